"""A GEMM k-step on the tensor cores: the MMA instructions it maps to (wgmma, tcgen05) and
where its fp32 accumulator lives (registers or Tensor Memory), checked against the SM's limits."""

from __future__ import annotations

from dataclasses import dataclass

from tmasim.errors import ResidencyError, ScenarioError
from tmasim.machine.hardware import GpuSpec
from tmasim.machine.mma import K_OF
from tmasim.machine.operands import check_source, operand_timing
from tmasim.machine.residency import Accumulator
from tmasim.values import format as fmt
from tmasim.workloads.gemm_config import GemmConfig


@dataclass(frozen=True)
class MmaStep:
    """One k-step's MMA: ``count`` instructions of one shape; the tensor cores' occupancy and
    the completion delay after it, in ps (flat FLOP rate where the preset has no MMA table)."""

    instruction: str | None
    count: int
    occupancy: int
    tail: int
    smem_reads: float = 0.0  # bytes the step's MMAs read from one SM's shared memory
    smem_bound: bool = False  # those reads, not the tensor cores, set the instructions' pace


def mma_step(config: GemmConfig, gpu: GpuSpec, consumers: int, mode: str, pair: bool = False,
             pace: float = 1.0) -> MmaStep:
    """Map a k-step onto MMA instructions as CUTLASS does. Hopper: each consumer warpgroup
    issues wgmma m64nBNk16 over its rows (BM / consumers cooperative, all BM in ping-pong);
    Blackwell: one thread issues tcgen05.mma M = BM, N = BN (a CTA pair's leader: M = 2·BM on
    both SMs, cta_group::2, the table's 2-SM rows). Either way BK / K instructions deep. The
    SM's tensor cores take them one after another: occupancy = count x II. ``pace``: how much
    slower the tensor cores run than alone (their sustained rate under whole-chip load, ``GpuSpec.mma_pace``)."""
    bm, bn, bk = config.tile
    table = gpu.mma
    if table is None:  # a pair computes twice the rows on twice the tensor cores: the same time
        return MmaStep(None, 0, round(2 * bm * bn * bk * pace / gpu.sm_flop_rate(config.dtype)), 0)
    k = K_OF[config.dtype]
    if bk % k:
        raise ScenarioError("workload.tile", f"BK = {bk}", f"is not a multiple of K = {k}, the depth of one "
                                                          f"{config.dtype} {table.instruction} instruction")
    n = bn
    if table.instruction == "wgmma":
        split = consumers if mode == "cooperative" else 1
        if bm % 64:
            raise ScenarioError("workload.tile", f"BM = {bm}", "is not a multiple of 64, the M of one wgmma")
        m, count = 64, bm // 64 * (bk // k)
        if (bm // 64) % split:
            # Too few 64-row blocks to share by rows: the warpgroups split N instead.
            if bn % split or (bn // split) % 8:
                raise ScenarioError("workload.tile", f"[{bm}, {bn}]",
                                    f"cannot be shared by {split} cooperative consumer warpgroups: neither BM / 64 "
                                    "nor BN / 8 divides evenly")
            n, count = bn // split, count * split
    else:
        m, count = bm, bk // k
    sms = 1
    if pair:
        if table.instruction != "tcgen05":
            raise ScenarioError("pipeline.mma_cta_group", 2, f"needs a 2-SM MMA; {table.instruction} runs on one SM")
        m, sms = 2 * bm, 2
    latency, ii = table.timing("workload.tile", config.dtype, m, n, sms)
    latency, ii = latency * pace, ii * pace
    source = check_source("workload.operands", table.instruction, config.operands)
    per_cycle = gpu.smem_bytes_per_cycle()
    op = operand_timing(latency, ii, m, n, sms, source, per_cycle, table.operands)
    return MmaStep(table.name(config.dtype, m, n, sms), count, gpu.cycles_ps(count * op.ii),
                   gpu.cycles_ps(op.latency - op.ii), count * op.smem_bytes, op.smem_bound)


PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232  # CUTLASS's setmaxnreg split for warp-specialized kernels
WARPGROUP = 128


def accumulator(config: GemmConfig, gpu: GpuSpec, consumers: int, mode: str,
                registers: tuple[int | None, int | None] = (None, None)) -> Accumulator | None:
    """Where the fp32 accumulator lives and whether it fits (one-line errors giving the numbers).

    Hopper: a consumer thread holds BM·BN / (128 · consumers) accumulator registers cooperative
    (BM·BN / 128 in ping-pong: each warpgroup owns a whole tile) plus the preset's overhead,
    within its setmaxnreg count (default 232; the producer keeps 40) and 255 per thread; the
    CTA's 128 x (producer + consumers x consumer) registers must fit the SM's file. If the
    default counts overflow the file, the consumer count defaults to what fits.
    Blackwell: BN fp32 columns of TMEM per accumulator (one per consumer in ping-pong),
    allocated in a power of two of at least 32 columns, within the SM's 512.
    """
    table = gpu.mma
    bm, bn, _ = config.tile
    if table is None:
        return None
    owners = consumers if mode == "pingpong" else 1  # accumulators per CTA
    if table.tmem_columns:
        columns = max(32, 1 << (bn * owners - 1).bit_length())
        if columns > table.tmem_columns:
            raise ResidencyError("workload.tile", list(config.tile),
                                 f"needs {columns} TMEM columns for {fmt.plural(owners, 'fp32 accumulator')} "
                                 f"of {bm}x{bn}, over "
                                 f"the {table.tmem_columns} of an SM's Tensor Memory on {gpu.name}")
        return Accumulator(tmem_columns=columns)
    share = bm * bn // (WARPGROUP * (1 if mode == "pingpong" else consumers))
    needed = share + table.register_overhead
    producer = registers[0] if registers[0] is not None else PRODUCER_REGISTERS
    consumer = registers[1] if registers[1] is not None else _default_consumer(table.registers_per_sm, producer,
                                                                               consumers)
    allowed = min(consumer, table.registers_per_thread)
    how = f"{bm}x{bn} over {consumers} cooperative warpgroups" if mode != "pingpong" else f"{bm}x{bn} per warpgroup"
    if needed > allowed:
        raise ResidencyError("workload.tile", list(config.tile),
                             f"needs {needed} registers per consumer thread ({share} for the fp32 accumulator, {how}, "
                             f"+ {table.register_overhead} overhead), over the {allowed} allowed (pipeline.registers."
                             f"consumer = {consumer}; at most {table.registers_per_thread} per thread)")
    per_cta = WARPGROUP * (producer + consumers * consumer)
    if per_cta > table.registers_per_sm:
        raise ResidencyError("pipeline.registers", f"{{producer = {producer}, consumer = {consumer}}}",
                             f"gives a CTA 128 x ({producer} + {consumers} x {consumer}) = {per_cta} registers, over "
                             f"the {table.registers_per_sm} of an SM on {gpu.name}")
    return Accumulator(producer, consumer, needed, per_cta)


def _default_consumer(per_sm: int, producer: int, consumers: int) -> int:
    fits = (per_sm // WARPGROUP - producer) // consumers // 8 * 8
    return min(CONSUMER_REGISTERS, fits)
