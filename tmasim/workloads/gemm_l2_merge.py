"""A GEMM's L2 reads after neighbouring CTAs' same-address loads merge in their GPC (tmasim.l2_merge).

In a raster, CTAs close in launch order load the same boxes: those of one output tile column the
same B box, those of one row the same A box, at the same k-step (a wave's CTAs run in step). The
CTAs of a wave are dealt round-robin over the GPCs (clusters whole); per wave, GPC and box, L2
serves the first load and ``p`` of every other (``p`` from the GPC's bytes in flight: its
CTAs' stage rings). Inside a cluster, loads of one box are already one read (multicast, or
``cluster_l2_coalescing``); across clusters they merge here.

The result is a per-wave factor on each operand's L2 bytes (reads over loads), the same for
every tile of the wave, as the HBM reuse fractions are (tmasim.workloads.gemm_layout): the L2
link is shared by the whole chip, so only the wave's total matters to it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from tmasim.cluster import ClusterPlacement
from tmasim.hardware import GpuSpec
from tmasim.l2_merge import deal, l2_reads, miss_fraction
from tmasim.workloads.gemm_layout import ClusterSetup


def merge_factors(gpu: GpuSpec, setup: ClusterSetup, placement: ClusterPlacement, coords: Sequence[tuple[int, int]],
                  concurrent: int, ring_bytes: int) -> list[tuple[float, float]]:
    """Per output tile (launch order), the share of its A and B loads' L2 bytes that L2 serves."""
    if gpu.l2_merge_bytes <= 0:
        return [(1.0, 1.0)] * len(coords)
    size = placement.size
    result: list[tuple[float, float]] = []
    for start in range(0, len(coords), concurrent):
        wave = coords[start : start + concurrent]
        gpcs = deal(placement.per_gpc, -(-len(wave) // size))
        ctas = [0] * len(placement.per_gpc)
        for gpc in gpcs:
            ctas[gpc] += size
        miss = [miss_fraction(gpu.l2_merge_bytes, n * ring_bytes) for n in ctas]
        a_loads, b_loads = _loads(gpu, setup, wave, gpcs)
        a_reads, a_count = l2_reads(a_loads, miss)
        b_reads, b_count = l2_reads(b_loads, miss)
        result += [(a_reads / a_count, b_reads / b_count)] * len(wave)
    return result


def _loads(gpu: GpuSpec, setup: ClusterSetup, wave: Sequence[tuple[int, int]],
           gpcs: Sequence[int]) -> tuple[list[tuple[int, Hashable]], list[tuple[int, Hashable]]]:
    """(GPC, box) of each load of the wave that reaches the GPC's merge: one per cluster and box
    (slice) where the cluster reads it once, else one per CTA."""
    size, cx = setup.shape[0] * setup.shape[1], setup.shape[0]
    once = gpu.cluster_l2_coalescing
    a_loads: dict[Hashable, int] = {}
    b_loads: dict[Hashable, int] = {}
    for index, (row, col) in enumerate(wave):
        cluster, rank = divmod(index, size)
        a_key = (row, rank // cx if setup.share[0] > 1 else 0)
        b_key = (col, setup.b_slice(rank) if setup.share[1] > 1 else 0)
        a_who = cluster if once or setup.share[0] > 1 else index
        b_who = cluster if once or setup.share[1] > 1 else index
        a_loads[(a_who, a_key)] = gpcs[cluster]
        b_loads[(b_who, b_key)] = gpcs[cluster]
    return ([(gpc, key[1]) for key, gpc in a_loads.items()], [(gpc, key[1]) for key, gpc in b_loads.items()])
