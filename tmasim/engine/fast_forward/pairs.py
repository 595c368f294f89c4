"""Blackwell's 2-SM MMA pairs in the fast-forward's state (engine/fast_forward/jump.py).

A pair's leader issues the MMA for both CTAs; when a unit's last MMA completes it marks the
unit done (``Cta._unit_done``), and the follower's consumers, which run no MMA, wait for that
to write their half of the accumulator out. Beyond what every CTA has, a pair's state is then:

- the leader's units not yet handed over: how many consumers still owe their part of each,
  and who waits for it (the follower's consumers);
- where each follower consumer stands: which unit it waits for or writes out, and since when;
- the follower's own full barriers and slot release times, which nothing uses (its bytes
  complete on the leader's barriers, the leader's consumers release its slots): full barrier
  phases are described as they are, not relative to the follower's step, release times not.

Units are described relative to the leader's current one (the unit of its producer's step,
``Describer.units``), so that a state recurs a whole tile or wave later: a persistent pair's
tiles repeat (the fast-forward drops whole units then, and the leader's list of them with
the program's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simpy.events import Process

    from tmasim.engine.pipeline.cta import Cta


# Units around a leader's current one named relative to it (nothing else waits on or queues a
# hand-over: a follower waits on a unit its leader's consumer has not finished).
NEAR = (-3, 2)


def unit_names(cta: Cta, number: int) -> dict[int, Any]:
    """Names of a leader's per-unit hand-over events, for the event queue and the waits, as
    they are (a fallback: :func:`near_unit_names` names those around the current unit)."""
    return {id(done): ("unit done", number, "at", unit) for unit, done in enumerate(cta._unit_done)}


def near_unit_names(cta: Cta, number: int, current: int) -> dict[int, Any]:
    """The hand-over events of the units around the leader's ``current`` one, relative to it."""
    done = cta._unit_done
    return {id(done[unit]): ("unit done", number, unit - current)
            for unit in range(max(current + NEAR[0], 0), min(current + NEAR[1], len(done)))}


def leader_state(cta: Cta, describe: Any) -> tuple[Any, ...]:
    """The leader's units whose accumulator is not handed over yet and where something happened
    (a consumer's part done, a waiter; the others are as the program made them), relative to
    its current unit: consumers left, waiters."""
    current, share = describe.units.get(id(cta), 0), cta._unit_share
    return tuple((unit - current, left, describe.callbacks(done.callbacks))
                 for unit, (left, done) in enumerate(zip(cta._unit_left, cta._unit_done, strict=True))
                 if done.callbacks is not None and (done.callbacks or left != share))


def follower_consumer_state(cta: Cta, role: str, proc: Process, describe: Any, active: Any) -> tuple[Any, ...]:
    """A follower consumer: the chain of generators it is suspended in (consumer, epilogue
    loop, epilogue), the unit it is at (relative to its leader's), whether it waits and on
    what. Not since when: no counter reads a follower's wait (only a deadlock report, from a
    run without the skip)."""
    lines: list[int] = []
    gen: Any = proc._generator
    unit = None
    while gen is not None and gen.gi_frame is not None:
        lines.append(gen.gi_frame.f_lineno)
        if gen.gi_code.co_name == "_follower_epilogues":
            unit = gen.gi_frame.f_locals.get("unit")
        gen = gen.gi_yieldfrom
    target = None if proc is active else describe.target(proc._target)
    if unit is not None and cta.leader is not None:
        unit -= describe.units.get(id(cta.leader), 0)
    return (tuple(lines), unit, role in cta._waiting, target)
