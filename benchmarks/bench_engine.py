"""Engine speed: simulated tiles per second for the ``tiles`` workload, as a ratio.

The baseline is the smallest SimPy program that pipelines the same tiles through the same
number of slots: a producer that takes a free slot, loads, and hands the tile over; a consumer
that takes it, computes, and frees the slot. It and tmasim, without records and with them (the
default of ``tmasim run``), run in this process in turn, ``--repeat`` rounds, each timed by the
process's own CPU time (``time.process_time``: on a machine that others share, wall time also
counts the time spent waiting for a core), best of the rounds, so machine noise affects all
three alike. Targets: without records >= 0.5x the baseline, with records >= 0.8x (issue 17; it
was 0.4x). Then a 1,000,000-tile summary-only run in a child process reports its peak memory
(max RSS); ``bench_memory.py`` measures it with records.

    python benchmarks/bench_engine.py [--tiles 100000] [--stages 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import simpy

from tmasim.scenario import from_dict
from tmasim.simulation import simulate

LOAD_PS, COMPUTE_PS = 3_000_000, 5_000_000


def minimal_pipeline(tiles: int, stages: int) -> int:
    env = simpy.Environment()
    free = simpy.Store(env, capacity=stages)
    full = simpy.Store(env, capacity=stages)
    free.items.extend(range(stages))

    def producer():  # type: ignore[no-untyped-def]
        for tile in range(tiles):
            slot = yield free.get()
            yield env.timeout(LOAD_PS)
            yield full.put((tile, slot))

    def consumer():  # type: ignore[no-untyped-def]
        for _ in range(tiles):
            _, slot = yield full.get()
            yield env.timeout(COMPUTE_PS)
            yield free.put(slot)

    env.process(producer())
    done = env.process(consumer())
    env.run(done)
    return int(env.now)


def tmasim_pipeline(tiles: int, stages: int, records: bool = False, fast_forward: bool = False) -> int:
    """The engine simulating every tile (``fast_forward`` off: equal tiles would be skipped)."""
    raw = {"workload": {"kind": "tiles", "tiles": tiles, "load": f"{LOAD_PS} ps", "compute": f"{COMPUTE_PS} ps"},
           "pipeline": {"stages": stages}, "run": {"records": records, "fast_forward": fast_forward}}
    return simulate(from_dict(raw)).makespan_ps


def fast_forwarded(tiles: int, stages: int) -> int:
    return tmasim_pipeline(tiles, stages, fast_forward=True)


def best_rate(fn, tiles: int, stages: int, repeat: int) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    best = float("inf")
    makespan = 0
    for _ in range(repeat):
        start = time.process_time()
        makespan = fn(tiles, stages)
        best = min(best, time.process_time() - start)
    return tiles / best, makespan


def with_records(tiles: int, stages: int) -> int:
    return tmasim_pipeline(tiles, stages, records=True)


def peak_memory_mb(tiles: int, stages: int) -> float:
    here = os.path.dirname(os.path.abspath(__file__))  # this checkout's tmasim, not an installed one
    code = (f"import resource, sys; sys.path[:0] = {[here, os.path.dirname(here)]!r}; "
            "from bench_engine import tmasim_pipeline; "
            f"tmasim_pipeline({tiles}, {stages}); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=sys.path[0] or ".")
    return int(out.stdout.strip()) / 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=100_000)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-tiles", type=int, default=1_000_000)
    args = parser.parse_args()

    runs = {fn: [0.0, 0] for fn in (minimal_pipeline, tmasim_pipeline, with_records, fast_forwarded)}
    for _ in range(args.repeat):  # in turn, so that a busy spell slows all four
        for fn, best in runs.items():
            rate, makespan = best_rate(fn, args.tiles, args.stages, 1)
            runs[fn] = [max(best[0], rate), makespan]
    (base_rate, base_makespan), (ours_rate, ours_makespan), (rec_rate, rec_makespan), (ff_rate, ff_makespan) = \
        runs.values()
    assert ours_makespan == base_makespan == rec_makespan == ff_makespan, \
        (ours_makespan, base_makespan, rec_makespan, ff_makespan)
    rss = peak_memory_mb(args.memory_tiles, args.stages)
    print(f"tiles workload, {args.tiles} tiles, {args.stages} stages, best of {args.repeat} (CPU time):")
    print(f"  minimal SimPy pipeline  {base_rate:12,.0f} tiles/s")
    print(f"  tmasim (no records)     {ours_rate:12,.0f} tiles/s  ratio {ours_rate / base_rate:5.2f}   (target >= 0.5)")
    print(f"  tmasim (records)        {rec_rate:12,.0f} tiles/s  ratio {rec_rate / base_rate:5.2f}   (target >= 0.8)")
    print(f"  tmasim, fast-forward    {ff_rate:12,.0f} tiles/s  ratio {ff_rate / base_rate:5.0f}   (equal tiles: the "
          "steady state is skipped)")
    print(f"  peak memory, {args.memory_tiles:,} tiles, no records: {rss:.0f} MB   (target < 300 MB)")
    print(f"  (this process's own peak so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
