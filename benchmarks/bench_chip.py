"""Chip-level speed: the 8192^3 bf16 GEMM on h100-sxm (scenarios/gemm-h100.toml), no records,
with and without aggregation of identical SMs, and the prediction with its breakdown.

    python benchmarks/bench_chip.py [--repeat 1] [--drift]

Targets (issue 17, on the 2-core development machine): <= 0.1 s aggregated, <= 3 s without,
with fast-forward (timed against ``run.fast_forward = false`` in the same run). Every run must
give the same makespan: aggregation and fast-forward are exact. Times are CPU seconds (process
time): the development machine is shared, and wall time there measures the neighbours. It also
prints the SimPy events processed per k-step of the run (ring step, skipped ones included), a
machine-independent cost figure (issue 10: the MMA model must not raise it by more than 10 %;
12.1 before it), with fast-forward off and on.

Then the same GEMM with 2x1 clusters multicasting B (scenarios/gemm-h100-cluster.toml),
aggregated by cluster, and the SimPy events each simulated k-step costs in both.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import simpy
from simpy import Environment  # the class itself: events_per_step patches the module's name

from tmasim import format as fmt
from tmasim import names
from tmasim.engine.chip import Chip
from tmasim.engine.event_loop import events_made, run_to_end
from tmasim.scenario import load
from tmasim.simulation import _sync, plan_scenario, simulate
from tmasim.summary_rows import traffic


def events_per_k_step(name: str) -> tuple[float, int, float]:
    """(events per simulated k-step, k-steps simulated, wall seconds) of an aggregated run."""
    scenario = load(name, ["run.records=false"])
    env = simpy.Environment()
    plan, _ = plan_scenario(scenario)
    start = time.process_time()
    chip = Chip(env, scenario.gpu, plan, _sync(scenario), None, aggregate=True)
    run_to_end(env)
    wall = time.process_time() - start
    steps = sum(cta.program.steps for cta in chip.ctas)
    return events_made(env) / steps, steps, wall


DRIFT = 'run.drift={start = "1 us", latency_cv = 0.15}'


def timed(aggregate: bool, repeat: int, *extra: str) -> tuple[float, dict[str, object]]:
    scenario = load("gemm-h100", [f"run.aggregate={'true' if aggregate else 'false'}", "run.records=false", *extra])
    best, stats = float("inf"), {}
    for _ in range(repeat):
        start = time.process_time()
        stats = simulate(scenario).stats
        best = min(best, time.process_time() - start)
    return best, stats


def events_per_step(aggregate: bool, fast_forward: bool = True) -> tuple[int, int]:
    """(events processed, ring steps of the run) of one run, counted in a separate run so that
    the counting costs the timed runs nothing. Fast-forward: the steps it skips count as run."""
    scenario = load("gemm-h100", [f"run.aggregate={'true' if aggregate else 'false'}", "run.records=false",
                                  f"run.fast_forward={'true' if fast_forward else 'false'}"])
    made: list[simpy.Environment] = []

    def factory() -> simpy.Environment:
        made.append(Environment())
        return made[-1]

    with mock.patch("simpy.Environment", factory):
        stats = simulate(scenario).stats
    return events_made(made[0]), int(stats["simulated_steps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--drift", action="store_true", help="also time a run with SM drift (every SM simulated)")
    args = parser.parse_args()
    agg_s, agg = timed(True, args.repeat)
    full_s, full = timed(False, args.repeat)
    slow = "run.fast_forward=false"
    agg0_s, agg0 = timed(True, args.repeat, slow)
    full0_s, full0 = timed(False, 1, slow)
    print("gemm-h100: 8192^3 bf16, tile 128x256x64, 4 stages, 2 consumer warpgroups, persistent")
    print(f"  CPU time, aggregated ({agg['sm_classes']} SM classes):  {agg_s:6.2f} s   (target <= 0.1 s; "
          f"{agg0_s:.2f} s without fast-forward, x{agg0_s / agg_s:.1f})")
    print(f"  CPU time, every SM ({full['sm_classes']} SMs):          {full_s:6.2f} s   (target <= 3 s; "
          f"{full0_s:.2f} s without fast-forward, x{full0_s / full_s:.1f})")
    print(f"  fast-forward: {agg['fast_forward']}")
    same = all(a['makespan_ps'] == agg['makespan_ps'] for a in (full, agg0, full0))
    print(f"  makespan: aggregated {agg['makespan_ps']} ps, every SM {full['makespan_ps']} ps, without "
          f"fast-forward {agg0['makespan_ps']} and {full0['makespan_ps']} ps ({'equal' if same else 'DIFFERENT'})")
    print(f"  predicted: {fmt.time_ns(agg['makespan_ns'])}, {fmt.flop_rate(agg['achieved_flops_per_s'])}")
    if args.drift:
        drift_s, drift = timed(True, args.repeat, DRIFT)
        print(f"  CPU time, with drift ({drift['sm_classes']} SMs):       {drift_s:6.2f} s   "
              f"(makespan {drift['makespan_ps']} ps, {drift['makespan_ps'] / agg['makespan_ps'] - 1:+.2%})")
    for ff in (False, True):
        events, steps = events_per_step(True, ff)
        print(f"  SimPy events per k-step of the run, fast-forward {'on ' if ff else 'off'}: {events / steps:6.3f}   "
              f"({events} events, {steps} k-steps, aggregated)")
    print("  bounds (what no schedule can beat):")
    for key in (k for k in names.BOUNDS if f"{k}_bound_ns" in agg):
        flag = "  <- binding" if key == names.bound_key(agg["binding"]) else ""
        print(f"    {names.bound(key):<13} {fmt.time_ns(agg[f'{key}_bound_ns']):>10}{flag}")
    print(f"  the run reaches {fmt.percent(agg['efficiency'])} of the binding bound; traffic {traffic(agg)}")
    cluster = simulate(load("gemm-h100-cluster", ["run.records=false"])).stats
    print("gemm-h100-cluster: the same GEMM, 2x1 clusters multicasting B")
    print(f"  predicted: {fmt.time_ns(cluster['makespan_ns'])}, {fmt.flop_rate(cluster['achieved_flops_per_s'])}, "
          f"L2 traffic {fmt.amount(cluster['l2_bytes'])} (no clusters: {fmt.amount(agg['l2_bytes'])}); "
          f"aggregation {cluster['aggregation']}, {cluster['cluster_classes']} cluster slot(s)")
    for name in ("gemm-h100", "gemm-h100-cluster"):
        per_step, steps, wall = events_per_k_step(name)
        print(f"  {name:<18} {per_step:5.2f} SimPy events per simulated k-step ({steps} k-steps, {wall:.2f} s)")


if __name__ == "__main__":
    main()
