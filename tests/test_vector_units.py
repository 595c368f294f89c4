"""The SM's vector units share each pipe by processor sharing (tmasim.engine.sm.vector_units):
closed forms for jobs that meet on a pipe, to the picosecond."""

from __future__ import annotations

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.engine.sm.vector_units import VectorUnits


def _finish_times(jobs: list[tuple[int, ...]]) -> list[float]:
    """Run ``(arrival, xu_ps, fma_ps[, alu_ps, issue_ps])`` jobs on one SM's units; when each finishes."""
    env = simpy.Environment()
    units = VectorUnits(env, "sm0.vector")
    ends: list[float] = [-1.0] * len(jobs)

    def job(i: int, arrival: int, *parts: int):  # type: ignore[no-untyped-def]
        yield env.timeout(arrival)
        yield units.run((*parts, 0, 0, 0)[:4])
        ends[i] = env.now

    for i, spec in enumerate(jobs):
        env.process(job(i, *spec))
    env.run()
    return ends


def test_a_job_alone_gets_the_whole_pipe():
    assert _finish_times([(5, 100, 0)]) == [105]
    assert _finish_times([(0, 100, 30)]) == [100]  # its pipes run side by side: the slower one
    assert _finish_times([(0, 0, 0)]) == [0]


def test_two_jobs_at_once_share_the_pipe():
    """Equal shares while both run: the shorter ends at 2·min, the longer at the sum."""
    assert _finish_times([(0, 300, 0), (0, 100, 0)]) == [400, 200]
    assert _finish_times([(0, 100, 0), (0, 100, 0)]) == [200, 200]


def test_a_late_short_job_is_not_queued_behind_a_long_one():
    """A (1000 ps) from 0, B (100 ps) from 400: B gets half the pipe, so it ends at 600 (a FIFO
    would end it at 1100), and A, slowed by B's 100 ps of work, at 1100."""
    assert _finish_times([(0, 1000, 0), (400, 100, 0)]) == [1100, 600]


def test_the_pipes_are_shared_apart():
    """A softmax (exponentials 800, FP32 400) and a rescale (FP32 only, 200) from 0: the FP32
    pipe is shared until the rescale ends at 400; the softmax's FP32 part then ends at 600,
    under its exponentials, which no one shares: it ends at 800."""
    assert _finish_times([(0, 800, 400), (0, 0, 200)]) == [800, 400]


def test_work_is_conserved_and_three_jobs_share_in_thirds():
    """Three jobs of 90, 60 and 30 ps from 0: the 30 ends at 90, the 60 at 90 + 2·30 = 150, the
    90 at 180 (the pipe never idles: the last end is the total work)."""
    assert _finish_times([(0, 90, 0), (0, 60, 0), (0, 30, 0)]) == [180, 150, 90]


def test_four_jobs_share_in_quarters():
    """Three 1 ps jobs and a 2 ps one from 0: each gets a quarter, so the short ones end at 4;
    the long one then has 1 ps left alone and ends at 5."""
    assert _finish_times([(0, 1, 0), (0, 1, 0), (0, 1, 0), (0, 2, 0)]) == [4, 4, 4, 5]


def test_a_finish_between_picoseconds_rounds_up():
    """A and B (1 ps each) from 0, C (1 ps) from 1: A and B would end at 2.5 ps and C at 3;
    picosecond clocks end A and B at 3, and C, which got 2/3 ps of work by then, at 4. The
    error is under 1 ps an event; it never makes a job end early."""
    assert _finish_times([(0, 1, 0), (0, 1, 0), (1, 1, 0)]) == [3, 3, 4]


def test_the_alu_and_issue_pipes_are_shared_apart_from_the_others():
    """Four pipes side by side: a job ends with its slowest part; jobs meet only on a pipe they share."""
    assert _finish_times([(0, 100, 0, 250, 30)]) == [250]
    # two jobs on the issue slots only: they share them; a third on the ALU runs beside both
    assert _finish_times([(0, 0, 0, 0, 100), (0, 0, 0, 0, 100), (0, 0, 0, 150, 0)]) == [200, 200, 150]


def test_a_job_that_comes_in_the_picosecond_another_ends_in():
    """The 101 ps job ends between picoseconds (253.42), so its wake-up is rounded up to 254, when
    a 7 ps job comes, before the wake-up: the clock moved past the first one's end, which then
    ends at 254, not at a negative delay (a crash until a test drew it)."""
    assert _finish_times([(45, 7, 0), (45, 50, 0), (45, 101, 0), (46, 50, 0), (254, 7, 0)]) == [73, 202, 254, 203, 261]


def _ends_and_order(jobs: list[tuple[int, ...]], quiet: bool) -> tuple[list[float], list[int]]:
    env = simpy.Environment()
    units = VectorUnits(env, "sm0.vector")
    units.quiet = quiet
    ends: list[float] = [-1.0] * len(jobs)
    order: list[int] = []

    def job(i: int, arrival: int, *parts: int):  # type: ignore[no-untyped-def]
        yield env.timeout(arrival)
        yield units.run(parts)
        ends[i] = env.now
        order.append(i)

    for i, spec in enumerate(jobs):
        env.process(job(i, *spec))
    env.run()
    return ends, order


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), *(st.sampled_from((0, 7, 50, 100, 101, 250)) for _ in range(4))),
                min_size=1, max_size=12))
def test_quiet_parts_change_no_end_and_no_order(jobs):
    """A part shorter than another of its job, alone on its pipe, goes on without a wake-up: every
    job ends at the same picosecond, in the same order, as with a wake-up for every part (equal
    works and arrivals on purpose: ties are where an order could change)."""
    assert _ends_and_order(jobs, quiet=True) == _ends_and_order(jobs, quiet=False)
