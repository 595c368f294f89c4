"""The stage ring: S shared-memory slots, each with a full and an empty mbarrier.

Step i of a CTA's program uses slot i mod S for the (i div S)-th time. The consumer waits on
full[s] with parity (i div S) mod 2; the producer waits on empty[s] with the opposite parity,
so its first S waits pass at once (the slots start empty), as CUTLASS's pipelines do.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import simpy

from tmasim.engine.sm.barrier import FlipHook, Mbarrier

SlotHook = Callable[[int, Mbarrier, int], None]  # (slot, barrier, completed phase)


class StageRing:
    __slots__ = ("stages", "full", "empty")

    def __init__(self, env: simpy.Environment, scope: str, stages: int, *, full_arrivals: int,
                 empty_arrivals: int, wake: int, on_full_flip: SlotHook | None = None,
                 on_empty_flip: SlotHook | None = None, multicast: bool = False) -> None:
        self.stages = stages
        self.full = [Mbarrier(env, f"{scope}.full[{s}]", full_arrivals, wake, _bind(on_full_flip, s),
                              signed_tx=multicast)
                     for s in range(stages)]
        self.empty = [Mbarrier(env, f"{scope}.empty[{s}]", empty_arrivals, wake, _bind(on_empty_flip, s))
                      for s in range(stages)]


    def watch_empty(self, hook: SlotHook) -> None:
        """Call ``hook`` at each flip of an empty barrier from now on."""
        for s, barrier in enumerate(self.empty):
            barrier.watch(_bind(hook, s))


def _bind(hook: SlotHook | None, slot: int) -> FlipHook | None:
    return None if hook is None else partial(hook, slot)  # a partial adds no Python frame of its own
