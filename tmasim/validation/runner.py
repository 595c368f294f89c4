"""Simulate many points of one base scenario: in parallel, each distinct scenario once, resumable.

Points travel to workers as the sweep's :class:`~tmasim.sweep.points.Task` and
:class:`~tmasim.sweep.spec.Point` (base scenario + overrides), so a point that cannot be
simulated is an ``invalid`` or ``error`` outcome with its message, exactly as in a sweep. Unlike
a sweep, a calibration asks for batches again and again, so one process pool lives as long as
the :class:`Runner`. Points with equal overrides (the same kernel measured with and without
timestamps, or by two TMA variants) are simulated once. With a journal, every finished
simulation is appended to a JSON-lines file as it comes, and a rerun of the same command reads
them back instead of simulating again (an interrupted run resumes where it stopped).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TextIO

from tmasim.errors import TmasimError
from tmasim.sweep.executors import chunked
from tmasim.sweep.points import Outcome, Task, evaluate_chunk
from tmasim.sweep.spec import Point
from tmasim.validation.mapping import Override
from tmasim.version import __version__

Progress = Callable[[int], None]


class Runner:
    """Outcomes of override lists on one base scenario; use as a context manager."""

    def __init__(self, base_raw: dict[str, Any], base_dir: Path | None, *, jobs: int = 1,
                 journal: Path | None = None) -> None:
        from tmasim.estimates.budget import check_jobs

        check_jobs(jobs)
        self.task = Task(base_raw, base_dir)
        self.jobs = jobs
        self.journal_path = journal
        self.simulations = 0
        self._known: dict[str, Outcome] = {}
        self._stack = contextlib.ExitStack()
        self._pool: Executor | None = None
        self._journal: TextIO | None = None
        self._new_files: list[Path] = []

    def __enter__(self) -> Runner:
        if self.journal_path is not None:
            self._known.update(read_journal(self.journal_path))
            self._new_files = [p for p in (self.journal_path.parent, self.journal_path) if not p.exists()]
        return self

    def _open_journal(self) -> TextIO | None:
        """Opened with the first finished simulation, so that a run that stops early leaves no file."""
        if self._journal is None and self.journal_path is not None:
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            self._journal = self._stack.enter_context(self.journal_path.open("a", encoding="utf-8"))
        return self._journal

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        """An error a user caused leaves nothing behind that was not there; an interruption keeps
        the journal, so that the same command resumes."""
        self._stack.close()
        if exc_type is not None and issubclass(exc_type, TmasimError):
            for path in reversed(self._new_files):  # the journal, then its folder if it is empty
                with contextlib.suppress(OSError):
                    if path.is_dir():
                        path.rmdir()
                    else:
                        path.unlink(missing_ok=True)

    def run(self, batch: Sequence[Sequence[Override]], progress: Progress | None = None) -> list[Outcome]:
        """One outcome per override list, in order; only scenarios not seen before are simulated."""
        keys = [self.key(overrides) for overrides in batch]
        todo = {key: overrides for key, overrides in zip(keys, batch, strict=True) if key not in self._known}
        if progress is not None:
            progress(len(batch) - len(todo))
        points = [Point(i, tuple(overrides)) for i, overrides in enumerate(todo.values())]
        for outcomes in self._chunks(points):
            self._finish(list(todo), outcomes)
            if progress is not None:
                progress(len(outcomes))
        return [self._known[key] for key in keys]

    def key(self, overrides: Sequence[Override]) -> str:
        """Same base, same overrides, same tmasim: the same simulation."""
        text = json.dumps([__version__, self.task.base_raw, list(overrides)], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def _chunks(self, points: Sequence[Point]) -> Iterator[list[Outcome]]:
        if self.jobs == 1 or len(points) <= 1:
            for point in points:
                yield evaluate_chunk(self.task, [point])
            return
        pool = self._ensure_pool()
        futures = [pool.submit(evaluate_chunk, self.task, chunk) for chunk in chunked(points, self.jobs)]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()

    def _ensure_pool(self) -> Executor:
        if self._pool is None:
            pool = ProcessPoolExecutor(max_workers=self.jobs, initializer=_ignore_ctrl_c)
            self._stack.callback(pool.shutdown, wait=True, cancel_futures=True)
            self._pool = pool
        return self._pool

    def _finish(self, keys: Sequence[str], outcomes: Sequence[Outcome]) -> None:
        from tmasim.output.paths import write_error

        try:
            self._journal_outcomes(keys, outcomes)
        except OSError as err:  # a full disk: one line; the lines flushed before it stay for a rerun
            raise write_error("--out", self.journal_path or Path("."), err) from None

    def _journal_outcomes(self, keys: Sequence[str], outcomes: Sequence[Outcome]) -> None:
        journal = self._open_journal()
        for outcome in outcomes:
            key = keys[outcome.point]
            self._known[key] = outcome
            self.simulations += 1
            if journal is not None:
                journal.write(json.dumps({"key": key, **outcome.to_json()}) + "\n")
        if journal is not None:
            journal.flush()

    def remove_journal(self) -> None:
        """Once the results are written, the journal has served its purpose."""
        if self.journal_path is not None:
            self._stack.close()
            self._journal = None
            self.journal_path.unlink(missing_ok=True)


def read_journal(path: Path) -> dict[str, Outcome]:
    """Finished simulations of an earlier run; a torn last line (a kill mid-write) is skipped."""
    known: dict[str, Outcome] = {}
    if not path.is_file():
        return known
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
            known[str(data["key"])] = Outcome.from_json(data)
        except (ValueError, KeyError, TypeError):
            continue
    return known


def _ignore_ctrl_c() -> None:
    """Workers leave Ctrl-C to the parent, which stops the pool once and keeps the journal."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def progress_bar(total: int, label: str, enabled: bool) -> Iterator[Progress]:
    """A tqdm bar on a terminal, nothing otherwise; yields the function that advances it."""
    from tqdm import tqdm

    with tqdm(total=total, unit="point", desc=label, file=sys.stderr, disable=not (enabled and sys.stderr.isatty()),
              dynamic_ncols=True) as bar:
        yield bar.update
