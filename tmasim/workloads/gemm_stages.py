"""``pipeline.stages = "auto"``: the stage count CUTLASS would choose for a GEMM, by one of two rules.

Blackwell (tcgen05 presets, 2-SM pairs included): the CuTeDSL example rule,
``examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm_persistent.py``
``_compute_stages``. The epilogue stages C through shared memory in sub-tiles
(``cutlass/utils/blackwell_helpers.py`` ``compute_epilogue_tile_size``, no source C, C N-major);
two of them are reserved first, with 1024 B of barriers, then

    ab stages = (capacity // occupancy - (1024 + 2 x C sub-tile)) // (A box + the CTA's B box)

(a pair's CTA holds half of B), and the shared memory left over goes to more C sub-tiles.

Hopper (wgmma presets): CUTLASS C++ ``StageCountAutoCarveout`` with the epilogue's shared storage
as the carveout (``sm90_gmma_builder.inl`` ``compute_stage_count_or_override``):

    stages = (capacity - round_up(carveout, 128)) / (round_up(A + B box, 128) + 16)

16 B being ``PipelineTmaAsync<1>::SharedStorage`` (a full and an empty barrier). The carveout is
``sizeof(CollectiveEpilogue::SharedStorage)`` of the SM90 TMA epilogue with no source C and the
default linear-combination fusion (an empty struct, 1 byte): StagesD = min(sub-tiles, 2) D
sub-tiles (``sm90_builder.inl``: cooperative, i.e. two or more consumer warpgroups in
``cooperative`` mode, min(128, BM) x min(32, BN); ping-pong or one consumer warpgroup
(KernelTmaWarpSpecialized) min(64, BM) x 32, or 64 for 8-bit D), aligned to their swizzle
(``alignment_for_swizzle``: 1024 B for a 128-byte row), plus the C load pipeline's barriers,
16 B x StagesC with StagesC = min(sub-tiles, 4).

Both rules take the capacity a CTA may use (227 KiB, 232448 B, on the presets: CUTLASS's
constant for sm_90 and sm_100). The run's epilogue shared memory is what the rule assumed
(``workload.epilogue_smem`` where set: the rule then reserves that instead of its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tmasim.errors import ScenarioError
from tmasim.machine.hardware import GpuSpec
from tmasim.settings.parts import Pipeline
from tmasim.workloads.gemm_config import OUT_BYTES, GemmConfig
from tmasim.workloads.gemm_layout import GemmLayout

CUTEDSL_RULE = "CuTeDSL dense_gemm_persistent rule"
SM90_RULE = "CUTLASS SM90 StageCountAutoCarveout rule"
SM100_BARRIER_BYTES = 1024  # _compute_stages: mbar_helpers_bytes
SM90_STAGE_BARRIER_BYTES = 16  # sizeof(PipelineTmaAsync<1>::SharedStorage): two 8-byte mbarriers
SM90_ALIGNMENT = 128  # compute_stage_count_or_override's alignment of stage bytes, carveout and capacity
FUSION_STORAGE_BYTES = 1  # the default linear combination's SharedStorage: an empty struct


@dataclass(frozen=True)
class AutoStages:
    """What ``"auto"`` chose: the count, the rule, the epilogue's shared memory it assumed, and
    the rule's arithmetic with this scenario's numbers (for the summary)."""

    stages: int
    rule: str
    epilogue_smem: int
    detail: str
    budget: str  # what the rule budgets, in words (said where tmasim's residency check refuses the count)


def auto_stages(config: GemmConfig, gpu: GpuSpec, pipeline: Pipeline) -> AutoStages:
    """The count by the rule of the GPU's architecture (its MMA instruction)."""
    instruction = gpu.mma.instruction if gpu.mma is not None else None
    if instruction == "tcgen05":
        return _cutedsl(config, gpu, pipeline.mma_cta_group == 2)
    if instruction == "wgmma":
        return _sm90(config, gpu, pipeline.consumer_mode == "cooperative" and pipeline.consumers > 1)
    raise ScenarioError("pipeline.stages", "auto", f"follows CUTLASS's rules for Hopper (wgmma) and Blackwell "
                        f"(tcgen05); {gpu.name} names no MMA instruction: give a whole number")


