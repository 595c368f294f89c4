"""Sweep speed on a 1,000-point mixed design sweep (issue 28): the slow corners together.

Five families, each a grid run as ``tmasim sweep --jobs N`` runs it (``run_sweep``, a process
pool, no output file), 1,000 points in all:

- gemm-h100, ragged edges: 4 tiles (128x192 and 192x128 leave edge tiles on most sizes) x
  M 8192, 5000 x N 8192, 7168, 6000 x K 1024-8192 (4) x stages 3, 4 x raster row, grouped = 384;
- attention-h100, causal and not: causal x seqlen 1024-8448 (5) x batch 1, 2, 4 x heads 8, 16 x
  stages 2, 3 x tile 128x128, 128x80 = 240;
- attention-b200-2sm (2-SM MMA pairs) and attention-b200: seqlen (5) x batch (3) x heads (2) x
  softmax overlap on, off = 60 each;
- gemm-b200-2sm and gemm-b200: M 8192, 6144 x N 8192, 7000, 6000, 4096 x K 1024-8192 (4) x
  stages 3, 4 x raster = 128 each.

By default it does not run the 1,000 points (CPU heavy): it times ``--sample`` points of each
family (a seeded random sample) in this process (CPU seconds, simulate only) and prints the
estimate, points x mean cost / jobs, labelled as such. ``--full`` runs the whole sweep, wall and
CPU time measured.

Measured once in full (issue 28, --jobs 2 on the shared development machine): 1,000 points ok,
628.8 CPU s (314.4 s over the 2 jobs; 554.5 s wall with other work on the cores). CPU a point:
gemm-h100 0.67 s (its 128x192 and 192x128 points), attention-h100 1.24 s (causal), attention-
b200-2sm 0.25 s, attention-b200 0.06 s, gemm-b200-2sm 0.27 s (1.7 s before clusters sharing SMs
were aggregated), gemm-b200 0.17 s. Again once attention was fast-forwarded (its K/V loops, 2-SM
pairs included), on an idle 2-core machine: 496.6 CPU s, 309.1 s wall (target 180 s), by family
wall / CPU: gemm-h100 114.6 / 221.9 s, attention-h100 155.7 / 200.7 s (its causal points: their
SM classes' unit boundaries bound every jump, and the longest of them end the family alone),
attention-b200-2sm 2.8 / 4.2 s, attention-b200 1.0 / 1.7 s, gemm-b200-2sm 20.2 / 38.7 s,
gemm-b200 14.9 / 29.5 s.
Again with chunks sized by the sweep's estimate (one point a chunk where points take seconds),
A/B in one sitting on an idle 2-core machine: 293.3 s -> 248.7 s wall, 478.2 -> 480.7 CPU s; the
attention-h100 family 139.5 -> 101.2 s wall (its CPU, 190 s, unchanged: the tail was one worker
finishing a chunk of fifteen causal points alone), gemm-h100 115.1 -> 108.9 s.

    python benchmarks/bench_sweep_mixed.py [--sample 4]
    python benchmarks/bench_sweep_mixed.py --full [--jobs 2]
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from typing import Any

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)

from tmasim.sweep import run_sweep

SEQ = [1024, 2048, 4096, 8192, 8448]
GEMM_B200 = {"workload.m": [8192, 6144], "workload.n": [8192, 7000, 6000, 4096],
             "workload.k": [1024, 2048, 4096, 8192], "pipeline.stages": [3, 4],
             "workload.raster": ["row", "grouped"]}
ATTENTION_B200 = {"workload.seqlen_q": SEQ, "workload.batch": [1, 2, 4], "workload.heads": [8, 16],
                  "workload.softmax_overlap": [True, False]}
FAMILIES: tuple[tuple[str, dict[str, list[Any]]], ...] = (
    ("gemm-h100", {"workload.tile": [[128, 192, 64], [192, 128, 64], [128, 256, 64], [128, 128, 64]],
                   "workload.m": [8192, 5000], "workload.n": [8192, 7168, 6000],
                   "workload.k": [1024, 2048, 4096, 8192],
                   "pipeline.stages": [3, 4], "workload.raster": ["row", "grouped"]}),
    ("attention-h100", {"workload.causal": [True, False], "workload.seqlen_q": SEQ, "workload.batch": [1, 2, 4],
                        "workload.heads": [8, 16], "pipeline.stages": [2, 3],
                        "workload.tile": [[128, 128], [128, 80]]}),
    ("attention-b200-2sm", ATTENTION_B200),
    ("attention-b200", ATTENTION_B200),
    ("gemm-b200-2sm", GEMM_B200),
    ("gemm-b200", GEMM_B200),
)


def size(vary: dict[str, list[Any]]) -> int:
    n = 1
    for values in vary.values():
        n *= len(values)
    return n


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def full(jobs: int) -> None:
    cpu, start = cpu_seconds(), time.perf_counter()
    points = 0
    for base, vary in FAMILIES:
        t0, c0 = time.perf_counter(), cpu_seconds()
        frame = run_sweep(base, [], vary, jobs=jobs, progress=False, allow_large=True)
        points += len(frame)
        status = frame["status"].value_counts().to_dict()  # type: ignore[attr-defined]
        print(f"  {base:<20} {len(frame):>4} points  wall {time.perf_counter() - t0:7.1f} s  "
              f"CPU {cpu_seconds() - c0:7.1f} s  {status}", flush=True)
    wall, used = time.perf_counter() - start, cpu_seconds() - cpu
    print(f"mixed sweep: {points} points, --jobs {jobs}: wall {wall:.1f} s, CPU {used:.1f} s "
          f"({used / jobs:.1f} s over the jobs)")


def sampled(sample: int, jobs: int) -> None:
    from tmasim.errors import TmasimError
    from tmasim.scenario import from_dict
    from tmasim.simulation import simulate
    from tmasim.sweep.spec import plan_sweep, point_raw

    total = 0.0
    for base, vary in FAMILIES:
        plan = plan_sweep(base, [], vary, False)
        # a seeded random sample: a stride through the grid follows its axes (all the first
        # tile, say) and misses the slow corners
        picked = random.Random(0).sample(list(plan.points), min(sample, len(plan.points)))
        costs = []
        for point in picked:
            scenario = from_dict(point_raw(plan.base_raw, point), plan.base_dir)
            start = time.process_time()
            try:
                simulate(scenario, allow_large=True)
            except TmasimError as err:  # an invalid point (as the sweep's row would say)
                print(f"    invalid point {dict(point.values)}: {err}"[:160])
            costs.append(time.process_time() - start)
        mean = sum(costs) / len(costs)
        total += mean * len(plan.points)
        print(f"  {base:<20} {len(plan.points):>4} points  {mean:6.3f} s CPU a point (mean of {len(costs)}, "
              f"max {max(costs):.3f})", flush=True)
    points = sum(size(vary) for _, vary in FAMILIES)
    print(f"mixed sweep, ESTIMATE (sampled, not run): {points} points, {total:.0f} CPU s, "
          f"{total / jobs:.0f} s with --jobs {jobs} on an idle {jobs}-core machine")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=4, help="points timed per family for the estimate")
    parser.add_argument("--full", action="store_true", help="run all 1,000 points (CPU heavy)")
    args = parser.parse_args()
    assert sum(size(vary) for _, vary in FAMILIES) == 1000
    if args.full:
        full(args.jobs)
    else:
        sampled(args.sample, args.jobs)


if __name__ == "__main__":
    main()
