"""Calibration against public microbenchmarks of single mechanisms (``validation/public/``).

Each :class:`Source` is one published table, a scenario family that reproduces the
benchmark's setup (``validation/public/<gpu>/<name>.toml`` plus one column map per varied
field), the preset fields it determines, and the rule that picks its rows. :func:`run` turns
the table into calibration points (derived columns such as a box's shape), fits the fields
with :func:`tmasim.validation.calibration.calibrate` on half of the points (a seeded split)
and reports the error on the other half. The presets' fitted values cite the table and the
held-out error; ``tests/test_public_calibration.py`` re-fits every source and fails if a
shipped preset departs from its data. Whole kernels (GEMM or attention TFLOP/s) are never a
source here: they judge the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tmasim.validation.calibration import Calibration, calibrate
from tmasim.validation.study import Options

if TYPE_CHECKING:
    import pandas as pd

HOLDOUT = 0.5   # at most half of a source's points are fitted
SEED = 0
B200_SMS = 148
BOXES_PER_SM = 32


@dataclass(frozen=True)
class Source:
    """One public table and how tmasim reproduces its benchmark."""

    name: str
    gpu: str
    table: str                  # under validation/public/
    scenario: str               # under validation/public/
    device: str
    maps: tuple[str, ...]
    measure: str
    predict: str
    fit: tuple[str, ...]
    x: str                      # the swept column, for the figure
    x_label: str
    rows: str                   # which rows are used, in words
    points: Callable[[pd.DataFrame], pd.DataFrame]
    bound_pct: float            # the shipped preset's held-out MAPE must stay under this
    start: tuple[str, ...] = ()  # --set overrides the fit starts from (default: the shipped preset)
    log_x: bool = True
    y_label: str = ""           # the figure's y axis, where "latency" or "bandwidth" would mislead


def _l2_points(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[(frame["data_set_kib"] >= 4096) & (frame["data_set_kib"] <= 262144)]
    return rows.reset_index(drop=True)


H100_PCIE_GHZ = 1.755


def _latency_chase_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows past L1; latency from the cycles column at the benchmark's 1.755 GHz (its ns column
    is not a per-load latency in its last rows, where the chase runs more than one pass)."""
    rows = frame[frame["data_set_kib"] > 256].reset_index(drop=True)
    return rows.assign(latency_from_cycles_ns=rows["latency_cycles"] / H100_PCIE_GHZ)


def _box_columns(frame: pd.DataFrame, boxes_per_sm: int, sms: int) -> pd.DataFrame:
    """A fp32 box of SmemWidth x SmemHeight elements; the tensor holds boxes_per_sm per SM."""
    out = frame.copy()
    out["box"] = [f"[{h}, {w}]" for h, w in zip(out["SmemHeight"], out["SmemWidth"], strict=True)]
    out["shape"] = [f"[{h * boxes_per_sm * sms}, {w}]" for h, w in zip(out["SmemHeight"], out["SmemWidth"],
                                                                         strict=True)]
    return out


def _throughput_points(frame: pd.DataFrame) -> pd.DataFrame:
    return _box_columns(frame, BOXES_PER_SM, B200_SMS)


def _latency_points(frame: pd.DataFrame) -> pd.DataFrame:
    return _box_columns(frame, 1, 1)


UMMA_FORMATS = {"BF16": "bf16", "E4M3": "fp8"}  # the table's formats that tmasim has


def _umma_operand_points(frame: pd.DataFrame) -> pd.DataFrame:
    """SS rows of BF16 and E4M3 (both CTA groups): the tile, cluster and MMA group that make
    one instruction per k-step, and the measured issue interval in ns at the preset's clock."""
    from tmasim.machine.hardware import load_gpu

    rows = frame[(frame["ABLayout"] == "SS") & frame["Format"].isin(list(UMMA_FORMATS))].reset_index(drop=True)
    pair = rows["CTAGroup"] == 2
    bm = rows["M"] // rows["CTAGroup"]
    ghz = load_gpu("b200").clock_hz / 1e9
    return rows.assign(dtype=rows["Format"].map(UMMA_FORMATS), operands=rows["ABLayout"],
                       tile=[f"[{m}, {n}, {k}]" for m, n, k in zip(bm, rows["N"], rows["K"], strict=True)],
                       k_total=rows["K"] * 4, cluster=["[2, 1]" if p else "[1, 1]" for p in pair],
                       mma_ns=rows["CyclesPerMMA"] / ghz)


