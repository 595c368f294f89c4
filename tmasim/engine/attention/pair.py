"""A CTA of a 2-SM pair running the attention pipeline (FlashAttention-4's ``cta_group::2``).

Two CTAs on two SMs of one cluster (ranks 2i and 2i + 1) cover 2 x BM query rows: each holds
its BM rows of Q, and its rows' S and O in its own Tensor Memory; one MMA instruction of
M = 2 x 128 spans both SMs' tensor cores. Its B operand is split along N: each CTA loads half
of every K block (BN / 2 keys) and half of every V block (d_v / 2 columns), so the pair reads
each K/V block once. As in FA4 (``flash_fwd_sm100.py``, and :mod:`tmasim.engine.pipeline.cta`'s GEMM
pair):

- each CTA's producer waits on its *own* empty barriers and issues its own Q tile and its own
  halves, whose bytes complete on the *leader's* full barriers (the leader announces the
  pair's bytes); the leader's MMA releases a slot in both CTAs, the peer's after the cluster's
  remote-arrival latency;
- only the leader's consumers issue MMAs, which keep both SMs' tensor cores busy (FLOPs
  counted once, on the leader); each S lands in both CTAs' TMEM at once;
- each CTA's softmax (and correction) warpgroups run on their own SM's vector units; the
  leader's next P·V waits for both, the peer's arrival after the remote-arrival latency;
- after a unit's last P·V each CTA's consumers normalize and store their own O tile.

The leader's consumer process stands for the pair's softmax warpgroups too (it starts the
peer's vector work when S is ready); the follower runs its producer and its epilogues.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from tmasim.engine.attention.cta import AttentionCta
from tmasim.engine.attention.program import Mma, VectorWork
from tmasim.engine.pipeline.stages import StageRing
from tmasim.engine.sm.barrier import Mbarrier

Wait = Generator[simpy.Event, object, None]


class RemoteArrival:
    """An arrival on a peer CTA's barrier, made when the cluster's remote-arrival latency has
    passed (a SimPy callback). An object, not a closure, so that fast-forward can say what it
    will do: which barrier, the phase relative to the barrier's own."""

    __slots__ = ("barrier", "who", "phase")

    def __init__(self, barrier: Mbarrier, who: str, phase: int) -> None:
        self.barrier, self.who, self.phase = barrier, who, phase

    def __call__(self, _: object = None) -> None:
        self.barrier.arrive(self.who, phase=self.phase)

    def fast_forward_state(self, describe: Any) -> tuple[Any, ...]:
        return ("remote arrival", describe.name(self.barrier), self.phase - self.barrier.phase)


class Joint:
    """Both CTAs' vector work on a block done: ours, and the peer's arrival (remote) after its
    own. ``done`` succeeds when both are in."""

    __slots__ = ("env", "latency", "left", "done")

    def __init__(self, env: simpy.Environment, latency: int) -> None:
        self.env, self.latency, self.left, self.done = env, latency, 2, env.event()

    def one(self, _: object = None) -> None:
        self.left -= 1
        if not self.left:
            self.done.succeed()

    def remote(self, _: object = None) -> None:
        """The peer's part is done: it arrives after the remote-arrival latency."""
        if not self.latency:
            self.one()
        else:
            self.env.timeout(self.latency).callbacks.append(self.one)

    def fast_forward_state(self, describe: Any) -> tuple[Any, ...]:
        return ("joint", self.left, describe.event(self.done))


