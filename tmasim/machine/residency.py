"""How many CTAs fit on an SM: shared memory, threads and the CTA limit.

A CTA's shared memory is its stage ring (stages x bytes per stage), whatever else the kernel
keeps there (an epilogue staging buffer), and two 8-byte mbarriers per stage. It must fit in
what one CTA may use (227 KiB on Hopper); on the SM each CTA also costs the system's reserved
share (1 KiB per CTA on Hopper), so the SM holds floor(SMEM per SM / (CTA's SMEM + reserved))
CTAs, capped by threads and by the resident-CTA limit. More stages hide more latency but can
lower this number: the trade-off behind most "how many stages?" questions.
"""

from __future__ import annotations

from dataclasses import dataclass

from tmasim.errors import ResidencyError
from tmasim.machine.hardware import GpuSpec
from tmasim.values import format as fmt

BARRIER_BYTES = 8
WARPGROUP_THREADS = 128
MAX_THREADS_PER_CTA = 1024


@dataclass(frozen=True)
class Accumulator:
    """Where a CTA's MMA accumulators live and what they take (docs/design.md, section 8).

    Hopper: registers. Each thread of the producer warpgroup holds ``producer`` registers and
    each consumer thread ``consumer`` (``setmaxnreg`` moves registers between them), so the CTA
    takes 128 x (producer + consumers x consumer) of the SM's register file; a consumer thread
    needs ``needed`` (its share of the fp32 accumulator plus an overhead). Blackwell: Tensor
    Memory, ``tmem_columns`` 32-bit columns of the SM's 128 lanes (allocated in powers of two).
    """

    producer: int = 0
    consumer: int = 0
    needed: int = 0
    registers_per_cta: int = 0
    tmem_columns: int = 0


@dataclass(frozen=True)
class Residency:
    stage_bytes: int
    stages: int
    other_smem: int
    smem_per_cta: int        # the CTA's own allocation: ring + other + barriers
    threads_per_cta: int
    ctas_per_sm: int
    limited_by: str          # "shared memory", "threads", "CTAs per SM", "registers" or "tensor memory"
    accumulator: Accumulator | None = None


def residency(gpu: GpuSpec, *, stage_bytes: int, stages: int, other_smem: int = 0,
              consumers: int = 1, requested_ctas_per_sm: int | None = None,
              accumulator: Accumulator | None = None) -> Residency:
    """The residency of a warp-specialized CTA (one producer and ``consumers`` warpgroups)."""
    ring = stages * stage_bytes
    smem = ring + other_smem + 2 * stages * BARRIER_BYTES
    threads = WARPGROUP_THREADS * (1 + consumers)
    if smem > gpu.smem_per_cta:
        raise ResidencyError(
            "pipeline.stages", stages,
            f"needs {fmt.size(smem)} of shared memory per CTA ({stages} stages x {fmt.size(stage_bytes)} "
            f"+ {fmt.size(other_smem)} other + {2 * stages * BARRIER_BYTES} B of barriers), over the "
            f"{fmt.size(gpu.smem_per_cta)} a CTA may use on {gpu.name}")
    if threads > min(MAX_THREADS_PER_CTA, gpu.max_threads_per_sm):
        raise ResidencyError("pipeline.consumers", consumers,
                             f"makes {threads} threads per CTA (128 per warpgroup, plus the producer's), over "
                             f"{min(MAX_THREADS_PER_CTA, gpu.max_threads_per_sm)}")
    limits = {
        "shared memory": gpu.smem_per_sm // (smem + gpu.smem_reserved_per_cta),
        "threads": gpu.max_threads_per_sm // threads,
        "CTAs per SM": gpu.max_ctas_per_sm,
    }
    if accumulator is not None and gpu.mma is not None:
        if accumulator.registers_per_cta:
            limits["registers"] = gpu.mma.registers_per_sm // accumulator.registers_per_cta
        if accumulator.tmem_columns:
            limits["tensor memory"] = gpu.mma.tmem_columns // accumulator.tmem_columns
    limited_by = min(limits, key=lambda k: limits[k])
    fits = limits[limited_by]
    if fits < 1:
        raise ResidencyError(
            "pipeline.stages", stages,
            f"makes a CTA of {fmt.size(smem)} + {fmt.size(gpu.smem_reserved_per_cta)} reserved that does "
            f"not fit in the {fmt.size(gpu.smem_per_sm)} of shared memory of an SM of {gpu.name}")
    if requested_ctas_per_sm is not None:
        if requested_ctas_per_sm > fits:
            raise ResidencyError("workload.ctas_per_sm", requested_ctas_per_sm,
                                 f"is more than fit on an SM of {gpu.name}: {fits} (limited by {limited_by}: "
                                 f"{_limit_detail(gpu, limited_by, smem, threads, accumulator)})")
        fits, limited_by = requested_ctas_per_sm, "the workload's ctas_per_sm"
    return Residency(stage_bytes, stages, other_smem, smem, threads, fits, limited_by, accumulator)


def _limit_detail(gpu: GpuSpec, limit: str, smem: int, threads: int, acc: Accumulator | None) -> str:
    if limit == "registers" and acc is not None and gpu.mma is not None:
        return (f"{acc.registers_per_cta} registers per CTA (128 x ({acc.producer} producer + consumers x "
                f"{acc.consumer})), {gpu.mma.registers_per_sm} per SM; set pipeline.registers to give less")
    if limit == "tensor memory" and acc is not None and gpu.mma is not None:
        return f"{acc.tmem_columns} TMEM columns per CTA, {gpu.mma.tmem_columns} per SM"
    if limit == "threads":
        return f"{threads} threads per CTA, {gpu.max_threads_per_sm} per SM"
    if limit == "CTAs per SM":
        return f"at most {gpu.max_ctas_per_sm} resident CTAs"
    return (f"{fmt.size(smem)} + {fmt.size(gpu.smem_reserved_per_cta)} reserved per CTA, "
            f"{fmt.size(gpu.smem_per_sm)} per SM")