SOURCES: dict[str, Source] = {s.name: s for s in (
    Source("h200-l2-bandwidth", "h200", "h200/l2_bandwidth.csv", "h200/l2_bandwidth.toml", "NVIDIA H200",
           ("data_set_kib=workload.data_set:KiB",), "bandwidth_gbps:GB/s", "achieved_bytes_per_s",
           ("l2_bandwidth", "hbm_bandwidth", "l2_fit_size", "l2_miss_scale"), "data_set_kib", "data set (KiB)",
           "data sets of 4 MiB to 256 MiB (below 4 MiB the benchmark's authors see L1 hits across thread "
           "blocks, which TMA bypasses; above 256 MiB the rows repeat the HBM plateau)", _l2_points, 10.0),
    Source("b200-tma-throughput", "b200", "b200/tma_throughput.csv", "b200/tma_throughput.toml", "NVIDIA B200",
           ("box=workload.box", "shape=workload.shape", "NumStages=pipeline.stages"), "DRAMBandwidthBps:B/s",
           "achieved_bytes_per_s", ("copy_latency", "copy_latency_per_kib", "hbm_bandwidth"),
           "BytesInFlightPerSM", "bytes in flight per SM", "all 24 rows", _throughput_points, 10.0),
    Source("b200-tma-latency", "b200", "b200/tma_latency.csv", "b200/tma_latency.toml", "NVIDIA B200",
           ("box=workload.box", "shape=workload.shape"), "LatencyNsMedian:ns", "makespan_ns",
           ("copy_latency", "copy_latency_per_kib"), "TileBytes", "box bytes", "all 9 rows", _latency_points,
           65.0, ("gpu.copy_latency=520 cycles", "gpu.copy_latency_per_kib=1 ns")),
    Source("h100-pcie-latency", "h100-sxm", "h100-pcie/latency.csv", "h100-pcie/latency.toml", "NVIDIA H100 PCIe",
           ("data_set_kib=workload.data_set:KiB",), "latency_from_cycles_ns:ns", "makespan_ns",
           ("copy_latency", "hbm_latency"),
           "data_set_kib", "data set (KiB)",
           "data sets above 256 KiB (smaller ones hit in L1, which TMA bypasses)", _latency_chase_points, 10.0),
    Source("b200-umma-operands", "b200", "b200/umma_throughput_tput_results_max.csv", "b200/umma_operands.toml",
           "NVIDIA B200", ("tile=workload.tile", "M=workload.m", "N=workload.n", "k_total=workload.k",
                           "dtype=workload.dtype", "operands=workload.operands", "cluster=pipeline.cluster",
                           "CTAGroup=pipeline.mma_cta_group"),
           "mma_ns:ns", "mma_k_step_ns", ("smem_bandwidth",), "N", "MMA N (M = 64, 128 or 256; 1 or 2 SMs)",
           "the 48 SS rows of BF16 and E4M3, one and two SMs (A and B read from shared memory)",
           _umma_operand_points, 10.0, log_x=False, y_label="issue interval of one MMA (ns)"),
)}


def points_file(source: Source, root: Path, out: Path, every: int = 1) -> Path:
    """The source's calibration points (every ``every``-th: tests thin them) as a CSV in ``out``,
    with a meta.json naming the device."""
    import pandas as pd

    frame = source.points(pd.read_csv(root / source.table)).iloc[::every]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{source.name}.csv"
    frame.to_csv(path, index=False)
    (out / "meta.json").write_text(json.dumps({"device": {"name": source.device}}))
    return path


