"""Fast-forward on the cases issue 17 named apart: ragged tiles and Blackwell's 2-SM MMA pairs.

Each case runs twice in this process, with ``run.fast_forward`` on and off, no records: the
SM classes simulated, the ring steps of the run and the share the skip jumped over, the CPU
seconds of each (process time: the development machine is shared) and their ratio. The two
runs must give the same makespan (the skip is exact); the script stops if they do not.

- 128 x 192 tiles on the 8192^3 GEMM (gemm-h100; 8192 is not a multiple of 192, so the last
  column of output tiles is 128 wide): grouped raster (14 SM classes) and row raster (35);
- gemm-b200-2sm: 2-SM MMA pairs computing 256 x 256 tiles; at 3 stages two CTAs fit per SM, so
  clusters share SMs (aggregated by block of SMs: 4 classes, not 148);
- gemm-b200 and gemm-b200-2sm with ping-pong warpgroups (whole tiles in turn).

    python benchmarks/bench_fast_forward_cases.py
"""

from __future__ import annotations

import time

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)

from tmasim.scenario import load
from tmasim.simulation import simulate

CASES = (("128x192, grouped", "gemm-h100", ["workload.tile=[128,192,64]"]),
         ("128x192, row raster", "gemm-h100", ["workload.tile=[128,192,64]", "workload.raster=row"]),
         ("gemm-b200-2sm", "gemm-b200-2sm", []),
         ("b200-2sm, 3 stages", "gemm-b200-2sm", ["pipeline.stages=3"]),
         ("b200 ping-pong", "gemm-b200", ["pipeline.consumer_mode=pingpong"]),
         ("b200-2sm ping-pong", "gemm-b200-2sm", ["pipeline.consumer_mode=pingpong"]))


def timed(name: str, sets: list[str], skip: bool) -> tuple[dict[str, object], float]:
    scenario = load(name, [*sets, "run.records=false", f"run.fast_forward={str(skip).lower()}"])
    start = time.process_time()
    stats = simulate(scenario, allow_large=True).stats
    return stats, time.process_time() - start


def main() -> None:
    print(f"{'case':<22} {'classes':>7} {'steps':>7} {'skipped':>8} {'on (s)':>7} {'off (s)':>8} {'x':>5}")
    for label, name, sets in CASES:
        fast, on = timed(name, sets, True)
        full, off = timed(name, sets, False)
        if fast["makespan_ps"] != full["makespan_ps"]:
            raise SystemExit(f"{label}: makespan {fast['makespan_ps']} with the skip, {full['makespan_ps']} without")
        steps = int(fast["simulated_steps"])  # type: ignore[call-overload]
        share = int(fast["fast_forward_skipped_steps"]) / steps  # type: ignore[call-overload]
        print(f"{label:<22} {fast['sm_classes']:>7} {steps:>7} {share:>8.0%} {on:>7.2f} {off:>8.2f} {off / on:>5.1f}")


if __name__ == "__main__":
    main()
