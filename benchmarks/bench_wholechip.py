"""The B200 whole-chip table, every row: how long the model takes on it, and where.

    python benchmarks/bench_wholechip.py [--jobs 2] [--every 1]

Simulates each of the 576 runs of ``validation/public/b200/wholechip_train.csv`` as
``tmasim validate public`` maps it (tmasim/validation/wholechip.py), timing each point's CPU
seconds in its worker, and prints the total, the slowest points, the figures (mean error, best
configuration, cluster choice) and the CPU time of the CI subset the test suite runs.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)

from tmasim.validation import wholechip


def timed(row: wholechip.Row) -> tuple[float, float]:
    """(predicted seconds, CPU seconds) of one run."""
    from tmasim.validation.pipelines import predicted_seconds

    start = time.process_time()
    predicted = predicted_seconds(wholechip.SCENARIO, wholechip.overrides(row))
    return predicted, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--every", type=int, default=1, help="every N-th row only")
    args = parser.parse_args()
    rows = wholechip.rows()[:: args.every]
    wall = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(timed, rows, chunksize=2))
    wall = time.perf_counter() - wall
    cpu = [c for _, c in results]
    predicted = [wholechip.Row(r.shape, r.dtype, r.tile, r.cluster, r.measured, p) for r, (p, _) in zip(rows, results,
                                                                                                       strict=True)]
    ci = sum(c for r, c in zip(rows, cpu, strict=True) if r.shape in wholechip.CI_SHAPES)
    print(f"{len(rows)} runs: {wall:.1f} s wall with {args.jobs} jobs, {sum(cpu):.1f} CPU s "
          f"(median {sorted(cpu)[len(cpu) // 2]:.2f} s a run; the CI subset {ci:.1f} CPU s)")
    print("slowest runs:")
    for (row, c) in sorted(zip(rows, cpu, strict=True), key=lambda x: -x[1])[:5]:
        print(f"  {row.problem:22s} {row.config:15s} {c:6.2f} CPU s")
    f = wholechip.figures(predicted)
    print(f"mean error {f['mean_error']:.1%}; best within 1% on {f['best_right']} of {f['problems']} problems; "
          f"cluster choice {f['cluster_right']} of {f['cluster_pairs']}")


if __name__ == "__main__":
    main()
