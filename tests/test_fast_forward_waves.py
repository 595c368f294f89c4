"""Grid launches under fast-forward (tmasim/engine/fast_forward/jump.py, ``adopt``): CTAs start as
others exit, wave after wave; the exited ones leave the state and, once the reference CTA's
producer is over, the next CTA to start cuts the run, so every wave's k-loops are skipped, not
only the first's. Exact: every figure equals the full run's, bit for bit, and with records
every span and event."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both
from test_record_shift import both as records_both


def grid(sms: int, rows: int, columns: int, k: int, stages: int = 4, **pipeline: Any) -> dict[str, Any]:
    """rows x columns tiles of 128 x 128, one CTA each, on ``sms`` SMs: waves of ``sms`` CTAs."""
    return {"name": "ff-waves", "gpu": {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]},
            "workload": {"kind": "gemm", "m": rows * 128, "n": columns * 128, "k": k * 64, "dtype": "bf16",
                         "tile": [128, 128, 64], "raster": "row", "launch": "grid"},
            "pipeline": {"stages": stages, "consumers": 2, **pipeline}, "run": {"aggregate": False}}


def test_every_wave_of_a_grid_is_skipped():
    fast, full = both(grid(4, 4, 4, 64))
    assert full["simulated_steps"] == 16 * 64  # 16 CTAs in 4 waves of 4, 64 k-steps each
    assert " in 4 jumps " in fast["fast_forward"]  # one a wave (it used to be the first wave's only)
    assert fast["fast_forward_skipped_steps"] > 16 * 64 // 2


def test_with_records_every_wave_is_skipped_and_its_records_regenerated():
    """Each jump's records shift by the CTAs of that jump (a CTA started later moves in time
    only), so the spans, events and links' loads are the full run's, row for row."""
    fast, _ = records_both(grid(4, 4, 4, 64), bandwidth=True)
    assert " in 4 jumps " in fast.stats["fast_forward"]
    assert fast.spans["cta"].nunique() == 16


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sms=st.integers(2, 6), rows=st.integers(1, 5), columns=st.integers(1, 5), k=st.integers(4, 40),
       stages=st.integers(1, 4), cluster=st.booleans())
def test_random_grids_agree_exactly(sms, rows, columns, k, stages, cluster):
    """Full and ragged last waves, clusters whose CTAs exit together."""
    raw = grid(sms, rows, columns, k, stages, **({"cluster": [2, 1]} if cluster else {}))
    both(raw)  # an odd number of rows rounds the cluster grid up: CTAs past the edge run too
