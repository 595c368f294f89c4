"""Split-K and stream-K: output tiles whose k-loop is shared by several CTAs, reduced through a
global workspace. The rules are those of CUTLASS 3.x's ``PersistentTileSchedulerSm90StreamK``
(``include/cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp`` and its parameters,
``PersistentTileSchedulerSm90StreamKParams`` in ``tile_scheduler_params.h``; on Blackwell
``PersistentTileSchedulerSm100StreamK``, ``sm100_tile_scheduler_stream_k.hpp``, which runs the same
rules), with its default ``ReductionMode::Deterministic``.

**Clusters** (``pipeline.cluster = [CX, CY]``): the scheduler decides each unit and its k-range
per cluster. It rounds the tile grid up to whole clusters (``set_params_basic``,
``select_decomposition_mode``), counts stream-K tiles and units in whole clusters
(``get_num_sk_tiles``: ``sk_tiles / cluster_size * cluster_size``; ``get_num_sk_units``:
``min_sized_sk_units / cluster_size * cluster_size``; ``ctas_per_wave_in_full_clusters``) and
gives the CTAs of a cluster the same k-range of their own tiles
(``get_current_work_iter_start_possible_update_work_tile_k_remaining``: "we divide up the
linearized stream-K units into clusters and share the same K offsets for work within clusters";
``update_output_tile_id_and_work_tile_k``: the tile ID in clusters, times ``cluster_size``, plus
the CTA's offset in its cluster). So every rule below holds with "tile" read as a cluster's
block of CX x CY tiles, "CTA" as a cluster and "unit" as a cluster's unit (``calculate_groups``
takes at most the clusters along the raster's direction, ``problem_blocks_m / cluster_shape.m()``);
each CTA of the cluster then takes tile ``t x CX·CY + rank`` of the block (tmasim.workloads.gemm_layout
.tile_coords), with its own fix-up: the workspace and its flags are per CTA tile
(``get_reduction_workspace_size(sk_tiles, ...)``, ``sk_tiles`` in CTA tiles). The figures this
module reports count CTAs and CTA tiles, as CUTLASS's do. With the 2-SM MMA (Blackwell's CTA
pairs, ``sm100_tile_scheduler_stream_k.hpp``: ``get_tiled_cta_shape_mnl`` with the MMA's
``AtomThrShape``, the workspace per CTA tile ``shape_div(tile_shape, atom_thr_shape)``) a pair
lies in one cluster, so both its CTAs share the k-range the leader's MMA computes; each CTA
reduces its own BM x BN half of the pair's tile.

**Split-K** (``workload.split_k = S``; CUTLASS's ``DecompositionMode::SplitK``, ``splits = S``,
``set_params_basic``): each output tile's K k-tiles (BK wide) are split into S ranges, the first
``K mod S`` one k-tile longer. Work unit ``L`` (``0 <= L < tiles x S``) is split ``L // tiles`` of
tile ``L mod tiles`` (``assign_work``): all tiles' first splits, then all second splits, and so
on. A persistent launch runs ``min(tiles x S, resident CTAs)`` CTAs, CTA g taking units g,
g + W, ... (``advance_to_next_work``); a grid launch runs one CTA per unit, in that order (as
CUTLASS 2.x's serial split-K, ``GemmUniversalMode::kGemm`` with ``split_k_slices``, whose CTAs
reduce through a semaphore in K order; ``kGemmSplitKParallel`` instead writes every split's
partial and reduces them in a second kernel, which is not modelled).

**Stream-K** (``workload.scheduler = "stream-k"``; ``DecompositionMode::StreamK``): the tiles'
k-iterations are spread evenly over the persistent CTAs, with data-parallel tiles for the full
waves (``get_num_sk_tiles``). With W resident CTAs (``ctas_per_wave``) and T tiles: where T is a
whole number of waves, or K <= 8 (``min_iters_per_sk_unit_``), every tile is data-parallel;
otherwise the last full wave and the partial one (all tiles, with fewer than two full waves)
are stream-K tiles and the waves before them data-parallel. The stream-K units number
``min(W, K x sk_tiles // 8)`` (``get_num_sk_units``); they come first in the linear order, the
data-parallel tiles after them (unit ``L >= sk_units`` is tile ``L - sk_units + sk_tiles``),
so CTA g runs stream-K unit g, then data-parallel tiles. The units form G groups
(``calculate_groups``: at most 8 and at most the tiles along the raster's direction, the most
that divides the units and the tiles evenly and leaves each unit at least 8 k-iterations);
group ``L mod G`` shares the group's tiles (``t x G + group``), each unit an even share of
their k-iterations, the first ones one more. A unit's start and end are moved to a tile's
boundary where they would leave fewer than 8 k-iterations of a tile on either side
(``get_current_work_iter_start_possible_update_work_tile_k_remaining``). A unit walks its
tiles backwards (``update_output_tile_id_and_work_tile_k``): its last tile first, from that
tile's first k-iteration, so the tile ends it must wait for come later.

**The reduction** (``fixup_helper``, deterministic): per split tile and consumer warpgroup a
flag counts the k-iterations added so far (tmasim.engine.pipeline.workspace). The peer that
starts the tile writes its fp32 partial (its warpgroup's share of BM x BN x 4 bytes) to the
workspace; a middle peer waits until the flag counts its first k-iteration, reads the partial,
adds its own and writes the sum back; each adds its k-iterations to the flag once written. The
peer that ends the tile waits likewise, reads and adds the partial, and runs the epilogue (the
store of C). Every partial is the whole tile's accumulator, at the problem's edge too. The
partials move through L2 as the copy engine's flows (reads through the SM's port as loads,
writes as stores: CUTLASS's ``BlockStripedReduce`` uses the threads' global loads and stores,
not TMA; tmasim times both by their bytes on the shared links); a read pays an L2 hit's copy
latency; a peer sees a flag change one L2 copy latency after it (the atomic's and the poll's
trip). The workspace holds ``4 x BM x BN`` bytes per split tile (``get_reduction_workspace_size``)
and a 4-byte flag per split tile and warpgroup (``get_barrier_workspace_size``); the partials
stay in L2 where the workspace fits in what L2 holds (tmasim.l2), else they go through HBM.
The adds themselves take no modelled time. A non-final peer's epilogue stages no C through
shared memory; on Blackwell its accumulator still drains from Tensor Memory.

Not modelled: ``DecompositionMode::Heuristic`` (CUTLASS's default, which may run a
``_stream_k`` kernel as data-parallel or split-K), the separate-reduction mode (disabled in
CUTLASS: ``should_perform_separate_reduction`` returns false), ``ReductionMode::Nondeterministic``,
Blackwell's dynamic (CLC) hand-out of the units (they go in the static order above,
``to_linear_idx``), and ping-pong consumers (CUTLASS's ping-pong kernel does not support the
stream-K scheduler: ``static_assert`` in ``sm90_gemm_tma_warpspecialized_pingpong.hpp``). A grid
launch of split-K with clusters is tmasim's: CUTLASS 3.x splits only in its persistent
stream-K scheduler. The split tiles' L2 reuse is the tile's own
(tmasim.workloads.gemm_layout.hbm_fractions), whichever CTA runs which of its k-ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tmasim.engine.program import Copy, Fixup
from tmasim.errors import ScenarioError
from tmasim.machine import l2
from tmasim.machine.hardware import GpuSpec
from tmasim.workloads.gemm_config import GemmConfig

MIN_ITERS = 8  # min_iters_per_sk_unit_
MAX_GROUPS = 8  # max_sk_groups_
ACCUMULATOR_BYTES = 4  # fp32 partials
FLAG_BYTES = 4  # one 32-bit flag per split tile and warpgroup
L2_LINE = 128  # the workspace's sizes are rounded up to it (round_up_to_l2_alignment)


class Work(NamedTuple):
    """One CTA's share of one output tile: ``k_count`` k-tiles from ``k_first``."""

    tile: int  # the tile's position in the raster order (tmasim.workloads.gemm_layout.tile_coords)
    k_first: int
    k_count: int


