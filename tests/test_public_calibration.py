"""The presets against the public microbenchmarks they were fitted to (validation/public/).

Each source is re-fitted (its main parameter, from the shipped preset, a short search) on the
calibration's own split (the bandwidth sources on every other row, so the module stays fast).
The test fails if the shipped preset's error on the held-out rows exceeds the source's stated
bound, or if the re-fit moves the shipped value by more than a few percent (the preset has
drifted from its evidence). Regenerate everything with ``python validation/calibrate_public.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tmasim.hardware import load_gpu
from tmasim.validation import public, public_hopper

ROOT = Path(__file__).resolve().parent.parent / "validation" / "public"
# source -> (the parameter re-fitted here, how far the re-fit may move it)
REFIT = {"h200-l2-bandwidth": ("l2_bandwidth", 0.03), "b200-tma-throughput": ("hbm_bandwidth", 0.05),
         "b200-tma-latency": (None, 0.0), "h100-pcie-latency": ("hbm_latency", 0.05),
         "b200-umma-operands": ("smem_bandwidth", 0.03),
         "h800-tma-latency": ("copy_latency", 0.03), "h800-tma-throughput": (None, 0.0),
         "h800-tma-bulk": (None, 0.0)}
# h800-tma-throughput: its error is flat in the request time near the fit (1.92 and 2.05 ns give 8.7 %
# held out), so a 3-evaluation re-fit on a thinned table wanders; the shipped preset's error is checked.
# rows kept: 1 = all (single-CTA sources are cheap; the H800 throughput tables run 19 drifting SMs each)
EVERY = {"h200-l2-bandwidth": 2, "b200-tma-throughput": 2, "b200-umma-operands": 2, "h800-tma-throughput": 3,
         "h800-tma-bulk": 4}
# On a thinned table the held-out half is a few points: where the source's bound is met on the full
# split (results/summary.md: 8.7 %) but a thinned half can land above it, the bound here.
THINNED_BOUND = {"h800-tma-throughput": 12.0}


@pytest.mark.parametrize("name", sorted(public.SOURCES))
def test_shipped_preset_matches_its_public_data(name: str, tmp_path: Path) -> None:
    source = public.SOURCES[name]
    field, tolerance = REFIT[name]
    cal = public.run(source, ROOT, tmp_path, fit=(field or source.fit[0],), max_evals=3,
                     every=EVERY.get(name, 1))
    shipped = cal.split_mape("holdout", "start_error_pct")
    assert shipped is not None and shipped <= THINNED_BOUND.get(name, source.bound_pct), (name, shipped)
    if field is not None:  # the shipped value, as the source's scenario sees it (at its clock)
        start = next(p.start for p in cal.parameters if p.name == field)
        assert abs(cal.fitted[field] / start - 1) <= tolerance, (field, start, cal.fitted[field])


def test_every_source_table_is_checked_in_with_its_scenario() -> None:
    for source in public.SOURCES.values():
        assert (ROOT / source.table).is_file() and (ROOT / source.scenario).is_file()
        assert source.bound_pct <= 10.0 or name_is_documented_exception(source.name)


def name_is_documented_exception(name: str) -> bool:
    """Sources whose shipped-preset error is above the 10 % target, each explained in the README."""
    return name == "b200-tma-latency"


def test_the_remote_arrive_is_one_crossing_of_the_dsmem_round_trip() -> None:
    """33 cycles on the own SM, about 199 to a peer: a hop of 83 cycles each way, fitted on half the
    remote rows (held-out error within 10 %); the presets' remote arrive is local + hop."""
    import pandas as pd

    fit = public_hopper.dsmem_fit(pd.read_csv(ROOT / "h800-pcie" / "dsmem_latency.csv"))
    assert fit.local == 33 and 80 < fit.hop < 86 and fit.holdout_mape <= 10.0
    for name in ("h100-sxm", "h200"):
        gpu = load_gpu(name)
        assert gpu.cluster_arrive_latency == gpu.cycles_ps(round(fit.arrive))


def test_wgmma_issues_at_its_latency_and_the_shortfall_is_the_clock() -> None:
    """m64n256k16 takes 128 cycles, the full-rate II the presets carry; the throughput rows give the
    clock under load (89 % of 1.755 GHz) and predict the held-out fp8 and RS rows within 1 %."""
    import pandas as pd

    fit = public_hopper.wgmma_fit(pd.read_csv(ROOT / "h800-pcie" / "wgmma.csv"))
    assert fit.ii_cycles == 128 and fit.holdout_mape <= 1.0
    assert 0.885 < fit.share_of_nominal < 0.895
    for name in ("h100-sxm", "h200"):
        gpu = load_gpu(name)
        assert gpu.mma is not None and gpu.mma.timing("t", "bf16", 64, 256) == (128.0, 128.0)
        assert gpu.mma.timing("t", "fp8", 64, 128) == (64.0, 64.0)  # derived: scaled by N
        assert gpu.clock_hz == 1.83e9 and gpu.boost_clock == 1.98e9


def test_the_mma_pipes_latency_and_ii_rule_matches_mmas_in_flight() -> None:
    """Not fitted: cycles per MMA with D = 1-10 independent MMAs in flight (TS, BF16), against
    (latency + (D - 1) x II) / D from the preset's rows, simulated. Whole table: MAPE 3.6 %, worst
    -10.3 % at D = 1 (the benchmark's ~12-cycle timing overhead, its fit's Overhead column)."""
    from tmasim.validation import umma_depth

    table = umma_depth.check(ROOT, every=12)
    assert len(table) == 20 and umma_depth.mape(table) < 5.0
    assert (table["error_pct"] < 0).mean() > 0.9  # the model is the faster: it has no timer overhead
