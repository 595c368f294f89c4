"""``--search`` against the full grid: the team's 192-point GEMM design sweep (issue 48).

gemm-h100 over 4 tiles (128x128x64, 128x256x64, 64x256x64, 128x192x64) x 3 stage counts
(2, 3, 4) x 4 K (1024, 2048, 4096, 8192) x 2 rasters (row, grouped) x 2 cluster shapes (1x1,
2x1) = 192 points, the grid of benchmarks/bench_sweep.py. K is the problem field: four
problems of 48 design points each. Both sweeps run as ``tmasim sweep`` runs them (``run_sweep``,
``--jobs``, no output file), one after the other in this process; printed: each one's wall time,
the points the search simulated and pruned, and whether their answers (best, knee, what binds,
next step: ``answer.answer_lines``) are the same, line for line. Target (issue 48): the search
in <= 15 s wall with ``--jobs 2`` on an idle 2-core machine, with the full grid's answer.

``--k`` takes a subset of the K values (``--k 1024,2048``: 96 points) for a quicker run: the
full grid takes minutes on 2 cores, most of it in the 128x192 points.

    python benchmarks/bench_search.py [--jobs 2] [--k 1024,2048,4096,8192]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
from bench_sweep import VARY

from tmasim.sweep import answer, run_sweep


def timed(vary: dict[str, Any], jobs: int, search: bool) -> tuple[float, Any]:
    start = time.perf_counter()
    frame = run_sweep("gemm-h100", [], vary, jobs=jobs, progress=False, search=search, max_seconds=None)
    return time.perf_counter() - start, frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--k", default="1024,2048,4096,8192", help="the K values, comma-separated")
    args = parser.parse_args()
    vary = {**VARY, "workload.k": [int(k) for k in args.k.split(",")]}

    found_wall, found = timed(vary, args.jobs, search=True)
    full_wall, full = timed(vary, args.jobs, search=False)
    counts = found["status"].value_counts().to_dict()
    same = answer.answer_lines(found) == answer.answer_lines(full)
    print(f"gemm-h100 design sweep: {len(full)} points (4 tiles x 3 stages x {len(vary['workload.k'])} K x "
          f"2 rasters x 2 clusters), --jobs {args.jobs}")
    print(f"  full grid   {full_wall:8.1f} s   {(full['status'] == 'ok').sum()} ok of {len(full)} simulated")
    print(f"  --search    {found_wall:8.1f} s   {len(found) - counts.get('pruned', 0)} simulated, "
          f"{counts.get('pruned', 0)} pruned   ({full_wall / found_wall:.1f}x faster; target <= 15 s on 192 points)")
    print(f"  same answer: {'yes' if same else 'NO'}")
    if not same:
        for a, b in zip(answer.answer_lines(full), answer.answer_lines(found), strict=False):
            if a != b:
                print(f"    full:   {a}\n    search: {b}")


if __name__ == "__main__":
    main()
