"""The online softmax as instructions on the SM's pipes: what FA3 (Hopper) and FA4 (Blackwell)
execute per block of scores, each instruction charged to the pipe that runs it at the preset's
rate, every instruction to the warp schedulers' issue slots, and the dependent chains as latency.

Per block of ``rows`` query rows x ``bn`` keys (status: *derived* = counted from the source; the
rates and latencies are the preset's, each with its source and confidence: ``tmasim presets``):

==========================  ==============================  ========  ==================================
instruction (SASS)          what                            pipe      count
==========================  ==============================  ========  ==================================
FMNMX                       row max, a serial chain a row   ALU       1 / score (FA4: 1/2, three-input)
SHFL.BFLY + FMNMX           the max's quad all-reduce       MIO, ALU  2 rounds / row-thread (FA3 only)
FFMA                        x·scale·log2e − max·scale       FMA       1 / score
MUFU.EX2                    exp2 of the score               XU        1 / score (FA4: a share emulated)
MUFU.EX2                    the row's rescale factor        XU        1 / row-thread
FADD                        row sum, a serial chain a row   FMA       1 / score + 1 / row-thread
FFMA/FMUL                   per-row scalars                 FMA       12 / row (FA3)
F2FP.PACK_AB                P to 16 bits, two a time        ALU or XU 1/2 / score (gpu.convert_pipe)
FMUL                        rescale of O                    FMA       1 / O element
==========================  ==============================  ========  ==================================

Counted from FA3's ``hopper/softmax.h`` (``reduce_max``, ``scale_apply_exp2``, ``reduce_sum``,
``max_get_scale``, ``rescale_o``) and ``hopper/utils.h`` (``Allreduce<4>``), as tabled in the
team's ``calibration/hopper/attention-softmax.md`` §3 (about 5.3 thread instructions a score
for head dim <= 128). The layout decides the chains: FA3's wgmma accumulator gives each thread
2 rows x ``bn`` / 4 scores, four threads a row (so the max ends in an all-reduce of two shuffle
rounds); FA4's ``tcgen05.ld`` gives a thread a whole row of ``bn`` scores, which it reduces in
four accumulators with three-input FMNMX (``flash_attn/cute/utils.py``, ``fmax_reduce`` for
arch >= 100) and no shuffle.

FA4 moves a share of the exponentials off the XU (``workload.exp_emulated``): its
``ex2_emulation_2`` (``flash_attn/cute/utils.py``) does a pair with one clamp FMNMX each, a
packed round-down add, two packed subtractions and a degree-3 Horner polynomial of packed FFMAs
(six FMA-pipe results a score), then a shift and an add into the exponent (two ALU a score):
counted as 6 FMA and 3 ALU results a score, and 6 issue slots (the packed FMA-pipe
instructions take one slot for two scores).

Phases, in FA3's order (``hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp``, ``fwd_step``): the row max
first (its chain, then the all-reduce: a *lead* that holds no shared pipe, ``VectorWork.lead``),
then the exponentials, sums and per-row scalars side by side on their pipes; with the softmax
overlapped on Hopper, the conversion of P and the rescale of O wait for P·V of the previous
block (:func:`convert_work`), since P_j is written over the registers that P·V reads. The last
exponential and its add close the row sum: their latencies are charged in the lead too (alone
on idle pipes it is the same time; under sharing the tail is approximated).

Pipes and sharing: the multi-function unit (``xu``: exponentials), the FP32 pipe (``fma``), the
ALU (``alu``) and the issue slots (``issue``) of the SM, each shared by processor sharing with
the other warpgroups' work (:class:`~tmasim.engine.sm.vector_units.VectorUnits`). Each warpgroup
puts one warp on each of the four sub-partitions, so per-SM rates and per-sub-partition rates
give the same times. The FMA pipe is left out of a job where it can never be the slower pipe:
every FMA-pipe instruction also takes an issue slot, so with ``fp32_per_clock`` at least
``issue_per_clock`` each job's FMA work is at most its issue work, and under processor sharing a
job's completion on a pipe only grows with the jobs' work, so the issue pipe finishes each job
no earlier than the FMA pipe would: exact, one shared pipe fewer.

What is not modelled: the wgmma issue (a few instructions per 64 x N x 16 step), the MIO queue
beside the XU (MUFU goes through it; the XU's own rate binds first at these counts), the row
max's FMNMX and shuffles on the shared ALU and MIO (they are the lead's latency, not shared),
and any interference between the tensor pipe and the vector pipes (none is documented; the
device check's third probe measures it).
"""

from __future__ import annotations

from dataclasses import dataclass

from tmasim.engine.attention.program import VectorWork
from tmasim.machine.hardware import GpuSpec

REDUCE_ROUNDS = 2  # FA3's quad all-reduce of the row max: 4 threads share a row (Allreduce<4>): derived
SCALARS_PER_ROW = 12  # FA3's per-row scalars (max·scale, (prev − cur)·scale, row_sum·scale): derived
FA4_MAX_CHAINS = 4  # FA4's fmax_reduce: four independent accumulators: derived
# FA4's ex2_emulation_2 per score: FMA-pipe results, ALU results, issue slots (see the module doc): derived
EMULATED_FMA, EMULATED_ALU, EMULATED_ISSUE = 6.0, 3.0, 6.0


