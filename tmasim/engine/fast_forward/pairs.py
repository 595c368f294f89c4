"""Blackwell's 2-SM MMA pairs in the fast-forward's state (engine/fast_forward/jump.py).

A pair's leader issues the MMA for both CTAs; when a unit's last MMA completes it marks the
unit done (``Cta._unit_done``), and the follower's consumers, which run no MMA, wait for that
to write their half of the accumulator out. Beyond what every CTA has, a pair's state is then:

- the leader's units not yet handed over: how many consumers still owe their part of each,
  and who waits for it (the follower's consumers);
- where each follower consumer stands: which unit it waits for or writes out (units keep their
  positions when steps are dropped, so the unit is described as it is), and since when;
- the follower's own full barriers and slot release times, which nothing uses (its bytes
  complete on the leader's barriers, the leader's consumers release its slots): full barrier
  phases are described as they are, not relative to the follower's step, release times not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simpy.events import Process

    from tmasim.engine.pipeline.cta import Cta


def unit_names(cta: Cta, number: int) -> dict[int, Any]:
    """Names of a leader's per-unit hand-over events, for the event queue and the waits."""
    return {id(done): ("unit done", number, unit) for unit, done in enumerate(cta._unit_done)}


def leader_state(cta: Cta, describe: Any) -> tuple[Any, ...]:
    """The leader's units whose accumulator is not handed over yet: consumers left, waiters."""
    return tuple((unit, left, describe.callbacks(done.callbacks))
                 for unit, (left, done) in enumerate(zip(cta._unit_left, cta._unit_done, strict=True))
                 if done.callbacks is not None)


def follower_consumer_state(cta: Cta, role: str, proc: Process, describe: Any, active: Any) -> tuple[Any, ...]:
    """A follower consumer: the chain of generators it is suspended in (consumer, epilogue
    loop, epilogue), the unit it is at, whether it waits and on what. Not since when: no
    counter reads a follower's wait (only a deadlock report, from a run without the skip)."""
    lines: list[int] = []
    gen: Any = proc._generator
    unit = None
    while gen is not None and gen.gi_frame is not None:
        lines.append(gen.gi_frame.f_lineno)
        if gen.gi_code.co_name == "_follower_epilogues":
            unit = gen.gi_frame.f_locals.get("unit")
        gen = gen.gi_yieldfrom
    target = None if proc is active else describe.target(proc._target)
    return (tuple(lines), unit, role in cta._waiting, target)
