"""Sweep speed: wall time of a 100-point sweep with one process and with two, as a ratio.

The sweep is the ``jitter`` scenario over 100 seeds (``run.seed=0..99``), so every point is a
different random draw of the same work. Both runs happen in this process, one after the other,
best of ``--repeat`` each, without an output file (no journal, no Parquet), so the figure is the
executor's: simulation plus process start-up, pickling and result collection. The two tables
must be equal. On two idle cores the ratio approaches 2 as points get longer (``--tiles``).

A shared machine rarely gives two idle cores, so the same run also measures the ceiling (a
pure-Python loop split over the same number of processes, with nothing to pickle) and the CPU
time each sweep cost, workers included: their ratio is the parallel overhead, which other
load on the machine barely changes.

    python benchmarks/bench_parallel.py [--points 100] [--tiles 64] [--jobs 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import pandas as pd

from tmasim.sweep import run_sweep


def timed_sweep(points: int, tiles: int, jobs: int) -> tuple[float, float, pd.DataFrame]:
    """Wall seconds, CPU seconds (this process and its finished workers) and the table."""
    vary = [f"run.seed={','.join(str(seed) for seed in range(points))}"]
    cpu, start = cpu_seconds(), time.perf_counter()
    frame = run_sweep("jitter", [f"workload.tiles={tiles}"], vary, jobs=jobs, progress=False)
    return time.perf_counter() - start, cpu_seconds() - cpu, frame


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def best_of(repeat: int, points: int, tiles: int, jobs: int) -> tuple[float, float, pd.DataFrame]:
    runs = [timed_sweep(points, tiles, jobs) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def ceiling(jobs: int, repeat: int, pieces: int = 16, n: int = 400_000) -> float:
    """The speedup this machine gives right now to ``jobs`` processes of pure Python."""
    def best(run) -> float:  # type: ignore[no-untyped-def]
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return min(times)

    one = best(lambda: [spin(n) for _ in range(pieces)])
    with ProcessPoolExecutor(jobs) as pool:
        list(pool.map(spin, [1] * jobs))  # start the workers before timing
        many = best(lambda: list(pool.map(spin, [n] * pieces)))
    return one / many


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--tiles", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    one, one_cpu, serial = best_of(args.repeat, args.points, args.tiles, 1)
    many, many_cpu, parallel = best_of(args.repeat, args.points, args.tiles, args.jobs)
    limit = ceiling(args.jobs, args.repeat)
    pd.testing.assert_frame_equal(serial, parallel)
    assert (serial["status"] == "ok").all()
    print(f"jitter sweep, {args.points} points of {args.tiles} tiles, best of {args.repeat}, "
          f"{os.cpu_count()} CPU(s):")
    print(f"  jobs=1           {one:8.3f} s   ({args.points / one:8.1f} points/s, {one_cpu:.3f} CPU s)")
    print(f"  jobs={args.jobs:<2}          {many:8.3f} s   ({args.points / many:8.1f} points/s, {many_cpu:.3f} CPU s)")
    print(f"  speedup          {one / many:8.2f}x")
    print(f"  ceiling          {limit:8.2f}x  (a pure-Python loop on {args.jobs} processes; ideal {args.jobs}x)")
    print(f"  efficiency       {one / many / limit:8.0%}   (speedup / ceiling)")
    print(f"  CPU cost ratio   {many_cpu / one_cpu:8.2f}   (jobs={args.jobs} / jobs=1: the parallel overhead)")


if __name__ == "__main__":
    main()
