"""Attention's plan: per-block costs from the MMA tables and the vector units' rates, the
registers or Tensor Memory they need, the launch order, and the CTAs' programs.

Softmax cost of one block for a consumer of ``r`` query rows (FA3's online softmax), by
mechanism (:mod:`.attention_softmax`: FA3's instructions per score element charged to the
MUFU, FP32, min/max and conversion units and to instruction issue; the row max first, then the
exponentials); the rescale of O one multiply per O element (r·d_v); the epilogue's
normalization one multiply per O element, plus staging O through shared memory at
``gpu.smem_bandwidth``.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tmasim.engine.attention.program import AttentionProgram, AttentionSchedule, AttentionUnit, KvBlock, Mma
from tmasim.engine.chip import Plan
from tmasim.engine.program import Copy, Epilogue
from tmasim.errors import ResidencyError, ScenarioError
from tmasim.machine.descriptor import row_requests
from tmasim.machine.hardware import GpuSpec
from tmasim.machine.mma import K_OF
from tmasim.machine.operands import operand_timing
from tmasim.machine.residency import Accumulator, Residency, residency
from tmasim.values import format as fmt
from tmasim.workloads.attention_config import ELEMENT_BYTES, AttentionConfig
from tmasim.workloads.attention_softmax import convert_work, multiplies, softmax_work

if TYPE_CHECKING:
    from tmasim.settings.parts import Pipeline, ScenarioParts

OUT_BYTES = 2  # O is written in 16 bits (bf16/fp16; fp8 inputs too, as FA3)
# FA3's setmaxnreg split (hopper/flash_fwd_kernel_sm90.h, Load/MmaRegisterRequirement) by the
# number of consumer warpgroups: producer and consumer registers per thread.
REGISTER_SPLIT = {1: (56, 256), 2: (24, 240), 3: (32, 160)}
PRODUCER_REGISTERS, CONSUMER_REGISTERS = REGISTER_SPLIT[2]
SECTION_BYTES = 32 * 2**20  # FA3's tile scheduler: K/V heads per section so that their K and V fit 32 MB of L2
WARPGROUP = 128


@dataclass(frozen=True)
class Shape:
    """Who computes what: consumer processes (see the engine's module doc) and rows each."""

    processes: int
    rows: int
    warpgroups: int
    pingpong: bool


def shape_of(config: AttentionConfig, pipeline: Pipeline) -> Shape:
    pingpong = pipeline.consumer_mode == "pingpong" and pipeline.consumers >= 2  # N warpgroups take turns
    processes = pipeline.consumers if pingpong else 1
    return Shape(processes, config.tile[0] // processes, pipeline.consumers, pingpong)


def mma_phase(gpu: GpuSpec, dtype: str, rows: int, n: int, k: int, flops: float, source: str = "SS") -> Mma:
    """``rows`` x ``n`` x ``k`` on the tensor cores: wgmma m64nNk16 per 64 rows (Hopper), one
    tcgen05.mma of M = rows (Blackwell), or the flat rate where the preset has no table. The
    instructions issue no faster than shared memory serves their operands (``source``: SS, both
    from shared memory; RS or TS, A from registers or Tensor Memory), as a GEMM's do
    (:func:`tmasim.machine.operands.operand_timing`)."""
    table = gpu.mma
    full = 2.0 * rows * n * k
    if table is None:
        return Mma(round(full / gpu.sm_flop_rate(dtype)), 0, flops)
    depth = K_OF[dtype]
    m = 64 if table.instruction == "wgmma" else rows
    count = (rows // m) * (k // depth)
    latency, ii = table.timing("workload.tile", dtype, m, n)
    per_cycle = gpu.smem_bytes_per_cycle()
    op = operand_timing(latency, ii, m, n, 1, source, per_cycle, table.operands)
    return Mma(gpu.cycles_ps(count * op.ii), gpu.cycles_ps(op.latency - op.ii), flops)


def block(config: AttentionConfig, gpu: GpuSpec, rows: int, k: Copy, v: Copy, masked: bool,
          keys: int | None = None) -> KvBlock:
    """One K/V block for a consumer of ``rows`` query rows: the MMAs run the whole block, but
    only ``keys`` of its BN keys exist (the last block of a ragged seqlen_kv) and, masked,
    half of those count as useful FLOPs."""
    bn, d, dv, scale = config.tile[1], config.head_dim, config.d_v, config.softmax_scale
    useful = (0.5 if masked else 1.0) * (keys if keys is not None else bn) / bn
    qk = mma_phase(gpu, config.dtype, rows, bn, d, useful * 2.0 * rows * bn * d)
    p_from = "TS" if gpu.mma is not None and gpu.mma.tmem_columns else "RS"  # P in Tensor Memory or registers
    pv = mma_phase(gpu, config.dtype, rows, dv, bn, useful * 2.0 * rows * bn * dv, p_from)
    # The softmax warpgroup also forms each row's rescale factor exp(m_old - m_new); the rescale
    # of O itself is FP32 multiplies only (by the softmax warpgroup, or FA4's correction warpgroup).
    # Hopper: P·V reads P from registers (wgmma RS), and P_j is converted into the registers P·V of
    # block j - 1 reads, so FA3 converts after that P·V has completed (hopper/mainloop_fwd_sm90_tma_
    # gmma_ws.hpp, fwd_step: warpgroup_wait<0>, then convert_type_out): a phase of its own.
    # Blackwell: P goes to Tensor Memory over S, inside the softmax; without the overlap no P·V is
    # in flight, and the conversion runs beside the exponentials as their results come.
    emulated = config.emulated_share(bool(gpu.mma is not None and gpu.mma.tmem_columns))
    softmax = softmax_work(gpu, scale, rows, bn, emulated=emulated)
    correction = multiplies(gpu, scale, rows * dv)
    if gpu.mma is None or gpu.mma.tmem_columns or not config.softmax_overlap:
        return KvBlock(k, v, qk, softmax, pv, correction)
    early = softmax_work(gpu, scale, rows, bn, convert=False, emulated=emulated)
    return KvBlock(k, v, qk, softmax, pv, correction, early, convert_work(gpu, scale, rows, bn))


def epilogue_ps(config: AttentionConfig, gpu: GpuSpec, rows: int) -> int:
    normalize = multiplies(gpu, config.softmax_scale, rows * config.d_v).time
    staging = rows * config.d_v * OUT_BYTES / gpu.smem_bandwidth if gpu.smem_bandwidth != float("inf") else 0
    return normalize + round(staging)


# ---------------------------------------------------------------------------------- residency


def registers(config: AttentionConfig, gpu: GpuSpec, pipeline: Pipeline) -> Accumulator | None:
    """Per consumer thread (Hopper): O (BM/W x d_v fp32), S (BM/W x BN fp32) and, with the
    softmax overlapped, the previous block's P (16-bit) beside the next S, over 128 threads,
    plus the preset's overhead; one-line error with the numbers if over the allowance."""
    table = gpu.mma
    if table is None or table.tmem_columns:
        return None
    bn, rows = config.tile[1], config.tile[0] // pipeline.consumers
    o, s, p = rows * config.d_v // WARPGROUP, rows * bn // WARPGROUP, rows * bn // (2 * WARPGROUP)
    needed = o + s + (p if config.softmax_overlap else 0) + table.register_overhead
    specialized = pipeline.warp_specialized
    split_producer, split_consumer = REGISTER_SPLIT.get(pipeline.consumers, REGISTER_SPLIT[2])
    producer = (pipeline.registers[0] or split_producer) if specialized else 0
    default = split_consumer if specialized else table.registers_per_sm // (WARPGROUP * pipeline.consumers)
    consumer = pipeline.registers[1] or default
    allowed = min(consumer, table.registers_per_thread)
    if needed > allowed:
        parts = f"O {o} + S {s}" + (f" + P {p} (softmax_overlap)" if config.softmax_overlap else "")
        raise ResidencyError("workload.tile", list(config.tile),
                             f"needs {needed} registers per consumer thread ({parts} + {table.register_overhead} "
                             f"overhead, {rows} rows per warpgroup, head_dim_v {config.d_v}), over the {allowed} "
                             f"allowed (pipeline.registers.consumer = {consumer}; at most "
                             f"{table.registers_per_thread} per thread)")
    per_cta = WARPGROUP * (producer + pipeline.consumers * consumer)
    if per_cta > table.registers_per_sm:
        raise ResidencyError("pipeline.registers", f"{{producer = {producer}, consumer = {consumer}}}",
                             f"gives a CTA 128 x ({producer} + {pipeline.consumers} x {consumer}) = {per_cta} "
                             f"registers, over the {table.registers_per_sm} of an SM on {gpu.name}")
    return Accumulator(producer, consumer, needed, per_cta)


def tensor_memory(config: AttentionConfig, gpu: GpuSpec, shape: Shape) -> Accumulator | None:
    """Blackwell: each consumer's Q tile keeps S (P overwrites it in 16 bits) and O in Tensor
    Memory, BN + d_v fp32 columns of its rows' lanes; the CTA allocates a power of two of at
    least 32 columns, within the SM's 512 (one-line error with the numbers if over)."""
    table = gpu.mma
    if table is None or not table.tmem_columns:
        return None
    bn = config.tile[1]
    if shape.rows > table.tmem_lanes:
        raise ResidencyError("workload.tile", list(config.tile),
                             f"gives each consumer {shape.rows} query rows, over the {table.tmem_lanes} lanes of "
                             "Tensor Memory (one row per lane)")
    columns = shape.processes * (bn + config.d_v)
    allocated = max(32, 1 << (columns - 1).bit_length())
    if allocated > table.tmem_columns:
        raise ResidencyError("workload.tile", list(config.tile),
                             f"needs {columns} TMEM columns ({fmt.plural(shape.processes, 'Q tile')} x (S "
                             f"{bn} + O {config.d_v})"
                             f", fp32), allocated as {allocated}, over the {table.tmem_columns} of an SM on {gpu.name}")
    return Accumulator(tmem_columns=allocated)


def smem_parts(config: AttentionConfig, gpu: GpuSpec, stages: int, halves: int = 1) -> tuple[int, int, int, str]:
    """(K + V bytes per stage, Q bytes, O staging bytes beyond what it shares, where O is staged).

    Hopper (register accumulators, FA3): O is always staged over the start of V's ring
    (``hopper/flash_fwd_kernel_sm90.h``: "We want smem_o to line up with the start of smem_v",
    padded where O is the larger), so the producer's first V load of the next unit waits until
    O's TMA store has read it (``barrier_O``): ``"v"``. Blackwell (Tensor Memory, FA4): O gets a
    buffer of its own when the CTA still fits with it, else it is staged over Q's (FA4's
    ``overlap_sO_sQ``), so the next unit's Q load waits for O's store: ``""`` or ``"q"``.
    ``halves``: 2 for a CTA of a 2-SM pair, which holds half of each K and V block."""
    e = ELEMENT_BYTES[config.dtype]
    bm, bn = config.tile
    stage = bn * (config.head_dim + config.d_v) * e // halves
    q, o = bm * config.head_dim * e, bm * config.d_v * OUT_BYTES
    if gpu.mma is not None and gpu.mma.instruction == "wgmma":
        v_ring = stages * bn * config.d_v * e // halves
        return stage, q, max(0, o - v_ring), "v"
    barriers = 8 * (4 * stages + 2)
    own = stages * stage + q + o + barriers <= gpu.smem_per_cta and o > 0
    return stage, q, (o if own else max(0, o - q)), ("" if own else "q")


# ---------------------------------------------------------------------------------- launch order


def unit_order(config: AttentionConfig) -> list[tuple[int, int, int]]:
    """(batch, head, query block) in launch order: sections of K/V heads whose K and V fit 32 MB
    of L2 (FA3's scheduler), inside a section the longest units first (causal: the last query
    blocks), then by head."""
    e = ELEMENT_BYTES[config.dtype]
    per_head = config.n_kv * (config.head_dim + config.d_v) * e
    section = max(1, SECTION_BYTES // per_head)
    kv_heads = config.batch * (config.kv_heads or config.heads)
    order = []
    for first in range(0, kv_heads, section):
        heads = [(kv // (kv_heads // config.batch), kv % (kv_heads // config.batch))
                 for kv in range(first, min(kv_heads, first + section))]
        units = [(b, kvh * config.kv_group + g, m) for b, kvh in heads for g in range(config.kv_group)
                 for m in range(config.m_blocks)]
        units.sort(key=lambda u: (-config.blocks_of(u[2])[0], u[2], u[0], u[1]))
        order += units
    return order


def assign(blocks: Sequence[int], ctas: int) -> list[list[int]]:
    """Each unit (in order) to the CTA with the least blocks so far (ties: the lowest index)."""
    heap = [(0, g) for g in range(ctas)]
    per_cta: list[list[int]] = [[] for _ in range(ctas)]
    for position, count in enumerate(blocks):
        load, g = heapq.heappop(heap)
        per_cta[g].append(position)
        heapq.heappush(heap, (load + count, g))
    return per_cta


def round_fractions(config: AttentionConfig, order: Sequence[tuple[int, int, int]], concurrent: int,
                    l2_bytes: float = 0) -> list[float]:
    """Per unit, the share of its K/V bytes that come from HBM: per round of ``concurrent``
    units, each K/V head's blocks once (the most any of its units reads) over all blocks read.
    With ``l2_bytes`` at least a section's (FA3 sizes its sections of K/V heads to fit 32 MB of
    L2, :func:`unit_order`), a head's blocks read by an earlier round of its section are still
    in L2: only the blocks no earlier round read come from HBM (the section's K/V once)."""
    e = ELEMENT_BYTES[config.dtype]
    per_head = config.n_kv * (config.head_dim + config.d_v) * e
    keep = l2_bytes >= SECTION_BYTES
    section_heads = max(1, SECTION_BYTES // per_head)
    seen: dict[tuple[int, int], int] = {}
    fractions: list[float] = []
    for start in range(0, len(order), concurrent):
        wave = order[start : start + concurrent]
        most: dict[tuple[int, int], int] = {}
        total = 0
        for b, h, m in wave:
            count = config.blocks_of(m)[0]
            key = (b, h // config.kv_group)
            most[key] = max(most.get(key, 0), count)
            total += count
        if not keep:
            fractions += [sum(most.values()) / total if total else 1.0] * len(wave)
            continue
        new = 0
        for key, count in most.items():
            if key not in seen and len(seen) >= section_heads:
                seen.clear()  # a new section: its heads' K/V are not in L2 yet
            new += max(0, count - seen.get(key, 0))
            seen[key] = max(seen.get(key, 0), count)
        fractions += [new / total if total else 1.0] * len(wave)
    return fractions


# ---------------------------------------------------------------------------------- the plan


def plan(config: AttentionConfig, scenario: ScenarioParts) -> tuple[Plan, Residency]:
    gpu, p = scenario.gpu, scenario.pipeline
    if p.mma_cta_group != 1:  # the 2-SM pair has its own plan (tmasim.workloads.attention_pair)
        raise ScenarioError("pipeline.mma_cta_group", p.mma_cta_group, "is planned by attention_pair.plan_pair")
    shape = shape_of(config, p)
    if gpu.mma is not None and gpu.mma.instruction == "wgmma" and shape.rows % 64:
        raise ScenarioError("workload.tile", list(config.tile),
                            f"gives each consumer {shape.rows} query rows: must be a multiple of 64 (wgmma's M)")
    stage, q_bytes, o_bytes, o_over = smem_parts(config, gpu, p.stages)
    acc = registers(config, gpu, p) or tensor_memory(config, gpu, shape)
    res = residency(gpu, stage_bytes=stage, stages=p.stages, other_smem=q_bytes + o_bytes + 16,
                    consumers=shape.warpgroups, accumulator=acc)
    order = unit_order(config)
    counts = [config.blocks_of(m)[0] for _, _, m in order]
    persistent = config.launch == "persistent"
    slots = gpu.sms * res.ctas_per_sm
    concurrent = min(slots, len(order))
    fractions = round_fractions(config, order, concurrent, gpu.l2_size)
    schedule = AttentionSchedule(shape.processes, shape.pingpong, config.softmax_overlap, p.warp_specialized,
                                 o_over, gpu.tma_issue, config.correction_warpgroup,
                                 pv_first=bool(gpu.mma is not None and gpu.mma.tmem_columns),  # P over S in TMEM
                                 k_before_q=o_over == "v")  # FA3 (Hopper): K_0, then Q, then V_0
    units = _units(config, gpu, shape, order, fractions)
    if persistent:
        programs = [AttentionProgram([units[i] for i in positions], schedule)
                    for positions in assign(counts, concurrent)]
    else:
        programs = [AttentionProgram([unit], schedule) for unit in units]
    sms = min(gpu.sms, len(programs))
    info = {"o_over": o_over, "max_blocks": max(counts), "mean_blocks": sum(counts) / len(counts),
            "processes": shape.processes, "warpgroups": shape.warpgroups}
    return Plan(programs, persistent, res.ctas_per_sm, sms, flow=True, units=len(units), info=info), res


def _units(config: AttentionConfig, gpu: GpuSpec, shape: Shape, order: Sequence[tuple[int, int, int]],
           fractions: Sequence[float]) -> list[AttentionUnit]:
    e = ELEMENT_BYTES[config.dtype]
    bm, bn = config.tile
    d, dv = config.head_dim, config.d_v
    blocks_cache: dict[tuple[float, bool, int], KvBlock] = {}
    tail_rows = config.n_kv - (config.n_blocks - 1) * bn

    def kv(fraction: float, masked: bool, rows_in: int) -> KvBlock:
        key = (fraction, masked, rows_in)
        if key not in blocks_cache:
            k = tma_copy(gpu, bn * d * e, rows_in, d * e, fraction)
            v = tma_copy(gpu, bn * dv * e, rows_in, dv * e, fraction)
            blocks_cache[key] = block(config, gpu, shape.rows, k, v, masked, rows_in)
        return blocks_cache[key]

    epilogue_time = epilogue_ps(config, gpu, shape.rows)
    runs_cache: dict[tuple[float, int, int], tuple[tuple[KvBlock, int], ...]] = {}
    edges_cache: dict[int, tuple[Copy, Epilogue]] = {}
    last = config.n_blocks - 1
    units = []
    for index, ((_, _, m), fraction) in enumerate(zip(order, fractions, strict=True)):
        rows_in = min(bm, config.seqlen_q - m * bm)
        blocks, full = config.blocks_of(m)
        key = (fraction, blocks, full)
        if key not in runs_cache:
            # Unmasked blocks, then masked ones; the last K/V block may be cut short by seqlen_kv.
            cuts = sorted({0, full, blocks, min(blocks, last), min(blocks, last + 1)})
            runs = [(kv(fraction, lo >= full, tail_rows if lo == last else bn), hi - lo)
                    for lo, hi in zip(cuts, cuts[1:], strict=False) if hi > lo]
            runs_cache[key] = tuple(runs)
        if rows_in not in edges_cache:  # (Q's copy, the epilogue: whole tiles share theirs)
            store = Copy(bm * dv * OUT_BYTES, rows_in * dv * OUT_BYTES, 1.0, 0)
            edges_cache[rows_in] = tma_copy(gpu, bm * d * e, rows_in, d * e, 1.0), Epilogue(epilogue_time, store)
        q, epilogue = edges_cache[rows_in]
        units.append(AttentionUnit(index, q, runs_cache[key], epilogue))
    return units


def tma_copy(gpu: GpuSpec, smem: int, rows: int, row_bytes: int, fraction: float) -> Copy:
    """A TMA load of ``rows`` in-bounds rows of ``row_bytes`` each (``smem`` bytes land, edge rows
    zero-filled), its requests counted as for a GEMM's boxes."""
    return Copy(smem, rows * row_bytes, fraction, gpu.copy_latency_for(smem) + round(fraction * gpu.hbm_latency),
                requests=row_requests(rows, row_bytes))
