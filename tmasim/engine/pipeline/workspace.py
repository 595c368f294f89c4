"""The flags of a split output tile's reduction workspace (split-K, stream-K).

CUTLASS's stream-K scheduler keeps one counter per split output tile and consumer warpgroup
in global memory (its "lock workspace", ``sm90_tile_scheduler_stream_k.hpp``, ``fixup_helper``):
a peer adds the k-iterations it reduced once its partial is written (``arrive_inc``), and the
peer that starts at k-iteration ``k`` of the tile waits until the counter equals ``k``
(``wait_eq``, the deterministic reduction: the peers add in K order). Counters only grow, so
"reached" is "equal" here. Deadlock reports name what a peer waits for.
"""

from __future__ import annotations

import simpy


class Workspace:
    """Chip-wide: one counter per (output tile, warpgroup) key, and the peers waiting on it."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.counts: dict[tuple[int, int], int] = {}
        self._waiting: dict[tuple[int, int], list[tuple[int, simpy.Event]]] = {}

    def reached(self, key: tuple[int, int], value: int) -> simpy.Event | None:
        """None if the counter already reached ``value``, else an event that fires when it does."""
        if self.counts.get(key, 0) >= value:
            return None
        event = self.env.event()
        self._waiting.setdefault(key, []).append((value, event))
        return event

    def arrive(self, key: tuple[int, int], count: int, delay: int = 0) -> None:
        """Add ``count`` to the counter, seen by waiters ``delay`` ps from now."""
        if delay:
            self.env.timeout(delay).callbacks.append(lambda _: self._add(key, count))
        else:
            self._add(key, count)

    def _add(self, key: tuple[int, int], count: int) -> None:
        total = self.counts[key] = self.counts.get(key, 0) + count
        waiting = self._waiting.get(key)
        if not waiting:
            return
        ready = [event for value, event in waiting if value <= total]
        self._waiting[key] = [(value, event) for value, event in waiting if value > total]
        for event in ready:
            event.succeed()

    def describe(self, key: tuple[int, int], value: int) -> str:
        tile, warpgroup = key
        return (f"the workspace flag of split tile {tile} (warpgroup {warpgroup}) to count {value} k-iterations "
                f"(it counts {self.counts.get(key, 0)}: a peer before it in K has not added its partial)")
