"""``tmasim sweep --search``: the full sweep's answer from the points that can change it.

Every point with a proven lower bound on its time (:func:`tmasim.simulation.lower_bound_ns`,
from its plan, without running it) is ordered by that bound within its problem (the answer's
notion, :mod:`tmasim.field_roles`), and points are simulated lowest bound first. Once a
problem's next bound exceeds its best time so far × (1 + :data:`~tmasim.sweep.answer.KNEE_TOLERANCE`),
the problem stops: its other points are ``pruned`` rows that carry their ``bound_ns``.

Why the answer is the full sweep's (:mod:`tmasim.sweep.answer`): a pruned point's time is at
least its bound, above best × (1 + tol), where best is the least simulated time, which is
the problem's best time over every point. So a pruned point is not the best; nor the knee (its
cheapest point within best × (1 + tol)); nor the next step (a point more than tol faster than
the knee, whose time is at most best × (1 + tol)). The best can only fall as more points finish, so a point
pruned against an earlier best is pruned against the final one too.

Points that differ only in noise fields (replicates, whose mean time the answer compares) are
one *unit*: simulated together, bounded by the least of their bounds, pruned together. A point
with no bound (a workload without one, SM drift, a scenario that does not build) is simulated
first. Problems are grouped at least as finely as the answer groups them (a field that is a
problem field of any workload splits them), which only ever simulates more.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tmasim.inputs import field_roles
from tmasim.sweep.answer import KNEE_TOLERANCE, _value
from tmasim.sweep.executors import Pool
from tmasim.sweep.points import OK, PRUNED, Outcome, Task, raw_seed
from tmasim.sweep.spec import Point, SweepPlan, point_raw
from tmasim.workloads import WORKLOADS

SLACK_NS = 0.001  # a bound is a float of picoseconds: one ps of rounding (tests/test_true_figures.py)
# What a search expects its best time to be, before it simulates anything: the problem's lowest
# bound over this, the median ratio of the tightest bound to the simulated time on the 192-point
# GEMM design sweep (benchmarks/bench_search.py; 62-98% over its points). See :func:`expected`.
BOUND_EFFICIENCY = 0.89


@dataclass
class Unit:
    """Points that differ only in noise fields: run together, pruned together."""

    points: list[Point]  # every point of the unit
    todo: list[Point]  # those not finished yet
    bounds: dict[int, float | None] = field(default_factory=dict)  # point id -> its bound (ns)
    exact: bool = True  # False: ``bounds`` are quick ones, to be tightened before the unit runs

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
    tighten: Callable[[Point], float | None] | None = None  # the tight bound of a point the quick one ordered

    def head(self) -> Unit | None:
        """The next unit, if its bound leaves it a chance to change the answer. A unit ordered by
        quick bounds gets its tight ones first, and goes back in its place by them (a quick bound
        is never above the tight one, so no unit behind it could have come first)."""
        while self.next < len(self.units):
            unit = self.units[self.next]
            if unit.bound_ns - SLACK_NS > self.best_ns * (1 + KNEE_TOLERANCE):
                return None
            if unit.exact or self.tighten is None:
                return unit
            self.refine(unit, self.tighten)
            del self.units[self.next]
            bisect.insort(self.units, unit, lo=self.next, key=lambda u: u.bound_ns)
        return None

    @staticmethod
    def refine(unit: Unit, tighten: Callable[[Point], float | None]) -> None:
        unit.bounds = {p.id: _tighter(unit.bounds.get(p.id), tighten(p)) for p in unit.todo}
        unit.exact = True

    def record(self, unit: Unit, finished: Mapping[int, Outcome]) -> None:
        time = unit_time(unit, finished)
        if time is not None:
            self.best_ns = min(self.best_ns, time)


def _tighter(quick: float | None, tight: float | None) -> float | None:
    """The larger of two lower bounds (either may be missing)."""
    known = [b for b in (quick, tight) if b is not None]
    return max(known) if known else None


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
             bound: Callable[[Point], float | None],
             tighten: Callable[[Point], float | None] | None = None) -> list[Problem]:
    """The sweep's problems with their units left to run (bounded by ``bound``), lowest first.
    With ``tighten``, ``bound`` gives quick bounds and ``tighten`` the tight ones, worked out
    only for the units that come near the answer (:meth:`Problem.head`)."""
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
        problem = Problem([], tighten=tighten)
        for points in units.values():
            unit = Unit(points, _todo(points, waiting, finished), exact=tighten is None)
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


def tighten_known(found: Sequence[Problem], tight: Mapping[int, float | None]) -> None:
    """Give the units whose tight bounds are already worked out (``tight``, by point id) those
    bounds, and order each problem's units again."""
    for problem in found:
        for unit in problem.units[problem.next:]:
            if not unit.exact and all(p.id in tight for p in unit.todo):
                Problem.refine(unit, lambda point: tight[point.id])
        problem.units[problem.next:] = sorted(problem.units[problem.next:], key=lambda u: u.bound_ns)


