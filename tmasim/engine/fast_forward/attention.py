"""Attention CTAs in the fast-forward's state (engine/fast_forward/jump.py).

An attention CTA (:mod:`tmasim.engine.attention.cta`) runs its producer and consumer warpgroups
as generators that call helpers (``yield from``) and keep steps, units and events in their
locals. At a cut each process is described by the chain of frames it is suspended in: per
frame its function, its line and its locals, each read by the rule :data:`FRAMES` gives it:

- ``step``: a K/V block, relative to the producer's step (the CTA's base, ``cta.issued``);
- ``use``: a ring slot's use (its barrier phase), relative to the base's;
- ``unit``: a work unit, relative to the base's unit (a period inside unit u and one inside a
  later unit compare equal, so a known period recurs unit after unit);
- ``time``: relative to now; ``event``: what it is (queued, named, done, or pending);
- ``same``: a value that is its own description (a block, a copy, a role, a flag);
- ``skip``: fixed for the whole run (the CTA, its program), or a function of described values
  (a unit's first step is its unit's: blocks are only dropped after it).

A local no rule covers makes the state opaque (nothing is skipped): a change to the CTA's
loops that adds one must say how it is read here, or the skip stops, never wrong. The CTA's own
fields (barrier phases, counts, the turn token, who waits for its exit) and the SM's vector
units (two processor-sharing pipes: their jobs' tags relative to the virtual clock) complete it.
Each process's lowest step still to touch is kept by the CTA itself (``cta.standing``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import PENDING

from tmasim.engine.fast_forward.state import Opaque
from tmasim.engine.sm.vector_units import QuietPart

if TYPE_CHECKING:
    from tmasim.engine.attention.cta import AttentionCta
    from tmasim.engine.fast_forward.state import Describer
    from tmasim.engine.sm.vector_units import SharedPipe, VectorUnits

SKIP, SAME, STEP, USE, UNIT, TIME, EVENT, RING, BARRIER = ("skip", "same", "step", "use", "unit", "time", "event",
                                                           "ring", "barrier")
_CTA = {"self": SKIP, "__class__": SKIP, "prog": SKIP, "w": SAME, "role": SAME, "at": SAME, "standing": SKIP}
FRAMES: dict[str, dict[str, str]] = {
    "producer": {**_CTA, "k_first": SAME, "u": UNIT, "first": SKIP, "early": SAME, "step": STEP},
    "_load_q": {**_CTA, "u": UNIT, "q": SAME, "pair_bytes": SAME},
    # (a pair's: its own half onto the leader's ring, ``target``, which ``is_k`` and the pair fix)
    "_load_one": {**_CTA, "ring": RING, "offset": SAME, "step": STEP, "use": USE, "slot": SAME, "starts": UNIT,
                  "block": SAME, "copy": SAME, "is_k": SAME, "owner": SKIP, "target": SKIP, "peer": SAME,
                  "pair_bytes": SAME},
    "_before_load": {**_CTA, "is_k": SAME, "step": STEP, "starts": UNIT},
    "_load_block": {**_CTA, "step": STEP},
    "_wait": {**_CTA, "barrier": BARRIER, "parity": SKIP, "full": SAME, "step": STEP, "ready": EVENT, "t0": TIME},
    "_wait_o_read": {**_CTA, "u": UNIT},
    "_prefetch": {**_CTA, "upto": STEP, "last": STEP, "step": STEP},
    "consumer": {**_CTA, "stages": SAME, "u": UNIT, "first": SKIP, "done": EVENT},  # (done: a pair follower's wait)
    "_serial": {**_CTA, "u": UNIT, "first": SKIP, "step": STEP, "block": SAME, "s_done": EVENT, "rescaled": EVENT},
    "_overlapped": {**_CTA, "u": UNIT, "first": SKIP, "block": SAME, "previous": SAME, "step": STEP,
                    "rescaled": EVENT, "s_done": EVENT, "pv_done": EVENT, "last": STEP},
    "_full": {**_CTA, "ring": RING, "step": STEP, "use": USE, "slot": SAME},
    "_my_turn": {**_CTA},
    "_vector": {**_CTA, "work": SAME, "step": STEP, "kind": SAME, "done": EVENT},
    "_epilogue": {**_CTA, "u": UNIT, "epilogue": SAME, "start": TIME},
    "_all_done_with_v": {**_CTA, "u": UNIT},
}


def barriers(cta: AttentionCta) -> list[tuple[str, int, Any]]:
    """The CTA's barriers with their names' parts: its K and V rings' (phases by step, the kinds
    in :data:`RING_KINDS`), then Q's and O's (phases by unit)."""
    named: list[tuple[str, int, Any]] = []
    for ring, kind in ((cta.k, "k"), (cta.v, "v")):
        named += [(f"{kind}.full", s, b) for s, b in enumerate(ring.full)]
        named += [(f"{kind}.empty", s, b) for s, b in enumerate(ring.empty)]
    named += [(kind, 0, b) for kind, b in (("q.full", cta.q_full), ("q.empty", cta.q_empty),
                                           ("o.read", cta.o_read), ("v.read", cta.v_read)) if b is not None]
    return named


RING_KINDS = frozenset({"k.full", "k.empty", "v.full", "v.empty"})
FOLLOWER_UNUSED = frozenset({"k.full", "v.full", "q.full"})


def names(cta: AttentionCta, number: int) -> dict[int, Any]:
    """Names of the CTA's fixed objects (its processes, barriers and exit)."""
    found: dict[int, Any] = {id(cta): ("cta", number), id(cta.finished): ("finished", number)}
    for r, proc in enumerate(cta.processes):
        found[id(proc)] = ("proc", number, r)
    for kind, s, barrier in barriers(cta):
        found[id(barrier)] = (kind, number, s)
    return found