def ab_stage_bytes(config: GemmConfig, pair: bool) -> int:
    """One stage of A and B in one CTA's shared memory (a 2-SM pair's CTA holds half of B)."""
    layout = GemmLayout.of(config)
    return layout.a.stage_bytes + (layout.b.stage_bytes // 2 if pair else layout.b.stage_bytes)


def blackwell_epilogue_tile(config: GemmConfig, pair: bool) -> tuple[int, int]:
    """``compute_epilogue_tile_size`` for no source C and an N-major C."""
    bm, bn = config.tile[0], config.tile[1]
    warp_m, warp_n = (2, 2) if bm == 64 and pair else (4, 1)
    tile_m = min(bm, 32 * warp_m)
    n_perf = 4096 // tile_m
    while bn % n_perf:
        n_perf //= 2
    out_bits = 8 * OUT_BYTES[config.out_dtype]
    tile_n = min(bn, max(n_perf, 8 * warp_n, 128 // out_bits * warp_n))
    return tile_m, tile_n if bn % tile_n == 0 else bn


def _cutedsl(config: GemmConfig, gpu: GpuSpec, pair: bool) -> AutoStages:
    ab, capacity, occupancy = ab_stage_bytes(config, pair), gpu.smem_per_cta, config.ctas_per_sm or 1
    tile_m, tile_n = blackwell_epilogue_tile(config, pair)
    c_stage = tile_m * tile_n * OUT_BYTES[config.out_dtype]
    c_bytes = config.epilogue_smem if config.epilogue_smem is not None else 2 * c_stage
    stages = _at_least_one((capacity // occupancy - (SM100_BARRIER_BYTES + c_bytes)) // ab, ab, capacity)
    epilogue = c_bytes
    if config.epilogue_smem is None:  # the left-over shared memory goes to more C sub-tiles
        extra = (capacity - occupancy * ab * stages - occupancy * (SM100_BARRIER_BYTES + c_bytes)) // (
            occupancy * c_stage)
        epilogue = (2 + extra) * c_stage
    where = "workload.epilogue_smem" if config.epilogue_smem is not None else (
        f"2 C sub-tiles of {tile_m}x{tile_n}")
    detail = (f"({capacity} // {occupancy} - (1024 + {c_bytes} B, {where})) // {ab} B of A+B a stage = {stages}; "
              f"epilogue {epilogue} B")
    budget = (f"{capacity} // {occupancy} B a CTA with 1024 B of barriers, and no 1 KiB reserved by the system a CTA")
    return AutoStages(stages, CUTEDSL_RULE, epilogue, detail, budget)


def hopper_epilogue_tile(config: GemmConfig, cooperative: bool) -> tuple[int, int]:
    """``sm90_compute_tile_shape_or_override`` with ``EpilogueTileAuto``."""
    bm, bn = config.tile[0], config.tile[1]
    if cooperative:
        return min(128, bm), math.gcd(min(32, bn), bn)
    n_perf = 64 if OUT_BYTES[config.out_dtype] == 1 and bn % 64 == 0 else 32
    return min(64, bm), math.gcd(min(n_perf, bn), bn)


def hopper_epilogue_storage(config: GemmConfig, cooperative: bool) -> int:
    """``sizeof(CollectiveEpilogue::SharedStorage)``: the D sub-tiles (aligned to their swizzle)
    with the fusion's empty storage, then the C load pipeline's barriers."""
    tile_m, tile_n = hopper_epilogue_tile(config, cooperative)
    bm, bn = config.tile[0], config.tile[1]
    sub_tiles = -(-bm // tile_m) * -(-bn // tile_n)
    row = tile_n * OUT_BYTES[config.out_dtype]  # a D sub-tile row (N-major): its swizzle span
    align = next((1024 * span // 128 for span in (128, 64, 32) if row % span == 0), 128)
    tensors = _round_up(min(sub_tiles, 2) * tile_m * row + FUSION_STORAGE_BYTES, align)
    return _round_up(tensors + SM90_STAGE_BARRIER_BYTES * min(sub_tiles, 4), align)


def _sm90(config: GemmConfig, gpu: GpuSpec, cooperative: bool) -> AutoStages:
    layout = GemmLayout.of(config)
    ab = layout.a.stage_bytes + layout.b.stage_bytes
    stage = _round_up(ab, SM90_ALIGNMENT) + SM90_STAGE_BARRIER_BYTES
    own = config.epilogue_smem is None
    epilogue = hopper_epilogue_storage(config, cooperative) if own else config.epilogue_smem
    assert epilogue is not None
    carveout = _round_up(epilogue, SM90_ALIGNMENT)
    capacity = gpu.smem_per_cta // SM90_ALIGNMENT * SM90_ALIGNMENT
    stages = _at_least_one((capacity - carveout) // stage, stage, capacity)
    where = "the epilogue's SharedStorage" if own else "workload.epilogue_smem"
    detail = f"({capacity} - {carveout} B, {where}) / ({_round_up(ab, SM90_ALIGNMENT)} + 16) B a stage = {stages}"
    return AutoStages(stages, SM90_RULE, epilogue, detail, f"all {capacity} B for one CTA per SM")


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _at_least_one(stages: int, stage_bytes: int, capacity: int) -> int:
    if stages < 1:
        raise ScenarioError("pipeline.stages", "auto", f"finds no stage that fits: one stage of A and B "
                            f"({stage_bytes} B) and the epilogue do not fit in the {capacity} B a CTA may use")
    return stages