class AttentionPairCta(AttentionCta):
    leader: AttentionPairCta | None = None  # set on the follower
    follower: AttentionPairCta | None = None  # set on the leader
    cluster, rank, arrive_latency = -1, 0, 0

    def join_cluster(self, cluster: int, rank: int, peers: list[AttentionPairCta], arrive_latency: int) -> None:
        """Wire the pair: rank 2i leads rank 2i + 1; the leader's full barriers take both halves."""
        self.cluster, self.rank, self.arrive_latency = cluster, rank, arrive_latency
        self.peers = list(peers)  # the pair moves together (fast-forward's jumps)
        if self.recorder is not None:
            self.recorder.event(self.env.now, self.sm, self.index, "cluster", f"cluster {cluster}", -1, rank)
        if rank % 2:
            self.leader = peers[rank - 1]
            self._landed_at = self.leader._landed_at  # our halves land on its full barriers (records' slot use)
            return
        self.follower = peers[rank + 1]
        for barrier in (*self.k.full, *self.v.full, self.q_full):
            barrier.signed_tx = True  # the peer's half may land before our expect_tx
        units = len(self.program.units)
        self._accumulated = [[self.env.event() for _ in range(self.schedule.consumers)] for _ in range(units)]

    # ---- the producer: own empty barriers, the leader's full ones ------------------------------

    def _load_q(self, u: int, role: str) -> Wait:
        q = self.program.units[u].q
        yield from self._wait(self.q_empty, (u & 1) ^ 1, role, False)
        if self.leader is not None:
            self.copy_engine.load(q, self.leader.q_full, self.index, u, 2 * self.sync.stages)
            return
        assert self.follower is not None
        pair_bytes = q.smem_bytes + self.follower.program.units[u].q.smem_bytes
        self.q_full.arrive_expect_tx(pair_bytes, f"{self.scope}.{role}", u)
        self.copy_engine.load(q, self.q_full, self.index, u, 2 * self.sync.stages)

    def _load_one(self, ring: StageRing, offset: int, step: int, role: str) -> Wait:
        """One of our halves of block ``step`` (K or V), after our own slot is free, onto the
        leader's full barrier (the leader announces both halves' bytes)."""
        use, slot = divmod(step, self.sync.stages)
        is_k = ring is self.k
        yield from self._before_load(is_k, step, role)
        copy = self.program.block(step).k if is_k else self.program.block(step).v
        owner = self.leader or self
        target = owner.k if is_k else owner.v
        yield from self._wait(ring.empty[slot], (use & 1) ^ 1, role, False, step)
        if self.follower is not None:
            peer = self.follower.program.block(step)
            pair_bytes = copy.smem_bytes + (peer.k if is_k else peer.v).smem_bytes
            target.full[slot].arrive_expect_tx(pair_bytes, f"{self.scope}.{role}", use)
        self._issued_at[offset + slot] = self.env.now
        self.copy_engine.load(copy, target.full[slot], self.index, step, offset + slot)
        if is_k:
            self.issued = step + 1

    # ---- the leader's consumers: one MMA on both SMs, both SMs' softmax ------------------------

    def _release(self, ring: StageRing, step: int, w: int) -> None:
        super()._release(ring, step, w)
        assert self.follower is not None
        use, slot = divmod(step, self.sync.stages)
        peer_ring = self.follower.k if ring is self.k else self.follower.v
        self._remote(RemoteArrival(peer_ring.empty[slot], f"{self.scope}.consumer{w}", use))

    def _release_q(self, u: int) -> None:
        super()._release_q(u)
        if self.schedule.o_over != "q":
            assert self.follower is not None
            follower = self.follower
            self._remote(RemoteArrival(follower.q_empty, f"{self.scope}.consumer", u))

    def _remote(self, arrive: RemoteArrival) -> None:
        """An arrival on a barrier of the peer CTA: after the cluster's remote-arrival latency."""
        if not self.arrive_latency:
            arrive()
        else:
            self.env.timeout(self.arrive_latency).callbacks.append(arrive)

    def _mma(self, mma: Mma, w: int, step: int, kind: str) -> simpy.Event:
        assert self.follower is not None
        start, done = self.tensor_core.run_with(self.follower.tensor_core, mma.occupancy, mma.flops, mma.tail)
        if self.recorder is not None:
            for cta in (self, self.follower):
                self.recorder.span(start, start + mma.occupancy, cta.sm, cta.index, "tensor", kind, step, w)
            self.recorder.span(start, start + mma.occupancy + mma.tail, self.sm, self.index, f"consumer{w}", kind,
                               step, -1)
        return done

    def _vector_apart(self, work: VectorWork, w: int, step: int, kind: str = "correction") -> simpy.Event | None:
        """Both CTAs' softmax (or rescale) of their own rows, each on its own SM's units; done when
        ours is and the peer's arrival (remote) is in."""
        assert self.follower is not None
        ours = super()._vector_apart(work, w, step, kind)
        theirs = AttentionCta._vector_apart(self.follower, work, w, step, kind)
        if ours is None or theirs is None:
            return ours
        both = Joint(self.env, self.arrive_latency)
        ours.callbacks.append(both.one)
        theirs.callbacks.append(both.remote)
        return both.done

    def _epilogue(self, w: int, u: int) -> Wait:
        if self.follower is not None:
            self._accumulated[u][w].succeed()  # the unit's last P·V is done: the peer's O too
        yield from super()._epilogue(w, u)

    # ---- the follower's consumers: its epilogues only ------------------------------------------

    def consumer(self, w: int) -> Wait:
        if self.leader is None:
            yield from super().consumer(w)
            return
        self.standing[w + self.schedule.producer] = -1  # (it touches no K/V block: it bounds no skip)
        for u in range(len(self.program.units)):
            done = self.leader._accumulated[u][w]
            if done.callbacks is not None:
                self._waiting[f"consumer{w}"] = (self.leader.q_full, u & 1)
                yield done
                del self._waiting[f"consumer{w}"]
            yield from AttentionCta._epilogue(self, w, u)
        self._consumers_left -= 1
        self._maybe_finish()
