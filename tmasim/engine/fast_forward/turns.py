"""Ping-pong warpgroups in the fast-forward's state (engine/fast_forward/jump.py).

Ping-pong consumers take whole work units in turn (``Cta._await_turn``). A warpgroup waiting
for its turn has not taken its next unit's first step yet: it waits for a unit, whose number a
skip leaves in place (the program keeps its units' numbers), while its producer and the
warpgroup in turn move on. So it is described by the unit it waits for, not by a step relative
to the producer's, and it holds no step that bounds the skip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simpy.events import Process


def awaited_unit(proc: Process) -> int | None:
    """The unit a ping-pong warpgroup waits for its turn to run, or None if it does not wait."""
    inner: Any = proc._generator.gi_yieldfrom  # type: ignore[attr-defined]
    if inner is None or inner.gi_frame is None or inner.gi_code.co_name != "_await_turn":
        return None
    return int(inner.gi_frame.f_locals["unit"])


def turn_wait_state(proc: Process, unit: int, target: Any) -> tuple[Any, ...]:
    """Where the waiting warpgroup is suspended (its loop's line and the wait's), the unit, on what."""
    gen: Any = proc._generator
    return ("turn", gen.gi_frame.f_lineno, gen.gi_yieldfrom.gi_frame.f_lineno, unit, target)
