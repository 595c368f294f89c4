"""What the recorder would cost a run without records if the CTA loops called hooks.

Today a CTA loop tests ``if rec is not None`` at each place it can record (:mod:`tmasim.engine.recorder`):
without records that is one comparison a place. With hooks, each place would instead call a
function (a no-op without records), so the loops would not name the recorder at all. This
measures the difference where it matters, in a SimPy loop shaped like the engine's (a producer
and a consumer handing tiles through slots, as ``bench_engine.py``'s baseline), with the same
record places per tile as the pipeline's loops pass without records (``PRODUCER_SITES``,
``CONSUMER_SITES``, each with the arguments the engine passes), in three
forms: no places at all, today's test, and a hook (a bound attribute holding a no-op, called
with the arguments). It then runs the engine itself (the ``tiles`` workload, without records)
to turn the per-tile difference into a share of a run. Each form is timed by the process's CPU
time, best of ``--repeat`` rounds, the forms in turn, so machine noise touches all alike.

The decision it informs (``docs/development.md``, "The recorder"): the loops move to hooks only
if hooks cost a run without records nothing measurable (under 1%).

    python benchmarks/bench_recorder_hooks.py [--tiles 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import simpy

from tmasim.scenario import from_dict
from tmasim.simulation import simulate

LOAD_PS, COMPUTE_PS, STAGES = 3_000_000, 5_000_000, 4
# The places pipeline/cta.py's loops pass a tile without records in this compute-bound run: the
# producer's after its wait for a slot and at the issue, the consumer's two after the MMA (it
# rarely waits for data, a place of its own). The copy engine's and the barriers' are not counted.
PRODUCER_SITES, CONSUMER_SITES = 2, 2  # (written out in pipeline())


def _noop(*_: object) -> None:
    return None


class Hooks:
    """A hook per record place; without records each is the no-op."""

    def __init__(self) -> None:
        self.wait_empty = self.issue = self.compute = self.use = _noop


def pipeline(tiles: int, form: str) -> float:
    """The baseline pipeline with the record places in ``form``: "none", "test" or "hook"."""
    env = simpy.Environment()
    free = simpy.Store(env, capacity=STAGES)
    full = simpy.Store(env, capacity=STAGES)
    free.items.extend(range(STAGES))
    rec = None
    hooks = Hooks()

    def producer():  # type: ignore[no-untyped-def]
        for tile in range(tiles):
            slot = yield free.get()
            now = env.now
            if form == "test":  # the places written out, as the loops have them
                if rec is not None:
                    rec.spanned(1, now, now, 0, 0, tile, slot)
                if rec is not None:
                    rec.spanned(3, now, now, 0, 0, tile, slot)
            elif form == "hook":
                hooks.wait_empty(1, now, now, 0, 0, tile, slot)
                hooks.issue(3, now, now, 0, 0, tile, slot)
            yield env.timeout(LOAD_PS)
            yield full.put((tile, slot))

    def consumer():  # type: ignore[no-untyped-def]
        for _ in range(tiles):
            tile, slot = yield full.get()
            now = env.now
            if form == "test":
                if rec is not None:
                    rec.compute(2, now, now, 0, 0, tile, slot)
                if rec is not None:
                    rec.span(4, now, now, 0, 0, tile, slot)
            elif form == "hook":
                hooks.compute(2, now, now, 0, 0, tile, slot)
                hooks.use(4, now, now, 0, 0, tile, slot)
            yield env.timeout(COMPUTE_PS)
            yield free.put(slot)

    env.process(producer())
    env.process(consumer())
    env.run()
    return env.now


def engine(tiles: int) -> None:
    simulate(from_dict({"workload": {"kind": "tiles", "tiles": tiles, "load": f"{LOAD_PS} ps",
                                     "compute": f"{COMPUTE_PS} ps"},
                        "pipeline": {"stages": STAGES}, "run": {"records": False, "fast_forward": False}}))


def best_cpu(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, forms = args.tiles, ("none", "test", "hook")
    rounds: list[dict[str, float]] = []
    for _ in range(args.repeat):  # the forms in turn, each round: a round's differences are paired
        timed = {form: best_cpu(lambda f=form: pipeline(n, f), 1) / n * 1e9 for form in forms}
        timed["engine"] = best_cpu(lambda: engine(n), 1) / n * 1e9
        rounds.append(timed)
    sites = PRODUCER_SITES + CONSUMER_SITES
    print(f"{n:,} tiles, {sites} record places a tile, {args.repeat} rounds (CPU time, ns a tile; best of the rounds)")
    for form in (*forms, "engine"):
        label = f"pipeline, places as {form}" if form != "engine" else "the engine, without records"
        print(f"  {label:<28} {min(r[form] for r in rounds):8.0f}")
    more = sorted(r["hook"] - r["test"] for r in rounds)
    share = sorted((r["hook"] - r["test"]) / r["engine"] for r in rounds)
    mid = len(more) // 2
    print(f"  hooks against today's tests, per round: {more[0]:.0f} / {more[mid]:.0f} / {more[-1]:.0f} ns a tile "
          f"more (min / median / max), {more[mid] / sites:.0f} ns a place")
    print(f"  hooks would add {share[mid]:.1%} to the engine without records "
          f"(rounds: {share[0]:.1%} to {share[-1]:.1%})")


if __name__ == "__main__":
    main()