def changing(cta: AttentionCta, number: int) -> dict[int, Any]:
    """Names of the CTA's events that change as it runs: the turn token, each barrier's current
    and last phase, each consumer's pending rescale (a correction warpgroup's), and a pair
    leader's per-unit accumulators not yet handed to the follower (by unit, relative)."""
    found: dict[int, Any] = {id(cta._turn_changed): ("turn", number)}
    if cta.follower is not None:
        unit = base_unit(cta)
        for u, events in enumerate(cta._accumulated):  # type: ignore[attr-defined]
            for w, event in enumerate(events):
                if event.callbacks is not None:
                    found[id(event)] = ("accumulated", number, u - unit, w)
    for kind, s, barrier in barriers(cta):
        found[id(barrier._current)] = (kind, number, s, "current")
        found[id(barrier._last)] = (kind, number, s, "last")
    for w, rescaled in enumerate(cta._rescaled):
        if rescaled is not None:
            found[id(rescaled)] = ("rescaled", number, w)
    return found


def base_unit(cta: AttentionCta) -> int:
    """The unit of the CTA's base step (what units are described relative to)."""
    prog = cta.program
    return prog.unit_of(min(cta.issued, prog.steps - 1)) if prog.steps else 0


def low(cta: AttentionCta) -> int:
    """The lowest step a live process of the CTA will still touch."""
    lows = [s for s, p in zip(cta.standing, cta.processes, strict=True) if p.is_alive and s >= 0]
    return min(lows) if lows else cta.issued


def vector_state(units: VectorUnits, now: int, describe: Describer) -> tuple[Any, ...]:
    """The SM's pipes: each job's tag relative to the virtual clock, in order, its parts left
    and what its end calls; the time since the clock last moved (while there are jobs)."""
    return tuple(_pipe_state(pipe, now, describe) for pipe in units.pipes)


def _pipe_state(pipe: SharedPipe, now: int, describe: Describer) -> tuple[Any, ...]:
    if pipe.idle:  # (a quiet part that has ended is gone)
        return ()
    jobs = sorted(pipe._jobs, key=lambda e: e[:2])
    virtual = pipe._virtual
    return (now - pipe._last, tuple((tag - virtual, "quiet", describe.event(job.job.done)) if isinstance(job, QuietPart)
                                    else (tag - virtual, job.left, describe.event(job.done)) for tag, _, job in jobs))


