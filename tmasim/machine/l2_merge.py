"""Same-address loads of neighbouring CTAs merged before L2 (B200's GPC request coalescer).

What the hardware does, read from the B200 ``tma2dmcast`` table (SemiAnalysis microbench-blackwell,
Nsight Compute counters; ``validation/public/b200/tma_mcast.csv``): when G CTAs with no cluster,
adjacent in launch order, load the same tiles, DRAM is read once (``dram_bytes_read`` stays that
of one CTA: the others are L2 hits), and the L2 serves the SMs' reads (``lts_sectors_tex_read``)
about G times for G <= 8 (1.96, 3.83, 7.3) but far fewer for G = 16 and 32 (7.7 and 9.8 at small
tiles). So the saving is not an in-flight merge in L2's request queue (L2 still counts a lookup
per request) but a merge upstream of it, in the GPC: the unit that merges a cluster's implicit
same-address loads (``cluster_l2_coalescing``) also merges those of CTAs of different clusters
that run on the same GPC, while the first request is still pending there.

Placement (an assumption the table supports): the block scheduler deals CTAs in launch order
round-robin over the GPCs that have room, so up to one CTA per GPC in every run of
``len(gpc_sms)`` neighbours (8 on B200: groups of <= 8 see no merge, 16 two a GPC, 32 four).
B200's two dies (GPCs 0-3 and 4-7, each with its own L2 half) are not told apart: the model has
one L2 link for both halves and does not carry the die-to-die traffic (the table's non-SM L2
reads, half the data for one CTA, all of it once a group spans both dies).

Window: the merge needs the first request still tracked when the next arrives. The table's merge
fails more as the bytes in flight per SM grow (4 boxes a CTA, 1-56 KiB each); the model is a
GPC that tracks ``l2_merge_bytes`` of pending reads: with B bytes in flight on the GPC, a
follower misses the merge with probability ``p = max(0, 1 - l2_merge_bytes / B)``, so n CTAs of
one GPC loading one box cost L2 ``1 + (n - 1) p`` reads of it (one, when few bytes are in flight).

Inside a cluster the same rule holds with its own window, ``cluster_l2_merge_bytes``: a cluster's
CTAs run in step (its barriers), so a follower's load comes sooner after the first and is merged
over more bytes in flight (the table's clusters of 2 and 4 merge every load up to 16 KiB boxes,
and miss 0.2-0.4 a follower at 48-56 KiB, where neighbours miss 0.7).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def deal(gpc_slots: Sequence[int], count: int) -> list[int]:
    """The GPC of each of ``count`` CTAs (or clusters) in launch order: round-robin over the GPCs
    that still have a free slot (``gpc_slots``: how many each GPC holds at once)."""
    if count > sum(gpc_slots):
        raise ValueError(f"{count} CTAs do not fit the GPCs' {sum(gpc_slots)} slots")
    room = list(gpc_slots)
    out: list[int] = []
    gpc = 0
    for _ in range(count):
        while room[gpc] == 0:
            gpc = (gpc + 1) % len(room)
        out.append(gpc)
        room[gpc] -= 1
        gpc = (gpc + 1) % len(room)
    return out


def miss_fraction(merge_bytes: int, bytes_in_flight: float) -> float:
    """Share of a follower's same-address loads that reach L2 anyway (the first one's request is
    no longer tracked): 0 while the GPC's bytes in flight fit ``merge_bytes``; 1 with no merging."""
    if merge_bytes <= 0:
        return 1.0
    if bytes_in_flight <= merge_bytes:
        return 0.0
    return 1.0 - merge_bytes / bytes_in_flight


def l2_reads(loads: Sequence[tuple[int, Hashable]], miss: Sequence[float]) -> tuple[float, int]:
    """(L2 reads, loads) for concurrent loads given as (GPC, box): per GPC and box, the first
    load reads L2 and each other one ``miss[gpc]`` of a read."""
    return merged_reads([(gpc, box, 1.0) for gpc, box in loads], miss), len(loads)


def merged_reads(groups: Sequence[tuple[int, Hashable, float]], miss: Sequence[float]) -> float:
    """L2 reads of concurrent groups of loads, in launch order, given as (GPC, box, reads the
    group makes on its own): per GPC and box the first group's reads count whole, every later
    group's ``miss[gpc]`` of theirs (a cluster's own merge comes first, then its neighbours')."""
    seen: set[tuple[int, Hashable]] = set()
    total = 0.0
    for gpc, box, reads in groups:
        total += reads if (gpc, box) not in seen else miss[gpc] * reads
        seen.add((gpc, box))
    return total
