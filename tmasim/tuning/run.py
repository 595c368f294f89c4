"""``tune``: a scenario's whole design space, searched as ``sweep --search`` searches a grid.

Every candidate of :func:`tmasim.tuning.space.design_space` is bounded (its plan's proven lower
bound, :mod:`tmasim.sweep.bounds`, on the ``jobs`` workers); one that breaks a rule is left out
and counted by the field its error names. The valid ones make one zipped sweep, simulated lowest
bound first until the next bound exceeds the best time x (1 + the knee tolerance)
(:mod:`tmasim.sweep.search`): the best, the knee, what binds there and the next step are what the
full space's sweep would answer, from a fraction of its simulations.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import TmasimError
from tmasim.inputs import scenario as scenarios
from tmasim.inputs.scenario import Scenario, from_dict
from tmasim.sweep import answer, estimate
from tmasim.sweep.bounds import bounds
from tmasim.sweep.points import Task
from tmasim.sweep.spec import IN_MEMORY, Axis, SweepPlan, expand, read_base
from tmasim.tuning.space import design_space

if TYPE_CHECKING:
    import pandas as pd

TOP = 5


@dataclass(frozen=True)
class TuneResult:
    """What a tune found: ``frame`` holds every valid point of the space (``ok`` rows simulated,
    ``pruned`` rows with their ``bound_ns``); ``left_out`` counts the candidates that broke a rule,
    by the field their error names, with one such error each in ``examples``."""

    name: str
    what: str  # the problem, in a few words
    candidates: int
    left_out: dict[str, int]
    frame: pd.DataFrame
    seconds: float
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def valid(self) -> int:
        return len(self.frame)

    @property
    def simulated(self) -> int:
        return int((self.frame["status"] != "pruned").sum())

    @property
    def best(self) -> dict[str, Any] | None:
        found = answer.find(self.frame)
        return found.best if found is not None else None

    @property
    def knee(self) -> dict[str, Any] | None:
        found = answer.find(self.frame)
        return found.knee if found is not None else None

    def top(self, count: int = TOP) -> pd.DataFrame:
        """The ``count`` fastest points of the space, fastest first: simulated points no pruned
        point can outrank (their time at most the least bound of the pruned ones). A search
        simulates everything within the knee's tolerance of the best, so fewer than ``count``
        come back only where the space's next-fastest lie past it and some were pruned."""
        rows = answer.valid_rows(self.frame).sort_values("makespan_ns", kind="stable")
        if {"status", "bound_ns"} <= set(self.frame.columns):
            bounds = self.frame.loc[self.frame["status"] == "pruned", "bound_ns"]
            if len(bounds):  # (a pruned point always has its bound; one without could be anywhere)
                rows = rows[rows["makespan_ns"] <= bounds.min(skipna=False)]
        return rows.head(count)

    def text(self) -> str:
        """What ``tmasim tune`` prints: the space, what ran, the five best, the answer."""
        left = sum(self.left_out.values())
        why = ", ".join(f"{n:,} by {f}" for f, n in sorted(self.left_out.items(), key=lambda kv: -kv[1]))
        lines = [f"tune {self.name}: {self.what}",
                 f"  design space: {self.candidates:,} points, {left:,} left out by the rules"
                 + (f" ({why})" if why else "") + f": {self.valid:,} valid",
                 f"  simulated {self.simulated:,} of the {self.valid:,} in {self.seconds:.1f} s; the other "
                 f"{self.valid - self.simulated:,} pruned by their lower bounds"]
        top = self.top()
        cut = len(top) < min(TOP, len(answer.valid_rows(self.frame)))
        lines.append(f"the {len(top)} best" + (" (a pruned point, with only its bound, could come next):" if cut
                                               else ":"))
        lines += [f"  {line}" for line in answer.table_lines(top)]
        return "\n".join(lines + answer.answer_lines(self.frame))