@dataclass(frozen=True)
class Decomposition:
    """Each CTA's work in order (persistent: the CTA's list; grid: one list per CTA)."""

    mode: str  # "split-K" or "stream-K"
    ctas: list[list[Work]]
    split_tiles: int  # tiles reduced through the workspace
    sk_tiles: int = 0
    sk_units: int = 0
    groups: int = 0
    cluster: int = 1  # CTAs per cluster: the counts above are CTAs and CTA tiles (see for_clusters)


def is_split(config: GemmConfig) -> bool:
    return config.split_k > 1 or config.scheduler == "stream-k"


def check(config: GemmConfig, consumers: int, mode: str) -> None:
    """What split-K and stream-K are not modelled with: a one-line error naming the field."""
    if not is_split(config):
        return
    what = f"workload.split_k = {config.split_k}" if config.split_k > 1 else "workload.scheduler = \"stream-k\""
    if mode == "pingpong" and consumers > 1:
        raise ScenarioError("pipeline.consumer_mode", mode, f"must be \"cooperative\" with {what}: CUTLASS's ping-pong "
                            "kernel does not support the stream-K scheduler (which runs its split-K too)")


def split_k(tiles: int, k_tiles: int, splits: int, ctas: int | None) -> Decomposition:
    """``ctas``: the persistent CTAs (``None``: a grid, one CTA per work unit). With clusters,
    tiles and CTAs are clusters' (:func:`for_clusters`): ``set_params_basic`` counts
    ``divmod_clusters_mnl_`` in clusters, and unit ``L``'s split is ``L / cluster_size`` divided
    by it."""
    per, big = divmod(k_tiles, splits)
    work = []
    for linear in range(tiles * splits):
        split, tile = divmod(linear, tiles)
        work.append(Work(tile, per * split + min(split, big), per + (split < big)))
    return Decomposition("split-K", _deal(work, ctas), tiles)


