"""How long a sweep will take, said before it starts: from the plans of a sample of its points.

Each sampled point is built and planned (not run) and its run estimated by
:func:`tmasim.simulation.estimate`, so a sweep of GEMM points is estimated as GEMM points and a
sweep of tiny ones as tiny ones, whatever the point count. A sweep expected to take over
:data:`NOTE_SECONDS` says so on its first line; past :data:`LIMIT_SECONDS` (or past the point
count the caller gives) it is refused unless confirmed (``--yes``). Where a sampled point is
estimated past :data:`SLOW_POINT_SECONDS` and fast-forward will skip little of it, the line says
why, for the slowest such point (its classes of SMs out of step on edge tiles or a causal launch's
units of many lengths, jitter: :func:`tmasim.skip_forecast.obstacle`), so that a user is not left
waiting without a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tmasim.errors import ResourceError, TmasimError
from tmasim.estimates import budget
from tmasim.inputs.scenario import from_dict
from tmasim.sweep.spec import Point, SweepPlan, point_raw
from tmasim.values import format as fmt

NOTE_SECONDS = 60.0
LIMIT_SECONDS = 900.0
# A point's cost in a sweep, besides its run's steps and records: a warm worker runs it (its imports
# and caches made once, where tmasim.budget.RUN_SECONDS counts a fresh process's first run), builds
# its scenario from the raw fields (a per-tile list of a million times: 2.4 s of reading every entry
# as a time) and journals its row. Fitted on the command grid of benchmarks/bench_estimates.py
# (10,000 tiny points: 2.7 ms each; a million-entry list), raised 1.3x as the run costs are.
POINT_SECONDS = 0.0035  # a tiny point whole: building the chip and summary, its row and its journal line
# each entry of a list in the point's fields (a per-tile time): read and checked as a time (2.4 us),
# and the run's lookup of it at its step, which costs more than a time shared by every tile (2.5 us)
ENTRY_SECONDS = 6.5e-6
SWEEP_SECONDS = 0.4     # once a sweep: its table built and written (pandas, Parquet)
SAMPLES = 8
SLOW_POINT_SECONDS = 1.0  # a sampled point estimated past this, and not skipped, is named with the reason


def sweep_seconds(plan: SweepPlan, todo: Sequence[Point], jobs: int) -> tuple[float, int]:
    """(estimated seconds with ``jobs`` workers, points sampled)."""
    seconds, sampled, _ = _sample(plan, todo, jobs)
    return seconds, sampled


def _sample(plan: SweepPlan, todo: Sequence[Point], jobs: int) -> tuple[float, int, str]:
    """(estimated seconds with ``jobs`` workers, points sampled, why the slowest sampled point
    that fast-forward cannot skip is slow: '' when none is over :data:`SLOW_POINT_SECONDS`)."""
    seconds, costs = _priced(plan, todo, SAMPLES)
    return seconds / jobs + SWEEP_SECONDS, len(costs), _slowest(costs)


def _priced(plan: SweepPlan, todo: Sequence[Point], samples: int) -> tuple[float, list[tuple[float, Point, str]]]:
    """(estimated seconds of all of ``todo`` on one worker, each sampled point's (seconds, point,
    why fast-forward skips little of it)), from ``samples`` points spread evenly over ``todo``."""
    if not todo:
        return 0.0, []
    count = min(samples, len(todo))
    picks = sorted({round(i * (len(todo) - 1) / max(1, count - 1)) for i in range(count)})
    costs = [(*_point_cost(plan, todo[i]), todo[i]) for i in picks]
    per_point = [seconds + POINT_SECONDS for seconds, _, _ in costs]
    return sum(per_point) / len(per_point) * len(todo), [(seconds, point, why) for seconds, why, point in costs]


def _slowest(costs: list[tuple[float, Point, str]]) -> str:
    slow = [cost for cost in costs if cost[2] and cost[0] >= SLOW_POINT_SECONDS]
    if not slow:
        return ""
    seconds, point, why = max(slow, key=lambda cost: cost[0])
    values = ", ".join(f"{name}={value}" for name, value in point.values)
    return f"; {fmt.plural(len(slow), 'sampled point')} over {budget.duration(SLOW_POINT_SECONDS)} each, the slowest " \
           f"({values}: {budget.about(seconds)}) because {why}"


def _point_cost(plan: SweepPlan, point: Point) -> tuple[float, str]:
    """(estimated seconds of the point's run, why fast-forward will skip little of it)."""
    from tmasim.simulation import estimate

    try:
        raw = point_raw(plan.base_raw, point)
        cost = estimate(from_dict(raw, plan.base_dir))
    except (TmasimError, TypeError, ValueError, ArithmeticError):
        return 0.0, ""  # a point that cannot be built fails fast
    return cost.seconds - budget.RUN_SECONDS + list_entries(raw) * ENTRY_SECONDS, cost.obstacle


def list_entries(raw: object) -> int:
    """How many entries the lists in a point's fields hold, nested ones included (each is read
    and checked when the point's scenario is built)."""
    if isinstance(raw, Mapping):
        return sum(list_entries(value) for value in raw.values())
    if isinstance(raw, (list, tuple)):
        return len(raw) + sum(list_entries(value) for value in raw if isinstance(value, (list, tuple, Mapping)))
    return 0


def check_count(todo: Sequence[Point], max_points: int | None) -> None:
    """Refuse more than ``max_points`` points left to run, before anything is worked out for them."""
    if max_points is not None and len(todo) > max_points:
        raise ResourceError(f"sweep: {len(todo):,} points to run, over {max_points:,}; add --yes (or pass "
                            "max_points=None from Python) to run them")


def check(plan: SweepPlan, todo: Sequence[Point], jobs: int, *, max_points: int | None, max_seconds: float | None,
          notify: Callable[[str], None] | None, expected: Sequence[Point] | None = None,
          command: str | None = None, certain: Sequence[Point] | None = None) -> float | None:
    """Refuse a sweep over the limits; note a long one; say nothing about a short one. Returns
    the estimated seconds a point (the sample's mean; None with nothing to run), which sizes
    the chunks the workers take (:func:`tmasim.sweep.executors.chunked`).

    A search passes the points it ``expected`` to simulate (:func:`tmasim.sweep.search.expected`,
    from their bounds): the estimate is theirs, sampled among them, not the whole grid's; the
    others cost nothing more (their bounds are already known). With ``certain`` (those of them
    sure to run: :func:`tmasim.sweep.search.certain`), ``expected`` is the most the search may
    run: the note gives both, and only what is certain is refused. ``command``: what the messages
    call the run (default ``sweep``, or ``sweep --search`` for a search; ``tune`` searches too)."""
    if not todo:
        return None
    if expected is not None:
        if not expected:
            return None
        count = len(expected)
        if certain is not None and len(certain) < count:
            # Each part priced by a sample of its own: the points sure to run are the lowest bounds,
            # often the cheapest designs to simulate too (in step, fast-forward skipping most of
            # them), where the rest may hold the slowest.
            sure = {p.id for p in certain}
            least, costs = _priced(plan, certain, SAMPLES // 2)
            rest, more = _priced(plan, [p for p in expected if p.id not in sure], SAMPLES - len(costs))
            costs += more
            least, seconds = least / jobs + SWEEP_SECONDS, (least + rest) / jobs + SWEEP_SECONDS
            points, about = f"{len(certain):,} to {count:,}", f"{budget.about(least)} to {budget.about(seconds)}"
            sampled, slow, most = len(costs), _slowest(costs), seconds
            seconds, count = least, len(certain)  # what is refused: the points sure to run
        else:
            seconds, sampled, slow = _sample(plan, expected, jobs)
            points, about, most = f"{count:,}", budget.about(seconds), seconds
        what = (f"{command or 'sweep --search'}: {points} of {len(todo):,} points expected to be "
                f"simulated (by their bounds)",
                f"{about} with --jobs {jobs} (from the plans of {sampled} of them{slow})")
    else:
        seconds, sampled, slow = _sample(plan, todo, jobs)
        most = seconds
        what = (f"{command or 'sweep'}: {len(todo):,} points to run",
                f"{budget.about(seconds)} with --jobs {jobs} (from the plans of {sampled} of them{slow})")
        count = len(todo)
    if max_points is not None and count > max_points:
        raise ResourceError(f"{what[0]}, over {max_points:,}: {what[1]}; add --yes (or pass max_points=None from "
                            "Python) to run them")
    if max_seconds is not None and seconds >= max_seconds:
        raise ResourceError(f"{what[0]}, {what[1]}, over the limit of {budget.duration(max_seconds)}; add --yes (or "
                            "pass max_seconds=None from Python) to run them (finished points are kept if you stop it)")
    if most >= NOTE_SECONDS and notify is not None:  # (long for sure, or only at its most)
        long = f"a long {what[0]}" if seconds >= NOTE_SECONDS else f"{what[0].replace(':', ' may be long:', 1)}"
        notify(f"tmasim: note: {long}, {what[1]}")
    return (seconds - SWEEP_SECONDS) * jobs / max(count, 1)
