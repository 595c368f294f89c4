"""``tmasim tune`` against its targets: gemm-h100's whole design space and attention-h100-causal's.

Runs ``tmasim.tune`` as the command does (``--jobs``, no output file), one scenario after the
other in this process, and prints for each: the wall time, the points of the space (valid and
left out), the simulations run, and the best. For gemm-h100 it also gives the best point of the
192-point design grid at K = 8192 (benchmarks/bench_search.py's grid, searched with
``sweep --search``: the same answer as the full grid) to compare: the tune's best must be no slower.
Targets (2 cores, 2 jobs): gemm-h100 over >= 1,000 design points in <= 60 s; attention-h100-causal
in <= 90 s. ``--wide`` tunes gemm-h100's wide space (``tmasim tune --wide``: clusters to the
GPU's limit, grid and persistent launches, stream-K and split-K) instead. On a machine that
others share, wall time counts the waits for a core: the CPU seconds of this process and its
workers are printed too.

    python benchmarks/bench_tune.py [--jobs 2] [--only gemm|attention] [--no-grid] [--wide]
"""

from __future__ import annotations

import argparse
import resource
import time

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
from bench_sweep import VARY

import tmasim
from tmasim.sweep import answer, run_sweep
from tmasim.tuning.run import TuneResult


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_tune(name: str, jobs: int, wide: bool = False) -> TuneResult:
    cpu, start = cpu_seconds(), time.perf_counter()
    result = tmasim.tune(name, jobs=jobs, wide=wide, max_seconds=None)
    wall, used = time.perf_counter() - start, cpu_seconds() - cpu
    best = result.best
    print(f"tune {name}{' --wide' if wide else ''}: {result.candidates:,} candidate points, {result.valid:,} valid "
          f"({sum(result.left_out.values()):,} left out); {result.simulated} simulated; "
          f"{wall:.1f} s wall, {used:.1f} CPU s (--jobs {jobs})")
    if best is not None:
        fields = answer.find(result.frame).fields
        print(f"  best: {answer.point_text(best, fields)}: {best['makespan_ns'] / 1e3:.2f} us")
    return result


def grid_best(jobs: int) -> float:
    """The 192-point grid's best time at K = 8192 (the only K in the tune's problem)."""
    frame = run_sweep("gemm-h100", [], {**VARY, "workload.k": [8192]}, jobs=jobs, progress=False, search=True,
                      max_seconds=None)
    rows = answer.valid_rows(frame)
    best = rows.loc[rows["makespan_ns"].idxmin()]
    print(f"  192-point grid at K = 8192 (48 points, --search): best {best['makespan_ns'] / 1e3:.2f} us "
          f"(tile {list(best['workload.tile'])}, {best['pipeline.stages']} stages, cluster "
          f"{list(best['pipeline.cluster'])}, raster {best['workload.raster']})")
    return float(best["makespan_ns"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", choices=("gemm", "attention"))
    parser.add_argument("--no-grid", action="store_true", help="skip the 192-point grid's best")
    parser.add_argument("--wide", action="store_true", help="gemm-h100's wide space")
    args = parser.parse_args()
    if args.only in (None, "gemm"):
        found = timed_tune("gemm-h100", args.jobs, args.wide)
        if not args.no_grid:
            grid = grid_best(args.jobs)
            tuned = float(found.best["makespan_ns"]) if found.best is not None else float("inf")
            print(f"  tune's best no slower than the grid's: {'yes' if tuned <= grid else 'NO'} "
                  f"({(grid / tuned - 1) * 100:.2f}% faster)")
    if args.only in (None, "attention"):
        timed_tune("attention-h100-causal", args.jobs)


if __name__ == "__main__":
    main()
