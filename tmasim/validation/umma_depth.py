"""The MMA pipe's latency + issue-interval rule against the B200 table of MMAs in flight.

``validation/public/b200/umma_throughput_tput_ts_small_depth.csv`` (SemiAnalysisAI/
microbench-blackwell, commit 9a068d8): one SM issues D independent ``tcgen05.mma`` (A in
Tensor Memory, TS), waits for all of them, and repeats; cycles per MMA for D = 1 to 10. The
model's rule (docs/design.md §8): D instructions take ``latency + (D - 1) x II`` from the first
issue to the last completion. Here each row is simulated: one CTA, one stage, a k-step of D
instructions (BK = D x K), the memory side and the barriers free, so the steady k-step is
that batch (a CTA pair for the table's CTAGroup 2 rows). Nothing
is fitted: latency and II are the preset's ``[mma]`` rows (the UMMA latency fit's TS rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tmasim.inputs.scenario import from_dict
from tmasim.simulation import simulate

if TYPE_CHECKING:
    import pandas as pd

TABLE = "b200/umma_throughput_tput_ts_small_depth.csv"
FORMATS = {"BF16": "bf16"}  # fp8 at D > 8 would need a box deeper than 256 elements
FREE_MEMORY = {"hbm_bandwidth": "unlimited", "l2_bandwidth": "unlimited", "sm_port_bandwidth": "unlimited",
               "smem_bandwidth": "unlimited", "copy_latency": "0 ns", "copy_latency_per_kib": "0 ns",
               "copy_latency_per_kib_in_flight": "0 ns",
               "hbm_latency": "0 ns", "tma_issue": "0 ns", "barrier_wake": "0 ns",
               "cluster_arrive_latency": "0 ns",
               "tma_request_time": "0 ns"}  # the benchmark waits on no barrier between batches
BATCHES = (2, 4)  # k-steps simulated: the steady batch is the difference over the extra two


def batch_cycles(dtype: str, m: int, n: int, k: int, sms: int, depth: int) -> float:
    """Simulated cycles of one batch of ``depth`` MMAs (first issue to last completion)."""
    spans = []
    for batches in BATCHES:
        raw = {"gpu": {"preset": "b200", **FREE_MEMORY},
               "workload": {"kind": "gemm", "m": m, "n": n, "k": k * depth * batches, "dtype": dtype,
                            "tile": [m // sms, n, k * depth], "operands": "TS", "epilogue_smem": 0},
               "pipeline": {"stages": 1, "consumers": 1, "cluster": [sms, 1], "mma_cta_group": sms},
               "run": {"records": False}}
        result = simulate(from_dict(raw))
        spans.append(result.stats["makespan_ps"])
        clock_hz = result.scenario.gpu.clock_hz
    return (spans[1] - spans[0]) / (BATCHES[1] - BATCHES[0]) * clock_hz / 1e12


def check(root: Path, every: int = 1) -> pd.DataFrame:
    """Every BF16 row (both CTA groups; every ``every``-th: tests thin them): measured and
    simulated cycles per MMA, and the error (%)."""
    import pandas as pd

    frame = pd.read_csv(root / TABLE)
    rows = frame[frame["Format"].isin(list(FORMATS))].iloc[::every].reset_index(drop=True)
    predicted = [batch_cycles(FORMATS[r.Format], r.M, r.N, r.K, r.CTAGroup, r.PipelineDepth) / r.PipelineDepth
                 for r in rows.itertuples()]
    out = rows[["Format", "CTAGroup", "M", "N", "K", "PipelineDepth", "CyclesPerMMA"]].copy()
    out["predicted"] = predicted
    out["error_pct"] = (out["predicted"] / out["CyclesPerMMA"] - 1) * 100
    return out


def mape(table: pd.DataFrame) -> float:
    return float(table["error_pct"].abs().mean())
