"""Running one point of a sweep, in whichever process or Dask worker it lands on.

Everything a worker needs travels in a :class:`Task` (plain data, picklable) so that the same
function serves the in-process loop, a process pool and a Dask cluster. A point that cannot run
is an outcome too: ``invalid`` for input a user can fix (a value out of range, a CTA that does
not fit, a run whose barriers were broken on purpose), ``error`` for a model that cannot finish
(deadlock, mbarrier misuse) and for anything else a point raises (a bug in tmasim, recorded
with its type and message): one point never stops the sweep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmasim.errors import ModelError, TmasimError
from tmasim.inputs.scenario import RunOptions, from_dict
from tmasim.simulation import simulate
from tmasim.sweep.spec import Point, point_raw

OK, INVALID, ERROR = "ok", "invalid", "error"
PRUNED = "pruned"  # not simulated: its lower bound shows it cannot change the answer (tmasim.sweep.search)


@dataclass(frozen=True)
class Task:
    """The base scenario every point of a sweep starts from."""

    base_raw: Mapping[str, Any]
    base_dir: Path | None
    allow_large: bool = False  # run points past tmasim.budget's limits (--yes)


@dataclass(frozen=True)
class Outcome:
    """What one point gave: its status, the error message if any, and the summary figures."""

    point: int
    seed: int | None
    status: str
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"point": self.point, "seed": self.seed, "status": self.status, "error": self.error,
                "stats": self.stats}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        """An outcome from a journal line; ``ValueError`` if the line is not one."""
        try:
            status, stats = data["status"], data["stats"]
            if status not in (OK, INVALID, ERROR, PRUNED) or not isinstance(stats, Mapping):
                raise ValueError("not an outcome")
            if status == OK and not _a_time(stats.get("makespan_ns")):  # empty, NaN, text: not a run's time
                raise ValueError("an ok outcome without a time")
            error = data["error"]
            return cls(int(data["point"]), data["seed"], str(status), None if error is None else str(error),
                       dict(stats))
        except (KeyError, TypeError) as err:
            raise ValueError(f"not an outcome ({err})") from None


def _a_time(value: Any) -> bool:
    """Whether a journal's ``makespan_ns`` is a run's time: a finite number above zero."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def evaluate_chunk(task: Task, chunk: Sequence[Point]) -> list[Outcome]:
    """Points are shipped in chunks so that a pool's per-task overhead is paid once per chunk."""
    return [evaluate(task, point) for point in chunk]


def evaluate(task: Task, point: Point) -> Outcome:
    seed = None
    try:
        raw = point_raw(task.base_raw, point)
        seed = raw_seed(raw)
        scenario = from_dict(raw, task.base_dir)
        seed = scenario.run.seed
        result = simulate(scenario, allow_large=True) if task.allow_large else simulate(scenario)
        stats = result.stats
        if not stats.get("valid", True):  # broken barriers: never recorded as a time
            return Outcome(point.id, seed, INVALID, str(stats["invalid_reason"]))
    except ModelError as err:
        return Outcome(point.id, seed, ERROR, str(err))
    except TmasimError as err:
        return Outcome(point.id, seed, INVALID, str(err))
    except Exception as err:  # noqa: BLE001 (recorded, never lost: the point's row says what happened)
        return Outcome(point.id, seed, ERROR, _one_line(f"{type(err).__name__}: {err}"))
    plain = {k: _plain(v) for k, v in stats.items()}
    wide = next((k for k, v in plain.items() if isinstance(v, int) and not -2**63 <= v < 2**63), None)
    if wide is not None:  # what no table column can hold: never an ok row (tmasim.ranges keeps runs from it)
        return Outcome(point.id, seed, ERROR, f"{wide} = {plain[wide]:.3g} leaves the engine's 64-bit range")
    # the summary's trust line, per row: what the validation says of runs like this one
    plain["validated"] = result.validated
    return Outcome(point.id, seed, OK, None, plain)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


def raw_seed(raw: Mapping[str, Any]) -> int | None:
    """The seed an invalid point would have run with, when it can be read at all."""
    run = raw.get("run")
    seed = run.get("seed", RunOptions().seed) if isinstance(run, Mapping) else RunOptions().seed
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _plain(value: Any) -> Any:
    """Numpy scalars as Python numbers, so that outcomes go to JSON lines as they are."""
    return value.item() if hasattr(value, "item") else value