def stream_k(tiles: int, k_tiles: int, ctas: int, tiles_along_raster: int) -> Decomposition | None:
    """CUTLASS's stream-K over ``ctas`` persistent CTAs; ``None`` where it makes every tile
    data-parallel (no partial wave, or too few k-iterations to split). With clusters, tiles,
    CTAs and ``tiles_along_raster`` are clusters' (:func:`for_clusters`): CUTLASS's counts in
    CTAs are those in clusters times the cluster size (``min_sized_sk_units`` in clusters is
    ``K x sk_cluster_tiles / 8``, rounded down)."""
    full, waves = tiles // ctas, -(-tiles // ctas)
    if full == waves or k_tiles <= MIN_ITERS:
        return None
    sk_tiles = tiles - (full - 1 if full > 1 else 0) * ctas
    sk_units = min(ctas, k_tiles * sk_tiles // MIN_ITERS)
    if sk_units == 0:
        return None
    groups = _groups(min(tiles_along_raster, MAX_GROUPS), sk_tiles, sk_units, k_tiles)
    work: list[list[Work]] = [_unit_work(unit, groups, sk_tiles, sk_units, k_tiles) for unit in range(sk_units)]
    work += [[Work(tile, 0, k_tiles)] for tile in range(sk_tiles, tiles)]
    per_cta = [[w for unit in work[g::ctas] for w in unit] for g in range(min(ctas, len(work)))]
    return Decomposition("stream-K", per_cta, sk_tiles, sk_tiles, sk_units, groups)


def _groups(groups: int, sk_tiles: int, sk_units: int, k_tiles: int) -> int:
    """``calculate_groups``: the most groups, from ``groups`` down, that divide the units and the
    tiles evenly without leaving a unit under 8 k-iterations; else the most that divide the units;
    else 1. In clusters (CUTLASS divides ``sk_cluster_units`` and ``sk_cluster_tiles``; its
    k-iterations per unit, ``(sk_cluster_tiles / g) x cluster_size x K / (sk_units / g)``, are
    the same count wherever g divides the cluster units, the only case the test decides)."""
    def too_small(g: int) -> bool:
        return sk_units // g == 0 or (sk_tiles // g) * k_tiles // (sk_units // g) < MIN_ITERS

    fallback = 0
    while groups > 1 and not (sk_units % groups == 0 and sk_tiles % groups == 0 and not too_small(groups)):
        if fallback == 0 and sk_units % groups == 0 and not too_small(groups):
            fallback = groups
        groups -= 1
    return fallback if groups == 1 and fallback else groups


def _unit_work(unit: int, groups: int, sk_tiles: int, sk_units: int, k_tiles: int) -> list[Work]:
    """Stream-K unit ``unit``'s k-range within its group, moved to tile boundaries that would
    leave fewer than 8 k-iterations, walked from its last tile back."""
    group, index = unit % groups, unit // groups
    tiles_in_group = sk_tiles // groups + (group < sk_tiles % groups)
    iters = tiles_in_group * k_tiles
    units_in_group = sk_units // groups
    per = iters // units_in_group
    big = iters - per * units_in_group
    start, count = per * index + min(index, big), per + (index < big)
    start, count = _align_start(start, count, k_tiles)
    end = start + count
    end = _align(end, k_tiles)
    work, last = [], end - 1
    while last >= start:
        tile = last // k_tiles
        first = max(tile * k_tiles, start)
        work.append(Work(tile * groups + group, first - tile * k_tiles, last + 1 - first))
        last = first - 1
    return work


def _align_start(start: int, count: int, k_tiles: int) -> tuple[int, int]:
    moved = _align(start, k_tiles)
    return moved, count - (moved - start)


def _align(at: int, k_tiles: int) -> int:
    """A unit boundary within 8 k-iterations of a tile's start or end moves onto it."""
    within = at % k_tiles
    if within < MIN_ITERS:
        return at - within
    if within > k_tiles - MIN_ITERS:
        return at + k_tiles - within
    return at


def for_clusters(decomposition: Decomposition, size: int) -> Decomposition:
    """The CTAs' work from their clusters' (the decomposition above, with tiles and CTAs counted in
    clusters): each CTA of a cluster takes the same k-range of its own tile of the cluster's block,
    tile ``t x size + rank`` (``update_output_tile_id_and_work_tile_k``). The counts become CTAs
    and CTA tiles, as CUTLASS's ``sk_tiles_`` and ``sk_units_`` are (multiples of the cluster size)."""
    if size == 1:
        return decomposition
    ctas = [[Work(w.tile * size + rank, w.k_first, w.k_count) for w in works]
            for works in decomposition.ctas for rank in range(size)]
    d = decomposition
    return Decomposition(d.mode, ctas, d.split_tiles * size, d.sk_tiles * size, d.sk_units * size, d.groups, size)


def _deal(work: list[Work], ctas: int | None) -> list[list[Work]]:
    if ctas is None:
        return [[w] for w in work]
    width = min(ctas, len(work))
    return [work[g::width] for g in range(width)]


def workspace_bytes(config: GemmConfig, split_tiles: int, consumers: int) -> int:
    """The reduction workspace and its flags, each rounded up to an L2 line."""
    bm, bn, _ = config.tile
    partials = ACCUMULATOR_BYTES * bm * bn * split_tiles
    flags = FLAG_BYTES * split_tiles * consumers
    return -(-partials // L2_LINE) * L2_LINE + -(-flags // L2_LINE) * L2_LINE


def fixup(config: GemmConfig, gpu: GpuSpec, work: Work, consumers: int, workspace: int) -> Fixup | None:
    """The reduction step of ``work`` for one consumer warpgroup, or None for a whole tile."""
    first, final = work.k_first == 0, work.k_first + work.k_count == config.k_steps
    if first and final:
        return None
    bm, bn, _ = config.tile
    share = ACCUMULATOR_BYTES * bm * bn // consumers
    hbm = 0.0 if workspace <= l2.holds(gpu) else 1.0
    read = None if first else Copy(share, share, hbm, gpu.copy_latency_for(share) + round(hbm * gpu.hbm_latency))
    write = None if final else Copy(share, share, hbm, 0)
    return Fixup(work.tile, work.k_first, work.k_count, read, write, gpu.copy_latency)
