"""Layer 1: the anchor formula, to the picosecond."""

from __future__ import annotations

import pytest
from tmasim_helpers import US, ps, run

from tmasim import analytic


def test_reference_scenario_is_23_us_pipelined_and_32_us_serial(reference):
    assert reference.stats["makespan_ps"] == 23 * US
    assert reference.stats["serial_ns"] == 32_000
    assert reference.stats["closed_form_ns"] == 23_000


def test_reference_with_one_stage_is_32_us():
    assert run(stages=1).makespan_ps == 32 * US


@pytest.mark.parametrize("stages", [2, 3, 4, 8])
def test_more_than_two_stages_do_not_beat_the_anchor_without_latency(stages):
    assert run(stages=stages).makespan_ps == 23 * US


def test_anchor_formula_values():
    assert analytic.anchor_time(4, 3 * US, 5 * US, 1) == 32 * US
    assert analytic.anchor_time(4, 3 * US, 5 * US, 2) == 23 * US
    assert analytic.anchor_time(1, 3 * US, 5 * US, 2) == 8 * US


# Load-bound, compute-bound and equal; odd picosecond values catch any rounding.
CASES = {"load-bound": (7_000_003, 2_999_999), "compute-bound": (3_000_001, 5_000_007), "equal": (4_000_000, 4_000_000)}


@pytest.mark.parametrize("case", CASES)
def test_anchor_formula_across_the_grid(case):
    load, compute = CASES[case]
    for tiles in range(1, 65):
        for stages in range(1, 9):
            result = run(tiles=tiles, load=ps(load), compute=ps(compute), stages=stages, records=False)
            expected = analytic.anchor_time(tiles, load, compute, stages)
            assert result.makespan_ps == expected, (tiles, stages)
            assert result.stats["closed_form_ns"] * 1000 == pytest.approx(expected, abs=0.5)


def test_two_cooperative_consumers_split_the_compute_exactly():
    from tmasim.scenario import from_dict
    from tmasim.simulation import simulate

    raw = {"workload": {"tiles": 4, "load": "3 us", "compute": "5000001 ps"}, "pipeline": {"stages": 2, "consumers": 2}}
    result = simulate(from_dict(raw))
    assert result.makespan_ps == analytic.anchor_time(4, 3 * US, 5_000_001, 2)
