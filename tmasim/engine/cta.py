"""A CTA's warp-specialized program: one producer, one or more consumer warpgroups.

Producer, per step i (slot s = i mod S):  wait empty[s]  ->  arrive.expect_tx(bytes) on full[s]
  ->  issue the copy into slot s (the copy engine retires the bytes on full[s] as they land).
Consumer, per step:  wait full[s]  ->  compute on the tensor core  ->  arrive on empty[s].

With ``waits_full`` off, the consumer skips its full-barrier wait (the classic missing-wait
bug); every read of a slot whose copy has not landed is recorded as a race.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy

from tmasim.engine.barrier import Mbarrier
from tmasim.engine.copy_engine import CopyEngine
from tmasim.engine.program import Program
from tmasim.engine.recorder import Recorder
from tmasim.engine.stages import StageRing
from tmasim.engine.tensor_core import TensorCore


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


@dataclass(frozen=True)
class Race:
    sm: int
    cta: int
    consumer: int
    tile: int
    stage: int
    read_ps: float
    landed_ps: float | None  # None: the copy had not even been issued


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
        on_flip = self._record_flip if recorder is not None else None
        self.ring = StageRing(env, self.scope, sync.stages, full_arrivals=sync.full_arrivals,
                              empty_arrivals=sync.empty_arrivals, wake=sync.wake, on_flip=on_flip)
        self.wait_full_ps: float = 0  # SimPy's clock is typed float; it holds ints here
        self.wait_empty_ps: float = 0
        self.finished_at: float | None = None
        # Without full-barrier waits: when each step's copy landed and when each consumer read it.
        self._landed: list[float | None] = [None] * program.steps if not sync.waits_full else []
        self._reads: list[tuple[int, int, float]] = []
        self._waiting: dict[str, tuple[Mbarrier, int]] = {}
        self._consumers_left = sync.consumers
        self.processes = [env.process(self.producer())]
        self.processes += [env.process(self.consumer(w)) for w in range(sync.consumers)]

    def producer(self) -> Generator[simpy.Event, object, None]:
        env, ring, prog, rec = self.env, self.ring, self.program, self.recorder
        copy_bytes, busy, latency = prog.copy_bytes, prog.copy_busy, prog.latency
        expect_tx = self.sync.expect_tx
        for i in range(prog.steps):
            slot, parity = ring.slot(i)
            empty = ring.empty[slot]
            ready = empty.wait(parity ^ 1)
            if not ready.processed:
                t0 = env.now
                self._waiting["producer"] = (empty, parity ^ 1)
                yield ready
                del self._waiting["producer"]
                if env.now > t0:
                    self.wait_empty_ps += env.now - t0
                    if rec is not None:
                        rec.span(t0, env.now, self.sm, self.index, "producer", "wait_empty", i, slot)
            full = ring.full[slot]
            nbytes = copy_bytes[i]
            announced = nbytes if expect_tx is None else expect_tx
            full.arrive_expect_tx(announced, f"{self.scope}.producer", i // ring.stages)
            issued, landed = self.copy_engine.copy_serial(nbytes, busy[i], latency[i], full, self.index, i, slot)
            if self._landed:
                self._landed[i] = landed
            if rec is not None:
                rec.event(issued, self.sm, self.index, "issue", f"{self.scope}.tma", i, slot)
                rec.event(landed, self.sm, self.index, "landed", f"{self.scope}.tma", i, slot)
                rec.span(issued, landed, self.sm, self.index, "slot", "fill", i, slot, nbytes)

    def consumer(self, warpgroup: int) -> Generator[simpy.Event, object, None]:
        env, ring, prog, rec, tc = self.env, self.ring, self.program, self.recorder, self.tensor_core
        share = self.sync.consumers
        flops = prog.flops
        role = f"consumer{warpgroup}"
        who = f"{self.scope}.{role}"
        for i in range(prog.steps):
            slot, parity = ring.slot(i)
            if self.sync.waits_full:
                full = ring.full[slot]
                ready = full.wait(parity)
                if not ready.processed:
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
            # Cooperative warpgroups split each step's work; the split loses no picosecond.
            whole, extra = divmod(prog.compute[i], share)
            start, done = tc.run(whole + (warpgroup < extra), flops[i] / share if flops else 0.0)
            yield done
            ring.empty[slot].arrive(who, phase=i // ring.stages)
            if rec is not None:
                rec.span(start, env.now, self.sm, self.index, "consumer", "compute", i, slot)
                rec.span(start, env.now, self.sm, self.index, "slot", "use", i, slot)
        self._consumers_left -= 1
        if self._consumers_left == 0:
            self.finished_at = env.now

    def races(self) -> list[Race]:
        """Reads of a slot before its copy landed (checked after the run, when every landing
        time is known: a read at the very instant the data lands is not a race)."""
        found = []
        for warpgroup, step, read in self._reads:
            landed = self._landed[step]
            if landed is None or landed > read:
                found.append(Race(self.sm, self.index, warpgroup, step, step % self.sync.stages, read, landed))
                if self.recorder is not None:
                    self.recorder.event(read, self.sm, self.index, "race", f"{self.scope}.consumer{warpgroup}",
                                        step, step % self.sync.stages)
        return found

    def _record_flip(self, barrier: Mbarrier, phase: int) -> None:
        assert self.recorder is not None
        slot = int(barrier.name[barrier.name.rindex("[") + 1 : -1])
        kind = "full" if ".full[" in barrier.name else "empty"
        step = phase * self.sync.stages + slot
        self.recorder.event(self.env.now, self.sm, self.index, f"flip_{kind}", barrier.name, step, slot, phase)

    def waiting(self) -> list[str]:
        """Who in this CTA is blocked, on what (for deadlock reports)."""
        return [f"{self.scope}.{role} waits on {barrier.describe_wait(parity)}"
                for role, (barrier, parity) in self._waiting.items()]

    @property
    def done(self) -> bool:
        return all(not p.is_alive for p in self.processes)
