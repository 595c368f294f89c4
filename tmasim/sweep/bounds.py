"""Every point's lower bound, worked out before a search simulates anything, on the sweep's workers.

A bound is built from the point's plan (:func:`tmasim.simulation.lower_bound_ns`): tens of
milliseconds a GEMM point, so a space of thousands is bounded in the worker processes a sweep's
``--jobs`` gives (local ones; with Dask, in this process). A search first takes every point's
quick bound (:func:`tmasim.simulation.quick_lower_bound_ns`, never above the other and a tenth
of its cost), then the tight one only for points that come near the answer
(:mod:`tmasim.sweep.search`). A point whose scenario does not build
(a value out of range, a CTA that does not fit) has no bound but the reason: a sweep simulates it
(an ``invalid`` row), a tune leaves it out of its space (:mod:`tmasim.tuning.space`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from tmasim.errors import ModelError, TmasimError
from tmasim.inputs.scenario import from_dict
from tmasim.simulation import lower_bound_ns, quick_lower_bound_ns, same_run
from tmasim.sweep.points import Task
from tmasim.sweep.spec import Point, point_raw

CHUNK = 16  # points a worker bounds per task: a few hundred ms of work against one round trip


@dataclass(frozen=True)
class Bound:
    """A point's proven lower bound in ns (None: it has none, and is simulated first), or why its
    scenario does not build (``invalid``: the error's one-line message)."""

    ns: float | None
    invalid: str | None = None


def bound_of(task: Task, point: Point, quick: bool = False, distinct: bool = False) -> Bound:
    """The point's bound: ``quick``, the cheaper one (:func:`tmasim.simulation.quick_lower_bound_ns`).
    ``distinct`` (a tune's space): a point that runs as a simpler setting of it does
    (:func:`tmasim.simulation.same_run`) is ``invalid`` with that reason."""
    how = quick_lower_bound_ns if quick else lower_bound_ns
    try:
        scenario = from_dict(point_raw(task.base_raw, point), task.base_dir)
        same = same_run(scenario) if distinct else None
        return Bound(None, same) if same is not None else Bound(how(scenario))
    except TmasimError as err:
        return Bound(None, str(err))
    except (ModelError, ArithmeticError, TypeError, ValueError):
        return Bound(None)


def bound_chunk(task: Task, points: Sequence[Point], quick: bool = False, distinct: bool = False) -> list[Bound]:
    return [bound_of(task, point, quick, distinct) for point in points]


def bounds(task: Task, points: Sequence[Point], *, jobs: int = 1, executor: str = "local",
           quick: bool = False, distinct: bool = False) -> dict[int, Bound]:
    """Each point's :class:`Bound` (``quick``: the cheaper one; ``distinct``: see :func:`bound_of`),
    by point id: in ``jobs`` local processes, else in this one."""
    if jobs == 1 or executor != "local" or len(points) <= CHUNK:
        return {point.id: bound_of(task, point, quick, distinct) for point in points}
    from tmasim.sweep.executors import _start_worker

    chunks = [list(points[i:i + CHUNK]) for i in range(0, len(points), CHUNK)]
    with ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(os.getpid(),)) as pool:
        found = pool.map(bound_chunk, [task] * len(chunks), chunks, [quick] * len(chunks), [distinct] * len(chunks))
        return {point.id: bound for chunk, got in zip(chunks, found, strict=True)
                for point, bound in zip(chunk, got, strict=True)}
