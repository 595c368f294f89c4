"""Fast-forward across work units (tmasim/engine/fast_forward/jump.py, ``crossing``): a
persistent CTA's tiles recur (the same segments and epilogue, its wave's L2 pattern), so the
chip's state repeats whole units later and the run drops whole periods of units. The result is
the full run's (``run.fast_forward = false``) in every figure of the summary."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both

from tmasim.engine.program import Segment, Unit, UnitProgram
from tmasim.estimates import skip_forecast
from tmasim.inputs.scenario import load
from tmasim.simulation import estimate

B200_PERSISTENT = ["workload.raster=column", "workload.launch=persistent", "pipeline.consumers=1",
                   "pipeline.mma_cta_group=2", "gpu.clock=1.3 GHz", "workload.m=2048", "workload.n=32768",
                   "workload.k=2560", "workload.tile=[64,64,64]", "pipeline.stages=8"]


def raw(name: str, sets: list[str]) -> dict[str, Any]:
    return dict(load(name, sets).raw)


def whole(summary: str) -> int:
    """Work units dropped whole, as the run's summary counts them (0: none)."""
    if "work unit" not in summary:
        return 0
    return int(summary.split(" work unit")[0].rsplit(", ", 1)[-1])


@pytest.mark.parametrize("sets", [
    ["pipeline.cluster=[2,1]"],  # 2-SM pairs: the leader's hand-overs dropped with the units
    ["pipeline.cluster=[2,2]", "workload.multicast=a"],  # pairs multicasting A along the cluster
], ids=["pairs", "pairs-multicast"])
def test_b200_persistent_waves_are_skipped_whole_and_exactly(sets):
    """2048x32768x2560 in 64x64 tiles on 74 pairs: 111 units a pair, a wave's L2 pattern
    recurs every 8 units; 8 stages do not divide a unit's 40 steps' places in the ring."""
    fast, full = both(raw("gemm-b200", B200_PERSISTENT + sets))
    assert whole(fast["fast_forward"]) >= 4 * 56  # 4 simulated CTAs, at least 7 periods of 8 units each
    assert fast["fast_forward_skipped_steps"] >= 0.4 * full["simulated_steps"]


def test_hopper_persistent_units_are_skipped_whole_and_exactly():
    """Cooperative warpgroups, no pairs: units of identical work in a row are skipped whole too."""
    fast, _ = both(raw("gemm-h100", ["workload.m=2048", "workload.n=32768", "workload.k=2048",
                                     "workload.tile=[128,128,64]", "workload.launch=persistent",
                                     "pipeline.stages=5", "pipeline.consumers=2"]))
    assert whole(fast["fast_forward"]) > 0


def test_with_records_no_unit_is_skipped_whole():
    """Records name units (an epilogue's, a store's): the skip stays within units, as exact."""
    scenario = raw("gemm-b200", B200_PERSISTENT + ["pipeline.cluster=[2,1]"])
    from tmasim.inputs.scenario import from_dict
    from tmasim.simulation import simulate

    stats = {records: simulate(from_dict({**scenario, "run": {"records": records}})).stats for records in (True, False)}
    assert whole(stats[True]["fast_forward"]) == 0 < whole(stats[False]["fast_forward"])
    assert stats[True]["makespan_ps"] == stats[False]["makespan_ps"]


def test_the_forecast_counts_the_whole_units_skipped():
    """The steps the estimate expects to simulate come within a factor 1.5 of those the run
    simulates (what its time follows)."""
    scenario = load("gemm-b200", B200_PERSISTENT + ["pipeline.cluster=[2,1]", "run.records=false"])
    forecast = estimate(scenario)
    from tmasim.simulation import simulate

    stats = simulate(scenario).stats
    assert whole(stats["fast_forward"]) > 0 and forecast.skipped > 0
    simulated = stats["simulated_steps"] - stats["fast_forward_skipped_steps"]
    expected = forecast.steps - forecast.skipped
    assert simulated / 1.5 <= expected <= simulated * 1.5


