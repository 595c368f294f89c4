"""``tmasim sweep --search``: the full sweep's answer from the points that can change it.

Every point with a proven lower bound on its time (:func:`tmasim.simulation.lower_bound_ns`,
from its plan, without running it) is ordered by that bound within its problem (the answer's
notion, :mod:`tmasim.field_roles`), and points are simulated lowest bound first. Once a
problem's next bound exceeds its best time so far × (1 + :data:`~tmasim.sweep.answer.KNEE_TOLERANCE`),
the problem stops: its other points are ``pruned`` rows that carry their ``bound_ns``.

Why the answer is the full sweep's (:mod:`tmasim.sweep.answer`): a pruned point's time is at
least its bound, above best × (1 + tol), where best is the least simulated time, which is
the problem's best time over every point. So a pruned point is not the best; nor the knee (its
cheapest point within best × (1 + tol)); nor the next step (a point faster than the knee, whose
time is at most best × (1 + tol)). The best can only fall as more points finish, so a point
pruned against an earlier best is pruned against the final one too.

Points that differ only in noise fields (replicates, whose mean time the answer compares) are
one *unit*: simulated together, bounded by the least of their bounds, pruned together. A point
with no bound (a workload without one, SM drift, a scenario that does not build) is simulated
first. Problems are grouped at least as finely as the answer groups them (a field that is a
problem field of any workload splits them), which only ever simulates more.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tmasim import field_roles
from tmasim.errors import ModelError, TmasimError
from tmasim.scenario import from_dict
from tmasim.simulation import lower_bound_ns
from tmasim.sweep.answer import KNEE_TOLERANCE, _value
from tmasim.sweep.executors import Pool
from tmasim.sweep.points import OK, PRUNED, Outcome, Task, raw_seed
from tmasim.sweep.spec import Point, SweepPlan, point_raw
from tmasim.workloads import WORKLOADS

SLACK_NS = 0.001  # a bound is a float of picoseconds: one ps of rounding (tests/test_true_figures.py)


@dataclass
class Unit:
    """Points that differ only in noise fields: run together, pruned together."""

    points: list[Point]  # every point of the unit
    todo: list[Point]  # those not finished yet
    bounds: dict[int, float | None] = field(default_factory=dict)  # point id -> its bound (ns)

    @property
    def bound_ns(self) -> float:
        """The least of its points' bounds; -inf where one has none or part of it already ran."""
        if len(self.todo) < len(self.points) or any(b is None for b in self.bounds.values()):
            return -math.inf
        return min(b for b in self.bounds.values() if b is not None)


@dataclass
class Problem:
    """One problem's units still to run, lowest bound first, and its best time so far."""

    units: list[Unit]
    best_ns: float = math.inf
    next: int = 0

    def head(self) -> Unit | None:
        """The next unit, if its bound leaves it a chance to change the answer."""
        if self.next >= len(self.units):
            return None
        unit = self.units[self.next]
        return unit if unit.bound_ns - SLACK_NS <= self.best_ns * (1 + KNEE_TOLERANCE) else None

    def record(self, unit: Unit, finished: Mapping[int, Outcome]) -> None:
        time = unit_time(unit, finished)
        if time is not None:
            self.best_ns = min(self.best_ns, time)


def unit_time(unit: Unit, finished: Mapping[int, Outcome]) -> float | None:
    """The answer's time for the unit: the mean over its replicates that ran to a valid time."""
    times = [t for t in (valid_time(finished.get(p.id)) for p in unit.points) if t is not None]
    return sum(times) / len(times) if times else None


def valid_time(outcome: Outcome | None) -> float | None:
    """A point's time as the answer counts it (:func:`tmasim.sweep.answer.valid_rows`), else None."""
    if outcome is None or outcome.status != OK:
        return None
    stats = outcome.stats
    if not stats.get("valid", stats.get("races", 0) == 0) or stats.get("makespan_ns") is None:
        return None
    return float(stats["makespan_ns"])


