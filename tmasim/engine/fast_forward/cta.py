"""Each CTA's part of the fast-forward's state at a cut (engine/fast_forward/jump.py), relative to
now and to its producer's step: where each of its processes stands and waits, its barriers'
phases and counts, its slots' release times, who waits for its exit.

A cut describes every CTA of the chip (132 in the every-SM GEMM), so this is written for
speed, with the same values a plain reading gives:

- a process's step and wait start come from ``Cta._waiting`` where it waits on a barrier (the
  engine's loops put ``(barrier, parity, t0, i)`` there before the wait); otherwise from its
  frame's locals, which Python copies out in full at each reading: :meth:`CtaStates.lows`
  reads them once a cut and :meth:`CtaStates.state` reuses them;
- the barriers are read in one loop, with no call for the (usual) ones nobody waits on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simpy.events import PENDING

from tmasim.engine.fast_forward.pairs import follower_consumer_state, leader_state
from tmasim.engine.fast_forward.state import Opaque
from tmasim.engine.fast_forward.turns import awaited_unit, turn_wait_state

if TYPE_CHECKING:
    import simpy

    from tmasim.engine.fast_forward.state import Describer
    from tmasim.engine.pipeline.cta import Cta


class CtaStates:
    """Describes CTAs at a cut: :meth:`lows` first, then :meth:`state` for each CTA, then
    :meth:`done` (the frames' locals read are this cut's only)."""

    def __init__(self, env: simpy.Environment, stages: int) -> None:
        self.env, self.stages = env, stages
        self._frames: dict[int, dict[str, Any]] = {}  # consumers' frames' locals read at this cut
        self._roles: dict[int, tuple[str, ...]] = {}  # a CTA's processes' roles, by their number
        self._orders: dict[int, list[int]] = {}  # the ring's slots from each slot on

    def roles(self, processes: int) -> tuple[str, ...]:
        """The roles of a CTA's processes: its producer, then each consumer warpgroup."""
        roles = self._roles.get(processes)
        if roles is None:
            roles = self._roles[processes] = ("producer", *(f"consumer{w}" for w in range(processes - 1)))
        return roles

    def _order(self, turn: int) -> range | list[int]:
        """The ring's slots from slot ``turn`` on, round."""
        if not turn:
            return range(self.stages)
        orders = self._orders
        order = orders.get(turn)
        if order is None:
            order = orders[turn] = [(turn + r) % self.stages for r in range(self.stages)]
        return order

    def lows(self, ctas: list[Cta]) -> list[int]:
        """Each CTA's lowest step a process stands on (a 2-SM follower's consumers run no steps;
        a ping-pong warpgroup awaiting its turn holds none)."""
        frames = self._frames = {}
        lows = []
        for c in ctas:
            low = c.issued
            if c.leader is None:
                waiting, processes = c._waiting, c.processes
                for role, p in zip(self.roles(len(processes))[1:], processes[1:], strict=True):
                    if not p.is_alive or awaited_unit(p) is not None:
                        continue
                    wait = waiting.get(role)
                    if wait is not None and len(wait) == 4:  # (barrier, parity, t0, i)
                        i = wait[3]
                    else:
                        local = frames[id(p)] = p._generator.gi_frame.f_locals  # type: ignore[attr-defined]
                        i = local.get("i", 0)
                    if i < low:
                        low = i
            lows.append(low)
        return lows

    def done(self) -> None:
        self._frames = {}

    def state(self, cta: Cta, now: int, describe: Describer) -> tuple[Any, ...]:
        if cta.done:
            return ("done",)
        if cta._reads:
            raise Opaque("unchecked reads are not described")
        base = cta.issued
        procs = tuple(self._processes(cta, now, describe))
        ring = cta.ring
        callbacks = describe.callbacks
        barriers = []
        # Slots from the producer's on (a cut need not fall on slot 0: engine/fast_forward/jump.py),
        # each barrier's phase relative to the use the next step through its slot makes of it. A
        # follower's bytes land on its leader's: its own full barriers' phases are kept as they are.
        stages = self.stages
        turn = base % stages
        order = self._order(turn)
        for absolute, ring_barriers in ((cta.leader is not None, ring.full), (False, ring.empty)):
            for r, slot in enumerate(order):
                b = ring_barriers[slot]
                ready = b._ready_at - now
                current = b._current
                waiters = current.callbacks if current is not None else None
                barriers.append((b.phase if absolute else b.phase - (base + r) // stages, b._pending, b._tx,
                                 ready if ready >= 0 else 0, b._last._value is PENDING,
                                 callbacks(waiters) if waiters else ()))
        times = cta._released_at if not turn else cta._released_at[turn:] + cta._released_at[:turn]
        released = tuple([t - now for t in times]) if cta.leader is None else ()
        exit_waiters = callbacks(cta.finished.callbacks)
        # when each fill still in flight was issued (records only; a follower's fills are its leader's)
        issued = () if describe.bases is None or cta.leader is not None else tuple(
            t - now for s, t in enumerate(cta._issued_at) if ring.full[s].phase * stages + s < base)
        return (procs, tuple(barriers), released, cta._consumers_left, cta._stores_left, cta._turn,
                cta.finished_at is not None, exit_waiters, tuple(sorted(cta._waiting)), issued,
                leader_state(cta, describe) if cta._unit_done else ())

    def _processes(self, cta: Cta, now: int, describe: Describer) -> list[tuple[Any, ...] | None]:
        """Where each process is suspended (its loop's line, the inner generator's), its step
        relative to the producer's, since when it waits and on what."""
        frames, active, base, records = self._frames, self.env.active_process, cta.issued, describe.bases is not None
        follower = cta.leader is not None
        procs: list[tuple[Any, ...] | None] = []
        for role, proc in zip(self.roles(len(cta.processes)), cta.processes, strict=True):
            if not proc.is_alive:
                procs.append(None)
                continue
            if follower and role != "producer":
                procs.append(follower_consumer_state(cta, role, proc, describe, active))
                continue
            target = None if proc is active else describe.target(proc._target)
            unit = awaited_unit(proc) if role != "producer" else None
            if unit is not None:
                procs.append(turn_wait_state(proc, unit, target))
                continue
            gen: Any = proc._generator
            inner = gen.gi_yieldfrom
            wait = cta._waiting.get(role)
            step: int
            waited: Any
            began: Any
            if wait is not None and len(wait) == 4 and not records:  # (barrier, parity, t0, i)
                step, waited, began = wait[3], wait[2] - now, None
            else:
                local = frames.get(id(proc))
                if local is None:
                    local = gen.gi_frame.f_locals
                step = local.get("i", -1)
                waited = local["t0"] - now if wait is not None else None
                began = local["start"] - now if records and "start" in local else None
            procs.append((gen.gi_frame.f_lineno, step - base, waited, target,
                          None if inner is None or inner.gi_frame is None else inner.gi_frame.f_lineno, began))
        return procs
