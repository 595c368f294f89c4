"""``run_sweep``: check the sweep, skip what earlier runs finished, run the rest, save as it goes."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import TmasimError
from tmasim.inputs import scenario as scenarios
from tmasim.sweep import estimate, lock, table
from tmasim.sweep import search as searching
from tmasim.sweep.executors import EXECUTORS, pool, started
from tmasim.sweep.points import PRUNED, Outcome, Task
from tmasim.sweep.spec import Point, SweepPlan, plan_sweep, read_base, scenario_name
from tmasim.sweep.store import SweepStore

if TYPE_CHECKING:
    import pandas as pd

Base = str | Path | Mapping[str, Any] | None
Vary = Sequence[str] | Mapping[str, Iterable[Any]]
MAX_POINTS = 10_000  # points left to run past which a sweep is refused by default (the command line's, without --yes)


def run_sweep(base: Base, overrides: Iterable[str] = (), vary: Vary = (), *, zip_: bool | Sequence[str] = False,
              jobs: int = 1,
              out: str | Path | None = None, executor: str = "local", scheduler: str | None = None,
              progress: bool = True, max_points: int | None = MAX_POINTS,
              max_seconds: float | None = estimate.LIMIT_SECONDS, allow_large: bool = False,
              notify: Callable[[str], None] | None = None, search: bool = False) -> pd.DataFrame:
    """Simulate every point of a sweep and return its table (one row per point, in point order).

    ``base`` is a scenario file, a bundled scenario's name or a raw scenario dict; ``overrides``
    are ``--set`` strings; ``vary`` is ``["FIELD=V1,V2", ...]`` or ``{FIELD: [V1, V2]}``; ``zip_``
    pairs the i-th values of every axis (True) or of the fields it names (a list), crossed with
    the others. With
    ``out``, finished points are journalled as they come and written to ``out`` (Parquet, or
    CSV if it ends in ``.csv``) at the end or on interruption; running the same sweep again
    computes only what is missing. ``frame.attrs["sweep"]`` says what produced the table.

    Before any point runs its time is estimated from the plans of a few points
    (:mod:`tmasim.sweep.estimate`): past ``max_points`` points left to run or ``max_seconds`` the
    sweep is refused (by default the command line's limits: :data:`MAX_POINTS` points and
    :data:`tmasim.sweep.estimate.LIMIT_SECONDS`; ``None`` lifts each, as ``--yes`` does), and a
    long one is announced through ``notify``. A point past a run's own limits (:mod:`tmasim.budget`)
    is an ``invalid`` row unless ``allow_large``. A second sweep on the same ``out`` while one runs is refused (see
    :mod:`tmasim.sweep.lock`).

    ``executor="dask"`` without ``scheduler`` starts a local Dask cluster whose workers are
    spawned processes: a script that calls this must guard its entry point with
    ``if __name__ == "__main__":``, as for any spawned multiprocessing.

    ``search=True`` simulates, per problem, only the points whose lower bound leaves them a chance
    to change the answer (lowest bound first); the others are ``pruned`` rows with their
    ``bound_ns``, and the answer is the full sweep's (:mod:`tmasim.sweep.search`). A sweep run
    without it simulates the points an earlier search pruned.
    """
    _check_options(jobs, executor, scheduler)
    _check_switches(progress=progress, allow_large=allow_large, search=search, **_zip_switch(zip_))
    _check_limits(max_points=max_points, max_seconds=max_seconds)
    plan = plan_sweep(base, overrides, vary, zip_, max_points=_grid_limit(out, max_points))
    return execute(plan, jobs=jobs, out=out, executor=executor, scheduler=scheduler, progress=progress,
                   max_points=max_points, max_seconds=max_seconds, allow_large=allow_large, notify=notify,
                   search=search)


def execute(plan: SweepPlan, *, jobs: int = 1, out: str | Path | None = None, executor: str = "local",
            scheduler: str | None = None, progress: bool = True, max_points: int | None = MAX_POINTS,
            max_seconds: float | None = estimate.LIMIT_SECONDS, allow_large: bool = False,
            notify: Callable[[str], None] | None = None, search: bool = False,
            known_bounds: Mapping[int, float | None] | None = None, command: str | None = None) -> pd.DataFrame:
    """Run a checked sweep plan as :func:`run_sweep` does (its options checked by the caller).
    ``known_bounds`` (a search: point id -> bound in ns) spares working out bounds already known;
    ``command`` names the run in the estimate's note and refusals (``tune``; default: the sweep)."""
    task = Task(plan.base_raw, plan.base_dir, allow_large=allow_large)
    store = SweepStore(Path(out), plan) if out is not None else None
    if store is not None:
        store.check_writable()
    with lock.held(store.lock_path, store.out) if store is not None else contextlib.nullcontext():
        finished = store.load_finished() if store is not None else {}
        if not search:  # the full grid: what a search pruned runs now
            finished = {i: o for i, o in finished.items() if o.status != PRUNED}
        resumed = len(finished)
        journalled = store is not None and store.journal_path.exists()
        todo = [point for point in plan.points if point.id not in finished]
        found = None
        point_seconds = None
        if search and todo:
            estimate.check_count(todo, max_points)
            found = _search_problems(plan, task, todo, finished, jobs, executor, known_bounds)
            # Each problem's lowest unit runs first (every search runs it): its time bounds the best,
            # so the estimate after it counts no more than the points the search can still reach.
            estimate.check(plan, todo, jobs, max_points=max_points, max_seconds=max_seconds, notify=None,
                           expected=searching.firsts(found), command=command)
        else:
            point_seconds = estimate.check(plan, todo, jobs, max_points=max_points, max_seconds=max_seconds,
                                           notify=notify, command=command)

        def after_firsts(problems: list[searching.Problem]) -> None:
            _tighten_certain(task, problems, jobs, executor)
            estimate.check(plan, todo, jobs, max_points=max_points, max_seconds=max_seconds, notify=notify,
                           expected=searching.expected(problems), certain=searching.certain(problems),
                           command=command)

        written = False
        try:
            if found is not None:
                _search_points(plan, task, found, finished, store, jobs=jobs, executor=executor,
                               scheduler=scheduler, progress=progress, after_firsts=after_firsts)
            else:
                _run_points(plan, task, todo, finished, store, jobs=jobs, executor=executor, scheduler=scheduler,
                            progress=progress, point_seconds=point_seconds)
        finally:
            if store is not None:
                written = _save_if_changed(store, finished, changed=journalled or len(finished) > resumed)
    frame = table.build(plan, finished)
    frame.attrs["sweep"] = Provenance({**_provenance(plan, store), "computed": len(finished) - resumed,
                                       "resumed": resumed, "written": written, "search": search,
                                       "journal_lines_skipped": list(store.skipped_lines) if store is not None else []})
    return frame


