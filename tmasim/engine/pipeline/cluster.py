"""A CTA's place in a thread-block cluster: where its copies land, whose consumers release its
slots, and what it waits for on its peers.

A copy multicast to a mask of ranks lands in the same slot of each receiver and completes on
the full barrier of the CTA whose MMA reads it there: the receiver itself, or with the 2-SM MMA
the pair's leader (the even rank). A consumer that releases a slot arrives on the empty barrier
of every CTA that writes into it, after the cluster's remote-arrival latency on a peer's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import simpy

from tmasim.engine.pipeline.stages import StageRing
from tmasim.engine.program import Copy, Program, TimedProgram
from tmasim.engine.sm.barrier import Mbarrier
from tmasim.engine.sm.copy_engine import CopyEngine, Multicast


class _Stages(Protocol):
    @property
    def stages(self) -> int: ...


class Peer(Protocol):
    """What this module reads of a CTA of the cluster (a :class:`~tmasim.engine.pipeline.cta.Cta`),
    so that the CTA imports this module and not the other way round."""

    @property
    def sm(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def cluster(self) -> int: ...
    @property
    def scope(self) -> str: ...
    @property
    def sync(self) -> _Stages: ...
    @property
    def copy_engine(self) -> CopyEngine: ...
    @property
    def ring(self) -> StageRing: ...
    @property
    def released(self) -> list[int]: ...
    @property
    def issued(self) -> int: ...


def all_copies(program: Program) -> Iterable[Copy]:
    units = getattr(program, "units", None)
    if units is not None:  # a UnitProgram: its segments, not every step
        return {c for unit in units for seg in unit.segments for c in seg.copies}
    if isinstance(program, TimedProgram) and program.shared_copies is not None:  # equal tiles: one copy
        return program.shared_copies
    return (c for i in range(program.steps) for c in program.copies(i))


def multicast_mask(program: Program) -> int:
    """The cluster ranks this CTA's copies land in (0: no multicast)."""
    mask = 0
    for copy in all_copies(program):
        mask |= copy.multicast
    return mask


def ranks(mask: int) -> list[int]:
    return [r for r in range(mask.bit_length()) if mask >> r & 1]


def self_owner(rank: int) -> int:
    return rank


def pair_owner(rank: int) -> int:
    """With the 2-SM MMA, the pair's leader (the even rank) issues the MMA and owns the barriers."""
    return rank - rank % 2


def multicast_target(peers: Sequence[Peer], mask: int, slot: int, owner: Callable[[int], int]) -> Multicast:
    """A copy landing in the SMEM of the ranks in ``mask``, completing on the full barrier of
    the CTA whose MMA reads each of them."""
    receivers = [peers[r] for r in ranks(mask)]
    ports = tuple(p.copy_engine.routes.port for p in receivers if p.copy_engine.routes is not None)
    barriers = tuple(peers[owner(r)].ring.full[slot] for r in ranks(mask))
    return Multicast(barriers, ports, tuple((p.sm, p.index) for p in receivers))


def remote_arrival(barrier: Mbarrier, who: str, use: int, late: int = 0) -> Callable[[simpy.Event], None]:
    """A remote arrival, delivered when the cluster's arrival latency has passed (taking effect
    ``late`` after that, when the MMAs it commits complete)."""
    return lambda _: barrier.arrive(who, phase=use, delay=late)


def cluster_wait(cta: Peer, writers: Sequence[Peer], role: str, barrier: Mbarrier, parity: int) -> str:
    """What a CTA of a cluster waits on, and for which of ``writers`` (the CTAs that write into
    its slots) when they are late: a deadlock report's line."""
    slot = int(barrier.name.rsplit("[", 1)[1].rstrip("]"))
    kind = barrier.name.rsplit(".", 1)[1].split("[")[0]
    use = barrier.phase
    if kind == "empty":  # phase `use` completes when every writer's consumers released use `use`
        late = [p for p in writers if p.released[slot] <= use]
        whose = "the consumers' release by"
    else:
        step = use * cta.sync.stages + slot
        late = [p for p in writers if p.issued <= step]
        whose = "the multicast slice of"
    names = ", ".join(f"CTA {p.rank}" + (f" ({p.scope})" if p is not cta else "") for p in late)
    cause = f" for {whose} {names}" if late else ""
    return (f"CTA {cta.rank} of cluster {cta.cluster} ({cta.scope}).{role} waits on {kind}[{slot}] of CTA "
            f"{cta.rank}{cause}: {barrier.describe_wait(parity)}")