@dataclass(frozen=True)
class Layout:
    """How a block's scores lie on the threads that run the softmax."""

    threads_per_row: int  # FA3: 4 (wgmma accumulator); FA4: 1 (a TMEM row per thread)
    rows_per_warp_slot: int  # query rows per warp on each sub-partition (64 for a warpgroup's wgmma, 128 for FA4)
    max_per_score: float  # FMNMX a score (1/2 with three-input FMNMX)
    max_chains: int  # independent accumulators of a thread's row max
    shuffle_rounds: int  # the all-reduce across the threads of a row


FA3 = Layout(threads_per_row=4, rows_per_warp_slot=64, max_per_score=1.0, max_chains=1, shuffle_rounds=REDUCE_ROUNDS)
FA4 = Layout(threads_per_row=1, rows_per_warp_slot=128, max_per_score=0.5, max_chains=FA4_MAX_CHAINS,
             shuffle_rounds=0)


def layout_of(gpu: GpuSpec) -> Layout:
    """FA4's on a GPU with Tensor Memory, FA3's otherwise."""
    return FA4 if gpu.mma is not None and gpu.mma.tmem_columns else FA3


def _rate(per_clock: int) -> float:
    """Cycles per instruction at ``per_clock`` a clock per SM; 0 (not stated): not charged."""
    return 1.0 / per_clock if per_clock else 0.0


def _work(gpu: GpuSpec, scale: float, xu: float, fma: float, alu: float, issue: float, lead_ps: float,
          fma_count: float, issue_count: float) -> VectorWork:
    """Cycles per pipe to a job in ps (x ``scale``); the FMA pipe left out where issue dominates it."""
    dominated = gpu.issue_per_clock and gpu.fp32_per_clock >= gpu.issue_per_clock and fma_count <= issue_count

    def ps(cycles: float) -> int:
        return gpu.cycles_ps(scale * cycles)

    return VectorWork(ps(xu), 0 if dominated else ps(fma), ps(alu), ps(issue), round(scale * lead_ps))


def softmax_work(gpu: GpuSpec, scale: float, rows: int, bn: int, convert: bool = True,
                 emulated: float = 0.0) -> VectorWork:
    """One block's online softmax for ``rows`` query rows against ``bn`` keys, x ``scale``; with
    ``convert`` false, without the conversion of P (its own phase: :func:`convert_work`);
    ``emulated``: the share of the score exponentials computed on the FMA pipe (FA4)."""
    if not scale:
        return VectorWork()
    lay = layout_of(gpu)
    scores, row_threads = rows * bn, rows * lay.threads_per_row
    # The lead: the row max (its serial chains, or the ALU's rate if that is slower), the all-reduce,
    # the scaled max feeding the exponentials; then the last exponential and its add (the sum's end).
    per_thread_row = bn / lay.threads_per_row
    chain = per_thread_row * lay.max_per_score / lay.max_chains + (lay.max_chains - 1).bit_length()
    maxes = scores * lay.max_per_score + row_threads * lay.shuffle_rounds
    shuffles = row_threads * lay.shuffle_rounds
    lead = (max(chain * gpu.minmax_latency, gpu.cycles_ps(maxes * _rate(gpu.minmax_per_clock)))
            + max(lay.shuffle_rounds * gpu.shuffle_latency, gpu.cycles_ps(shuffles * _rate(gpu.shuffle_per_clock)))
            + 2 * gpu.fp32_latency + gpu.exp_latency)
    exps = scores * (1.0 - emulated) + row_threads
    fma_issue = 2.0 * scores + row_threads + SCALARS_PER_ROW * rows * (lay.threads_per_row > 1)
    fma = fma_issue + EMULATED_FMA * emulated * scores
    alu = EMULATED_ALU * emulated * scores
    issue = exps + fma_issue + EMULATED_ISSUE * emulated * scores
    packs = scores / 2 if convert else 0.0
    on_xu = gpu.convert_pipe == "xu"
    xu_cycles = exps * _rate(gpu.exp_per_clock) + (packs * _rate(gpu.convert_per_clock) if on_xu else 0.0)
    alu_cycles = alu * _rate(gpu.minmax_per_clock) + (0.0 if on_xu else packs * _rate(gpu.convert_per_clock))
    return _work(gpu, scale, xu_cycles, fma * _rate(gpu.fp32_per_clock), alu_cycles,
                 (issue + packs) * _rate(gpu.issue_per_clock), lead, fma, issue + packs)


def convert_work(gpu: GpuSpec, scale: float, rows: int, bn: int) -> VectorWork:
    """P of ``rows`` x ``bn`` to 16 bits on its own (F2FP.PACK_AB, two scores an instruction, on
    ``gpu.convert_pipe`` at ``gpu.convert_per_clock``; each also an issue slot): the phase FA3 runs
    after P·V of the previous block has completed, since P_j is written over the registers P_{j-1}
    feeds that P·V from."""
    if not scale:
        return VectorWork()
    packs = rows * bn / 2
    cycles = packs * _rate(gpu.convert_per_clock)
    on_xu = gpu.convert_pipe == "xu"
    return _work(gpu, scale, cycles if on_xu else 0.0, 0.0, 0.0 if on_xu else cycles,
                 packs * _rate(gpu.issue_per_clock), 0.0, 0.0, packs)


def multiplies(gpu: GpuSpec, scale: float, count: int) -> VectorWork:
    """``count`` FMULs (the rescale or the normalization of O): the FP32 pipe, one issue slot each."""
    if not scale:
        return VectorWork()
    return _work(gpu, scale, 0.0, count * _rate(gpu.fp32_per_clock), 0.0, count * _rate(gpu.issue_per_clock), 0.0,
                 count, count)
