"""The online softmax's cost by mechanism: FA3's instructions per score element, charged to the
units that execute them and to instruction issue.

Counted from FA3's source (Dao-AILab/flash-attention ``hopper/softmax.h``: ``reduce_max``,
``scale_apply_exp2``, ``reduce_sum``, ``max_get_scale``, ``rescale_o``; the algorithm of Shah et
al., FlashAttention-3, arXiv 2407.08608, §3) for one block of ``rows`` x ``BN`` scores, per
element unless said (status: *derived* = counted from the source, *assumed* = not measured):

==========================  ========================  =====================  ==========
instruction (SASS)          what                      unit                   per
==========================  ========================  =====================  ==========
FMNMX                       row max (thread_reduce_)  ALU (min/max)          1 / score   derived
SHFL + FMNMX                the max's quad all-reduce ALU, latency           2 / row-thread, 4 threads a row  derived
FFMA                        x·scale·log2e - max·s     FP32 (FMA) pipe        1 / score   derived
MUFU.EX2                    exp2f                     MUFU                   1 / score   derived
FADD                        row sum (reduce_sum)      FP32 (FMA) pipe        1 / score   derived
F2FP.PACK_AB                P to 16 bits, two a time  conversion             1/2 / score derived, below
MUFU.EX2, FMUL              the row's rescale factor  MUFU, FP32             1 / row     derived
FMUL                        rescale of O (rescale_o)  FP32 (FMA) pipe        1 / O element derived
==========================  ========================  =====================  ==========

Unit rates per SM per clock (CUDA C++ Programming Guide, arithmetic instructions, throughput
table, cc 9.0 and 10.0): FP32 add/multiply/FMA 128 (``gpu.fp32_per_clock``); exp2 (MUFU) 16
(``gpu.exp_per_clock``; FA3's paper: 3.9 T special functions/s on H100 SXM5 = 16 per SM per
clock at 1.83 GHz); compare/minimum/maximum 64 (half the FP32 rate: ``MINMAX_SHARE``); type
conversions 16 (``CONVERT_PER_CLOCK``, the guide's "all other type conversions"). The last two
are the table as read before, not re-checked against the cc 9.0 column in this change: treat
them as datasheet values to confirm. Whether F2FP shares MUFU's port is not documented:
assumed apart. The FP32 rate is two 16-lane pipes per sub-partition (FMA heavy and lite) and the
tensor pipe dispatches apart from them (NVIDIA's developer forum, "separate CUDA core pipeline for
FP16 and FP32", GH100: "Shared pipe handles Tensor and FP64 operations", the FMA pipes as GA10x):
so the softmax's FP32 and MUFU work and the tensor cores' run side by side, as modelled. Issue: one warp
instruction per clock per scheduler, four schedulers an SM (the guide's SM description for cc
9.0/10.0): 128 thread-instructions per clock (``ISSUE_PER_CLOCK``), shared by every
instruction above (the wgmma issue, a few instructions per 64 x N x 16 step, is left out:
assumed negligible).

Where P·V reads P from registers (Hopper's wgmma RS), the conversion is a phase of its own
(:func:`convert_work`): FA3's loop (``hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp``, ``fwd_step``)
writes P_j into the registers that P·V_{j-1} reads as its A operand, so it converts only after
``warpgroup_wait<0>`` (P·V_{j-1} complete), then rescales O (``rescale_o`` after the conversion
for head dim <= 128: ``RescaleOBeforeGemm = kHeadDim > 128 && ...``; above it FA3 rescales O
inside its turn, before issuing P·V, which the model does not follow): status derived. Alone
on idle units it costs the same; what changes is that it no longer runs under
P·V_{j-1}, so it lengthens the warpgroup's chain between its S_j and its next turn.

Two phases, because the exponentials need the row max: first the max (FMNMX at the min/max
rate, then the all-reduce's two shuffle rounds at ``SHUFFLE_CYCLES`` each, assumed: a latency
no other work fills in FA3's instruction stream), then the exponentials, sums and conversions
side by side on their units, the slowest unit (or issue) setting the time. The second phase is
what :class:`~tmasim.engine.attention.program.VectorWork` shares between warpgroups; the first
is its ``lead``.
"""

