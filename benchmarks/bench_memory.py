"""Peak memory (max RSS) of big ``tiles`` runs, each in a fresh child process.

Runs of the reference tiles (3 us load, 5 us compute, 2 stages), as ``tmasim run``
does them (build the scenario, simulate, summarize): a tiny run (what the interpreter and
the imports cost), 1,000,000 tiles with the default settings (per-event records kept, as
compact columns), 10,000,000 tiles with ``run.records = false``, and 1,000,000 tiles with
neither records nor the skip (``run.fast_forward = false``): 500,000 laps of 2 stages, each cut by
fast-forward, whose float counters once kept a float per cut (now an exact sum that does not
grow). Each child reports its own ``resource.getrusage(RUSAGE_SELF).ru_maxrss``, so the figures
do not mix.

    python benchmarks/bench_memory.py [--tiles 1000000] [--big-tiles 10000000] [--lap-tiles 1000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import resource, sys, time  # run with cwd = this checkout: its tmasim comes first on sys.path
from tmasim.scenario import load
from tmasim.simulation import simulate
tiles, records, skip = int(sys.argv[1]), sys.argv[2], sys.argv[3]
start = time.perf_counter()
result = simulate(load(None, [f"workload.tiles={tiles}", f"run.records={records}", f"run.fast_forward={skip}"]))
counts = (result.recorder.span_count, result.recorder.event_count) if result.recorder is not None else (0, 0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, result.makespan_ps, *counts, time.perf_counter() - start)
"""


def measure(tiles: int, records: bool, skip: bool = True) -> tuple[float, int, int, int, float]:
    """(peak RSS in MB, makespan in ps, spans, events, seconds) of one run in a child process."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(tiles), str(records).lower(), str(skip).lower()],
                         capture_output=True, text=True, check=True, cwd=REPO)
    rss_kib, makespan, spans, events, seconds = out.stdout.split()
    return int(rss_kib) / 1024, int(makespan), int(spans), int(events), float(seconds)  # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=1_000_000, help="tiles of the run with records")
    parser.add_argument("--big-tiles", type=int, default=10_000_000, help="tiles of the run without records")
    parser.add_argument("--lap-tiles", type=int, default=1_000_000, help="tiles of the run without records or skip")
    args = parser.parse_args()

    start = time.perf_counter()
    base, *_ = measure(4, records=True)
    rss, makespan, spans, events, seconds = measure(args.tiles, records=True)
    assert makespan == 3_000_000 + 5_000_000 * args.tiles, makespan  # the anchor formula, S = 2
    big_rss, big_makespan, *_, big_seconds = measure(args.big_tiles, records=False)
    assert big_makespan == 3_000_000 + 5_000_000 * args.big_tiles, big_makespan
    laps_rss, laps_makespan, *_, laps_seconds = measure(args.lap_tiles, records=False, skip=False)
    assert laps_makespan == 3_000_000 + 5_000_000 * args.lap_tiles, laps_makespan
    records_bytes = (rss - base) * 2**20 / (spans + events)
    print("peak memory (max RSS) of tiles runs, each in its own process:")
    print(f"  4 tiles (interpreter and imports)         {base:8.0f} MB")
    print(f"  {args.tiles:>10,} tiles, records kept          {rss:8.0f} MB   (target < 300 MB)   "
          f"{spans:,} spans + {events:,} events, about {records_bytes:.0f} B each; {seconds:.0f} s")
    print(f"  {args.big_tiles:>10,} tiles, run.records = false  {big_rss:8.0f} MB   {big_seconds:.0f} s")
    print(f"  {args.lap_tiles:>10,} tiles, no records, no skip  {laps_rss:8.0f} MB   {args.lap_tiles // 2:,} laps cut; "
          f"{laps_seconds:.0f} s")
    print(f"(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