def tune(scenario: str | Path | Mapping[str, Any] | Scenario | None, overrides: Iterable[str] = (), *,
         jobs: int = 1, out: str | Path | None = None, progress: bool = False, allow_large: bool = False,
         max_seconds: float | None = estimate.LIMIT_SECONDS,
         notify: Callable[[str], None] | None = None, wide: bool = False) -> TuneResult:
    """Search ``scenario``'s design space (:mod:`tmasim.tuning.space`) for its best design.

    ``scenario`` is a bundled scenario's name, a file, raw scenario data or a :class:`Scenario`;
    ``overrides`` are ``--set`` strings applied first (the problem: ``workload.m=4096``...).
    ``jobs`` worker processes bound and simulate the points; ``out`` (.parquet or .csv) receives
    the table of every valid point, and running the same tune again resumes from it. A search
    estimated past ``max_seconds`` is refused (``None``: no limit), as a sweep's is. ``wide``: a
    GEMM's wide space (:mod:`tmasim.tuning.space`: clusters to the GPU's limit, the launch,
    stream-K and split-K).
    """
    from tmasim.estimates.budget import check_jobs
    from tmasim.sweep.runner import execute

    check_jobs(jobs)
    start = time.perf_counter()
    source, raw, base_dir = _base(scenario)
    raw = scenarios.apply_overrides(raw, overrides)
    scenarios.set_field(raw, "run.records", False)
    base = from_dict(raw, base_dir)
    space = design_space(base, kept=_given(overrides), wide=wide)
    task = Task(raw, base_dir, allow_large=allow_large)
    candidates = _plan(source, raw, base_dir, space.fields, space.points)
    # A design that runs as another of the space does (stream-K splitting no tile) is left out,
    # where that other one is in the space (the scheduler varies).
    distinct = "workload.scheduler" in space.fields
    found = bounds(task, candidates.points, jobs=jobs, quick=True, distinct=distinct)
    valid = [p for p in candidates.points if found[p.id].invalid is None]
    if not valid:
        first = next(iter(found.values()))
        raise TmasimError(f"tune: no point of the design space of {candidates.name} is valid (the first: "
                          f"{first.invalid})")
    plan = _plan(source, raw, base_dir, space.fields, [space.points[p.id] for p in valid])
    known = {new.id: found[old.id].ns for new, old in zip(plan.points, valid, strict=True)}
    frame = execute(plan, jobs=jobs, out=out, progress=progress, max_points=None, max_seconds=max_seconds,
                    allow_large=allow_large, notify=notify, search=True, known_bounds=known, command="tune")
    left_out, examples = _left_out(found[p.id].invalid for p in candidates.points)
    return TuneResult(plan.name, _what(base), len(space), left_out, frame, time.perf_counter() - start, examples)


def _given(overrides: Iterable[str]) -> set[str]:
    """The fields an override sets: the space keeps them as given."""
    return {o.split("=", 1)[0].strip() for o in overrides if "=" in o}


def _base(scenario: str | Path | Mapping[str, Any] | Scenario | None) -> tuple[str, dict[str, Any], Path | None]:
    if isinstance(scenario, Scenario):
        return IN_MEMORY, scenario.to_dict(), None
    return read_base(scenario)


def _plan(source: str, raw: dict[str, Any], base_dir: Path | None, fields: tuple[str, ...],
          points: Iterable[tuple[Any, ...]]) -> SweepPlan:
    """The points as one zipped sweep; a field that takes one value over them all is set in the
    base instead (it is no choice: the answer and the table then leave it out)."""
    points = list(points)
    columns = {f: [p[i] for p in points] for i, f in enumerate(fields)}
    raw = dict(raw)
    axes = []
    for name, values in columns.items():
        if len({repr(v) for v in values}) == 1:
            raw = scenarios.apply_overrides(raw, {name: values[0]})
        else:
            axes.append(Axis(name, tuple(values)))
    if not axes:  # one point: still a sweep of one value
        name = fields[0]
        axes = [Axis(name, (columns[name][0],))]
    return SweepPlan(source, raw, base_dir, tuple(axes), True, expand(axes, True))


def _left_out(errors: Iterable[str | None]) -> tuple[dict[str, int], dict[str, str]]:
    """Per field an error names (``pipeline.stages: 5 needs ...``): how many, and the first such error."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for error in errors:
        if error is None:
            continue
        name = error.split(":", 1)[0].strip() if ":" in error else "other"
        counts[name] += 1
        examples.setdefault(name, error)
    return dict(counts), examples


def _what(base: Scenario) -> str:
    from tmasim.workloads import workload_of

    problem = workload_of(base.workload).describe(base.workload).split(", tile")[0]
    return f"{problem} on {base.gpu.name}"