class Provenance(dict[str, Any]):
    """``frame.attrs["sweep"]``: what produced the table, the base scenario's fields included,
    shared (never copied) by the frames made from it. pandas deep-copies a frame's ``attrs`` into
    every frame, row and column it hands out (``NDFrame.__finalize__``): with a per-tile list of a
    million times in the scenario, the summary of a 2-point sweep spent a minute copying it."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Provenance:
        return self


def _search_problems(plan: SweepPlan, task: Task, todo: Sequence[Point], finished: Mapping[int, Outcome],
                     jobs: int, executor: str, known: Mapping[int, float | None] | None) -> list[searching.Problem]:
    """The search's problems, their units ordered by bound: every point's quick bound (those not
    ``known``) worked out first, then the tight bounds of the points expected to run, both on
    ``jobs`` local workers (:mod:`tmasim.sweep.bounds`); any other point's tight bound is worked
    out here when the search reaches it."""
    from tmasim.sweep import bounds as bounding

    quick = dict(known or {})
    missing = [point for point in todo if point.id not in quick]
    quick.update((i, b.ns) for i, b in bounding.bounds(task, missing, jobs=jobs, executor=executor,
                                                       quick=True).items())
    # A workload without a quick bound gave its tight one already (attention, tiles): not twice.
    tight = {p.id: quick.get(p.id) for p in todo if not _has_quick_bound(task, p)}
    found = searching.problems(plan, todo, finished, lambda point: quick.get(point.id),
                               tighten=lambda point: bounding.bound_of(task, point).ns)
    searching.tighten_known(found, tight)
    return found


def _tighten_certain(task: Task, found: list[searching.Problem], jobs: int, executor: str) -> None:
    """The tight bounds of the points a search is sure to run, on ``jobs`` local workers at once
    (the search would work them out one by one as it reaches them; the others it may never reach)."""
    from tmasim.sweep import bounds as bounding

    loose = searching.loose(found)
    ahead = [point for point in searching.certain(found) if point.id in loose]
    tight = {i: b.ns for i, b in bounding.bounds(task, ahead, jobs=jobs, executor=executor).items()}
    searching.tighten_known(found, tight)


def _has_quick_bound(task: Task, point: Point) -> bool:
    """Whether the point's workload has a quick bound of its own (GEMM), cheaper than its tight one."""
    from tmasim.workloads import WORKLOADS

    kind = dict(point.values).get("workload.kind", (task.base_raw.get("workload") or {}).get("kind", "tiles"))
    return hasattr(WORKLOADS.get(str(kind)), "quick_lower_bound_ns")


def _grid_limit(out: str | Path | None, max_points: int | None) -> int | None:
    """``max_points`` applies to the whole grid before it is built, unless an earlier run may have
    finished some of it (then it applies to the points left, after they are read)."""
    if out is None or max_points is None:
        return max_points
    path = Path(out)
    if not path.name:  # '.', '/': refused as a file name by the store, with its own message
        return max_points
    earlier = (path, path.with_name(path.name + ".partial.jsonl"))
    try:
        return None if any(p.exists() for p in earlier) else max_points
    except OSError:
        return max_points


