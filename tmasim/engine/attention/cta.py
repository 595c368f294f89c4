"""A CTA running the FlashAttention-3 forward pipeline (Shah et al., 2024) on Hopper.

Producer (a warpgroup of its own), per unit: wait Q's empty barrier, load Q (one TMA copy);
then per K/V block j: wait k.empty[s], load K_j; wait v.empty[s], load V_j (s = j mod S). K
and V have rings of their own, each slot with a full and an empty barrier.

Consumer process, per block (``overlap`` off)::

    wait k.full; [turn]  S = Q·K_jᵀ  [pass turn]; wait S; release K_j
    softmax(S) and the rescale of O on the vector units
    wait v.full; O += P·V_j; wait it; release V_j

with ``overlap`` on (FA3's intra-warpgroup pipelining, its Algorithm 2): S_0 and its softmax
first, then for j >= 1::

    wait k.full[j], v.full[j-1]; [turn]  issue S_j, then O += P_{j-1}·V_{j-1}  [pass turn]
    wait S_j; release K_j; softmax(S_j) (while P·V runs); wait P·V; release V_{j-1};
    convert P_j (Hopper: into the registers P·V_{j-1} read); rescale O

and the last block's P·V after the loop. ``[turn]``: with ping-pong the two warpgroups issue
their GEMMs in turn (a named-barrier token, as FA3's ``warp_scheduler_barrier``), so one's
softmax runs under the other's GEMMs. The SM's tensor cores are one FIFO server shared by the
CTA's consumers; its vector units (FP32 and multi-function units) are shared by processor
sharing (:mod:`tmasim.engine.sm.vector_units`): warpgroups with vector work at once split the rate.

Cooperative warpgroups without that ordering issue every phase together and share each unit,
so they move in lockstep and finish each phase together; they are simulated as one consumer
process doing both warpgroups' rows (its costs are the pair's), which is exact for that
processor-sharing model. After a unit's last S GEMM its consumers release Q, normalize and
stage O, and the last of them issues the TMA store of the O tile. Where O is staged
(``schedule.o_over``):

- over V's ring (FA3, ``hopper/flash_fwd_kernel_sm90.h``): the consumers first wait for each
  other ("make sure all WGs have finished reading V", a named barrier in FA3's epilogue), and
  the producer's first V load of the next unit waits until O's store has read the buffer
  (``barrier_O``; K and Q of the next unit load meanwhile);
- over Q's buffer (FA4's ``overlap_sO_sQ``): Q is released only once O's store has read it, so
  the next unit's Q load waits for the store;
- a buffer of its own: nothing waits for the store but the CTA's exit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from typing import Any

import simpy

from tmasim.engine.attention.program import AttentionProgram, KvBlock, Mma, VectorWork
from tmasim.engine.event_loop import timeout
from tmasim.engine.pipeline.cta import Race, Sync
from tmasim.engine.pipeline.stages import StageRing
from tmasim.engine.recorder import Recorder
from tmasim.engine.sm.barrier import Mbarrier
from tmasim.engine.sm.copy_engine import CopyEngine
from tmasim.engine.sm.tensor_core import TensorCore, VectorUnits

Wait = Generator[simpy.Event, object, None]


class _VectorSpan:
    """Records a vector job's span when it ends (the units are shared: the end is known when it
    comes). An object, not a closure, so that fast-forward's state can say what it holds."""

    __slots__ = ("cta", "start", "w", "step", "kind")

    def __init__(self, cta: AttentionCta, start: float, w: int, step: int, kind: str) -> None:
        self.cta, self.start, self.w, self.step, self.kind = cta, start, w, step, kind

    def __call__(self, _: object = None) -> None:
        cta = self.cta
        assert cta.recorder is not None
        end = cta.env.now
        cta.recorder.span(self.start, end, cta.sm, cta.index, "softmax", self.kind, self.step, self.w)
        if self.kind != "correction" or not cta.schedule.correction_apart:
            cta.recorder.span(self.start, end, cta.sm, cta.index, f"consumer{self.w}", self.kind, self.step, -1)

    def fast_forward_state(self, describe: Any) -> tuple[Any, ...]:
        return ("vector span", self.start - describe.now, self.w, describe.tile(self.cta.index, self.step, 0),
                self.kind)


