"""CPU time of the bundled attention scenarios, with the fabric's shortcuts and without them.

Attention's CTAs do unequal work when causal (``attention-h100-causal``: 120 classes of 132
SMs), so many SMs are simulated and the flow model's cost per event grows with them. Each
scenario runs twice in this process: with the fabric as it is (one-pass rates when no shared
link binds, merged rate groups) and with the reference full progressive filling, one group per
level (``Fabric._water_fill_plain``), best CPU time (``time.process_time``) of ``--repeat``
rounds each; every summary figure must be identical (how much fast-forward skipped may differ:
the two fillings' float clocks repeat at different cuts).

    python benchmarks/bench_attention.py [--repeat 1] [--only attention-h100-causal]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)

from tmasim.engine.fabric.model import Fabric
from tmasim.scenario import bundled_names, load
from tmasim.simulation import simulate


@contextmanager
def plain_fabric() -> Iterator[None]:
    shortcut = Fabric._water_fill
    Fabric._water_fill = Fabric._water_fill_plain  # type: ignore[method-assign]
    try:
        yield
    finally:
        Fabric._water_fill = shortcut  # type: ignore[method-assign]


def timed(name: str, repeat: int) -> tuple[float, dict[str, Any]]:
    best, stats = float("inf"), {}
    for _ in range(repeat):
        scenario = load(name, ["run.records=false"])
        start = time.process_time()
        stats = simulate(scenario, allow_large=True).stats
        best = min(best, time.process_time() - start)
    return best, stats


def _figures(stats: dict[str, Any]) -> dict[str, Any]:
    """The summary's figures, less how much fast-forward skipped: the plain filling's float
    clocks repeat at other cuts than the shortcuts', so the skip may differ (attention-h100-causal:
    31,200 against 30,240 ring steps) while every figure of the run is the same."""
    return {k: v for k, v in stats.items() if not k.startswith("fast_forward")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", action="append", help="a scenario name (repeatable)")
    args = parser.parse_args()
    names = args.only or [n for n in bundled_names() if n.startswith("attention")]
    print(f"{'scenario':26s} {'plain fabric':>13s} {'shortcuts':>10s} {'speed-up':>9s}  SM classes  makespan")
    for name in names:
        with plain_fabric():
            plain, reference = timed(name, args.repeat)
        fast, stats = timed(name, args.repeat)
        same = _figures(stats) == _figures(reference)
        print(f"{name:26s} {plain:11.2f} s {fast:8.2f} s {plain / fast:8.2f}x  {stats.get('sm_classes', '')!s:>10}  "
              f"{stats['makespan_ns']:.3f} ns{'' if same else '  DIFFERENT SUMMARY'}")


if __name__ == "__main__":
    main()
