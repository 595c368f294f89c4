"""The B200 whole-chip table, every row: how long the model takes on it, and where.

    python benchmarks/bench_wholechip.py [--jobs 2] [--every 1]   (--every N: every N-th problem)
    python benchmarks/bench_wholechip.py --shape 4096x128000x7168 [--dtype fp16]

Simulates each of the 576 runs of ``validation/public/b200/wholechip_train.csv`` as
``tmasim validate public`` maps it (tmasim/validation/wholechip.py), timing each point's CPU
seconds in its worker, and prints the total, the slowest points, the figures (mean error, best
configuration, cluster choice) and the CPU time of the CI subset the test suite runs.

With ``--shape M×N×K``, every configuration the table runs a shape in (8 tiles × 2 clusters) for
that shape, whether or not the table has it, mapped the same way: each point's CPU seconds, its
estimate (``tmasim.simulation.estimate``, what a sweep prints before the work) and their ratio,
and the units fast-forward skipped whole. A point with a 128,000 dimension is the slow case:
a persistent CTA walks hundreds of tiles.
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


TILES = ((64, 64), (64, 128), (64, 192), (64, 256), (128, 64), (128, 128), (128, 192), (128, 256))
CLUSTERS = ((2, 1), (2, 2))


def shape_points(shape: tuple[int, int, int], dtype: str) -> None:
    """Time every configuration of one shape, with its estimate (see the module doc)."""
    from tmasim.inputs.scenario import load
    from tmasim.simulation import estimate, simulate

    print(f"{dtype} {'x'.join(map(str, shape))}: CPU s a point, its estimate and estimate / CPU")
    cpus, ratios = [], []
    for tile in TILES:
        for cluster in CLUSTERS:
            row = wholechip.Row(shape, dtype, tile, cluster, 0.0)
            scenario = load(wholechip.SCENARIO, wholechip.overrides(row))
            start = time.process_time()
            result = simulate(scenario)
            cpu = time.process_time() - start
            guess = estimate(scenario).seconds
            cpus.append(cpu)
            ratios.append(guess / cpu)
            whole = result.stats["fast_forward"].split("exact")[-1].strip(" ,)")
            print(f"  {row.config:15s} {cpu:6.2f} CPU s  estimate {guess:6.2f} s  {guess / cpu:5.2f}x  {whole}")
    guesses = sum(r * c for r, c in zip(ratios, cpus, strict=True))
    print(f"all {len(cpus)}: {sum(cpus):.1f} CPU s, the slowest {max(cpus):.2f} s; estimate / CPU from "
          f"{min(ratios):.2f}x to {max(ratios):.2f}x a point, {guesses / sum(cpus):.2f}x for all (a sweep's estimate)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--every", type=int, default=1,
                        help="every N-th problem (shape and dtype) only, each with all its runs")
    parser.add_argument("--shape", help="M×N×K: time every configuration of this shape instead")
    parser.add_argument("--dtype", default="fp16", choices=sorted(wholechip.ELEMENT_BYTES))
    args = parser.parse_args()
    if args.shape:
        m, n, k = (int(d) for d in args.shape.replace("×", "x").split("x"))
        shape_points((m, n, k), args.dtype)
        return
    every = wholechip.rows()
    problems = sorted({r.problem for r in every})[:: args.every]  # whole problems: their best and cluster pairs
    rows = [r for r in every if r.problem in problems]
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