class AttentionCta:
    leader: AttentionCta | None = None  # (2-SM pairs only: :mod:`tmasim.engine.attention.pair`)
    follower: AttentionCta | None = None

    def __init__(self, env: simpy.Environment, sm: int, index: int, program: AttentionProgram, sync: Sync,
                 copy_engine: CopyEngine, tensor_core: TensorCore, vector_units: VectorUnits,
                 recorder: Recorder | None) -> None:
        self.env, self.sm, self.index = env, sm, index
        self.scope = f"sm{sm}.cta{index}"
        self.program, self.sync, self.recorder = program, sync, recorder
        self.schedule = program.schedule
        self.copy_engine, self.tensor_core, self.vector_units = copy_engine, tensor_core, vector_units
        self.multiplicity = 1
        consumers, wake, stages = self.schedule.consumers, sync.wake, sync.stages
        watch = recorder is not None
        self.k = StageRing(env, f"{self.scope}.k", stages, full_arrivals=1, empty_arrivals=consumers, wake=wake,
                           on_full_flip=self._on_full(0) if watch else None,
                           on_empty_flip=self._on_empty(0) if watch else None)
        self.v = StageRing(env, f"{self.scope}.v", stages, full_arrivals=1, empty_arrivals=consumers, wake=wake,
                           on_full_flip=self._on_full(stages) if watch else None,
                           on_empty_flip=self._on_empty(stages) if watch else None)
        self._landed_at = [0.0] * (2 * stages)
        self.q_full = Mbarrier(env, f"{self.scope}.q.full", 1, wake)
        self.q_empty = Mbarrier(env, f"{self.scope}.q.empty", consumers, wake)
        over_v = self.schedule.o_over == "v"
        # O over V: O's store has read the buffer (one arrival a unit, FA3's barrier_O); the
        # consumers' named barrier before staging O over V (one phase a unit); each unit's first
        # step (after the first unit, units without keys aside), whose V copy waits for the last O store
        self.o_read = Mbarrier(env, f"{self.scope}.o.read", 1, wake) if over_v else None
        self.v_read = Mbarrier(env, f"{self.scope}.epilogue.v_read", consumers, wake) if over_v else None
        self._over_v = over_v
        # Who arrives, as the barriers name it, per role and per consumer (made once, not per arrival)
        self._roles = [f"consumer{w}" for w in range(consumers)]
        self._whos = {role: f"{self.scope}.{role}" for role in ("producer", *self._roles)}
        self._computing = 0  # without a producer: the unit consumer 0 computes
        self.wait_full_ps: float = 0
        self.wait_empty_ps: float = 0
        self.slot_cycle_ps: float = 0
        self.slot_cycles = 0
        self.finished_at: float | None = None
        self.finished = env.event()
        self._waiting: dict[str, tuple[Mbarrier, int]] = {}
        self._issued_at = [0.0] * (2 * stages)
        self._consumers_left = consumers
        self._stores_left = 0
        self._staged = [0] * len(program.units)  # consumers done with each unit's epilogue
        self._turn = 0
        self._turn_changed = env.event()
        self._rescaled: list[simpy.Event | None] = [None] * consumers  # correction warpgroup's last rescale
        self._next_load = 0  # without a producer: the next block whose copies are to be issued
        # Fast-forward (engine/fast_forward/jump.py): the step whose K copy is issued next, the
        # cut it is told of (once a lap), and whether it may shorten the program (the loops
        # read each unit's length from the program as they go, so they always may).
        self.issued = 0
        self.on_step: Callable[[AttentionCta, int], None] | None = None
        self.steps_may_drop = False
        self.peers: list[AttentionCta] = [self]
        # The lowest step each process (producer first, then each consumer) will still touch: where
        # fast-forward's identical steps must begin (engine/fast_forward/attention.py).
        self.standing = [0] * ((1 if self.schedule.producer else 0) + consumers)
        self.processes = [env.process(self.producer())] if self.schedule.producer else []
        self.processes += [env.process(self.consumer(w)) for w in range(consumers)]

    # ---- waiting ------------------------------------------------------------------------------

    def _wait(self, barrier: Mbarrier, parity: int, role: str, full: bool | None, step: int = -1) -> Wait:
        """Wait for the phase of ``parity``: a consumer's wait for data (``full``), the producer's
        for a slot, or (``full`` None) a consumer's wait in its epilogue, counted as neither (the
        consumer lane shows it as the gap before the epilogue). Reported if it never ends."""
        ready = barrier.wait(parity)
        if ready.callbacks is None:
            return
        t0 = self.env.now
        self._waiting[role] = (barrier, parity)
        yield ready
        del self._waiting[role]
        if full is None:
            return
        waited = self.env.now - t0
        if full:
            self.wait_full_ps += waited
        else:
            self.wait_empty_ps += waited
        if self.recorder is not None and waited:
            lane = role if full else "producer"
            self.recorder.span(t0, self.env.now, self.sm, self.index, lane, "wait_full" if full else "wait_empty",
                               step, -1)

    # ---- the producer -------------------------------------------------------------------------

    def producer(self) -> Wait:
        """Per unit: Q (with ``k_before_q``, FA3's order: the unit's first K, then Q), then K_j and
        V_j; with ``overlap``, in the order the consumers use them (S_j before P·V_{j-1}): K_0, then
        K_j and V_{j-1}, then the last V (FA3's load with IntraWGOverlap)."""
        prog = self.program
        k_first = self.schedule.k_before_q
        # Each unit's last step is read from the program at every block: fast-forward may drop
        # blocks from the unit in progress (engine/fast_forward/jump.py).
        standing = self.standing
        for u in range(len(prog.units)):
            first = prog.first_step(u)
            standing[0] = first
            early = k_first and prog.blocks_in(u) > 0
            if early:
                yield from self._load_one(self.k, 0, step=first, role="producer")
            yield from self._load_q(u, "producer")
            if not self.schedule.overlap:
                step = first
                while step <= prog.last_step(u):
                    standing[0] = step
                    if step != first or not early:
                        yield from self._load_one(self.k, 0, step=step, role="producer")
                    yield from self._load_one(self.v, self.sync.stages, step=step, role="producer")
                    step += 1
            elif prog.blocks_in(u):
                if not early:
                    yield from self._load_one(self.k, 0, step=first, role="producer")
                step = first + 1
                while step <= prog.last_step(u):
                    standing[0] = step - 1  # (V_{j-1} is loaded after K_j)
                    yield from self._load_one(self.k, 0, step=step, role="producer")
                    yield from self._load_one(self.v, self.sync.stages, step=step - 1, role="producer")
                    step += 1
                standing[0] = prog.last_step(u)
                yield from self._load_one(self.v, self.sync.stages, step=prog.last_step(u), role="producer")

    def _load_q(self, u: int, role: str) -> Wait:
        q = self.program.units[u].q
        yield from self._wait(self.q_empty, (u & 1) ^ 1, role, False)
        self.q_full.arrive_expect_tx(q.smem_bytes, f"{self.scope}.{role}", u)
        self.copy_engine.load(q, self.q_full, self.index, u, 2 * self.sync.stages)  # Q's buffer: slot 2S

    def _load_block(self, step: int, role: str) -> Wait:
        yield from self._load_one(self.k, 0, step, role)
        yield from self._load_one(self.v, self.sync.stages, step, role)

    def _before_load(self, is_k: bool, step: int, role: str) -> Wait:
        """What comes before a K or V copy of block ``step``: for K in slot 0, fast-forward's cut
        (once a lap; it may shorten the program, so the block is read after it); with O over V, a
        unit's first V (after the first unit's) waits for the last O store."""
        if is_k:
            self._k_cut(step)
        elif self._over_v:
            starts = self.program.unit_starting(step)
            if starts:
                yield from self._wait_o_read(starts, role)

    def _k_cut(self, step: int) -> None:
        """Fast-forward's cut at a K copy in slot 0, once a lap (it may shorten the program: the
        block is read after it)."""
        if not step % self.sync.stages and self.on_step is not None:
            self.on_step(self, step)

    def _load_one(self, ring: StageRing, offset: int, step: int, role: str) -> Wait:
        use, slot = divmod(step, self.sync.stages)
        if ring is self.k:  # (_before_load's K part, without a generator)
            self._k_cut(step)
        elif self._over_v:
            yield from self._before_load(False, step, role)
        block = self.program.block(step)
        copy = block.k if ring is self.k else block.v
        if ring.empty[slot].wait((use & 1) ^ 1).callbacks is not None:  # (free already: no generator)
            yield from self._wait(ring.empty[slot], (use & 1) ^ 1, role, False, step)
        ring.full[slot].arrive_expect_tx(copy.smem_bytes, self._whos[role], use)
        self._issued_at[offset + slot] = self.env.now
        self.copy_engine.load(copy, ring.full[slot], self.index, step, offset + slot)
        if ring is self.k:
            self.issued = step + 1

    def _wait_o_read(self, u: int, role: str) -> Wait:
        """O over V: unit ``u``'s V may land only once unit ``u - 1``'s O store has read the buffer."""
        assert self.o_read is not None
        yield from self._wait(self.o_read, (u & 1) ^ 1, role, False)

    def _prefetch(self, w: int, upto: int) -> Wait:
        """Without a producer warpgroup, consumer 0 issues the copies up to block ``upto`` (the
        ring's depth ahead of what it computes), paying the issue time on its own timeline; with O
        over V not past its unit (the next unit's V waits for this unit's O store)."""
        if w or self.schedule.producer:
            return
        last = min(upto, self.program.steps - 1)
        while self._next_load <= last:
            step = self._next_load
            if self._over_v and (self.program.unit_starting(step) or 0) > self._computing:
                return
            self._next_load += 1
            yield from self._load_block(step, f"consumer{w}")
            if self.schedule.issue:
                yield self.env.timeout(2 * self.schedule.issue)

    # ---- the consumers ------------------------------------------------------------------------

    def consumer(self, w: int) -> Wait:
        prog, role = self.program, f"consumer{w}"
        stages, at = self.sync.stages, w + self.schedule.producer
        for u in range(len(prog.units)):
            first = prog.first_step(u)
            self.standing[at] = first
            if not self.schedule.producer and w == 0:
                self._computing = u
                yield from self._load_q(u, role)
            yield from self._prefetch(w, first + stages - 1)
            yield from self._wait(self.q_full, u & 1, role, True)
            if not prog.blocks_in(u):  # a causal query block that sees no key: O is zero
                self._release_q(u)
            elif self.schedule.overlap:
                yield from self._overlapped(w, u, first)
            else:
                yield from self._serial(w, u, first)
            yield from self._epilogue(w, u)
        self._consumers_left -= 1
        self._maybe_finish()

    def _serial(self, w: int, u: int, first: int) -> Wait:
        prog, step, at = self.program, first, w + self.schedule.producer
        while step <= prog.last_step(u):  # (the unit's length as it now stands: fast-forward may shorten it)
            self.standing[at] = step
            yield from self._prefetch(w, step + self.sync.stages - 1)
            block = self.program.block(step)
            yield from self._full(self.k, step, w)
            if self._turn != w:
                yield from self._my_turn(w)
            s_done = self._mma(block.qk, w, step, "qk")
            self._pass_turn(w)
            yield s_done
            self._release(self.k, step, w)
            if step == prog.last_step(u):
                self._release_q(u)
            if self.schedule.correction_apart:  # the correction warpgroup rescales O meanwhile:
                # it needs only the new row max (taken as known when the softmax starts) and the
                # previous P·V (done), so its multiplies share the FP32 pipe with the softmax's.
                rescaled = self._vector_apart(block.correction, w, step)
                yield from self._vector(block.softmax, w, step, "softmax")
            else:
                yield from self._vector(block.softmax + block.correction, w, step, "softmax")
                rescaled = None
            yield from self._full(self.v, step, w)
            if rescaled is not None and rescaled.callbacks is not None:
                yield rescaled  # O must be rescaled before P·V adds into it
            yield self._mma(block.pv, w, step, "pv")
            self._release(self.v, step, w)
            step += 1

    def _overlapped(self, w: int, u: int, first: int) -> Wait:
        prog, at = self.program, w + self.schedule.producer
        block = prog.block(first)
        yield from self._full(self.k, first, w)
        if self._turn != w:
            yield from self._my_turn(w)
        s_done = self._mma(block.qk, w, first, "qk")
        self._pass_turn(w)
        yield s_done
        self._release(self.k, first, w)
        if prog.blocks_in(u) == 1:
            self._release_q(u)
        yield from self._vector(block.softmax, w, first, "softmax")  # no P·V in flight yet: P converted in it
        step = first + 1
        while step <= prog.last_step(u):  # (the unit's length as it now stands: fast-forward may shorten it)
            self.standing[at] = step - 1  # (P·V_{j-1} with S_j)
            block, previous = prog.block(step), prog.block(step - 1)
            yield from self._full(self.k, step, w)
            yield from self._full(self.v, step - 1, w)
            rescaled = self._rescaled[w]
            if rescaled is not None and rescaled.callbacks is not None:
                yield rescaled  # the correction warpgroup has not finished rescaling O yet
            if self._turn != w:
                yield from self._my_turn(w)
            if self.schedule.pv_first:  # S_j would overwrite P_{j-1} in TMEM: FA4 issues P·V first
                pv_done = self._mma(previous.pv, w, step - 1, "pv")
                s_done = self._mma(block.qk, w, step, "qk")
            else:
                s_done = self._mma(block.qk, w, step, "qk")
                pv_done = self._mma(previous.pv, w, step - 1, "pv")
            self._pass_turn(w)
            yield s_done
            self._release(self.k, step, w)
            if step == prog.last_step(u):
                self._release_q(u)
            yield from self._vector(block.softmax if block.early is None else block.early, w, step, "softmax")
            yield pv_done
            self._release(self.v, step - 1, w)
            yield from self._prefetch(w, step + self.sync.stages - 1)
            # P_j over P_{j-1}'s registers (Hopper): converted after P·V_{j-1}, then O rescaled
            if self.schedule.correction_apart:
                yield from self._vector(block.convert, w, step, "softmax")
                self._rescaled[w] = self._vector_apart(block.correction, w, step)
            else:
                yield from self._vector(block.convert + block.correction, w, step, "correction")
            step += 1
        last = self.standing[at] = prog.last_step(u)
        yield from self._full(self.v, last, w)
        rescaled, self._rescaled[w] = self._rescaled[w], None
        if rescaled is not None and rescaled.callbacks is not None:
            yield rescaled
        yield self._mma(prog.block(last).pv, w, last, "pv")
        self._release(self.v, last, w)

    def _full(self, ring: StageRing, step: int, w: int) -> Wait | tuple[()]:
        """Consumer ``w``'s wait for block ``step`` in ``ring``: nothing to wait for (landed
        already: an empty tuple, no generator made) or the wait."""
        use, slot = divmod(step, self.sync.stages)
        if ring.full[slot].wait(use & 1).callbacks is None:
            return ()
        return self._wait(ring.full[slot], use & 1, self._roles[w], True, step)

    def _release(self, ring: StageRing, step: int, w: int) -> None:
        use, slot = divmod(step, self.sync.stages)
        ring.empty[slot].arrive(self._whos[self._roles[w]], phase=use)
        if ring is self.v and w == 0:
            self.slot_cycles += 1

    def _release_q(self, u: int) -> None:
        if self.schedule.o_over != "q":
            self.q_empty.arrive(f"{self.scope}.consumer", phase=u)

    def _mma(self, mma: Mma, w: int, step: int, kind: str) -> simpy.Event:
        start, done = self.tensor_core.run(mma.occupancy, mma.flops, mma.tail)
        if self.recorder is not None:
            self.recorder.span(start, start + mma.occupancy, self.sm, self.index, "tensor", kind, step, w)
            self.recorder.span(start, start + mma.occupancy + mma.tail, self.sm, self.index, f"consumer{w}", kind,
                               step, -1)
        return done

    def _vector(self, work: VectorWork, w: int, step: int, kind: str) -> Wait:
        if work.lead:  # the row max and its all-reduce: the exponentials wait for it
            yield timeout(self.env, work.lead)
        done = self._vector_apart(work, w, step, kind)
        if done is not None:
            yield done

    def _vector_apart(self, work: VectorWork, w: int, step: int, kind: str = "correction") -> simpy.Event | None:
        """Queue ``work`` on the SM's vector units; its end event (the correction warpgroup's
        rescale of O is not waited for by the softmax warpgroup)."""
        parts = work.pipes
        if not any(parts):
            return None
        done = self.vector_units.run(parts)
        if self.recorder is not None:  # the units are shared: the end is known when it comes
            done.callbacks.append(_VectorSpan(self, self.env.now, w, step, kind))
        return done

    # ---- ping-pong ----------------------------------------------------------------------------

    def _my_turn(self, w: int) -> Wait:
        if not self.schedule.pingpong:
            return
        while self._turn != w:
            yield self._turn_changed

    def _pass_turn(self, w: int) -> None:
        if not self.schedule.pingpong:
            return
        self._turn = (w + 1) % self.schedule.consumers
        changed, self._turn_changed = self._turn_changed, self.env.event()
        changed.succeed()

    # ---- epilogue and exit --------------------------------------------------------------------

    def _epilogue(self, w: int, u: int) -> Wait:
        epilogue = self.program.units[u].epilogue
        if self.v_read is not None:  # O over V: every consumer done reading V, the last store done reading O
            yield from self._all_done_with_v(w, u)
        start = self.env.now
        if epilogue.duration:
            yield timeout(self.env, epilogue.duration)
        if self.recorder is not None:
            self.recorder.span(start, self.env.now, self.sm, self.index, f"consumer{w}", "epilogue", u, -1)
        self._staged[u] += 1
        if self._staged[u] == self.schedule.consumers and epilogue.store is not None:
            self._stores_left += 1
            self.copy_engine.store(epilogue.store, functools.partial(self._store_done, u), self.index, u)
        elif self._staged[u] == self.schedule.consumers:
            self._o_read(u, "epilogue")

    def _store_done(self, u: int, _: object = None) -> None:
        self._stores_left -= 1
        self._o_read(u, "store")
        self._maybe_finish()

    def _o_read(self, u: int, who: str) -> None:
        """Unit ``u``'s O has left its staging buffer: release what it was staged over."""
        if self.schedule.o_over == "q":
            self.q_empty.arrive(f"{self.scope}.{who}", count=self.schedule.consumers, phase=u)
        elif self.o_read is not None:
            self.o_read.arrive(f"{self.scope}.{who}", phase=u)

    def _all_done_with_v(self, w: int, u: int) -> Wait:
        """FA3's epilogue named barrier before O is written over V (all consumers' last P·V has
        read V), and, for a unit that loaded no V (a causal block that sees no key), the previous
        unit's O store done reading the buffer."""
        assert self.v_read is not None and self.o_read is not None
        self.v_read.arrive(f"{self.scope}.consumer{w}", phase=u)
        yield from self._wait(self.v_read, u & 1, f"consumer{w}", None)
        if u and not self.program.blocks_in(u):
            yield from self._wait(self.o_read, (u & 1) ^ 1, f"consumer{w}", None)

    def _maybe_finish(self) -> None:
        if self._consumers_left == 0 and self._stores_left == 0 and self.finished_at is None:
            self.finished_at = self.env.now
            self.finished.succeed(self)

    def _on_full(self, offset: int) -> Callable[[int, Mbarrier, int], None]:
        def hook(slot: int, barrier: Mbarrier, phase: int) -> None:
            assert self.recorder is not None
            step = phase * self.sync.stages + slot
            block: KvBlock = self.program.block(step)
            copy = block.k if offset == 0 else block.v
            self.recorder.span(self._issued_at[offset + slot], self.env.now, self.sm, self.index, "slot", "fill",
                               step, offset + slot, copy.smem_bytes)
            self.recorder.event(self.env.now, self.sm, self.index, "flip_full", barrier.name, step, offset + slot,
                                phase)
            self._landed_at[offset + slot] = self.env.now
        return hook

    def _on_empty(self, offset: int) -> Callable[[int, Mbarrier, int], None]:
        def hook(slot: int, barrier: Mbarrier, phase: int) -> None:
            """Every consumer released the slot: its data was in use from landing until now."""
            assert self.recorder is not None
            step = phase * self.sync.stages + slot
            self.recorder.span(self._landed_at[offset + slot], self.env.now, self.sm, self.index, "slot", "use", step,
                               offset + slot)
            self.recorder.event(self.env.now, self.sm, self.index, "flip_empty", barrier.name, step, offset + slot,
                                phase)
        return hook

    # ---- what the run's summary and error reports ask of every CTA ----------------------------

    def races(self) -> list[Race]:
        return []  # consumers always wait on their full barriers (the workload refuses otherwise)

    def waiting(self) -> list[str]:
        return [f"{self.scope}.{role} waits on {barrier.describe_wait(parity)}"
                for role, (barrier, parity) in self._waiting.items()]

    @property
    def done(self) -> bool:
        return self.finished_at is not None and all(not p.is_alive for p in self.processes)
