"""Flow events (starts + ends) per second of wall time in the fabric, against a baseline.

Each SM keeps ``lanes`` copies in flight: a lane starts a flow, waits for it, and starts the
next. Sizes are jittered (seeded) so completions do not fall in lockstep; a lockstep run would
settle a whole wave in one recomputation and flatter the figures. The baseline replaces each
flow by a plain timeout of similar length, so the ratio isolates the fabric's own cost from
SimPy's event loop and the lanes' generator switches.

    PYTHONPATH=. python benchmarks/bench_fabric.py [--flows N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import numpy as np
import simpy

from tmasim.engine.fabric.model import Fabric, Flow

HBM_BYTES_PER_PS = 3.35  # H100 SXM datasheet
L2_BYTES_PER_PS = 10.0  # illustrative: above HBM, so HBM binds when all SMs pull
PORT_BYTES_PER_PS = 0.125  # illustrative per-SM ingest (64 B/clk at ~2 GHz)
MEAN_BYTES = 32768  # a 128 × 128 bf16 tile


@dataclass(frozen=True)
class Case:
    name: str
    sms: int
    lanes: int
    hbm_weights: tuple[float, ...]  # per SM, cycled: L2 hit fractions make classes differ
    stands_for: int = 1  # SMs each simulated SM represents (weight on the shared links)


def _lanes(
    env: simpy.Environment, case: Case, flows: int, start: Callable[[int, int], simpy.Event]
) -> None:
    """Start ``flows`` copies in total, ``case.lanes`` at a time per SM, jittered sizes."""
    rng = np.random.default_rng(np.random.SeedSequence(7))
    per_lane = flows // (case.sms * case.lanes)
    sizes = rng.integers(
        MEAN_BYTES // 2, MEAN_BYTES * 3 // 2, size=(case.sms, case.lanes, per_lane)
    )

    def lane(sm: int, k: int) -> simpy.events.ProcessGenerator:
        for nbytes in sizes[sm, k]:
            yield start(sm, int(nbytes))

    for sm in range(case.sms):
        for k in range(case.lanes):
            env.process(lane(sm, k))


def run_fabric(case: Case, flows: int) -> tuple[float, int, int]:
    """Wall seconds, flows finished and recomputations for one case."""
    env = simpy.Environment()
    fabric = Fabric(env)
    l2 = fabric.add_link("l2", L2_BYTES_PER_PS)
    hbm = fabric.add_link("hbm", HBM_BYTES_PER_PS)
    routes = []
    for sm in range(case.sms):
        port = fabric.add_link(f"sm{sm}", PORT_BYTES_PER_PS)
        k = float(case.stands_for)
        hbm_weight = case.hbm_weights[sm % len(case.hbm_weights)]
        routes.append(((port, 1.0), (l2, k), (hbm, k * hbm_weight)))
    finished: list[Flow] = []

    def start(sm: int, nbytes: int) -> simpy.Event:
        flow = fabric.start_flow(routes[sm], nbytes)
        flow.done.callbacks.append(lambda _: finished.append(flow))
        return flow.done

    _lanes(env, case, flows, start)
    t0 = time.perf_counter()
    env.run()
    return time.perf_counter() - t0, len(finished), fabric.recomputations


def run_baseline(case: Case, flows: int) -> float:
    """Wall seconds for the same lanes waiting on plain timeouts instead of flows."""
    env = simpy.Environment()
    per_ps = HBM_BYTES_PER_PS / (case.sms * case.stands_for * case.lanes)
    _lanes(env, case, flows, lambda sm, nbytes: env.timeout(round(nbytes / per_ps)))
    t0 = time.perf_counter()
    env.run()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=200_000, help="flows per case")
    args = parser.parse_args()
    cases = [
        Case("132 SMs x 4 flows, HBM binds", 132, 4, (1.0,)),
        Case("132 SMs x 4 flows, mixed L2 hits", 132, 4, (1.0, 0.5, 0.25, 0.0)),
        Case("4 reps x 33 SMs x 4, mixed L2 hits", 4, 4, (1.0, 0.5, 0.25, 0.0), stands_for=33),
        Case("1 SM x 4 flows, port binds", 1, 4, (1.0,)),
        Case("1 SM x 8 flows, port binds", 1, 8, (1.0,)),
    ]
    header = ("case", "flows", "events/s", "recomp", "baseline ev/s", "slowdown")
    print("{:38} {:>8} {:>10} {:>8} {:>14} {:>9}".format(*header))
    for case in cases:
        wall, done, recomputations = run_fabric(case, args.flows)
        base = run_baseline(case, args.flows)
        events = 2 * done  # one start and one end per flow
        print(
            f"{case.name:38} {done:8d} {events / wall:10.0f} {recomputations:8d} "
            f"{events / base:14.0f} {wall / base:8.2f}x"
        )


if __name__ == "__main__":
    main()
