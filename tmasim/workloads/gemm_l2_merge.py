"""A GEMM's L2 reads after same-address loads merge in their GPC (tmasim.l2_merge).

In a raster, CTAs close in launch order load the same boxes: those of one output tile column the
same B box, those of one row the same A box, at the same k-step (a wave's CTAs run in step). The
CTAs of a wave are dealt round-robin over the GPCs (clusters whole). Per wave, GPC and box: a
cluster's CTAs that load it without multicast merge first (``cluster_l2_coalescing``, window
``cluster_l2_merge_bytes``), then the clusters' loads merge with each other (window
``l2_merge_bytes``); a multicast slice is one load of its cluster. The windows are compared with
the GPC's bytes in flight: its CTAs' stage rings.

The result is a per-wave factor on each operand's L2 bytes (reads over the CTAs' loads), the same
for every tile of the wave, as the HBM reuse fractions are (tmasim.workloads.gemm_layout): the L2
link is shared by the whole chip, so only the wave's total matters to it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from tmasim.machine.cluster import ClusterPlacement
from tmasim.machine.hardware import GpuSpec
from tmasim.machine.l2_merge import deal, merged_reads, miss_fraction
from tmasim.workloads.gemm_layout import ClusterSetup

Loads = dict[tuple[int, Hashable], int]  # (cluster, box) -> CTAs of the cluster that load it, in launch order


def merge_factors(gpu: GpuSpec, setup: ClusterSetup, placement: ClusterPlacement, coords: Sequence[tuple[int, int]],
                  concurrent: int, ring_bytes: int,
                  tiles: tuple[int, int] | None = None) -> list[tuple[float, float]]:
    """Per output tile (launch order), the share of its A and B loads' bytes that L2 serves.
    ``tiles``: the problem's tile rows and columns; a rounded-up cluster grid's tiles past them
    load zero-filled boxes (no bytes), which neither reach L2 nor merge."""
    if gpu.l2_merge_bytes <= 0 and not gpu.cluster_l2_coalescing:
        return [(1.0, 1.0)] * len(coords)
    size = placement.size
    result: list[tuple[float, float]] = []
    for start in range(0, len(coords), concurrent):
        wave = coords[start : start + concurrent]
        gpcs = deal(placement.per_gpc, -(-len(wave) // size))
        ctas = [0] * len(placement.per_gpc)
        for gpc in gpcs:
            ctas[gpc] += size
        across = [miss_fraction(gpu.l2_merge_bytes, n * ring_bytes) for n in ctas]
        inside = [_inside_miss(gpu, n * ring_bytes) for n in ctas]
        a_loads, b_loads = _loads(setup, wave, tiles)
        result += [(_share(a_loads, gpcs, inside, across), _share(b_loads, gpcs, inside, across))] * len(wave)
    return result


def _inside_miss(gpu: GpuSpec, bytes_in_flight: int) -> float:
    """Share of a cluster peer's load of the same box that reaches L2 anyway."""
    if not gpu.cluster_l2_coalescing:
        return 1.0
    if gpu.cluster_l2_merge_bytes <= 0:
        return 0.0  # no window stated: every peer's load merges
    return miss_fraction(gpu.cluster_l2_merge_bytes, bytes_in_flight)


def _share(loads: Loads, gpcs: Sequence[int], inside: Sequence[float], across: Sequence[float]) -> float:
    """L2 reads over the CTAs' loads, for one operand of one wave."""
    groups = [(gpcs[cluster], box, 1.0 + (n - 1) * inside[gpcs[cluster]]) for (cluster, box), n in loads.items()]
    return merged_reads(groups, across) / sum(loads.values()) if loads else 1.0


def _loads(setup: ClusterSetup, wave: Sequence[tuple[int, int]],
           tiles: tuple[int, int] | None = None) -> tuple[Loads, Loads]:
    """Per (cluster, box or multicast slice) the CTAs that load it, for A and for B; a box past
    the problem's edge (``tiles``: its tile rows and columns) reads nothing and is left out."""
    size, cx = setup.shape[0] * setup.shape[1], setup.shape[0]
    rows, cols = tiles if tiles is not None else (math.inf, math.inf)
    a_loads: Loads = {}
    b_loads: Loads = {}
    for index, (row, col) in enumerate(wave):
        cluster, rank = divmod(index, size)
        if row < rows:
            a_key = (cluster, (row, rank // cx if setup.share[0] > 1 else 0))
            a_loads[a_key] = a_loads.get(a_key, 0) + 1
        if col < cols:
            b_key = (cluster, (col, setup.b_slice(rank) if setup.share[1] > 1 else 0))
            b_loads[b_key] = b_loads.get(b_key, 0) + 1
    return a_loads, b_loads