class AttentionDescriber:
    """Reads attention CTAs at one cut (the names and queue positions of ``describe``)."""

    def __init__(self, describe: Describer, stages: int) -> None:
        self.describe, self.stages = describe, stages

    def state(self, cta: AttentionCta, now: int) -> tuple[Any, ...]:
        if cta.done:
            return ("done",)
        describe, stages = self.describe, self.stages
        base = cta.issued
        unit = describe.units[id(cta)]  # (base_unit, read once a cut)
        procs = tuple(self._process(cta, proc, now, base, unit) for proc in cta.processes)
        shift = base // stages
        # a pair follower's halves land on its leader's full barriers: its own are kept as they are
        unused = FOLLOWER_UNUSED if cta.leader is not None else frozenset()
        parts = []
        for kind, _, b in barriers(cta):
            ready = b._ready_at - now
            current = b._current
            waiters = current.callbacks if current is not None else None
            phase = b.phase if kind in unused else b.phase - (shift if kind in RING_KINDS else unit)
            parts.append((phase, b._pending, b._tx, ready if ready >= 0 else 0, b._last._value is PENDING,
                          describe.callbacks(waiters) if waiters else ()))
        consumers = cta.schedule.consumers
        staged = tuple((v - unit, n) for v, n in enumerate(cta._staged) if n != (consumers if v < unit else 0))
        rescaled = tuple(None if e is None else self._event(e, now) for e in cta._rescaled)
        return (procs, tuple(parts), staged, rescaled, self._recorded(cta, now), cta._consumers_left,
                cta._stores_left, cta._turn,
                None if cta.schedule.producer else (cta._next_load - base, cta._computing - unit),
                tuple(s - base if s >= 0 else None for s in cta.standing),
                cta.finished_at is not None, describe.callbacks(cta.finished.callbacks), tuple(sorted(cta._waiting)))

    def _recorded(self, cta: AttentionCta, now: int) -> tuple[Any, ...]:
        """With records: when each fill still in flight was issued and when each slot in use
        landed (its fill and use spans start there); a pair follower's fills are its leader's."""
        if self.describe.bases is None or cta.leader is not None:
            return ()
        stages, parts, peer = self.stages, [], cta.follower
        for ring, offset in ((cta.k, 0), (cta.v, stages)):
            # (a pair's follower records its slot's use from the leader's landing, after its own release)
            peer_ring = None if peer is None else peer.k if ring is cta.k else peer.v
            for s in range(stages):
                full, empty = ring.full[s], ring.empty[s]
                released = empty.phase if peer_ring is None else min(empty.phase, peer_ring.empty[s].phase)
                filling = full._pending != full.arrivals or full._tx
                parts.append((cta._issued_at[offset + s] - now if filling else None,
                              cta._landed_at[offset + s] - now if full.phase > released else None))
        return tuple(parts)

    def _process(self, cta: AttentionCta, proc: simpy.Process, now: int, base: int, unit: int) -> Any:
        if not proc.is_alive:
            return None
        frames = []
        gen: Any = proc._generator
        while gen is not None and gen.gi_frame is not None:
            name = gen.gi_code.co_name
            rules = FRAMES.get(name)
            if rules is None:
                raise Opaque(f"an attention process in {name}, which the fast-forward does not read")
            local = gen.gi_frame.f_locals
            values = []
            for var, value in local.items():
                rule = rules.get(var)
                if rule is None:
                    raise Opaque(f"{name}'s local {var!r}, which the fast-forward does not read")
                if rule == SKIP:
                    continue
                values.append(self._value(rule, value, cta, now, base, unit))
            frames.append((name, gen.gi_frame.f_lineno, tuple(values)))
            gen = gen.gi_yieldfrom
        target = None if proc is proc.env.active_process else self._event(proc._target, now)
        return (tuple(frames), target)

    def _value(self, rule: str, value: Any, cta: AttentionCta, now: int, base: int, unit: int) -> Any:
        if rule == SAME:
            return value
        if value is None:
            return None
        if rule == STEP:
            return value - base
        if rule == USE:
            return value - base // self.stages
        if rule == UNIT:
            return value - unit
        if rule == TIME:
            return value - now
        if rule == EVENT:
            return self._event(value, now)
        if rule == RING:
            return "k" if value is cta.k else "v"
        return self.describe.name(value)  # BARRIER

    def _event(self, event: simpy.Event, now: int) -> Any:
        """An event a process holds or waits on: its place in the queue, its name, or (an
        unnamed one, a vector job's end, which its pipe's state describes) whether it is done."""
        describe = self.describe
        queued = describe.queued.get(id(event))
        if queued is not None:
            return ("queued", queued)
        named = describe.names.get(id(event))
        if named is not None:
            return named
        if event.callbacks is None:
            return ("processed", event._ok)
        return ("pending", event._value is PENDING)