def _zip_switch(zip_: object) -> dict[str, object]:
    """``zip_`` as a switch to check: True/False, or (checked here) a list or tuple of field names."""
    if isinstance(zip_, (list, tuple)) and all(isinstance(name, str) for name in zip_):
        return {}
    return {"zip_": zip_}


def _check_switches(**switches: object) -> None:
    """``zip_="no"`` must not zip, nor ``allow_large="no"`` lift the limits: True or False only."""
    for name, value in switches.items():
        if not isinstance(value, bool):
            also = ", or a list of the fields to pair" if name == "zip_" else ""
            raise TmasimError(f"run_sweep: {name}={str(value)[:40]!r} must be True or False{also}")


def _check_limits(**limits: object) -> None:
    for name, value in limits.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:  # NaN is no limit
            raise TmasimError(f"run_sweep: {name}={str(value)[:40]!r} must be a number >= 0, or None for no limit")


def _check_options(jobs: int, executor: str, scheduler: str | None) -> None:
    from tmasim.estimates.budget import check_jobs

    check_jobs(jobs)
    if executor not in EXECUTORS:
        raise TmasimError(f"--executor: {executor!r} must be one of {', '.join(EXECUTORS)}")
    if scheduler and executor != "dask":
        raise TmasimError("--scheduler: a Dask scheduler address needs --executor dask")


def _run_points(plan: SweepPlan, task: Task, todo: Sequence[Point], finished: dict[int, Outcome],
                store: SweepStore | None, *, jobs: int, executor: str, scheduler: str | None, progress: bool,
                point_seconds: float | None = None) -> None:
    """Each chunk is journalled before it counts as finished, so a kill loses no finished point."""
    if not todo:
        return
    with contextlib.ExitStack() as stack:
        journal = stack.enter_context(store.journal()) if store is not None else None
        chunks = stack.enter_context(started(task, todo, jobs=jobs, executor=executor, scheduler=scheduler,
                                             point_seconds=point_seconds))
        bar = stack.enter_context(_progress_bar(plan, len(finished), progress))
        for outcomes in chunks:
            if journal is not None:
                journal.write_many([outcome.to_json() for outcome in outcomes])
            finished.update((outcome.point, outcome) for outcome in outcomes)
            bar.update(len(outcomes))


def _search_points(plan: SweepPlan, task: Task, found: list[searching.Problem], finished: dict[int, Outcome],
                   store: SweepStore | None, *, jobs: int, executor: str, scheduler: str | None,
                   progress: bool, after_firsts: Callable[[list[searching.Problem]], None]) -> None:
    """As :func:`_run_points`, but lowest bound first, up to where no point can change the answer:
    each problem's lowest unit first; once each has a unit finished, ``after_firsts`` (the estimate)."""
    with contextlib.ExitStack() as stack:
        journal = stack.enter_context(store.journal()) if store is not None else None
        workers = stack.enter_context(pool(task, jobs=jobs, executor=executor, scheduler=scheduler))
        bar = stack.enter_context(_progress_bar(plan, len(finished), progress))

        def done(outcomes: list[Outcome]) -> None:
            if journal is not None:
                journal.write_many([outcome.to_json() for outcome in outcomes])
            finished.update((outcome.point, outcome) for outcome in outcomes)
            bar.update(len(outcomes))

        searching.run(found, workers, jobs, finished, done, known=after_firsts)
        rest = searching.pruned(found, task)
        if rest:
            done(rest)


@contextlib.contextmanager
def _progress_bar(plan: SweepPlan, done: int, enabled: bool) -> Iterator[Any]:
    from tqdm import tqdm

    shown = enabled and sys.stderr.isatty()
    with tqdm(total=len(plan.points), initial=done, unit="point", desc=f"sweep {plan.name}", file=sys.stderr,
              disable=not shown, dynamic_ncols=True) as bar:
        yield bar


def _save_if_changed(store: SweepStore, finished: Mapping[int, Outcome], *, changed: bool) -> bool:
    """Rewrite FILE only with something new, so a finished file stays byte for byte as it was."""
    if finished and (changed or not store.out.exists()):
        store.save(finished)  # removes the journal once FILE holds its points
        return True
    store.journal_path.unlink(missing_ok=True)  # at most a header: no point in it
    return False


def _provenance(plan: SweepPlan, store: SweepStore | None) -> dict[str, Any]:
    if store is None:
        return {"source": plan.source, **plan.fingerprint(), "points": len(plan.points), "out": None}
    return {**store.metadata(len(plan.points)), "out": str(store.out)}


def default_out(base: Base, overrides: Iterable[str] = ()) -> Path:
    """``sweep-<scenario name>.parquet`` in the current folder."""
    source, raw, _ = read_base(base)
    name = scenario_name(source, scenarios.apply_overrides(raw, overrides))
    return Path(f"sweep-{re.sub(r'[^A-Za-z0-9._-]+', '-', name)}.parquet")
