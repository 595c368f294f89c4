"""How many stages? The single-CTA GEMM mainloop on b200: k-step cost and knee by tile and dtype.

    python benchmarks/bench_stage_knees.py [--k 131072] [--gpu b200]

One CTA on one SM (m = BM, n = BN, epilogue_smem = 0), stages 2-8, bf16 and fp8, for the
tiles of issue 16's acceptance table. The k-step cost is the steady-state time per k-step:
the makespan difference between K and K/2 over the k-steps between them, so the pipeline's
fill and drain (and the epilogue) cancel; the knee is the fewest stages whose k-step cost is
within 1% of the best. Also prints the bound that binds at the most stages that fit (8, or fewer where shared memory
runs out: '-') and the SimPy events per
simulated k-step of the run. Summary-only runs (no records), aggregated.
"""

from __future__ import annotations

import argparse
import time

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import simpy

from tmasim import names
from tmasim.engine.chip import Chip
from tmasim.engine.event_loop import events_made, run_to_end
from tmasim.errors import ResidencyError
from tmasim.scenario import load
from tmasim.simulation import _sync, plan_scenario, simulate

TILES = ((128, 128, 64), (128, 128, 32), (64, 64, 64), (128, 256, 32), (128, 64, 64))
DTYPES = ("bf16", "fp8")
STAGES = tuple(range(2, 9))


def scenario(gpu: str, tile: tuple[int, int, int], dtype: str, stages: int, k: int):  # type: ignore[no-untyped-def]
    bm, bn, _ = tile
    return load("gemm-b200", [f"gpu={gpu}", f"workload.m={bm}", f"workload.n={bn}", f"workload.k={k}",
                              f"workload.tile=[{','.join(map(str, tile))}]", f"workload.dtype={dtype}",
                              "workload.epilogue_smem=0", f"pipeline.stages={stages}", "pipeline.consumers=1",
                              "run.records=false", "run.aggregate=true"])


def k_step_ns(gpu: str, tile: tuple[int, int, int], dtype: str, stages: int, k: int) -> tuple[float, str]:
    """(steady-state ns per k-step, what binds at K) from two runs, K and K/2."""
    full = simulate(scenario(gpu, tile, dtype, stages, k)).stats
    half = simulate(scenario(gpu, tile, dtype, stages, k // 2)).stats
    steps = (k - k // 2) // tile[2]
    return (full["makespan_ps"] - half["makespan_ps"]) / steps / 1000, str(full["binding"])


def events_per_k_step(gpu: str, tile: tuple[int, int, int], dtype: str, stages: int, k: int) -> float:
    sc = scenario(gpu, tile, dtype, stages, k)
    env = simpy.Environment()
    plan, _ = plan_scenario(sc)
    chip = Chip(env, sc.gpu, plan, _sync(sc), None, aggregate=True)
    run_to_end(env)
    return events_made(env) / sum(cta.program.steps for cta in chip.ctas)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=131072, help="the GEMM's K (default 131072)")
    parser.add_argument("--gpu", default="b200")
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"single-CTA GEMM mainloop on {args.gpu}, K = {args.k}: steady ns per k-step by stages "
          f"{STAGES[0]}-{STAGES[-1]}; {names.term('knee')}")
    header = "".join(f"{s:>8}" for s in STAGES)
    print(f"{'tile':<12}{'dtype':<6}{header}{'knee':>6}  binding (most) events/k-step")
    for tile in TILES:
        for dtype in DTYPES:
            costs: dict[int, float] = {}
            binding = ""
            for stages in STAGES:
                try:
                    costs[stages], binding = k_step_ns(args.gpu, tile, dtype, stages, args.k)
                except ResidencyError:  # does not fit in shared memory: no point
                    break
            best = min(costs.values())
            knee = next(s for s, c in costs.items() if c <= (1 + names.KNEE_TOLERANCE) * best)
            events = events_per_k_step(args.gpu, tile, dtype, max(costs), args.k)
            name = "x".join(map(str, tile))
            cells = "".join(f"{costs[s]:8.2f}" if s in costs else f"{'-':>8}" for s in STAGES)
            print(f"{name:<12}{dtype:<6}{cells}{knee:>6}  {binding:<12}{events:6.2f}")
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