def certain(found: Sequence[Problem]) -> list[Point]:
    """The points every search of ``found`` simulates: per problem, the units whose bound is within
    the knee tolerance of the lowest bound (the best time is at least the lowest bound, so their
    bounds never exceed best x (1 + tolerance)), and every unit with no bound."""
    return _bounded(found, lambda problem, lowest: lowest * (1 + KNEE_TOLERANCE))


def expected(found: Sequence[Problem]) -> list[Point]:
    """The points a search expects to simulate, for its estimate (:mod:`tmasim.sweep.estimate`):
    per problem, every unit whose bound is at most the best time x (1 + the knee tolerance), and
    every unit with no bound. With a best time known, that is the most the search can still run
    (the best only falls); before one, the best is guessed as the problem's lowest bound /
    :data:`BOUND_EFFICIENCY`, the typical gap between bound and time. The units sure to run are
    :func:`certain`'s."""
    def limit(problem: Problem, lowest: float) -> float:
        best = problem.best_ns if problem.best_ns < math.inf else lowest / BOUND_EFFICIENCY
        return best * (1 + KNEE_TOLERANCE) + SLACK_NS

    return _bounded(found, limit)


def _bounded(found: Sequence[Problem], limit: Callable[[Problem, float], float]) -> list[Point]:
    """Per problem, the points of the units left whose bound is at most ``limit(problem, its lowest
    bound)`` (a unit with no bound: always)."""
    points: list[Point] = []
    for problem in found:
        units = problem.units[problem.next:]
        bounds = [unit.bound_ns for unit in units]
        cap = limit(problem, min([b for b in bounds if b > -math.inf], default=math.inf))
        points += [p for unit, b in zip(units, bounds, strict=True) if b <= cap for p in unit.todo]
    return points


def firsts(found: Sequence[Problem]) -> list[Point]:
    """The points of each problem's lowest unit where the problem has no best time yet: those
    :func:`run` starts first (every search runs them)."""
    return [p for problem in found if problem.best_ns == math.inf and (unit := problem.head()) is not None
            for p in unit.todo]


def loose(found: Sequence[Problem]) -> set[int]:
    """The points whose units are ordered by quick bounds still (their tight ones not worked out)."""
    return {p.id for problem in found for unit in problem.units[problem.next:] if not unit.exact for p in unit.todo}


def run(found: list[Problem], workers: Pool, jobs: int, finished: dict[int, Outcome],
        done: Callable[[list[Outcome]], None], known: Callable[[list[Problem]], None] | None = None) -> None:
    """Keep ``jobs`` units running, the lowest bound that can still matter next (first each
    problem's lowest unit, where it has no best time yet); ``done`` gets each unit's outcomes as it
    finishes (and has put them in ``finished``). ``known`` is called once, as soon as every problem
    has a unit finished (the times then bound what the search can still reach: its estimate),
    before another unit starts; it may raise to stop the search."""
    flying: dict[int, tuple[Problem, Unit]] = {}
    waiting = [problem for problem in found if problem.best_ns == math.inf]
    unknown = {id(problem) for problem in waiting if problem.next < len(problem.units)}
    if known is not None and not unknown:  # every problem has its time already (a resumed search)
        known(found)
        known = None
    while True:
        while len(flying) < jobs and (pick := _first(waiting) or _lowest(found)) is not None:
            workers.submit(pick[1].todo)
            flying[pick[1].todo[0].id] = pick
        if not flying:
            return
        outcomes = workers.next_done()
        problem, unit = flying.pop(outcomes[0].point)
        done(outcomes)
        problem.record(unit, finished)
        unknown.discard(id(problem))
        if known is not None and not unknown:
            known(found)
            known = None


def _first(waiting: list[Problem]) -> tuple[Problem, Unit] | None:
    while waiting:
        problem = waiting.pop(0)
        if problem.head() is not None:
            unit = problem.units[problem.next]
            problem.next += 1
            return problem, unit
    return None


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
