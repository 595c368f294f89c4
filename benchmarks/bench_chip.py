"""Chip-level speed: the 8192^3 bf16 GEMM on h100-sxm (scenarios/gemm-h100.toml), no records,
with and without aggregation of identical SMs, and the prediction with its breakdown.

    python benchmarks/bench_chip.py [--repeat 1]

Targets (issue 3, on the 2-core development machine): <= 2 s aggregated, <= 10 s without.
Both runs must give the same makespan: aggregation is exact.

Then the same GEMM with 2x1 clusters multicasting B (scenarios/gemm-h100-cluster.toml),
aggregated by cluster, and the SimPy events each simulated k-step costs in both.
"""

from __future__ import annotations

import argparse
import time

import simpy

from tmasim import format as fmt
from tmasim.engine.chip import Chip
from tmasim.scenario import load
from tmasim.simulation import _sync, plan_scenario, simulate


class CountingEnvironment(simpy.Environment):
    """Counts the events scheduled (SimPy's own work)."""

    scheduled = 0

    def schedule(self, event, priority=1, delay=0):  # type: ignore[no-untyped-def]
        self.scheduled += 1
        super().schedule(event, priority, delay)


def events_per_k_step(name: str) -> tuple[float, int, float]:
    """(events per simulated k-step, k-steps simulated, wall seconds) of an aggregated run."""
    scenario = load(name, ["run.records=false"])
    env = CountingEnvironment()
    plan, _ = plan_scenario(scenario)
    start = time.perf_counter()
    chip = Chip(env, scenario.gpu, plan, _sync(scenario), None, aggregate=True)
    env.run()
    wall = time.perf_counter() - start
    steps = sum(cta.program.steps for cta in chip.ctas)
    return env.scheduled / steps, steps, wall


def timed(aggregate: bool, repeat: int) -> tuple[float, dict[str, object]]:
    scenario = load("gemm-h100", [f"run.aggregate={'true' if aggregate else 'false'}", "run.records=false"])
    best, stats = float("inf"), {}
    for _ in range(repeat):
        start = time.perf_counter()
        stats = simulate(scenario).stats
        best = min(best, time.perf_counter() - start)
    return best, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    agg_s, agg = timed(True, args.repeat)
    full_s, full = timed(False, args.repeat)
    print("gemm-h100: 8192^3 bf16, tile 128x256x64, 4 stages, 2 consumer warpgroups, persistent")
    print(f"  wall time, aggregated ({agg['sm_classes']} SM classes):  {agg_s:6.2f} s   (target <= 2 s)")
    print(f"  wall time, every SM ({full['sm_classes']} SMs):          {full_s:6.2f} s   (target <= 10 s)")
    print(f"  makespan: aggregated {agg['makespan_ps']} ps, every SM {full['makespan_ps']} ps "
          f"({'equal' if agg['makespan_ps'] == full['makespan_ps'] else 'DIFFERENT'})")
    print(f"  predicted: {fmt.time_ns(agg['makespan_ns'])}, {fmt.flop_rate(agg['achieved_flops_per_s'])}")
    print("  bounds (what no schedule can beat):")
    for name in ("compute", "l2", "hbm", "port", "latency"):
        flag = "  <- binds" if name == agg["binding"] else ""
        print(f"    {name:<8} {fmt.time_ns(agg[f'{name}_bound_ns']):>10}{flag}")
    print(f"  the run reaches {fmt.percent(agg['efficiency'])} of the binding bound; "
          f"HBM {fmt.amount(agg['hbm_bytes'])} ({fmt.percent(agg['hbm_utilization'])} busy), "
          f"L2 {fmt.amount(agg['memory_bytes'])} ({fmt.percent(agg['l2_utilization'])} busy)")
    cluster = simulate(load("gemm-h100-cluster", ["run.records=false"])).stats
    print("gemm-h100-cluster: the same GEMM, 2x1 clusters multicasting B")
    print(f"  predicted: {fmt.time_ns(cluster['makespan_ns'])}, {fmt.flop_rate(cluster['achieved_flops_per_s'])}, "
          f"L2 {fmt.amount(cluster['memory_bytes'])} (no clusters: {fmt.amount(agg['memory_bytes'])}); "
          f"aggregation {cluster['aggregation']}, {cluster['cluster_classes']} cluster slot(s)")
    for name in ("gemm-h100", "gemm-h100-cluster"):
        per_step, steps, wall = events_per_k_step(name)
        print(f"  {name:<18} {per_step:5.2f} SimPy events per simulated k-step ({steps} k-steps, {wall:.2f} s)")


if __name__ == "__main__":
    main()