def grouping(plan: SweepPlan) -> tuple[list[int], list[int]]:
    """(positions of the axes that split problems, positions of the noise axes): as the answer
    reads the table, a problem field under any workload (finer problems only prune less)."""
    kinds = [None, *WORKLOADS]
    problem, noise = [], []
    try:
        for position, axis in enumerate(plan.axes):
            roles = {field_roles.role(axis.field, kind) for kind in kinds}
            if field_roles.PROBLEM in roles:
                problem.append(position)
            elif roles == {field_roles.NOISE}:
                noise.append(position)
    except KeyError:  # the answer then has no problem and no noise field: every point on its own
        return [], []
    return problem, noise


def problems(plan: SweepPlan, todo: Sequence[Point], finished: Mapping[int, Outcome],
             bound: Callable[[Point], float | None]) -> list[Problem]:
    """The sweep's problems with their units left to run (bounded by ``bound``), lowest first."""
    problem_axes, noise_axes = grouping(plan)
    waiting = {p.id for p in todo}
    grouped: dict[tuple[str, ...], dict[tuple[str, ...], list[Point]]] = {}
    for point in plan.points:
        values = [_value(v) for _, v in point.values]
        key = tuple(values[i] for i in problem_axes)
        design = tuple(v for i, v in enumerate(values) if i not in noise_axes)
        grouped.setdefault(key, {}).setdefault(design, []).append(point)
    found = []
    for units in grouped.values():
        problem = Problem([])
        for points in units.values():
            unit = Unit(points, _todo(points, waiting, finished))
            if unit.todo:
                unit.bounds = {p.id: bound(p) for p in unit.todo}
                problem.units.append(unit)
            else:
                problem.record(unit, finished)
        problem.units.sort(key=lambda u: u.bound_ns)
        found.append(problem)
    return found


def _todo(points: list[Point], waiting: set[int], finished: Mapping[int, Outcome]) -> list[Point]:
    """A unit's points to run or prune: those waiting and, with them, those an earlier search
    pruned (a replicate added to a pruned unit is decided with the rest of it, never alone)."""
    if not any(p.id in waiting for p in points):
        return []
    return [p for p in points if p.id in waiting or getattr(finished.get(p.id), "status", None) == PRUNED]


def point_bound(task: Task, point: Point) -> float | None:
    """The point's proven lower bound (ns), or None (no bound, or no scenario: it is simulated)."""
    try:
        return lower_bound_ns(from_dict(point_raw(task.base_raw, point), task.base_dir))
    except (TmasimError, ModelError, ArithmeticError, TypeError, ValueError):
        return None


def run(found: list[Problem], workers: Pool, jobs: int, finished: dict[int, Outcome],
        done: Callable[[list[Outcome]], None]) -> None:
    """Keep ``jobs`` units running, the lowest bound that can still matter next; ``done`` gets
    each unit's outcomes as it finishes (and has put them in ``finished``)."""
    flying: dict[int, tuple[Problem, Unit]] = {}
    while True:
        while len(flying) < jobs and (pick := _lowest(found)) is not None:
            workers.submit(pick[1].todo)
            flying[pick[1].todo[0].id] = pick
        if not flying:
            return
        outcomes = workers.next_done()
        problem, unit = flying.pop(outcomes[0].point)
        done(outcomes)
        problem.record(unit, finished)


def _lowest(found: list[Problem]) -> tuple[Problem, Unit] | None:
    heads = [(unit.bound_ns, i) for i, problem in enumerate(found) if (unit := problem.head()) is not None]
    if not heads:
        return None
    problem = found[min(heads)[1]]
    unit = problem.units[problem.next]
    problem.next += 1
    return problem, unit


def pruned(found: list[Problem], task: Task) -> list[Outcome]:
    """The units no simulation reached: each point a ``pruned`` outcome with its bound."""
    return [Outcome(p.id, _seed(task, p), PRUNED, None, {"bound_ns": unit.bounds[p.id]})
            for problem in found for unit in problem.units[problem.next:] for p in unit.todo]


def _seed(task: Task, point: Point) -> int | None:
    return raw_seed(point_raw(task.base_raw, point))