def run(source: Source, root: Path, out: Path, *, fit: tuple[str, ...] | None = None, max_evals: int = 30,
        overrides: tuple[str, ...] = (), jobs: int = 1, every: int = 1) -> Calibration:
    """Fit ``fit`` (default: the source's fields) on half the points; the rest are held out."""
    options = Options(scenario=root / source.scenario, maps=source.maps, measure=source.measure,
                      predict=source.predict, overrides=overrides)
    points = points_file(source, root, out / source.name, every)
    return calibrate(points, fit or source.fit, options, holdout=HOLDOUT, seed=SEED, max_evals=max_evals,
                     jobs=jobs)


def points_table(source: Source, root: Path, cal: Calibration) -> pd.DataFrame:
    """The calibration's point table with the source's swept column (for figures and README)."""
    import pandas as pd

    frame = source.points(pd.read_csv(root / source.table))
    keys = [k for k in cal.study.keys if k in frame.columns]
    extra = frame[[*keys, source.x]].drop_duplicates(keys)
    table = cal.table.copy()
    for key in keys:  # the study reads mapped cells as text or numbers; compare them as text
        table[key], extra[key] = table[key].astype(str), extra[key].astype(str)
    if source.x not in keys:
        table = table.merge(extra, on=keys, how="left")
    table[source.x] = pd.to_numeric(table[source.x])
    return table


def source_text(source: Source, cal: Calibration) -> str:
    """What a fitted preset value's ``source`` says."""
    counts = cal.table["split"].value_counts()
    return (f"fitted: validation/public/{source.table} ({source.rows}; {counts.get('train', 0)} fitted, "
            f"{counts.get('holdout', 0)} held out, seed {SEED}), held-out MAPE {cal.holdout_mape:.1f}%")


# ------------------------------------------------------------------ Hopper (H800 PCIe, Luo et al.)
from tmasim.validation import public_hopper as _hopper  # noqa: E402  (its points live in their own module)

_H800 = "NVIDIA H800 PCIe (114 SMs, 1.755 GHz)"
SOURCES.update({s.name: s for s in (
    Source("h800-tma-throughput", "h100-sxm", "h800-pcie/tma_throughput_boxes.csv", "h800-pcie/tma_throughput.toml",
           _H800, ("box=workload.box", "shape=workload.shape", "ctas_per_sm=workload.ctas_per_sm"),
           "slice_gbps:GB/s", "achieved_bytes_per_s", ("tma_request_time", "hbm_bandwidth"),
           "bytes_in_flight_kib", "bytes in flight per SM (KiB)",
           "all 68 rows of the 2-D and 3-D tables (60 distinct points)",
           _hopper.box_points, 10.0),
    Source("h800-tma-bulk", "h100-sxm", "h800-pcie/tma_throughput_bulk.csv", "h800-pcie/tma_bulk.toml", _H800,
           ("box=workload.box", "shape=workload.shape", "ctas_per_sm=workload.ctas_per_sm"), "slice_gbps:GB/s",
           "achieved_bytes_per_s", ("hbm_bandwidth",), "bytes_in_flight_kib", "bytes in flight per SM (KiB)",
           "all 24 rows; a check of the shipped latency and request time with the 2-D/3-D fit's HBM "
           "bandwidth (the shipped preset's error is the check; the fit only shows how far HBM would move)",
           _hopper.bulk_points, 10.0),
    Source("h800-tma-latency", "h100-sxm", "h800-pcie/latency_tma.csv", "h800-pcie/latency_tma.toml", _H800,
           ("data_set_kib=workload.data_set:KiB",), "latency_ns:ns", "makespan_ns", ("copy_latency", "hbm_latency"),
           "data_set_kib", "data set (KiB)", "all 189 rows (a TMA copy bypasses L1: every row is an L2 hit or a "
           "miss)", _hopper.chase_points, 10.0),
)})
