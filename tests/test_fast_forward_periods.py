"""Known periods (tmasim/engine/fast_forward/periods.py): a period the fast-forward has jumped
over is jumped over again, at once, wherever its state recurs on steps of the same kinds (the
next work unit, after its transient), without simulating a period to see the repeat. Exact:
every figure equals the full run's, bit for bit."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both

from tmasim.engine.fast_forward.periods import Periods
from tmasim.engine.program import Copy, Epilogue, Segment, Unit, UnitProgram
from tmasim.scenario import from_dict, load
from tmasim.simulation import simulate


def gemm(sms: int, rows: int, columns: int, k: int, stages: int = 4) -> dict[str, Any]:
    """Persistent CTAs on a small H100, each walking rows x columns / sms tiles of 128 x 128."""
    return {"name": "ff-periods", "gpu": {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]},
            "workload": {"kind": "gemm", "m": rows * 128, "n": columns * 128, "k": k * 64, "dtype": "bf16",
                         "tile": [128, 128, 64], "raster": "row", "launch": "persistent"},
            "pipeline": {"stages": stages, "consumers": 2}}


def skipped(raw: dict[str, Any], **run: Any) -> dict[str, Any]:
    return simulate(from_dict({**raw, "run": {"records": False, **run}})).stats


def test_units_after_the_first_jump_from_the_period_seen_in_it(monkeypatch):
    """4 SMs, 8 tiles each of 32 k-steps: every unit after the first reaches the state its
    predecessor's period started in, and jumps at once."""
    raw = gemm(4, 8, 4, 32)
    fast, full = both(raw)
    assert full["simulated_steps"] == 8 * 32  # one class: 8 units of 32 k-steps
    assert "from periods seen before" in fast["fast_forward"]
    monkeypatch.setattr(Periods, "recall", lambda self, *args: None)
    unknown = skipped(raw)
    assert unknown["makespan_ps"] == fast["makespan_ps"]
    assert "seen before" not in unknown["fast_forward"]
    # each recalled jump saves the period it would have simulated to see the repeat
    assert fast["fast_forward_skipped_steps"] > unknown["fast_forward_skipped_steps"]


def test_the_8192_gemm_skips_more_with_known_periods(monkeypatch):
    fast = skipped(dict(load("gemm-h100").raw))
    monkeypatch.setattr(Periods, "recall", lambda self, *args: None)
    unknown = skipped(dict(load("gemm-h100").raw))
    assert fast["makespan_ps"] == unknown["makespan_ps"] == 1490222122
    assert fast["fast_forward_skipped_steps"] > unknown["fast_forward_skipped_steps"]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sms=st.integers(2, 6), rows=st.integers(2, 6), columns=st.integers(2, 6), k=st.integers(12, 40),
       stages=st.integers(2, 4))
def test_random_multi_unit_gemms_agree_exactly(sms, rows, columns, k, stages):
    both(gemm(sms, rows, columns, k, stages))


def test_identical_steps_agree_with_the_runs_they_lie_in():
    """``identical(first, last)`` (what a cut checks before describing the state) is
    ``run_of(first)`` reaching past ``last``, for units with and without epilogues, of one
    segment or two, counted by unit or not; a step with an epilogue is no run, not even alone."""
    copy = Copy(1024, 1024, 0.0, 100)
    main, edge = Segment(5, (copy,), 10, 1.0), Segment(2, (copy, copy), 10, 1.0)
    units = [Unit(0, (main, edge), Epilogue(7, None)), Unit(1, (main,), None), Unit(2, (main,), Epilogue(3, None)),
             Unit(3, (edge,), None)]
    program = UnitProgram(units)
    for units_matter in (True, False):
        for first in range(program.steps):
            for last in range(first + 1, program.steps + 2):
                expected = last < program.steps and program.run_of(first, units_matter)[1] > last
                assert program.identical(first, last, units_matter) == expected, (first, last, units_matter)
    assert program.epilogue(6) is not None and not program.identical(6, 6, False)
    assert program.identical(7, 7) and program.identical(7, 11, False) and not program.identical(7, 11, True)


def test_runs_of_identical_steps_and_their_ends():
    """``run_of`` (the same segment, no epilogue; by unit: the same unit, not its last step)
    against the rule written step by step, and ``run_end`` (what a jump's bound reads) is its end."""
    copy = Copy(1024, 1024, 0.0, 100)
    main, edge = Segment(5, (copy,), 10, 1.0), Segment(2, (copy, copy), 10, 1.0)
    program = UnitProgram([Unit(0, (main, edge), Epilogue(7, None)), Unit(1, (main,), None),
                           Unit(2, (main,), Epilogue(3, None)), Unit(3, (edge,), None)])
    ends = {6, 11, 16, 18}  # each unit's last step; 6 and 16 have an epilogue

    def plain(y: int, step: int, units_matter: bool) -> bool:
        same = program.step_kind(y) is program.step_kind(step)
        if units_matter:
            return same and program.unit_of(y) == program.unit_of(step) and y not in ends
        return same and program.epilogue(y) is None

    for units_matter in (True, False):
        for step in range(program.steps):
            first, end = step, step + 1
            if plain(step, step, units_matter):
                while end < program.steps and plain(end, step, units_matter):
                    end += 1
                while first > 0 and plain(first - 1, step, units_matter):
                    first -= 1
            assert program.run_of(step, units_matter) == (first, end), (step, units_matter)
            assert program.run_end(step, units_matter) == end, (step, units_matter)
    assert program.run_of(7, False) == (7, 16) and program.run_of(7, True) == (7, 11)
    assert program.run_of(0, True) == (0, 5) and program.run_of(6, False) == (6, 7)
    assert program.run_end(17, False) == 19 and program.run_end(17, True) == 18  # 18: the last unit's last step


def test_a_repeat_whose_first_cut_cannot_jump_is_taken_from_the_later_one(monkeypatch):
    """gemm-h100 in row raster: after each unit boundary the state repeats first between a cut
    whose CTAs are not all on the unit's steps yet and a later one; the later cut is kept, and
    the next period jumps (it used to keep the first and skip 316 of the 3,968 k-steps)."""
    raw = dict(load("gemm-h100").raw)
    raw = {**raw, "workload": {**raw["workload"], "raster": "row"}}
    monkeypatch.setattr(Periods, "recall", lambda self, *args: None)  # the repeat alone, no known periods
    fast, full = both(raw)
    assert full["simulated_steps"] == 3968
    assert fast["fast_forward_skipped_steps"] > 0.8 * 3968
