"""The ``gemm`` workload: C[M, N] = A[M, K] · B[K, N] with TMA-fed tensor-core k-loops.

Each output tile (BM x BN) is a work unit. Its k-loop has ceil(K / BK) steps; each step copies
an A box (BM x BK) and a B box (BN x BK, B stored K-major as in CUTLASS's TN layout) into one
ring slot, then the consumers run 2·BM·BN·BK FLOPs on the tensor cores (a full MMA, even over
a zero-filled edge box): BK / K MMA instructions of the shape the tile maps to (see
:func:`mma_step`), which hold the tensor cores count x II and release the slot when the last
completes (latency - II later). After the last step the epilogue stages the tile through shared
memory and TMA-stores it. Where operands lie and the L2 reuse model: :mod:`tmasim.workloads.gemm_layout`.

Clusters (``pipeline.cluster = [CX, CY]``): the raster walks CX x CY blocks of output tiles,
one per cluster (a grouped band still spans ``group`` tile rows); the CTA of rank x + y·CX
computes tile (x, y) of its block. With multicast (``workload.multicast``) the CY CTAs of a
cluster row each load 1/CY of the shared A box and deliver it to all of them (B likewise over
the CX CTAs of a column); a slice is read from L2 once, and carries the panel's HBM misses for
all its receivers, so multicast cuts L2 bytes and leaves HBM bytes as they were. With
``pipeline.mma_cta_group = 2`` CTAs 2i and 2i + 1 along M are a pair: each loads its A box and
half of B (shared with the same half of the cluster's other pairs along M when B is
multicast), and the leader's MMA computes both tiles (timed by the 2-SM rows of the preset's
MMA table, tmasim.mma).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tmasim.engine.chip import Plan, launch_cost
from tmasim.engine.program import Copy, Epilogue, Segment, Unit, UnitProgram
from tmasim.errors import ResidencyError, ScenarioError
from tmasim.machine import l2
from tmasim.machine.cluster import ClusterPlacement, place
from tmasim.machine.descriptor import TensorDescriptor
from tmasim.machine.hardware import GpuSpec
from tmasim.machine.operands import k_step_smem_bytes, k_step_smem_hold, staging_ps
from tmasim.machine.residency import Residency, residency
from tmasim.workloads import gemm_split
from tmasim.workloads.gemm_bounds import breakdown, slot_chain_ns
from tmasim.workloads.gemm_config import FIELDS, KIND, PROBLEM_FIELDS, GemmConfig, parse
from tmasim.workloads.gemm_l2_merge import merge_factors
from tmasim.workloads.gemm_layout import (
    ClusterSetup,
    GemmLayout,
    cluster_grid,
    default_epilogue_smem,
    hbm_fractions,
    in_bounds,
    k_step_smem_traffic,
    launched_ctas,
    tile_coord,
    tile_coords,
)
from tmasim.workloads.gemm_mma import MmaStep, accumulator, mma_step
from tmasim.workloads.gemm_stages import AutoStages, auto_stages, blackwell_epilogue_tile
from tmasim.workloads.gemm_summary import explain, summary_rows

if TYPE_CHECKING:
    from tmasim.settings.parts import ScenarioParts

__all__ = ["FIELDS", "KIND", "PROBLEM_FIELDS", "GemmConfig", "auto_stages", "check", "describe", "explain", "parse",
           "lower_bound_ns", "plan", "quick_lower_bound_ns", "same_run", "stats", "summary_rows", "work_units"]


def check(config: GemmConfig, scenario: ScenarioParts) -> None:
    """A count ``"auto"`` chose must still be the rule's (a scenario changed after it was read,
    by ``dataclasses.replace``, is refused rather than run with a stale count); the other rules
    between this workload and the rest of the scenario are checked by ``plan``."""
    p = scenario.pipeline
    if p.stages_auto:
        chosen = auto_stages(config, scenario.gpu, p)
        if chosen.stages != p.stages:
            raise ScenarioError("pipeline.stages", p.stages, f"is marked as chosen by \"auto\" (stages_auto), but "
                                f"the {chosen.rule} gives {chosen.stages} for this scenario: read it again "
                                "(tmasim.load_scenario), or set stages_auto = False")


@dataclass(frozen=True)
class _Placed:
    """What a plan settles before its work units: the MMA, residency, clusters and tile order."""

    setup: ClusterSetup
    layout: GemmLayout
    step: MmaStep
    res: Residency
    placement: ClusterPlacement
    config: GemmConfig
    launched: int    # CTAs the rounded-up cluster grid launches
    slots: int       # clusters resident at once
    concurrent: int  # CTAs resident at once
    b_stage: int     # a CTA's B bytes a stage (half of B in a pair)
    mma_pace: float  # how much longer each MMA takes than alone (gpu.tensor_sustained; 1 within it)

    @property
    def coords(self) -> tuple[tuple[int, int], ...]:
        """Each launched CTA's (tile row, tile column), in launch order (a plan's walk of them all)."""
        return tile_coords(self.config, self.setup.shape)

    def coord(self, index: int) -> tuple[int, int]:
        """CTA ``index``'s tile alone (the quick bounds look at a few CTAs of a large launch)."""
        return tile_coord(self.config, self.setup.shape, index)


