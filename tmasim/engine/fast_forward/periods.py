"""Known periods: a repeat the fast-forward has seen, kept to be jumped over again at once
(docs/design.md §9).

A jump from cut i to cut j establishes a fact about the simulation, not about that place in
the run: from state s, with every moving CTA c on steps of one kind (one segment, no epilogue)
from its lowest step on, the chip is back in state s after Δ, each CTA p_c steps further, its
counters grown by the same amounts. The state is relative to now and to each CTA's own step,
so a later cut whose state is s again, and whose CTAs stand on steps of those same kinds (in a
later work unit, say), repeats that period too: it can jump at once, without simulating a
period to see the repeat. A GEMM's persistent CTAs pass through the same configuration unit
after unit, and each time would otherwise simulate one more period after the unit's transient
(ragged tiles' classes do not: their offsets drift from unit to unit, docs/design.md §9).

Kept for the CTAs it was seen with (a grid launch's later waves are other CTAs, whose cluster
peers the state does not name), and not with 2-SM pairs or ping-pong turns (their states name
units). With records, a period keeps where its records are in the stream (engine/fast_forward/record_shift.py,
:class:`~tmasim.engine.fast_forward.record_shift.Recorded`: positions, not a copy) and the jump replays them,
moved as far in time and in each CTA's steps as the recurrence is from the period; a period whose
records name a work unit (an epilogue's, a store's: its number does not move) is not kept.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tmasim.engine.fast_forward.record_shift import Recorded
    from tmasim.engine.pipeline.cta import Cta

KEPT = 256  # periods remembered (the oldest is forgotten first): a run visits few configurations


@dataclass(frozen=True)
class Period:
    """One period of the whole chip: its length, each CTA's move and the kind of step it moved
    on (None: it did not move), and what the counters gained."""

    delta: int
    ctas: tuple[int, ...]  # which CTAs (by id): the state names them by place, not their peers
    moves: tuple[int, ...]
    kinds: tuple[object, ...]
    ints: tuple[Any, ...]
    sums: tuple[int, ...]
    records: Recorded | None = None  # where its records are, with records on (record_shift.py)


class Periods:
    """Periods seen, by the state they start (and end) in."""

    def __init__(self) -> None:
        self._by_state: OrderedDict[tuple[Any, ...], Period] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_state)

    def keep(self, state: tuple[Any, ...], period: Period) -> None:
        self._by_state[state] = period
        self._by_state.move_to_end(state)
        while len(self._by_state) > KEPT:
            self._by_state.popitem(last=False)

    def recall(self, state: tuple[Any, ...], ctas: list[Cta], low: list[int],
               base: list[int]) -> tuple[Period, int] | None:
        """The period known from ``state`` and how many of them every CTA's steps allow from
        here (each moving CTA's steps from its lowest on stay of the period's kind), or None."""
        period = self._by_state.get(state)
        if period is None or period.ctas != tuple(id(c) for c in ctas):
            return None
        k: float = math.inf
        for cta, p, kind, lo, b in zip(ctas, period.moves, period.kinds, low, base, strict=True):
            if not p:
                continue
            program: Any = cta.program
            end = program.run_end(lo, False)  # the run of identical steps from ``lo`` on (it starts at or before)
            end = min(end, program.steps - 1)  # a producer at ``b`` stands for step b + k·p after the jump
            if b > end or program.step_kind(lo) != kind:
                return None
            k = min(k, (end - b) // p)
        if not k or k == math.inf:
            return None
        return period, int(k)
