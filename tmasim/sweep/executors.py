"""Where the points of a sweep run: this process, a pool of local processes, or a Dask cluster.

Each executor is a context manager that starts the work on entry and yields an iterable of
finished chunks (lists of outcomes) in the order they finish; leaving it, normally or on
Ctrl-C, cancels what has not started and releases the workers. Work is submitted on entry,
before the caller starts its progress bar, so that worker processes fork from a process that
has no other threads yet.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from tmasim.errors import TmasimError
from tmasim.sweep.points import Outcome, Task, evaluate_chunk
from tmasim.sweep.spec import Point

EXECUTORS = ("local", "dask")
PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 0.5
Chunks = Iterable[list[Outcome]]


@contextlib.contextmanager
def started(task: Task, points: Sequence[Point], *, jobs: int, executor: str,
            scheduler: str | None, point_seconds: float | None = None) -> Iterator[Chunks]:
    """Run ``points`` on the chosen executor; ``jobs=1`` locally means in this very process.
    ``point_seconds``, the sweep's estimated time a point, sizes the chunks (:func:`chunked`)."""
    if executor == "dask":
        with _dask(task, points, jobs, scheduler, point_seconds) as chunks:
            yield chunks
    elif jobs == 1:
        yield (evaluate_chunk(task, [point]) for point in points)
    else:
        with _process_pool(task, points, jobs, point_seconds) as chunks:
            yield chunks


CHUNK_SECONDS = 0.5  # a chunk's time, where the points' time is known: a worker's last chunk is its tail


def chunked(points: Sequence[Point], workers: int, point_seconds: float | None = None) -> list[list[Point]]:
    """About eight chunks per worker (so the load evens out), of at most 32 points each, and
    where a point's time is estimated (``point_seconds``), of about :data:`CHUNK_SECONDS` each:
    workers take chunks in order as they free up, so the sweep ends at most one chunk after the
    last worker starts its last one. Chunks of a few slow points (a causal launch, ragged tiles:
    seconds each) keep that tail to a point; chunks of many quick ones keep each chunk's
    shipping and journalling cost small beside its work."""
    size = max(1, min(32, len(points) // (workers * 8)))
    if point_seconds is not None and point_seconds > 0:
        size = max(1, min(size, round(CHUNK_SECONDS / point_seconds)))
    return [list(points[i:i + size]) for i in range(0, len(points), size)]


@contextlib.contextmanager
def _process_pool(task: Task, points: Sequence[Point], jobs: int, point_seconds: float | None) -> Iterator[Chunks]:
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(os.getpid(),))
    try:
        futures = [pool.submit(evaluate_chunk, task, chunk) for chunk in chunked(points, jobs, point_seconds)]
        yield (_result(future) for future in as_completed(futures))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _result(future: Any) -> list[Outcome]:
    """A chunk's outcomes; a worker that died (killed, out of memory) ends the sweep in one line."""
    try:
        return list(future.result())
    except BrokenProcessPool:
        raise TmasimError("--jobs: a worker process died (killed, or out of memory); the points finished so far "
                          "are kept: run the same command again to resume") from None


def _start_worker(parent: int) -> None:
    """Workers ignore SIGINT (the parent stops the pool and saves what finished, once) and end
    when their parent does, however it ends: a worker outliving a killed sweep would hold the
    journal and the lock (inherited across fork) and keep computing points no one collects."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)


def _die_with(parent: int) -> None:
    """Linux: the kernel sends SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG); elsewhere,
    and as a second guard, a daemon thread polls the parent pid."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="tmasim-parent-watch").start()
    if os.getppid() != parent:  # the parent died before the guard was set
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


@contextlib.contextmanager
def _dask(task: Task, points: Sequence[Point], jobs: int, scheduler: str | None,
          point_seconds: float | None) -> Iterator[Chunks]:
    distributed = _import_distributed()
    with _dask_client(distributed, scheduler, jobs) as client:
        workers = max(1, sum(client.nthreads().values()))
        futures = [client.submit(evaluate_chunk, task, chunk, pure=False)
                   for chunk in chunked(points, workers, point_seconds)]
        try:
            yield (future.result() for future in distributed.as_completed(futures))
        finally:
            client.cancel(futures)


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise TmasimError("--executor dask needs dask.distributed: install tmasim[dask]") from None
    return distributed


@contextlib.contextmanager
def _dask_client(distributed: Any, scheduler: str | None, jobs: int) -> Iterator[Any]:
    """A client of the cluster at ``scheduler``, or of a local cluster started (and stopped) here."""
    with contextlib.ExitStack() as stack:
        if scheduler:
            client = _connect(distributed, scheduler)
        else:
            cluster = stack.enter_context(distributed.LocalCluster(
                n_workers=jobs, threads_per_worker=1, processes=True,
                dashboard_address=":0", silence_logs=logging.ERROR))
            client = distributed.Client(cluster)
        stack.enter_context(client)
        yield client


def _connect(distributed: Any, scheduler: str) -> Any:
    try:
        return distributed.Client(scheduler, timeout="10s")
    except (OSError, TimeoutError, ValueError) as err:
        raise TmasimError(f"--scheduler: cannot reach the Dask scheduler at {scheduler!r} ({err})") from None


class Pool:
    """Workers that take one batch of points at a time, as the caller submits it: what a search
    needs (tmasim.sweep.search), which decides what to run next from what has finished."""

    def submit(self, points: Sequence[Point]) -> None:
        raise NotImplementedError

    def next_done(self) -> list[Outcome]:
        """The outcomes of a submitted batch that has finished (blocks until one has)."""
        raise NotImplementedError


class _InProcess(Pool):
    def __init__(self, task: Task) -> None:
        self._task, self._queue = task, list[list[Point]]()

    def submit(self, points: Sequence[Point]) -> None:
        self._queue.append(list(points))

    def next_done(self) -> list[Outcome]:
        return evaluate_chunk(self._task, self._queue.pop(0))


class _Futures(Pool):
    """A process pool's or a Dask client's futures; ``wait`` is the library's wait-for-first."""

    def __init__(self, submit: Any, wait: Any, task: Task) -> None:
        self._submit, self._wait, self._task, self._pending = submit, wait, task, set[Any]()

    def submit(self, points: Sequence[Point]) -> None:
        self._pending.add(self._submit(evaluate_chunk, self._task, list(points)))

    def next_done(self) -> list[Outcome]:
        done = next(iter(self._wait(self._pending)))
        self._pending.discard(done)
        return _result(done)

    def cancel(self) -> None:
        for future in self._pending:
            future.cancel()


@contextlib.contextmanager
def pool(task: Task, *, jobs: int, executor: str, scheduler: str | None) -> Iterator[Pool]:
    """A :class:`Pool` on the chosen executor (``jobs=1`` locally: this very process)."""
    if executor == "dask":
        distributed = _import_distributed()
        with _dask_client(distributed, scheduler, jobs) as client:
            futures = _Futures(lambda *a: client.submit(*a, pure=False),
                               lambda f: distributed.wait(f, return_when="FIRST_COMPLETED").done, task)
            try:
                yield futures
            finally:
                futures.cancel()
    elif jobs == 1:
        yield _InProcess(task)
    else:
        processes = ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(os.getpid(),))
        try:
            yield _Futures(processes.submit, lambda f: wait(f, return_when=FIRST_COMPLETED).done, task)
        finally:
            processes.shutdown(wait=True, cancel_futures=True)