def _place(config: GemmConfig, scenario: ScenarioParts) -> _Placed:
    """Every rule a plan checks (dtype, MMA shape, accumulator, residency, cluster placement)."""
    gpu, p = scenario.gpu, scenario.pipeline
    stages, consumers, mode, registers = p.stages, p.consumers, p.consumer_mode, p.registers
    if config.dtype not in gpu.tensor_flops:
        raise ScenarioError("workload.dtype", config.dtype, f"has no tensor-core rate on {gpu.name} "
                            f"(gpu.tensor_flops gives {', '.join(gpu.tensor_flops) or 'none'})")
    cluster, mma_cta_group = p.cluster, p.mma_cta_group
    gemm_split.check(config, consumers, mode)
    setup = ClusterSetup.of(config, cluster, mma_cta_group)
    layout = GemmLayout.of(config)
    step = mma_step(config, gpu, consumers, mode, setup.pair)
    acc = accumulator(config, gpu, consumers, mode, registers)
    chosen = auto_stages(config, gpu, p) if p.stages_auto else None
    epilogue_smem = _epilogue_smem(config, chosen)
    b_stage = layout.b.stage_bytes // 2 if setup.pair else layout.b.stage_bytes  # a pair's CTA holds half of B
    try:
        res = residency(gpu, stage_bytes=layout.a.stage_bytes + b_stage, stages=stages,
                        other_smem=epilogue_smem, consumers=consumers, requested_ctas_per_sm=config.ctas_per_sm,
                        accumulator=acc)
    except ResidencyError as err:
        if chosen is None:
            raise
        raise ResidencyError(err.field, err.value, f"{err.rule} (pipeline.stages = \"auto\" chose {chosen.stages} by "
                             f"the {chosen.rule}, which budgets {chosen.budget}; tmasim's residency check refuses "
                             "it: give a whole number)") from None
    placement = place(gpu, cluster, res.ctas_per_sm, res.limited_by)
    launched = launched_ctas(config, cluster)
    slots = min(launched // placement.size, placement.clusters)
    concurrent = slots * placement.size
    pace = gpu.mma_pace(config.dtype, _whole_chip(gpu, placement, concurrent, res))
    if pace > 1:  # the tensor cores' sustained rate under whole-chip load (gpu.tensor_sustained)
        step = mma_step(config, gpu, consumers, mode, setup.pair, pace)
    return _Placed(setup, layout, step, res, placement, config, launched, slots, concurrent, b_stage, pace)


def _whole_chip(gpu: GpuSpec, placement: ClusterPlacement, concurrent: int, res: Residency) -> bool:
    """Whether the launch's resident CTAs keep every SM its clusters can use busy."""
    return -(-concurrent // res.ctas_per_sm) >= gpu.sms - placement.idle_sms


def plan(config: GemmConfig, scenario: ScenarioParts) -> tuple[Plan, Residency]:
    gpu, stages = scenario.gpu, scenario.pipeline.stages
    placed = _place(config, scenario)
    setup, layout, step, res, placement = placed.setup, placed.layout, placed.step, placed.res, placed.placement
    size, coords, slots, concurrent, b_stage = (placement.size, placed.coords, placed.slots, placed.concurrent,
                                                placed.b_stage)
    # what L2 holds (tmasim.l2): a panel read again misses as a data set of its reuse distance would
    fractions = hbm_fractions(config, coords, concurrent, l2.holds(gpu), lambda d: l2.miss_fraction(gpu, int(d)),
                              in_flight=(stages * layout.a.stage_bytes, stages * layout.b.stage_bytes))
    far = _far_latency(gpu, layout)
    merged = merge_factors(gpu, setup, placement, coords, concurrent, stages * (layout.a.stage_bytes + b_stage),
                           (config.tiles_m, config.tiles_n))
    if gemm_split.is_split(config):
        split = _split_plan(config, scenario, placed, (fractions, merged), far)
        if split is not None:
            return split, res
    cache: dict[tuple[object, ...], Unit] = {}
    units = []
    for index, ((row, col), (fa, fb), (ma, mb)) in enumerate(zip(coords, fractions, merged, strict=True)):
        rank = index % size
        # its CTA's last tile (whose epilogue nothing overlaps), where the epilogue model tells it apart
        last = _drains_tmem(gpu) and (config.launch != "persistent" or index + concurrent >= len(coords))
        key = (_edge(row, config.tiles_m), _edge(col, config.tiles_n), fa, fb, rank, ma, mb,
               _partner_rows(config, setup, row, rank), last)
        if key not in cache:
            cache[key] = _unit(config, layout, gpu, step, row, col, (fa, fb), setup, rank, (ma, mb), far, last)
        units.append(Unit(index, cache[key].segments, cache[key].epilogue))
    if config.launch == "persistent":
        programs = [UnitProgram(units[g::concurrent]) for g in range(concurrent)]
    else:
        programs = [UnitProgram([unit]) for unit in units]
    sms = min(gpu.sms - placement.idle_sms, len(programs))
    info = _placement_info(config, placed, slots, gpu)
    return Plan(programs, config.launch == "persistent", res.ctas_per_sm, sms, flow=True, units=len(units),
                cluster=size, cluster_slots=slots, info=info), res


def _split_plan(config: GemmConfig, scenario: ScenarioParts, placed: _Placed,
                shares: tuple[list[tuple[float, float]], list[tuple[float, float]]], far: int) -> Plan | None:
    """Split-K or stream-K (tmasim.workloads.gemm_split): each CTA's share of its tiles' k-loops,
    the split tiles' fix-ups after them. The units and k-ranges are decided per cluster (its
    block of tiles, its resident slots) and each CTA of a cluster takes its own tile of the
    block, as CUTLASS's stream-K scheduler does. None where stream-K leaves every tile
    data-parallel (the plain plan is then the same)."""
    gpu, consumers, persistent = scenario.gpu, scenario.pipeline.consumers, config.launch == "persistent"
    setup, placement, coords, step, res = placed.setup, placed.placement, placed.coords, placed.step, placed.res
    size = placement.size
    found = _decomposition(config, placed)
    if found is None:
        return None
    split = gemm_split.for_clusters(found, size)
    workspace = gemm_split.workspace_bytes(config, split.split_tiles, consumers)
    fractions, merged = shares
    cache: dict[tuple[object, ...], Unit] = {}
    programs, index, fixups = [], 0, False
    for g, works in enumerate(split.ctas):  # CTA g is rank g mod size of its cluster
        rank, units = g % size, []
        for position, work in enumerate(works):
            (row, col), last = coords[work.tile], _drains_tmem(gpu) and position == len(works) - 1
            final = work.k_first + work.k_count == config.k_steps
            key = (_edge(row, config.tiles_m), _edge(col, config.tiles_n), fractions[work.tile], merged[work.tile],
                   work.k_first, work.k_count, final, last, rank, _partner_rows(config, setup, row, rank))
            if key not in cache:
                cache[key] = _unit(config, placed.layout, gpu, step, row, col, fractions[work.tile], setup, rank,
                                   merged[work.tile], far, last, (work.k_first, work.k_count))
            base = cache[key]
            fix = gemm_split.fixup(config, gpu, work, consumers, workspace)
            fixups = fixups or fix is not None
            assert base.epilogue is not None
            epilogue = base.epilogue if fix is None else base.epilogue._replace(fixup=fix)
            units.append(Unit(index, base.segments, epilogue))
            index += 1
        programs.append(UnitProgram(units))
    # persistent: every launched cluster is resident; a grid: the resident slots take the clusters in turn
    slots = len(programs) // size if persistent else min(placement.clusters, len(programs) // size)
    info = {**_placement_info(config, placed, slots, gpu), "decomposition": split.mode,
            "split_tiles": split.split_tiles, "workspace_bytes": workspace, "work_units": index}
    if persistent:  # the most tiles (or parts of tiles) one CTA walks
        info["waves"] = max(len(works) for works in split.ctas)
    if split.mode == "stream-K":
        info.update(stream_k_tiles=split.sk_tiles, stream_k_units=split.sk_units, stream_k_groups=split.groups,
                    data_parallel_tiles=len(coords) - split.sk_tiles)
    return Plan(programs, persistent, res.ctas_per_sm, min(gpu.sms - placement.idle_sms, len(programs)), flow=True,
                units=index, cluster=size, cluster_slots=slots if size > 1 else 0, info=info, fixups=fixups)


def _decomposition(config: GemmConfig, placed: _Placed) -> gemm_split.Decomposition | None:
    """The split (tmasim.workloads.gemm_split), in clusters: each cluster's works, its rank 0's
    tiles. None where stream-K leaves every tile data-parallel."""
    placement, persistent = placed.placement, config.launch == "persistent"
    clusters = placed.launched // placement.size
    if config.split_k > 1:
        return gemm_split.split_k(clusters, config.k_steps, config.split_k, placement.clusters if persistent else None)
    gm, gn = cluster_grid(config, placed.setup.shape)  # calculate_groups: clusters along the raster
    return gemm_split.stream_k(clusters, config.k_steps, placement.clusters, gn if config.raster == "row" else gm)


def _epilogue_smem(config: GemmConfig, chosen: AutoStages | None) -> int:
    """The epilogue's shared memory: the workload's, else what ``"auto"``'s rule assumed, else
    two BM x 32 sub-tiles of C (tmasim.workloads.gemm_layout.default_epilogue_smem)."""
    if config.epilogue_smem is not None:
        return config.epilogue_smem
    return chosen.epilogue_smem if chosen is not None else default_epilogue_smem(config)


def _far_latency(gpu: GpuSpec, layout: GemmLayout) -> int:
    """The extra latency of the operands' L2 hits: where A and B fit in L2 only with its far part
    (tmasim.l2), their hits come from it (the k-loops sweep them in order, so none stays near);
    past it, a wave's own re-reads hit near."""
    operands = layout.a.tensor_bytes + layout.b.tensor_bytes
    return l2.far_latency(gpu, operands) if operands <= l2.holds(gpu) else 0


def _placement_info(config: GemmConfig, placed: _Placed, slots: int, gpu: GpuSpec) -> dict[str, object]:
    """The clusters' placement, the 2-SM MMA, and the CTA tiles a rounded-up cluster grid adds."""
    setup, placement, launched = placed.setup, placed.placement, placed.launched
    info = _cluster_info(setup, placement, slots, gpu) if placement.size > 1 else {}
    if setup.pair:
        info["mma_cta_group"] = 2
    if placed.mma_pace > 1:  # scalars only: summaries become table rows
        info["mma_pace"] = placed.mma_pace
    if launched > config.units:  # the cluster grid rounded up (tmasim.workloads.gemm_layout.cluster_grid)
        info.update(tiles_past_edge=launched - config.units, tile_grid=f"{config.tiles_m}x{config.tiles_n}",
                    launched_tile_grid="x".join(str(g * c) for g, c in zip(cluster_grid(config, setup.shape),
                                                                            setup.shape, strict=True)))
    return info


def _cluster_info(setup: ClusterSetup, placement: ClusterPlacement, slots: int, gpu: GpuSpec) -> dict[str, object]:
    return {
        "cluster": f"{setup.shape[0]}x{setup.shape[1]}",  # scalars only: summaries become table rows
        "multicast": setup.multicast,
        "clusters_resident": placement.clusters,
        "clusters_per_gpc": "+".join(map(str, placement.per_gpc)),
        "idle_sms": placement.idle_sms,
        "cluster_portable": placement.portable,
        "cluster_slots_used": slots,
        "remote_arrive_ns": gpu.cluster_arrive_latency / 1000,
    }


def plan_size(config: GemmConfig, scenario: ScenarioParts) -> tuple[int, int, int]:
    """(ring steps, work units, other bytes) of the plan, before it is built (tmasim.budget):
    the CTAs' tiles, the cluster grid rounded up (tmasim.workloads.gemm_layout.cluster_grid)."""
    cx, cy = scenario.pipeline.cluster
    gm, gn = cluster_grid(config, (cx, cy))
    units = gm * cx * gn * cy
    return units * config.k_steps, units, 0


def work_units(config: GemmConfig, plan: Plan) -> int:
    """The problem's output tiles: a rounded-up cluster grid's CTAs past its edge do no useful work."""
    return config.units


def describe(config: GemmConfig) -> str:
    bm, bn, bk = config.tile
    return f"{config.m}x{config.n}x{config.k} {config.dtype} GEMM, tile {bm}x{bn}x{bk}"


def lower_bound_ns(config: GemmConfig, scenario: ScenarioParts) -> float:
    """The run's ``bound_ns`` (:func:`breakdown`), from the plan without running it, or the
    busiest slot's chain of CTAs if that is higher (:func:`slot_chain_ns`); then the launch's own
    cost, which the makespan adds (tmasim.engine.chip.launch_cost)."""
    planned, _ = plan(config, scenario)
    bound = breakdown(config, scenario.gpu, planned, scenario.pipeline.stages, scenario.pipeline.consumers)["bound_ns"]
    assert isinstance(bound, (int, float))
    return max(float(bound), slot_chain_ns(planned, scenario.gpu)) + launch_cost(scenario.gpu, planned) / 1000


def same_run(config: GemmConfig, scenario: ScenarioParts) -> str | None:
    """Stream-K that splits no tile (whole waves of tiles, or too few k-tiles to split) runs the
    data-parallel plan itself: the reason, else None (tmasim.workloads.base)."""
    if config.scheduler != "stream-k" or config.split_k > 1:
        return None
    if _decomposition(config, _place(config, scenario)) is not None:
        return None
    return ("workload.scheduler: \"stream-k\" splits no tile here (the tiles make whole waves of the resident "
            "CTAs, or K has too few k-tiles): the same run as \"data-parallel\"")


def quick_lower_bound_ns(config: GemmConfig, scenario: ScenarioParts) -> float:
    """A lower bound never above :func:`lower_bound_ns`, at a fraction of its cost: the bounds of
    the first CTA's own work alone (its tensor-core, shared-memory, SM-port, TMA-request and slot
    times; the busiest SM carries at least as much), its copies with no HBM miss and no far L2
    hit (each only adds latency and bytes). Every rule the plan checks is checked (one-line errors).
    A split run's CTAs take parts of tiles: its busiest cluster's rank 0 (persistent), or the
    busiest SM's count of the cheapest work unit (grid), without the fix-ups (which only add)."""
    gpu, placed = scenario.gpu, _place(config, scenario)
    return _quick_work_bound(config, scenario, placed) + gpu.launch_overhead / 1000  # the launch's cost, at least


def _quick_work_bound(config: GemmConfig, scenario: ScenarioParts, placed: _Placed) -> float:
    """The quick bound of the CTAs' work (the makespan adds the launch's cost)."""
    gpu = scenario.gpu
    if gemm_split.is_split(config):
        found = _decomposition(config, placed)
        if found is not None:
            return _quick_split_bound(config, scenario, placed, found)
    if config.launch != "persistent":
        return _quick_grid_bound(config, scenario, placed)
    cache: dict[tuple[object, ...], Unit] = {}
    units = []
    for index in range(0, placed.launched, placed.concurrent):  # the first CTA's tiles
        last = _drains_tmem(gpu) and index + placed.concurrent >= placed.launched
        units.append(_rank0_unit(cache, config, gpu, placed, index, last))
    alone = Plan([UnitProgram(units)], True, placed.res.ctas_per_sm, 1, flow=True, units=len(units))
    return _bound_of(config, gpu, alone, scenario)


def _rank0_unit(cache: dict[tuple[object, ...], Unit], config: GemmConfig, gpu: GpuSpec, placed: _Placed,
                index: int, last: bool, k_range: tuple[int, int] | None = None) -> Unit:
    """The unit of CTA ``index`` (rank 0 of its cluster) as the quick bounds see it: copies that all
    hit near in L2; one per kind of tile (inside or at an edge, a pair's partner rows, a last drain,
    a split's k-range)."""
    row, col = placed.coord(index)
    return _near_unit(cache, config, gpu, placed, row, col, last, k_range)


def _near_unit(cache: dict[tuple[object, ...], Unit], config: GemmConfig, gpu: GpuSpec, placed: _Placed, row: int,
               col: int, last: bool, k_range: tuple[int, int] | None = None) -> Unit:
    """:func:`_rank0_unit` of the rank-0 CTA of tile (``row``, ``col``)."""
    key = (_edge(row, config.tiles_m), _edge(col, config.tiles_n), _partner_rows(config, placed.setup, row, 0), last,
           k_range)
    if key not in cache:
        cache[key] = _unit(config, placed.layout, gpu, placed.step, row, col, (0.0, 0.0), placed.setup, 0,
                           (0.0, 0.0), 0, last, k_range)
    return cache[key]


def _quick_grid_bound(config: GemmConfig, scenario: ScenarioParts, placed: _Placed) -> float:
    """A grid launch's quick bound: the block scheduler hands CTAs to whichever SM frees first, so
    which tiles share an SM is not known, but some SM runs at least ``ceil(CTAs / SMs)`` of them,
    each at least the cheapest kind of tile a cluster's rank 0 runs (edge tiles copy less), in its
    resident slots. Its bounds (tensor cores, shared memory, port, TMA requests, each slot's chain
    of CTAs) with copies that all hit near in L2, as the persistent form's."""
    gpu, (cx, cy), (gm, gn) = scenario.gpu, placed.setup.shape, cluster_grid(config, placed.setup.shape)
    last = _drains_tmem(gpu)  # a grid CTA drains its one tile's accumulator before it exits
    # Each cluster's rank 0 takes tile (row, column) = (cluster row x CX, cluster column x CY), in
    # every combination (the raster orders them): one row of each kind, one column of each.
    rows = {(_edge(r, config.tiles_m), _partner_rows(config, placed.setup, r, 0)): r for r in range(0, gm * cx, cx)}
    cols = {_edge(c, config.tiles_n): c for c in range(0, gn * cy, cy)}
    kinds: dict[tuple[object, ...], Unit] = {}
    for row, col in itertools.product(rows.values(), cols.values()):
        _near_unit(kinds, config, gpu, placed, row, col, last)
    return _busiest_sm_bound(config, scenario, placed, list(kinds.values()), placed.launched)


def _busiest_sm_bound(config: GemmConfig, scenario: ScenarioParts, placed: _Placed, kinds: list[Unit],
                      launched: int, resident: int | None = None) -> float:
    """A grid of ``launched`` one-unit CTAs: some SM runs at least ``ceil(launched / SMs)`` of
    them, each at least the cheapest of ``kinds``, in its resident slots (one after another in
    each slot: each at least the shortest kind's own time, :func:`slot_chain_ns`). ``resident``:
    the CTAs resident at once (default: a whole-tile launch's, ``placed.concurrent``)."""
    gpu, ctas_per_sm = scenario.gpu, placed.res.ctas_per_sm
    resident = placed.concurrent if resident is None else resident
    cheapest = min(kinds, key=lambda unit: _breakdown_ns(
        config, gpu, Plan([UnitProgram([unit])], False, ctas_per_sm, 1, flow=True), scenario))
    busiest = -(-launched // max(1, min(gpu.sms, resident)))  # CTAs some SM runs, at least
    sm = Plan([UnitProgram([cheapest]) for _ in range(busiest)], False, ctas_per_sm, 1, flow=True, units=busiest)
    # (any CTA of a cluster: a peer's own copies may be only its multicast slices)
    shortest = min(kinds, key=lambda unit: slot_chain_ns(Plan([UnitProgram([unit])], True, 1, 1, flow=True), gpu,
                                                         least_fill=True))
    chain = Plan([UnitProgram([shortest]) for _ in range(busiest)], False, ctas_per_sm, 1, flow=True, units=busiest)
    return max(_breakdown_ns(config, gpu, sm, scenario), slot_chain_ns(chain, gpu, least_fill=True))


def _quick_split_bound(config: GemmConfig, scenario: ScenarioParts, placed: _Placed,
                       found: gemm_split.Decomposition) -> float:
    """A split run's quick bound. Persistent: the rank-0 CTA of the cluster with the most
    k-tiles, its units alone (:func:`_rank0_unit`'s: copies that hit near in L2) and no fix-up.
    Grid: one CTA per work unit, so some SM runs at least ``ceil(CTAs / SMs)`` of them, each at
    least the cheapest unit a cluster's rank 0 runs."""
    gpu, size, ctas_per_sm = scenario.gpu, placed.placement.size, placed.res.ctas_per_sm
    drains = _drains_tmem(gpu)
    kinds: dict[tuple[object, ...], Unit] = {}
    if config.launch == "persistent":
        works = max(found.ctas, key=lambda ws: sum(w.k_count for w in ws))
        units = [_rank0_unit(kinds, config, gpu, placed, w.tile * size, drains and n == len(works) - 1,
                             (w.k_first, w.k_count)) for n, w in enumerate(works)]
        alone = Plan([UnitProgram(units)], True, ctas_per_sm, 1, flow=True, units=len(units))
        return _bound_of(config, gpu, alone, scenario)
    for ws in found.ctas:
        for w in ws:
            _rank0_unit(kinds, config, gpu, placed, w.tile * size, drains, (w.k_first, w.k_count))
    launched = sum(len(ws) for ws in found.ctas) * size  # a CTA per work unit
    resident = min(placed.placement.clusters, len(found.ctas)) * size
    return _busiest_sm_bound(config, scenario, placed, list(kinds.values()), launched, resident)


def _bound_of(config: GemmConfig, gpu: GpuSpec, plan: Plan, scenario: ScenarioParts) -> float:
    return max(_breakdown_ns(config, gpu, plan, scenario), slot_chain_ns(plan, gpu))


def _breakdown_ns(config: GemmConfig, gpu: GpuSpec, plan: Plan, scenario: ScenarioParts) -> float:
    bound = breakdown(config, gpu, plan, scenario.pipeline.stages, scenario.pipeline.consumers)["bound_ns"]
    assert isinstance(bound, (int, float))
    return float(bound)


def stats(config: GemmConfig, scenario: ScenarioParts, plan: Plan, res: Residency, makespan: int) -> dict[str, Any]:
    """The bounds (see :func:`breakdown`) and how close the run comes to the one that binds."""
    extra: dict[str, Any] = breakdown(config, scenario.gpu, plan, scenario.pipeline.stages, scenario.pipeline.consumers)
    pace = plan.info.get("mma_pace", 1.0)
    assert isinstance(pace, float)
    step = mma_step(config, scenario.gpu, scenario.pipeline.consumers, scenario.pipeline.consumer_mode,
                    scenario.pipeline.mma_cta_group == 2, pace)
    extra.update(mma_instruction=step.instruction, mma_per_k_step=step.count if step.instruction else None,
                 mma_k_step_ns=step.occupancy / 1000, mma_completion_ns=step.tail / 1000)
    layout = GemmLayout.of(config)
    extra.update(swizzle=config.swizzle, tma_boxes_per_k_step=len(layout.a) + len(layout.b),
                 tma_requests_per_k_step=layout.a.requests + layout.b.requests,
                 tma_a_box="x".join(map(str, reversed(layout.a.first.box_dims))),
                 tma_b_box="x".join(map(str, reversed(layout.b.first.box_dims))))
    writes, a_once = k_step_smem_traffic(config, layout, scenario.pipeline.mma_cta_group == 2)
    extra.update(operands=config.operands, smem_mma_read_bytes=step.smem_reads, smem_tma_write_bytes=writes,
                 smem_a_copy_bytes=a_once, smem_bytes_per_k_step=k_step_smem_bytes(step.smem_reads, writes, a_once),
                 mma_smem_bound=step.smem_bound,
                 smem_write_bytes_per_s=None if scenario.gpu.smem_write_bandwidth is None
                 else scenario.gpu.smem_write_bandwidth * 1e12)
    extra.update(_epilogue_stats(config, scenario, step, writes, a_once, whole_tiles="decomposition" not in plan.info))
    far = _far_latency(scenario.gpu, layout)
    extra.update(l2_far_latency_ns=far / 1000 if far else None,
                 l2_operand_bytes=layout.a.tensor_bytes + layout.b.tensor_bytes)
    extra["efficiency"] = extra["bound_ns"] * 1000 / makespan if makespan else None
    if "decomposition" in plan.info:  # split-K, stream-K (tmasim.workloads.gemm_split)
        extra.update(plan.info)
    if scenario.pipeline.stages_auto:  # only then: other runs' summaries stay as they were
        chosen = auto_stages(config, scenario.gpu, scenario.pipeline)
        extra.update(stages_auto_rule=chosen.rule, stages_auto_detail=chosen.detail,
                     epilogue_smem_bytes=chosen.epilogue_smem if config.epilogue_smem is None else config.epilogue_smem)
    return extra


def _epilogue_stats(config: GemmConfig, scenario: ScenarioParts, step: MmaStep, writes: int,
                    a_once: int, whole_tiles: bool) -> dict[str, Any]:
    """A Tensor Memory accumulator's drain, per tile (:func:`_epilogue_time`), beside the MMA
    time of one tile's k-loop (its k-steps at their issue pace, memory waits aside); without it
    where the tiles' k-loops are split among CTAs (split-K, stream-K: a unit's share varies)."""
    gpu, pair = scenario.gpu, scenario.pipeline.mma_cta_group == 2
    if not _drains_tmem(gpu) or not step.instruction:
        return {}
    hold = _k_step_hold(gpu, step, writes, a_once, pair)
    count = _subtiles(config, pair)
    return {"epilogue_subtiles": count, "epilogue_subtile": "x".join(map(str, blackwell_epilogue_tile(config, pair))),
            "epilogue_drain_ns": _drain_time(config, gpu, pair) / 1000,
            "epilogue_mainloop_ns": config.k_steps * (step.occupancy + hold) / 1000 if whole_tiles else None}


def _k_step_hold(gpu: GpuSpec, step: MmaStep, writes: int, a_once: int, pair: bool) -> int:
    """How long shared memory stays busy after a k-step's MMAs (:func:`k_step_smem_hold` on this GPU)."""
    return k_step_smem_hold(step.smem_reads, writes, a_once, step.occupancy, gpu.smem_bandwidth,
                            gpu.smem_write_bandwidth, pair and gpu.pair_writes_overlap)


def _edge(index: int, count: int) -> bool | None:
    """Where a tile lies along one dimension: inside (False), at the edge (True), or past it
    (None: a CTA of a cluster the rounded-up grid launched beyond the problem)."""
    return None if index >= count else index == count - 1


def _partner_rows(config: GemmConfig, setup: ClusterSetup, row: int, rank: int) -> int:
    """The rows of a 2-SM leader's partner tile inside the problem (its MMA covers both); -1 otherwise."""
    return in_bounds(config, row + 1, 0)[0] if setup.pair and rank % 2 == 0 else -1


def _unit(config: GemmConfig, layout: GemmLayout, gpu: GpuSpec, step: MmaStep, row: int, col: int,
          hbm: tuple[float, float], setup: ClusterSetup, rank: int, merged: tuple[float, float],
          far: int, last: bool = True, k_range: tuple[int, int] | None = None) -> Unit:
    """``hbm``: the A and B loads' HBM shares; ``merged``: the shares of their bytes L2 serves after
    same-address loads merge in the GPC (tmasim.workloads.gemm_l2_merge); ``far``: the extra
    latency of their L2 hits (L2's far part, tmasim.l2). ``k_range``: (first k-tile, k-tiles)
    of a split tile's share (tmasim.workloads.gemm_split); None: the whole k-loop."""
    bm, bn, bk = config.tile
    (fa, fb), (ma, mb) = hbm, merged
    # A tile wholly past the edge still runs its k-loop, as CUTLASS's kernels do (the scheduler
    # hands every CTA of a launched cluster a tile): its boxes are zero-filled (no bytes from
    # memory, the barrier counts the whole box), its MMAs run on zeros (no useful FLOPs) and its
    # store writes nothing. It must: its multicast slices and a pair's half of B feed its peers.
    rows_in, cols_in = in_bounds(config, row, col)
    cx = setup.shape[0]
    (a_parts, b_parts), (a_mask, b_mask) = setup.share, setup.masks(rank)
    # A CTA issues its slice of each shared box: along N (index y) for A, along M (index x) for B.
    a_index, b_index = rank // cx, setup.b_slice(rank)
    expect = layout.a.stage_bytes + layout.b.stage_bytes if a_mask or b_mask else 0
    if setup.pair:  # each CTA holds its A box and half of B; the leader's full barrier counts both CTAs'
        expect = 2 * layout.a.stage_bytes + layout.b.stage_bytes if rank % 2 == 0 else 0
        rows_in += max(0, _partner_rows(config, setup, row, rank))  # the leader's MMA covers the pair's rows
    writes, a_once = k_step_smem_traffic(config, layout, setup.pair)
    hold = _k_step_hold(gpu, step, writes, a_once, setup.pair)
    # With smem_write_bandwidth (B200) the writes' time belongs to the k-step: its MMAs complete
    # that much later, so the slot's release waits for it as the next step's MMAs do (tmasim.operands).
    tail = step.tail + hold if gpu.smem_write_bandwidth is not None else step.tail
    segments = []
    first, steps = k_range if k_range is not None else (0, config.k_steps)
    for first_k, count in _k_segments(config, first, steps):
        k_in = min(bk, config.k - first_k)
        a = tuple(_copy(gpu, box, (first_k + off, row * bm), fa, a_parts, a_index, a_mask, ma, far)
                  for off, box in layout.a.boxes)
        b = tuple(_copy(gpu, box, (first_k + off, col * bn), fb, b_parts, b_index, b_mask, mb, far)
                  for off, box in layout.b.boxes)
        flops = 0.0 if setup.pair and rank % 2 else 2.0 * rows_in * cols_in * k_in
        segments.append(Segment(count, a + b, step.occupancy, flops, tail, expect, hold))
    c_bytes = layout.c.box_bytes
    staging = staging_ps(c_bytes, gpu.smem_bandwidth)
    store = Copy(c_bytes, layout.c.bytes_from_memory((col * bn, row * bm)), 1.0, 0)
    if first + steps < config.k_steps:  # a split tile's share before its last: its partial goes to the workspace
        return Unit(-1, tuple(segments), Epilogue(_epilogue_time(config, gpu, setup.pair, 0,
                                                                 steps * (step.occupancy + hold), last), None))
    parts, interval = _store_parts(config, gpu, setup.pair, store)
    return Unit(-1, tuple(segments), Epilogue(_epilogue_time(config, gpu, setup.pair, staging,
                                                             steps * (step.occupancy + hold), last), store,
                                              store_parts=parts, store_interval=interval,
                                              store_lead=gpu.epilogue_tile_time if parts else 0))


def _store_parts(config: GemmConfig, gpu: GpuSpec, pair: bool, store: Copy) -> tuple[tuple[Copy, ...], int]:
    """A Tensor Memory accumulator's store, one TMA store per C sub-tile as the epilogue warps
    drain it (CuTeDSL ``dense_gemm_persistent``: each sub-tile goes TMEM -> registers -> a C
    buffer in shared memory -> ``cp.async.bulk.tensor`` store, the next sub-tile's drain beside it),
    ``gpu.epilogue_subtile_time`` apart after the tile's own ``gpu.epilogue_tile_time``; () where
    the tile is stored in one piece."""
    count = _subtiles(config, pair) if _drains_tmem(gpu) else 1
    if count <= 1:
        return (), 0
    parts = tuple(store._replace(smem_bytes=_part(store.smem_bytes, n, count),
                                 memory_bytes=_part(store.memory_bytes, n, count)) for n in range(count))
    return parts, gpu.epilogue_subtile_time


def _subtiles(config: GemmConfig, pair: bool) -> int:
    """The C sub-tiles a Tensor Memory accumulator is drained in (``compute_epilogue_tile_size``)."""
    tile_m, tile_n = blackwell_epilogue_tile(config, pair)
    return -(-config.tile[0] // tile_m) * -(-config.tile[1] // tile_n)


def _drains_tmem(gpu: GpuSpec) -> bool:
    """Whether the epilogue drains a Tensor Memory accumulator beside the next tile's MMAs."""
    return bool(gpu.epilogue_subtile_time) and gpu.mma is not None and gpu.mma.instruction == "tcgen05"


def _epilogue_time(config: GemmConfig, gpu: GpuSpec, pair: bool, staging: int, mainloop: int, last: bool) -> int:
    """How long a tile's epilogue holds up its CTA's MMAs. With an accumulator in Tensor Memory
    (tcgen05) and ``gpu.epilogue_subtile_time``, the epilogue warps drain it in C sub-tiles
    (CuTeDSL's ``compute_epilogue_tile_size``) after a cost of the tile's own
    (``gpu.epilogue_tile_time``), while the MMA warp runs the next tile into the second
    accumulator: only the part longer than that tile's mainloop (its MMAs' time) delays the MMAs,
    all of it after a CTA's last tile. Otherwise: C's staging through shared memory."""
    if not _drains_tmem(gpu):
        return staging
    work = _drain_time(config, gpu, pair)
    return max(staging, work if last else work - mainloop)


def _drain_time(config: GemmConfig, gpu: GpuSpec, pair: bool) -> int:
    """The epilogue warps' time for one tile's Tensor Memory accumulator: the tile's own cost,
    then each C sub-tile's."""
    return gpu.epilogue_tile_time + _subtiles(config, pair) * gpu.epilogue_subtile_time


def _k_segments(config: GemmConfig, first: int = 0, count: int | None = None) -> list[tuple[int, int]]:
    """(first k of the segment, steps) of k-tiles ``first`` .. ``first + count - 1`` (default: all):
    the full k-steps, then a partial last one if the range ends the k-loop and K % BK."""
    bk, steps = config.tile[2], config.k_steps
    count = steps - first if count is None else count
    if config.k % bk == 0 or first + count < steps:
        return [(first * bk, count)]
    return [(first * bk, count - 1), ((steps - 1) * bk, 1)] if count > 1 else [((steps - 1) * bk, 1)]


def _copy(gpu: GpuSpec, descriptor: TensorDescriptor, coord: tuple[int, int], hbm_fraction: float,
          parts: int = 1, index: int = 0, mask: int = 0, l2_share: float = 1.0, far: int = 0) -> Copy:
    """One TMA load: the whole box, or (multicast) slice ``index`` of ``parts`` of it, delivered
    to the cluster ranks in ``mask``. The slice is read once from L2; the wave's HBM misses
    for the panel are spread over ``parts`` times fewer reads, so HBM bytes do not change.
    ``l2_share``: the share of its bytes L2 serves after the same loads of cluster peers and
    neighbours merge in the GPC (tmasim.workloads.gemm_l2_merge); never below its HBM share.
    ``far``: the extra latency of the share L2 serves (its far part, tmasim.l2)."""
    smem = _part(descriptor.box_bytes, index, parts)
    memory = _part(descriptor.bytes_from_memory(coord), index, parts)
    fraction = min(1.0, hbm_fraction * parts)
    latency = gpu.copy_latency_for(smem) + round(fraction * gpu.hbm_latency + (1.0 - fraction) * far)
    return Copy(smem, memory, fraction, latency, multicast=mask, l2_fraction=max(fraction, l2_share),
                requests=_part(descriptor.requests_from_memory(coord), index, parts))


def _part(nbytes: int, index: int, parts: int) -> int:
    """Slice ``index`` of ``parts`` near-equal whole-byte slices; the slices add up to ``nbytes``."""
    return nbytes * (index + 1) // parts - nbytes * index // parts
