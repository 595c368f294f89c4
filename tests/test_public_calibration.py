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
from tmasim.validation import public

ROOT = Path(__file__).resolve().parent.parent / "validation" / "public"
# source -> (the parameter re-fitted here, how far the re-fit may move it)
REFIT = {"h200-l2-bandwidth": ("l2_bandwidth", 0.03), "b200-tma-throughput": ("hbm_bandwidth", 0.05),
         "b200-tma-latency": (None, 0.0), "h100-pcie-latency": ("hbm_latency", 0.05),
         "b200-umma-operands": ("smem_bandwidth", 0.03)}
# rows kept: 1 = all (single-CTA sources are cheap)
EVERY = {"h200-l2-bandwidth": 2, "b200-tma-throughput": 2, "b200-umma-operands": 2}


@pytest.mark.parametrize("name", sorted(public.SOURCES))
def test_shipped_preset_matches_its_public_data(name: str, tmp_path: Path) -> None:
    source = public.SOURCES[name]
    field, tolerance = REFIT[name]
    cal = public.run(source, ROOT, tmp_path, fit=(field or source.fit[0],), max_evals=3,
                     every=EVERY.get(name, 1))
    shipped = cal.split_mape("holdout", "start_error_pct")
    assert shipped is not None and shipped <= source.bound_pct, (name, shipped)
    if field is not None:
        start = float(getattr(load_gpu(source.gpu), field))
        assert abs(cal.fitted[field] / start - 1) <= tolerance, (field, start, cal.fitted[field])


def test_every_source_table_is_checked_in_with_its_scenario() -> None:
    for source in public.SOURCES.values():
        assert (ROOT / source.table).is_file() and (ROOT / source.scenario).is_file()
        assert source.bound_pct <= 10.0 or name_is_documented_exception(source.name)


def name_is_documented_exception(name: str) -> bool:
    """Sources whose shipped-preset error is above the 10 % target, each explained in the README."""
    return name == "b200-tma-latency"


def test_the_mma_pipes_latency_and_ii_rule_matches_mmas_in_flight() -> None:
    """Not fitted: cycles per MMA with D = 1-10 independent MMAs in flight (TS, BF16), against
    (latency + (D - 1) x II) / D from the preset's rows, simulated. Whole table: MAPE 3.6 %, worst
    -10.3 % at D = 1 (the benchmark's ~12-cycle timing overhead, its fit's Overhead column)."""
    from tmasim.validation import umma_depth

    table = umma_depth.check(ROOT, every=12)
    assert len(table) == 20 and umma_depth.mape(table) < 5.0
    assert (table["error_pct"] < 0).mean() > 0.9  # the model is the faster: it has no timer overhead
