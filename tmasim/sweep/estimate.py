"""How long a sweep will take, said before it starts: from the plans of a sample of its points.

Each sampled point is built and planned (not run) and its run estimated by
:func:`tmasim.simulation.estimate`, so a sweep of GEMM points is estimated as GEMM points and a
sweep of tiny ones as tiny ones, whatever the point count. A sweep expected to take over
:data:`NOTE_SECONDS` says so on its first line; past :data:`LIMIT_SECONDS` (or past the point
count the caller gives) it is refused unless confirmed (``--yes``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tmasim import budget
from tmasim.errors import ResourceError, TmasimError
from tmasim.scenario import from_dict
from tmasim.sweep.spec import Point, SweepPlan, point_raw

NOTE_SECONDS = 60.0
LIMIT_SECONDS = 900.0
POINT_SECONDS = 0.02  # building a point's scenario, shipping it and journalling its row
SAMPLES = 8


def sweep_seconds(plan: SweepPlan, todo: Sequence[Point], jobs: int) -> tuple[float, int]:
    """(estimated seconds with ``jobs`` workers, points sampled)."""
    count = min(SAMPLES, len(todo))
    picks = sorted({round(i * (len(todo) - 1) / max(1, count - 1)) for i in range(count)})
    per_point = [_point_seconds(plan, todo[i]) + POINT_SECONDS for i in picks]
    return sum(per_point) / len(per_point) * len(todo) / jobs, len(picks)


def _point_seconds(plan: SweepPlan, point: Point) -> float:
    from tmasim.simulation import estimate

    try:
        return estimate(from_dict(point_raw(plan.base_raw, point), plan.base_dir)).seconds
    except (TmasimError, TypeError, ValueError, ArithmeticError):
        return 0.0  # a point that cannot be built fails fast


def check(plan: SweepPlan, todo: Sequence[Point], jobs: int, *, max_points: int | None, max_seconds: float | None,
          notify: Callable[[str], None] | None) -> None:
    """Refuse a sweep over the limits; note a long one; say nothing about a short one."""
    if not todo:
        return
    seconds, sampled = sweep_seconds(plan, todo, jobs)
    what = (f"sweep: {len(todo):,} points to run", f"{budget.about(seconds)} with --jobs {jobs} (from the plans "
            f"of {sampled} of them)")
    if max_points is not None and len(todo) > max_points:
        raise ResourceError(f"{what[0]}, over {max_points:,}: {what[1]}; add --yes to run them")
    if max_seconds is not None and seconds >= max_seconds:
        raise ResourceError(f"{what[0]}, {what[1]}, over the limit of {budget.duration(max_seconds)}; add --yes to "
                            "run them (finished points are kept if you stop it)")
    if seconds >= NOTE_SECONDS and notify is not None:
        notify(f"tmasim: note: a long {what[0]}, {what[1]}")
