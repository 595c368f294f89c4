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

from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass

import simpy

from tmasim.engine.pipeline.cluster import (
    all_copies,
    cluster_wait,
    multicast_mask,
    multicast_target,
    pair_owner,
    ranks,
    remote_arrival,
    self_owner,
)
from tmasim.engine.pipeline.stages import StageRing
from tmasim.engine.pipeline.workspace import Workspace
from tmasim.engine.program import Copy, Epilogue, Fixup, Program
from tmasim.engine.recorder import EPILOGUE, FLIP_EMPTY, WAIT_EMPTY, WAIT_FULL, Recorder
from tmasim.engine.sm.barrier import Mbarrier
from tmasim.engine.sm.copy_engine import WORKSPACE_READ, WORKSPACE_WRITE, CopyEngine, Multicast
from tmasim.engine.sm.tensor_core import TensorCore

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
    mma_pair: bool = False  # 2-SM MMA: cluster rank 2i leads a pair with rank 2i + 1


@dataclass(frozen=True)
class Race:
    sm: int
    cta: int
    consumer: int
    tile: int
    stage: int
    read_ps: float
    landed_ps: float | None  # None: the copy never landed


def _arrives_quietly(full: Mbarrier, use: int) -> bool:
    """Whether the producer's arrival on ``full`` for phase ``use``, announcing some bytes, can
    neither complete the phase nor fail: then nothing is recorded between its wait and its first
    copy's issue, and the two make one record."""
    return full.phase == use and full.pending_arrivals > 0 and full.pending_tx >= 0


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
        self.workspace: Workspace | None = None  # split tiles' flags (the chip's, where the plan has fix-ups)
        self.fixup_wait_ps: float = 0  # summed over consumer warpgroups: waits for peers' partials
        self._fixup_waits: dict[str, tuple[tuple[int, int], int]] = {}  # role: (flag key, count awaited)
        # Cluster: the ranks this CTA multicasts into are, by symmetry, those that multicast into
        # it; each one's consumers must release a slot before its producers refill it.
        self.mask = multicast_mask(program)
        self.cluster = -1
        self.rank = 0
        self.peers: list[Cta] = [self]
        self._targets: list[dict[int, Multicast]] = []
        self._release: list[Cta] | None = None
        self._arrive_latency = 0
        self.released = [0] * sync.stages  # uses of each slot its consumers released (deadlock reports)
        self.issued = 0  # steps the producer issued (deadlock reports)
        writers = self.mask.bit_count() or 1
        self.ring = StageRing(env, self.scope, sync.stages, full_arrivals=sync.full_arrivals,
                              empty_arrivals=sync.empty_arrivals * writers, wake=sync.wake,
                              on_full_flip=None if sync.waits_full else self._on_full_flip,
                              multicast=bool(self.mask) or sync.mma_pair)
        # The ring's barrier names as the records keep them: full[0..S-1], then empty[0..S-1].
        self._names = [recorder.name(b.name) for b in (*self.ring.full, *self.ring.empty)] if recorder else []
        self._issued_at: list[float] = [0] * sync.stages  # when the producer filled each slot last
        self._filled = [0] * sync.stages  # with records: the bytes of the CTA's own copies into it
        if recorder is not None and sync.waits_full:  # a full barrier's flip: its fill record, one call
            for slot, barrier in enumerate(self.ring.full):
                barrier.watch(recorder.fill_hook(sm, index, slot, sync.stages, self._names[slot],
                                                 self._issued_at, self._filled), records_landing=True)
        self.leader: Cta | None = None  # 2-SM MMA follower: the CTA whose MMA reads our half
        self.follower: Cta | None = None  # 2-SM MMA leader: the CTA holding the other half
        self._unit_done: list[simpy.Event] = []
        self._unit_left: list[int] = []
        self._unit_share = 0  # a leader's consumers that finish each unit's MMAs (its _unit_left at first)
        self.wait_full_ps: float = 0  # SimPy's clock is typed float; it holds ints here
        self.wait_empty_ps: float = 0
        self.slot_cycle_ps: float = 0  # summed over steps: a slot's release to its next release
        self.slot_cycles = 0
        self.finished_at: float | None = None
        self.finished = env.event()
        # Without full-barrier waits: when each step's data landed and when each consumer read it.
        self._landed: list[float | None] = [None] * program.steps if not sync.waits_full else []
        self._reads: list[tuple[int, int, float]] = []
        self._released_at: list[float] = [env.now] * sync.stages
        self._waiting: dict[str, tuple[Mbarrier, int, float, int]] = {}  # role: barrier, parity, since, step
        self._consumers_left = sync.consumers
        self._stores_left = 0
        self._turn = 0  # ping-pong: the unit whose mainloop may run
        self._turn_changed = env.event()
        # Fast-forward's cut: called as the producer reaches a step where the run is cut (the
        # first step, then each step it returns: may shorten the program).
        self.on_step: Callable[[Cta, int], int] | None = None
        self.steps_may_drop = False  # fast-forward may shorten the program: loops re-read its length
        self.processes = [env.process(self.producer())]
        self.processes += [env.process(self.consumer(w)) for w in range(sync.consumers)]

    def join_cluster(self, cluster: int, rank: int, peers: list[Cta], arrive_latency: int) -> None:
        """Wire this CTA to its cluster (``peers`` by rank): its copies land in the slots of the
        ranks in their masks, and the CTA whose MMA reads a slot releases it in every CTA that
        writes into it. The MMA's owner is the CTA itself, or with the 2-SM MMA the pair's
        leader (the even rank): the follower's bytes complete on the leader's full barrier."""
        self.cluster, self.rank, self.peers, self._arrive_latency = cluster, rank, peers, arrive_latency
        if self.recorder is not None:  # which CTAs form a cluster: for the Gantt chart and the trace
            self.recorder.event(self.env.now, self.sm, self.index, "cluster", f"cluster {cluster}", -1, rank)
        pair = self.sync.mma_pair
        if not self.mask and not pair:
            return
        if self.recorder is not None:  # peers' consumers arrive on our empty barriers too
            self.ring.watch_empty(self._on_empty_flip)
        owner = pair_owner if pair else self_owner
        receivers = [ranks(peer.mask) or [q] for q, peer in enumerate(peers)]
        if owner(rank) == rank:
            self._release = [peers[q] for q in range(len(peers)) if rank in {owner(r) for r in receivers[q]}]
        writers = len({owner(r) for r in receivers[rank]})
        for barrier in self.ring.empty:
            barrier.expect_arrivals(self.sync.empty_arrivals * writers)
        keys = {c.multicast or (1 << rank if pair else 0) for c in all_copies(self.program)} - {0}
        self._targets = [{key: multicast_target(peers, key, slot, owner) for key in keys}
                         for slot in range(self.sync.stages)]
        if pair:
            self._join_pair(peers)

    def _join_pair(self, peers: list[Cta]) -> None:
        """2-SM MMA: the leader's MMA keeps both SMs' tensor cores busy and hands each finished
        accumulator half to the follower's epilogue."""
        if self.rank % 2:
            self.leader = peers[self.rank - 1]
            return
        self.follower = peers[self.rank + 1]
        units = self.program.unit_of(self.program.steps - 1) + 1 if self.program.steps else 0
        share = self.sync.consumers if self.sync.mode == COOPERATIVE else 1
        self._unit_done = [self.env.event() for _ in range(units)]
        self._unit_left = [share] * units
        self._unit_share = share

    def drop_units(self, unit: int, count: int) -> None:
        """Fast-forward dropped ``count`` units after the one at ``unit`` from this pair leader's
        program (and its follower's): their hand-overs go too."""
        del self._unit_done[unit + 1:unit + 1 + count]
        del self._unit_left[unit + 1:unit + 1 + count]

    def _accumulator_ready(self, unit: int) -> None:
        """One consumer finished its part of the unit's last MMA; when all have, the follower's
        half of the accumulator is ready for its epilogue."""
        self._unit_left[unit] -= 1
        if not self._unit_left[unit]:
            self._unit_done[unit].succeed()

    def _follower_epilogues(self, warpgroup: int) -> Generator[simpy.Event, object, None]:
        """A pair follower's consumers run no MMA: they wait for each accumulator half, then
        write it out (a split tile's half through its own fix-up first)."""
        assert self.leader is not None
        prog, turns = self.program, self.sync.mode != COOPERATIVE and self.sync.consumers > 1
        # By unit, not by step: the wait stays put when fast-forward drops steps before it.
        for unit, done in enumerate(self.leader._unit_done):
            if turns and unit % self.sync.consumers != warpgroup:
                continue
            if prog.epilogue(prog.last_step(unit)) is None:
                continue
            if done.callbacks is not None:
                i = prog.last_step(unit)
                slot, parity, t0 = i % self.sync.stages, (i // self.sync.stages) & 1, self.env.now
                self._waiting[f"consumer{warpgroup}"] = (self.leader.ring.full[slot], parity, t0, i)
                yield done
                del self._waiting[f"consumer{warpgroup}"]
            i = prog.last_step(unit)
            epilogue = prog.epilogue(i)
            assert epilogue is not None
            yield from self._epilogue(warpgroup, i, epilogue)
        self._consumers_left -= 1
        self._maybe_finish()

    # The two loops below are the engine's hot path: they keep what they use in locals, and
    # test `event.callbacks is not None` (SimPy's "not yet processed") inline.

    def producer(self) -> Generator[simpy.Event, object, None]:
        env, ring, prog, rec, load = self.env, self.ring, self.program, self.recorder, self.copy_engine.loader()
        expect_tx, targets = self.sync.expect_tx, self._targets
        expects = bool(targets)  # the full barrier counts peers' bytes too
        follower = self.leader is not None
        solo = 1 << self.rank if self.sync.mma_pair else 0  # a pair's own copy: to the leader's barrier
        who = f"{self.scope}.producer"
        stages, fulls, empties, copies_of = ring.stages, ring.full, ring.empty, prog.copies
        on_step, filled, cut = self.on_step, self._filled, 0
        # Where no peer's copy lands (no multicast, no pair), a full barrier's byte count is never
        # negative and the producer's arrival is its phase's first: `_arrives_quietly` is then
        # `full.phase == use`, with no call.
        quiet = not (self.mask or self.sync.mma_pair)
        for i in self._steps():
            use, slot = divmod(i, stages)
            if i == cut and on_step is not None:  # fast-forward's cut, about once a lap: may shorten the program
                cut = on_step(self, i)
            parity = use & 1
            empty = empties[slot]
            ready = empty.wait(parity ^ 1)
            waited = None  # with records: when a wait began, recorded with the first copy's issue
            now = env._now  # (the clock moves only at a yield; `_now`: no property call)
            if ready.callbacks is not None:
                t0 = now
                self._waiting["producer"] = (empty, parity ^ 1, t0, i)
                yield ready
                del self._waiting["producer"]
                now = env._now
                if now > t0:
                    self.wait_empty_ps += now - t0
                    if rec is not None:
                        waited = t0
            full = fulls[slot]
            copies = copies_of(i)
            if follower:  # 2-SM MMA: our half completes on the leader's full barrier
                if waited is not None:
                    rec.spanned(WAIT_EMPTY, waited, now, self.sm, self.index, i, slot)  # type: ignore[union-attr]
                self.issued = i + 1
                for copy in copies:
                    load(copy, targets[slot][copy.multicast or solo], self.index, i, slot)
                continue
            own = copies[0].smem_bytes if len(copies) == 1 else sum(c.smem_bytes for c in copies)
            if expect_tx is not None:
                announced = expect_tx
            elif expects:
                announced = prog.expected(i)  # type: ignore[attr-defined]
            else:
                announced = own
            if rec is not None:
                filled[slot] = own  # the fill record's bytes, when the slot's full barrier flips
                quietly = full.phase == use if quiet else _arrives_quietly(full, use)
                if waited is not None and not (copies and announced > 0 and quietly):
                    rec.spanned(WAIT_EMPTY, waited, now, self.sm, self.index, i, slot)
                    waited = None
            full.arrive_expect_tx(announced, who, use)
            self._issued_at[slot] = now
            self.issued = i + 1
            for copy in copies:
                key = copy.multicast or solo
                load(copy, targets[slot][key] if key else full, self.index, i, slot, waited)
                waited = None

    def consumer(self, warpgroup: int) -> Generator[simpy.Event, object, None]:
        if self.leader is not None:
            yield from self._follower_epilogues(warpgroup)
            return
        env, ring, prog, rec, tc = self.env, self.ring, self.program, self.recorder, self.tensor_core
        pair = self.follower.tensor_core if self.follower is not None else None
        role = f"consumer{warpgroup}"
        who = f"{self.scope}.{role}"
        share = self.sync.consumers if self.sync.mode == COOPERATIVE else 1
        ordered = share == 1 and self.sync.consumers > 1
        waits_full, counts_cycles = self.sync.waits_full, warpgroup == 0 or share == 1
        stages, fulls, empties, released = ring.stages, ring.full, ring.empty, self._released_at
        release, sm, index, names = self._release, self.sm, self.index, self._names
        compute_of, flops_of, tail_of, epilogue_of = prog.compute, prog.flops, prog.tail, prog.epilogue
        hold_of = getattr(prog, "hold", None)
        # Ping-pong: a warpgroup waits for its turn by unit, before it takes the unit's first
        # step, so fast-forward may drop steps of the unit in progress while it waits.
        if ordered and prog.steps and warpgroup <= prog.unit_of(prog.steps - 1):
            yield from self._await_turn(warpgroup)
        for i in self._steps_of(warpgroup):
            use, slot = divmod(i, stages)
            parity = use & 1
            if waits_full:
                full = fulls[slot]
                ready = full.wait(parity)
                if ready.callbacks is not None:
                    t0 = env._now
                    self._waiting[role] = (full, parity, t0, i)
                    yield ready
                    del self._waiting[role]
                    now = env._now
                    if now > t0:
                        self.wait_full_ps += now - t0
                        if rec is not None:
                            rec.spanned(WAIT_FULL, t0, now, sm, index, i, slot)
            else:
                self._reads.append((warpgroup, i, env.now))
            # The step's MMAs occupy the tensor cores (cooperative warpgroups split them; the
            # split loses no picosecond); the slot is released when the last one completes,
            # `tail` later, while the warpgroup goes on to issue the next step. Before an
            # epilogue the warpgroup itself waits for the accumulator (wait_group 0).
            epilogue = epilogue_of(i)
            tail = tail_of(i)
            wait = tail if epilogue is not None else 0
            hold = hold_of(i) if hold_of is not None else 0
            if share == 1:
                work, flops = compute_of(i), flops_of(i)
            else:
                whole, extra = divmod(compute_of(i), share)
                work, flops = whole + (warpgroup < extra), flops_of(i) / share
                whole, extra = divmod(hold, share)
                hold = whole + (warpgroup < extra)
            # A 2-SM MMA needs both SMs' tensor cores at once.
            if pair is None:
                start, done = tc.run(work, flops, wait, hold)
            else:
                start, done = tc.run_with(pair, work, flops, wait, hold)
            yield done
            late = tail - wait
            if release is None:
                empty = empties[slot]
                empty.arrive(who, phase=use, delay=late)
            else:
                self._release_slot(slot, use, who, late)
            now = env._now
            freed = now + late
            if counts_cycles:
                self.slot_cycle_ps += freed - released[slot]
                released[slot] = freed
                self.slot_cycles += 1
            if rec is not None and release is None:  # the compute and use spans, the empty flip if any
                if empty.phase == use:
                    rec.compute(start, now - wait, freed, sm, index, i, slot)
                else:
                    rec.compute_flip(start, now - wait, freed, sm, index, i, slot, use, empty.flipped_at,
                                     names[stages + slot])
            elif rec is not None:
                rec.span(start, env.now - wait, self.sm, self.index, "consumer", "compute", i, slot)
                if self.follower is not None:  # the pair's MMA runs on the follower's tensor cores too
                    rec.span(start, env.now - wait, self.follower.sm, self.follower.index, "consumer", "compute",
                             i, slot)
                rec.span(start, env.now + late, self.sm, self.index, "slot", "use", i, slot)
            if pair is not None and epilogue is not None:
                self._accumulator_ready(prog.unit_of(i))
            last = ordered and (i + 1 == prog.steps or prog.unit_of(i + 1) != prog.unit_of(i))
            if last:
                self._pass_turn()
            if epilogue is not None:
                yield from self._epilogue(warpgroup, i, epilogue)
            if last and prog.unit_of(i) + self.sync.consumers <= prog.unit_of(prog.steps - 1):
                yield from self._await_turn(prog.unit_of(i) + self.sync.consumers)
        self._consumers_left -= 1
        self._maybe_finish()

    def _release_slot(self, slot: int, use: int, who: str, late: int = 0) -> None:
        """Arrive on the empty barrier of every CTA that writes into this slot: at once on our
        own, after the cluster's remote-arrival latency on a peer's. ``late``: the slot's last
        MMA completes that much later (the arrival takes effect then)."""
        self.released[slot] = use + 1
        latency = self._arrive_latency
        for peer in self._release or ():
            barrier = peer.ring.empty[slot]
            if peer is self or not latency:
                barrier.arrive(who, phase=use, delay=late)
            else:
                self.env.timeout(latency).callbacks.append(remote_arrival(barrier, who, use, late))
            if peer is not self and self.recorder is not None:
                self.recorder.event(self.env.now + (latency or 0) + late, peer.sm, peer.index, "remote_arrive",
                                    f"{self.scope}.{who.rsplit('.', 1)[-1]}", -1, slot, use)

    def _pass_turn(self) -> None:
        """Ping-pong order barrier: this mainloop is done, the next unit's may start."""
        self._turn += 1
        changed, self._turn_changed = self._turn_changed, self.env.event()
        changed.succeed()

    def _await_turn(self, unit: int) -> Generator[simpy.Event, object, None]:
        """Ping-pong: wait until the mainloop of the unit at position ``unit`` may run."""
        while self._turn != unit:
            yield self._turn_changed

    def _steps_of(self, warpgroup: int) -> Iterable[int]:
        prog = self.program
        if self.sync.mode == COOPERATIVE or self.sync.consumers == 1:
            return self._steps()
        consumers = self.sync.consumers
        return (i for i in self._steps() if prog.unit_of(i) % consumers == warpgroup)

    def _steps(self) -> Iterable[int]:
        """Every step: a plain range unless fast-forward may drop steps ahead (the range's
        length is fixed at the start; ``live_steps`` reads it anew, at a cost per step)."""
        return live_steps(self.program) if self.steps_may_drop else range(self.program.steps)

    def _epilogue(self, warpgroup: int, step: int, epilogue: Epilogue) -> Generator[simpy.Event, object, None]:
        """Write the tile out: a split tile's fix-up, consumer time, then (by one warpgroup) a
        TMA store of the tile, or of each C sub-tile as it is drained (``Epilogue.store_parts``)."""
        if epilogue.fixup is not None:
            yield from self._fixup(warpgroup, step, epilogue.fixup)
        start, duration, store = self.env.now, epilogue.duration, epilogue.store
        unit = self.program.unit_of(step)
        stores = store is not None and (warpgroup == 0 or self.sync.mode == PINGPONG)
        if stores and epilogue.store_parts:  # each sub-tile goes out as it is drained, from now on
            self._stores_left += len(epilogue.store_parts)
            for n, part in enumerate(epilogue.store_parts):
                drained = epilogue.store_lead + (n + 1) * epilogue.store_interval
                self.env.timeout(drained).callbacks.append(self._store_later(part, unit))
        if duration:
            yield self.env.timeout(duration)
        if self.recorder is not None:
            self.recorder.spanned(EPILOGUE, start, self.env.now, self.sm, self.index, unit, -1)
        if stores and not epilogue.store_parts:
            assert store is not None
            self._stores_left += 1
            self.copy_engine.store(store, self._store_done, self.index, unit)

    def _store_later(self, copy: Copy, tile: int) -> Callable[[simpy.Event], None]:
        """A callback that issues one C sub-tile's store (its free variables are the ones the
        fast-forward's state describes: engine/fast_forward/state.py)."""
        return lambda _: self.copy_engine.store(copy, self._store_done, self.index, tile)

    def _fixup(self, warpgroup: int, step: int, fixup: Fixup) -> Generator[simpy.Event, object, None]:
        """A split tile's reduction, for this warpgroup's share of the accumulator (CUTLASS's
        ``fixup_helper``): wait until the peers before it in K added theirs, read the partial
        and add it, write the sum back and add this peer's k-iterations to the flag."""
        workspace, env, rec = self.workspace, self.env, self.recorder
        assert workspace is not None, "a fix-up needs the chip's workspace (Plan.fixups)"
        unit, key = self.program.unit_of(step), (fixup.tile, warpgroup)
        ready = workspace.reached(key, fixup.wait_for) if fixup.wait_for else None
        if ready is not None:
            t0, role = env.now, f"consumer{warpgroup}"
            self._fixup_waits[role] = (key, fixup.wait_for)
            yield ready
            del self._fixup_waits[role]
            self.fixup_wait_ps += env.now - t0
            if rec is not None:
                rec.span(t0, env.now, self.sm, self.index, "consumer", "wait_fixup", unit, -1)
        for copy, stage, kind in ((fixup.read, WORKSPACE_READ, "workspace_read"),
                                  (fixup.write, WORKSPACE_WRITE, "workspace_write")):
            if copy is None:
                continue
            t0, landed = env.now, env.event()
            self.copy_engine.store(copy, _Succeed(landed), self.index, unit, stage)
            yield landed
            if rec is not None:
                rec.span(t0, env.now, self.sm, self.index, "consumer", kind, unit, -1, copy.memory_bytes)
        if fixup.write is not None:
            workspace.arrive(key, fixup.k_count, fixup.signal)

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

    def _on_full_flip(self, slot: int, barrier: Mbarrier, phase: int) -> None:
        """A slot's data landed: the step it holds is ready (without full-barrier waits: reads
        before this are races; with them, the recorder's own hook records the fill)."""
        step = phase * self.ring.stages + slot
        if self._landed:
            self._landed[step] = self.env.now
        if self.recorder is not None:  # the fill span and the flip in one record
            self.recorder.fill(self._issued_at[slot], self.env.now, self.sm, self.index, step, slot,
                               self._filled[slot], phase, self._names[slot])

    def _on_empty_flip(self, slot: int, barrier: Mbarrier, phase: int) -> None:
        """A slot's release completed (in a cluster: a peer's consumer may complete it)."""
        stages = self.sync.stages
        self.recorder.instant(FLIP_EMPTY, barrier.flipped_at, self.sm, self.index,  # type: ignore[union-attr]
                              self._names[stages + slot], phase * stages + slot, slot, phase)

    def waiting(self) -> list[str]:
        """Who in this CTA is blocked, on what (for deadlock reports); in a cluster, which peers
        it waits for."""
        fixups = [f"{self.scope}.{role} waits for {self.workspace.describe(key, value)}"  # type: ignore[union-attr]
                  for role, (key, value) in self._fixup_waits.items()]
        if self.cluster < 0:
            return [f"{self.scope}.{role} waits on {barrier.describe_wait(parity)}"
                    for role, (barrier, parity, _, _) in self._waiting.items()] + fixups
        writers = self._release or [self]
        return [cluster_wait(self, writers, role, barrier, parity)
                for role, (barrier, parity, _, _) in self._waiting.items()]

    def record_open_waits(self, now: float) -> None:
        """At a deadlock: the waits still open when the run stopped, recorded as wait spans up to
        ``now`` with a ``stuck`` event each (the barrier and the phase parity waited for), and the
        fills whose full barrier never flipped as fill spans up to ``now``, so that figures and
        animations draw who was left waiting on what, and which slots never became ready."""
        rec = self.recorder
        if rec is None:
            return
        for role, (barrier, parity, since, step) in self._waiting.items():
            lane, kind = ("producer", "wait_empty") if role == "producer" else ("consumer", "wait_full")
            slot = step % self.sync.stages
            rec.span(since, now, self.sm, self.index, lane, kind, step, slot)
            rec.event(now, self.sm, self.index, "stuck", barrier.name, step, slot, parity)
        stages = self.sync.stages
        for slot, full in enumerate(self.ring.full if self.leader is None else ()):
            step = full.phase * stages + slot  # issued, its full barrier never flipped: still filling
            if step < self.issued:
                nbytes = sum(c.smem_bytes for c in self.program.copies(step))
                rec.span(self._issued_at[slot], now, self.sm, self.index, "slot", "fill", step, slot, nbytes)

    @property
    def done(self) -> bool:
        return self.finished_at is not None and all(not p.is_alive for p in self.processes)


def live_steps(program: Program) -> Iterator[int]:
    """0, 1, ... while below ``program.steps``, read anew each time: fast-forward may drop
    steps a loop has not reached yet (``range`` would fix the count at the start)."""
    i = 0
    while i < program.steps:
        yield i
        i += 1



class _Succeed:
    """A copy's completion callback that succeeds ``event`` (typed, unlike a default-argument lambda)."""

    __slots__ = ("event",)

    def __init__(self, event: simpy.Event) -> None:
        self.event = event

    def __call__(self, _: object = None) -> None:
        self.event.succeed()
