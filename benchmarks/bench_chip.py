"""Chip-level speed: the 8192^3 bf16 GEMM on h100-sxm (scenarios/gemm-h100.toml), no records,
with and without aggregation of identical SMs, and the prediction with its breakdown.

    python benchmarks/bench_chip.py [--repeat 1]

Targets (issue 3, on the 2-core development machine): <= 2 s aggregated, <= 10 s without.
Both runs must give the same makespan: aggregation is exact.
"""

from __future__ import annotations

import argparse
import time

from tmasim import format as fmt
from tmasim.scenario import load
from tmasim.simulation import simulate


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


if __name__ == "__main__":
    main()