from __future__ import annotations

from tmasim.engine.attention.program import VectorWork
from tmasim.hardware import GpuSpec

# Status of each count: "datasheet, not re-checked" = the CUDA guide's throughput table as read
# before; its cc 9.0 column could not be retrieved again in the change that split the conversion.
MINMAX_SHARE = 0.5  # FMNMX at 64 a clock per SM, FP32's 128 (guide, compare/min/max): datasheet, not re-checked
CONVERT_PER_CLOCK = 16  # F2FP per clock per SM (guide, "all other type conversions"): datasheet, not re-checked;
# its unit apart from MUFU and the FP32 pipe: assumed
ISSUE_PER_CLOCK = 128  # 4 schedulers x 1 warp instruction (32 threads) per clock: datasheet
SHUFFLE_CYCLES = 30  # one SHFL round trip and its FMNMX, dependent: assumed
REDUCE_ROUNDS = 2  # the quad all-reduce: 4 threads share a row (Allreduce<4>): derived

# Per score element (counted from hopper/softmax.h, see the table above).
FFMA, FMNMX, EX2, FADD, F2FP = 1.0, 1.0, 1.0, 1.0, 0.5


def _ps(gpu: GpuSpec, cycles: float) -> int:
    return round(cycles / gpu.clock_hz * 1e12)


def softmax_work(gpu: GpuSpec, scale: float, rows: int, bn: int, convert: bool = True) -> VectorWork:
    """One block's online softmax for ``rows`` query rows against ``bn`` keys, x ``scale``; with
    ``convert`` false, without the conversion of P (its own phase: :func:`convert_work`)."""
    if not scale:
        return VectorWork()
    scores = rows * bn
    minmax_rate = gpu.fp32_per_clock * MINMAX_SHARE
    reduce_lanes = REDUCE_ROUNDS * 4 * rows  # SHFL + FMNMX per round, per thread of a row
    lead = scores * FMNMX / minmax_rate + REDUCE_ROUNDS * SHUFFLE_CYCLES
    exps = scores * EX2 + rows
    fma = scores * (FFMA + FADD) + 2 * rows
    packs = scores * F2FP if convert else 0.0
    issue = scores * (FFMA + EX2 + FADD) + packs + 3 * rows + 2 * reduce_lanes
    other = max(fma / gpu.fp32_per_clock, packs / CONVERT_PER_CLOCK, issue / ISSUE_PER_CLOCK)
    return VectorWork(_ps(gpu, scale * exps / gpu.exp_per_clock), _ps(gpu, scale * other), _ps(gpu, scale * lead))


def convert_work(gpu: GpuSpec, scale: float, rows: int, bn: int) -> VectorWork:
    """P of ``rows`` x ``bn`` to 16 bits on its own (F2FP.PACK_AB, two scores an instruction, at
    ``CONVERT_PER_CLOCK``; each also an issue slot): the phase FA3 runs after P·V of the previous
    block has completed, since P_j is written over the registers P_{j-1} feeds that P·V from."""
    if not scale:
        return VectorWork()
    packs = rows * bn * F2FP
    # Not on MUFU (assumed, as in the softmax job): on the pipe VectorWork calls FP32, which stands
    # for the vector work beside the exponentials (FP32, conversions, issue), shared by warpgroups.
    return VectorWork(0, _ps(gpu, scale * max(packs / CONVERT_PER_CLOCK, packs / ISSUE_PER_CLOCK)))


def multiplies(gpu: GpuSpec, scale: float, count: int) -> VectorWork:
    """``count`` FMULs (the rescale or the normalization of O): the FP32 pipe, issued one a thread."""
    if not scale:
        return VectorWork()
    return VectorWork(0, _ps(gpu, scale * count / min(gpu.fp32_per_clock, ISSUE_PER_CLOCK)))