# ---- the program's side: positions as built, periods, drops across units, cuts -----------------

def program(kinds: str, steps: int = 4) -> UnitProgram:
    """Units of ``steps`` steps, one per letter: the same letter, the same segment."""
    segments = {k: Segment(steps, (), 100 + n, 1.0) for n, k in enumerate(sorted(set(kinds)))}
    return UnitProgram([Unit(n, (segments[k],), None) for n, k in enumerate(kinds)])


def test_periodic_end_finds_where_units_stop_repeating():
    p = program("aBCBCBCd")  # steps 4..27 repeat with a period of 8 steps (B C)
    assert p.periodic_end(4, 8) == 20  # step 20 (C, the last) differs from step 28 (d)
    assert p.periodic_end(0, 8) == 0  # a differs from C
    assert p.periodic_end(4, 4) == 4  # B is not C


def test_drop_periods_merges_the_unit_and_moves_later_units_down():
    p = program("aBCBCBCd")
    assert p.steps == 32 and p.unit_of(31) == 7
    gone = p.drop_periods(6, 8, 2)  # from inside the first B, two periods of B C
    assert gone == 4 and p.steps == 16
    assert [p.unit_of(s) for s in range(p.steps)] == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
    assert [p.last_step(u) for u in range(4)] == [3, 7, 11, 15]
    assert p.original(5) == 5 and p.original(6) == 22 and p.original(15) == 31


def test_drop_periods_refuses_steps_that_do_not_repeat():
    p = program("aBCBCd")  # B C B C, then d: two periods of 8 steps from step 4, not three
    with pytest.raises(ValueError, match="are not 3 periods of 8"):
        p.drop_periods(4, 8, 3)
    assert p.drop_periods(4, 8, 2) == 4 and p.steps == 8


def test_cuts_fall_every_s_steps_from_each_units_first_as_built():
    p = program("abc", steps=5)  # units at steps 0, 5 and 10
    assert [p.next_cut(s, 2) for s in range(15)] == [2, 2, 4, 4, 5, 7, 7, 9, 9, 10, 12, 12, 14, 14, 15]
    p.drop_steps(5, 2)  # two steps of unit 1 dropped at its cut: later cuts stay where they were as built
    assert [p.next_cut(s, 2) for s in (5, 7, 8, 10)] == [7, 8, 10, 12]


def test_unit_period_of_a_waves_pattern():
    assert skip_forecast.unit_period(np.array([1, 2, 3, 1, 2, 3, 1, 2, 3, 1]), 8) == 3
    assert skip_forecast.unit_period(np.array([1, 2, 3, 4, 5, 6]), 8) is None


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sms=st.sampled_from([2, 4, 6]), rows=st.integers(2, 8), columns=st.integers(4, 16), k=st.integers(8, 32),
       stages=st.integers(2, 5), pair=st.booleans(), cluster=st.booleans(),
       raster=st.sampled_from(["row", "column", "grouped"]), edge=st.booleans())
def test_random_persistent_b200_gemms_agree_exactly(sms, rows, columns, k, stages, pair, cluster, raster, edge):
    """Small chips whose persistent CTAs walk many tiles: pairs, clusters with multicast, ragged
    edges, every raster; whatever is skipped, whole units or not, every figure is the full run's."""
    pipeline: dict[str, Any] = {"stages": stages, "consumers": 1}
    workload: dict[str, Any] = {"kind": "gemm", "m": rows * 64 * (2 if pair else 1) - (16 if edge else 0),
                                "n": columns * 64, "k": k * 64, "dtype": "bf16", "tile": [64, 64, 64],
                                "raster": raster, "launch": "persistent"}
    if pair:
        pipeline.update(mma_cta_group=2, cluster=[2, 2] if cluster else [2, 1])
        if cluster:
            workload["multicast"] = "a"
    elif cluster:
        pipeline["cluster"] = [2, 1]
    both({"name": "ff-units", "gpu": {"preset": "b200", "sms": sms, "gpc_sms": [sms]}, "workload": workload,
          "pipeline": pipeline})
