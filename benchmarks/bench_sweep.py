"""Sweep speed: the team's 192-point GEMM design sweep (issues 17 and 28), in points per second.

gemm-h100 (scenarios/gemm-h100.toml) over 4 tiles x 3 stage counts x 4 K x 2 rasters x 2
cluster shapes = 192 points, run as ``tmasim sweep`` runs it (``run_sweep``, a process pool
with ``--jobs``, no output file), timed as a whole: wall time, and the CPU time of this process
and its workers. The tiles are the team's: 128x192 included, whose last column of output tiles
is 128 wide on 8192 (edge tiles: classes of SMs out of step, the slow corner of issue 28; until
then this benchmark ran 256x128 in its place and measured 28.5 s without it; with it, 186.5 CPU s in
all, 93.2 s over the 2 jobs, 128x192 points at 1.1-3.4 s each; measured again for issue 28:
173.4 CPU s, 86.7 s over the 2 jobs, of which the 144 points of the other tiles cost 15.3 s in
all, 0.11 s a point: the 48 points of 128x192 are nine tenths of the sweep; with chunks sized by
the sweep's estimate, A/B in one sitting on an idle machine: 72.3 s -> 64.8 s wall, 125.7 -> 126.5
CPU s: the wall is now the CPU over the jobs plus one point). Target (issue 28):
<= 20 s with ``--jobs 2`` on an idle 2-core machine (issue 17's was 36 s; about 160 s before it).
On a machine that others share, wall time
counts the time spent waiting for a core, so the CPU seconds over the jobs are printed too
(what the sweep would take with its cores to itself).

Then where a point's time goes, in this process, for ``--sample`` points spread over the sweep: reading
the scenario, the workload's plan, the engine, and the summary.

    python benchmarks/bench_sweep.py [--jobs 2] [--sample 8]
"""

from __future__ import annotations

import argparse
import resource
import time

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)

from tmasim.sweep import run_sweep

TILES = ([128, 128, 64], [128, 256, 64], [64, 256, 64], [128, 192, 64])
VARY = {"workload.tile": TILES, "pipeline.stages": [2, 3, 4], "workload.k": [1024, 2048, 4096, 8192],
        "workload.raster": ["row", "grouped"], "pipeline.cluster": [[1, 1], [2, 1]]}


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the pool's workers, once shut down)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_sweep(jobs: int) -> tuple[float, float, object]:
    cpu, start = cpu_seconds(), time.perf_counter()
    frame = run_sweep("gemm-h100", [], VARY, jobs=jobs, progress=False)
    return time.perf_counter() - start, cpu_seconds() - cpu, frame


def phases(sample: int) -> dict[str, float]:
    """Mean CPU seconds per point of each phase, over ``sample`` points spread over the sweep."""
    import simpy

    from tmasim.engine.chip import Chip
    from tmasim.scenario import from_dict
    from tmasim.simulation import _common_stats, _sync, plan_scenario
    from tmasim.sweep.spec import plan_sweep, point_raw
    from tmasim.workloads import workload_of

    plan = plan_sweep("gemm-h100", [], VARY, False)
    totals = dict.fromkeys(("scenario", "plan", "engine", "summary"), 0.0)
    for point in plan.points[::max(1, len(plan.points) // sample)][:sample]:
        t0 = time.process_time()
        scenario = from_dict(point_raw(plan.base_raw, point), plan.base_dir)
        scenario.validate()
        t1 = time.process_time()
        work, res = plan_scenario(scenario)
        t2 = time.process_time()
        env = simpy.Environment()
        chip = Chip(env, scenario.gpu, work, _sync(scenario), None, aggregate=True)
        env.run()
        t3 = time.process_time()
        makespan = int(max(cta.finished_at or 0 for cta in chip.ctas))
        _common_stats(scenario, chip, res, makespan)
        workload_of(scenario.workload).stats(scenario.workload, scenario, chip.plan, res, makespan)
        t4 = time.process_time()
        for name, seconds in zip(totals, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            totals[name] += seconds / sample
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=8, help="points timed phase by phase (0: none)")
    args = parser.parse_args()

    wall, cpu, frame = timed_sweep(args.jobs)
    points = len(frame)
    status = frame["status"].value_counts().to_dict()  # type: ignore[attr-defined]
    print(f"gemm-h100 design sweep: {points} points (4 tiles x 3 stages x 4 K x 2 rasters x 2 clusters), "
          f"--jobs {args.jobs}; {status}")
    print(f"  wall time        {wall:8.1f} s   {points / wall:6.2f} points/s   (target <= 20 s: >= 9.6 points/s)")
    print(f"  CPU time         {cpu:8.1f} s   {cpu / points * 1000:6.0f} ms a point, all processes")
    print(f"  CPU / jobs       {cpu / args.jobs:8.1f} s   {points * args.jobs / cpu:6.2f} points/s with "
          f"{args.jobs} cores to itself; 1,000 points in {1000 * cpu / points / args.jobs / 60:.1f} min")
    if args.sample:
        split = phases(args.sample)
        shown = ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in split.items())
        print(f"  one point, mean of {args.sample} (CPU): {shown}")


if __name__ == "__main__":
    main()
