"""A CTA's warp-specialized program: one producer, one or more consumer warpgroups.

Producer, per step i (slot s = i mod S):  wait empty[s]  ->  arrive.expect_tx(bytes) on full[s]
  ->  issue the step's copies into slot s (the copy engine retires the bytes on full[s]).
Consumer, per step:  wait full[s]  ->  compute on the tensor core  ->  arrive on empty[s];
after a work unit's last step, its epilogue (consumer time, then a TMA store of the tile).

Consumer warpgroups either *cooperate* (each takes its share of every step, all arrive on
empty[s]) or play *ping-pong* (they take whole work units in turn, so one's epilogue overlaps
the other's MMAs; one arrival per step). Ping-pong mainloops run in unit order, handed over
by an order barrier as in CUTLASS: without it a warpgroup could wait on a full barrier a lap
too early, and parity alone would let it pass.

With ``waits_full`` off, the consumer skips its full-barrier wait (the classic missing-wait
bug); every read of a slot whose copy had not landed is reported as a race.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass

import simpy

from tmasim.engine.barrier import Mbarrier
from tmasim.engine.copy_engine import CopyEngine
from tmasim.engine.program import Copy, Program
from tmasim.engine.recorder import Recorder
from tmasim.engine.stages import StageRing
from tmasim.engine.tensor_core import TensorCore

COOPERATIVE, PINGPONG = "cooperative", "pingpong"


@dataclass(frozen=True)
class Sync:
    """How a CTA synchronizes: normally derived from the pipeline; see ``Pipeline``."""

    stages: int
    consumers: int
    waits_full: bool
    full_arrivals: int
    empty_arrivals: int
    expect_tx: int | None
    wake: int
    mode: str = COOPERATIVE


@dataclass(frozen=True)
class Race:
    sm: int
    cta: int
    consumer: int
    tile: int
    stage: int
    read_ps: float
    landed_ps: float | None  # None: the copy never landed


class Cta:
    def __init__(self, env: simpy.Environment, sm: int, index: int, program: Program, sync: Sync,
                 copy_engine: CopyEngine, tensor_core: TensorCore, recorder: Recorder | None) -> None:
        self.env = env
        self.sm = sm
        self.index = index
        self.scope = f"sm{sm}.cta{index}"
        self.program = program
        self.sync = sync
        self.copy_engine = copy_engine
        self.tensor_core = tensor_core
        self.recorder = recorder
        self.multiplicity = 1  # identical SMs this CTA's SM stands for (aggregation)
        watch = recorder is not None or not sync.waits_full
        self.ring = StageRing(env, self.scope, sync.stages, full_arrivals=sync.full_arrivals,
                              empty_arrivals=sync.empty_arrivals, wake=sync.wake,
                              on_full_flip=self._on_full_flip if watch else None,
                              on_empty_flip=self._on_empty_flip if recorder is not None else None)
        self.wait_full_ps: float = 0  # SimPy's clock is typed float; it holds ints here
        self.wait_empty_ps: float = 0
        self.slot_cycle_ps: float = 0  # summed over steps: a slot's release to its next release
        self.slot_cycles = 0
        self.finished_at: float | None = None
        self.finished = env.event()
        # Without full-barrier waits: when each step's data landed and when each consumer read it.
        self._landed: list[float | None] = [None] * program.steps if not sync.waits_full else []
        self._reads: list[tuple[int, int, float]] = []
        self._issued_at: list[float] = [0] * sync.stages
        self._released_at: list[float] = [env.now] * sync.stages
        self._waiting: dict[str, tuple[Mbarrier, int]] = {}
        self._consumers_left = sync.consumers
        self._stores_left = 0
        self._turn = 0  # ping-pong: the unit whose mainloop may run
        self._turn_changed = env.event()
        self.processes = [env.process(self.producer())]
        self.processes += [env.process(self.consumer(w)) for w in range(sync.consumers)]

    # The two loops below are the engine's hot path: they keep what they use in locals, and
    # test `event.callbacks is not None` (SimPy's "not yet processed") inline.

    def producer(self) -> Generator[simpy.Event, object, None]:
        env, ring, prog, rec, engine = self.env, self.ring, self.program, self.recorder, self.copy_engine
        expect_tx = self.sync.expect_tx
        who = f"{self.scope}.producer"
        stages, fulls, empties, copies_of = ring.stages, ring.full, ring.empty, prog.copies
        for i in range(prog.steps):
            use, slot = divmod(i, stages)
            parity = use & 1
            empty = empties[slot]
            ready = empty.wait(parity ^ 1)
            if ready.callbacks is not None:
                t0 = env.now
                self._waiting["producer"] = (empty, parity ^ 1)
                yield ready
                del self._waiting["producer"]
                if env.now > t0:
                    self.wait_empty_ps += env.now - t0
                    if rec is not None:
                        rec.span(t0, env.now, self.sm, self.index, "producer", "wait_empty", i, slot)
            full = fulls[slot]
            copies = copies_of(i)
            if len(copies) == 1:
                announced = copies[0].smem_bytes if expect_tx is None else expect_tx
            else:
                announced = sum(c.smem_bytes for c in copies) if expect_tx is None else expect_tx
            full.arrive_expect_tx(announced, who, use)
            self._issued_at[slot] = env.now
            for copy in copies:
                engine.load(copy, full, self.index, i, slot)

    def consumer(self, warpgroup: int) -> Generator[simpy.Event, object, None]:
        env, ring, prog, rec, tc = self.env, self.ring, self.program, self.recorder, self.tensor_core
        role = f"consumer{warpgroup}"
        who = f"{self.scope}.{role}"
        share = self.sync.consumers if self.sync.mode == COOPERATIVE else 1
        ordered = share == 1 and self.sync.consumers > 1
        waits_full, counts_cycles = self.sync.waits_full, warpgroup == 0 or share == 1
        stages, fulls, empties, released = ring.stages, ring.full, ring.empty, self._released_at
        compute_of, flops_of, tail_of, epilogue_of = prog.compute, prog.flops, prog.tail, prog.epilogue
        for i in self._steps_of(warpgroup):
            use, slot = divmod(i, stages)
            parity = use & 1
            if ordered:
                unit = prog.unit_of(i)
                while self._turn != unit:
                    yield self._turn_changed
            if waits_full:
                full = fulls[slot]
                ready = full.wait(parity)
                if ready.callbacks is not None:
                    t0 = env.now
                    self._waiting[role] = (full, parity)
                    yield ready
                    del self._waiting[role]
                    if env.now > t0:
                        self.wait_full_ps += env.now - t0
                        if rec is not None:
                            rec.span(t0, env.now, self.sm, self.index, "consumer", "wait_full", i, slot)
            else:
                self._reads.append((warpgroup, i, env.now))
            # The step's MMAs occupy the tensor cores (cooperative warpgroups split them; the
            # split loses no picosecond); the slot is released when the last one completes,
            # `tail` later, while the warpgroup goes on to issue the next step. Before an
            # epilogue the warpgroup itself waits for the accumulator (wait_group 0).
            epilogue = epilogue_of(i)
            tail = tail_of(i)
            wait = tail if epilogue is not None else 0
            if share == 1:
                start, done = tc.run(compute_of(i), flops_of(i), wait)
            else:
                whole, extra = divmod(compute_of(i), share)
                start, done = tc.run(whole + (warpgroup < extra), flops_of(i) / share, wait)
            yield done
            late = tail - wait
            empties[slot].arrive(who, phase=use, delay=late)
            if counts_cycles:
                now = env.now + late
                self.slot_cycle_ps += now - released[slot]
                released[slot] = now
                self.slot_cycles += 1
            if rec is not None:
                rec.span(start, env.now - wait, self.sm, self.index, "consumer", "compute", i, slot)
                rec.span(start, env.now + late, self.sm, self.index, "slot", "use", i, slot)
            if ordered and (i + 1 == prog.steps or prog.unit_of(i + 1) != prog.unit_of(i)):
                self._pass_turn()
            if epilogue is not None:
                yield from self._epilogue(warpgroup, i, epilogue.duration, epilogue.store)
        self._consumers_left -= 1
        self._maybe_finish()

    def _pass_turn(self) -> None:
        """Ping-pong order barrier: this mainloop is done, the next unit's may start."""
        self._turn += 1
        changed, self._turn_changed = self._turn_changed, self.env.event()
        changed.succeed()

    def _steps_of(self, warpgroup: int) -> Iterable[int]:
        prog = self.program
        if self.sync.mode == COOPERATIVE or self.sync.consumers == 1:
            return range(prog.steps)
        consumers = self.sync.consumers
        return (i for i in range(prog.steps) if prog.unit_of(i) % consumers == warpgroup)

    def _epilogue(self, warpgroup: int, step: int, duration: int,
                  store: Copy | None) -> Generator[simpy.Event, object, None]:
        """Write the tile out: consumer time, then (by one warpgroup) a TMA store of the tile."""
        start = self.env.now
        if duration:
            yield self.env.timeout(duration)
        if self.recorder is not None:
            self.recorder.span(start, self.env.now, self.sm, self.index, "consumer", "epilogue",
                               self.program.unit_of(step), -1)
        if store is not None and (warpgroup == 0 or self.sync.mode == PINGPONG):
            self._stores_left += 1
            self.copy_engine.store(store, self._store_done, self.index, self.program.unit_of(step))

    def _store_done(self, _: float) -> None:
        self._stores_left -= 1
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        """A CTA exits when its consumers are done and its stores have landed (bulk wait)."""
        if self._consumers_left == 0 and self._stores_left == 0 and self.finished_at is None:
            self.finished_at = self.env.now
            self.finished.succeed(self)

    def races(self) -> list[Race]:
        """Reads of a slot before its copy landed (checked after the run, when every landing
        time is known: a read at the very instant the data lands is not a race)."""
        found = []
        for warpgroup, step, read in self._reads:
            landed = self._landed[step]
            if landed is None or landed > read:
                stage = step % self.sync.stages
                found.append(Race(self.sm, self.index, warpgroup, step, stage, read, landed))
                if self.recorder is not None:
                    self.recorder.event(read, self.sm, self.index, "race", f"{self.scope}.consumer{warpgroup}",
                                        step, stage)
        return found

    def _on_full_flip(self, barrier: Mbarrier, phase: int, slot: int) -> None:
        """A slot's data landed: the step it holds is ready."""
        step = phase * self.sync.stages + slot
        now = self.env.now
        if self._landed:
            self._landed[step] = now
        if self.recorder is not None:
            self.recorder.span(self._issued_at[slot], now, self.sm, self.index, "slot", "fill", step, slot,
                               sum(c.smem_bytes for c in self.program.copies(step)))
            self.recorder.event(now, self.sm, self.index, "flip_full", barrier.name, step, slot, phase)

    def _on_empty_flip(self, barrier: Mbarrier, phase: int, slot: int) -> None:
        assert self.recorder is not None
        step = phase * self.sync.stages + slot
        self.recorder.event(barrier.flipped_at, self.sm, self.index, "flip_empty", barrier.name, step, slot, phase)

    def waiting(self) -> list[str]:
        """Who in this CTA is blocked, on what (for deadlock reports)."""
        return [f"{self.scope}.{role} waits on {barrier.describe_wait(parity)}"
                for role, (barrier, parity) in self._waiting.items()]

    @property
    def done(self) -> bool:
        return self.finished_at is not None and all(not p.is_alive for p in self.processes)
