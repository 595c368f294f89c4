"""Where an MMA's operands come from, and the shared-memory bandwidth they cost (docs/design.md §8).

An MMA instruction reads its B operand from shared memory (SMEM), and its A operand from SMEM
too (``SS``) or from Tensor Memory (``TS``, Blackwell ``tcgen05.mma``) or registers (``RS``,
Hopper ``wgmma``). One SM's SMEM serves ``smem_bandwidth`` (about 128 B per cycle), shared by
every reader and writer: the MMA's operand reads, the TMA's writes of the stage ring, the
epilogue's staging of C. The preset's ``[mma]`` table gives each shape's latency and II with
A *not* read from SMEM (the ``TS`` rows of the B200 UMMA table: what the tensor cores alone
take); an ``SS`` instruction then

- issues no faster than its operand bytes stream from SMEM: II = max(II, bytes / bandwidth),
  bytes = (M + N) x 32 B per instruction and SM (every K of every dtype is 32 bytes deep:
  k16 bf16, k32 fp8, k8 tf32); a CTA pair's ``cta_group::2`` MMA reads half of each operand
  on each SM;
- completes later by the time A's bytes take to arrive: latency + M x 32 B / bandwidth.

Fitted on the B200 table of SS against TS issue intervals (``validation/public/b200/``): at
M = 128 and N = 64 SS takes 48.6 cycles where TS takes 32.5, 6 KiB at 126.6 B per cycle.

In a GEMM k-step, A must reach TMEM or the registers somehow: with ``TS``/``RS`` it is read
from SMEM once (``tcgen05.cp`` / ``ldmatrix``), off the MMA's critical path; the SMEM then also
serves the k-step's TMA writes. That traffic is charged as SMEM time after the step's MMAs
(:func:`k_step_smem_hold`): the next k-step's MMAs wait for it, the slot's release does not,
so a throughput-bound mainloop is bounded by (reads + writes) / bandwidth and a latency-bound
one, whose SMEM idles between MMAs, is not slowed. Arithmetic on durations, no events.

Where the preset gives ``smem_write_bandwidth`` (B200), the writes do not share the MMAs' time:
the k-step is bounded by MMA time + writes / ``smem_write_bandwidth``. The one-CTA mainloop
table (``validation/public/b200/cutlass_mainloop_train.csv``) asks for it: 128x32x128 bf16
plateaus at 508 cycles a k-step where the shared rule gives 661 (80 KiB of reads and writes at
124 B per cycle), while 64x128x128 bf16 plateaus at 789, its 512 cycles of MMAs plus its 48 KiB
of writes at about 177 B per cycle; no single shared bandwidth fits both, MMA time plus writes
at one rate fits both within 8%. The fitted rate (254 B per cycle) is above the 128 B per cycle
an SM's SMEM serves, so read it as the share of the writes that hide under the MMAs (about half)
rather than as a port of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tmasim.errors import ScenarioError

SOURCES = {"tcgen05": ("SS", "TS"), "wgmma": ("SS", "RS")}
SOURCE_NAMES = ("SS", "TS", "RS")
DEFAULT_SOURCE = "SS"  # CUTLASS's GEMM mainloops: both operands staged in SMEM by TMA
ROW_BYTES = 32  # bytes of one operand row of one MMA instruction: K x element size, every dtype


def check_source(where: str, instruction: str | None, source: str) -> str:
    """The operand source if the instruction set has it, else a one-line error."""
    allowed = SOURCES.get(instruction or "", ("SS",))
    if source not in allowed:
        what = f"{instruction} instructions" if instruction else "a preset without an [mma] table"
        raise ScenarioError(where, source, f"must be one of {', '.join(allowed)} for {what} (SS: A and B in shared "
                                           "memory; TS: A in Tensor Memory, Blackwell; RS: A in registers, Hopper)")
    return source


def instruction_smem_bytes(m: int, n: int, sms: int, source: str) -> float:
    """Bytes one MMA instruction of M x N reads from one SM's shared memory."""
    a = m * ROW_BYTES if source == "SS" else 0
    return (a + n * ROW_BYTES) / sms


@dataclass(frozen=True)
class OperandTiming:
    """One instruction's (latency, II) in cycles once its operands' SMEM reads are counted."""

    latency: float
    ii: float
    smem_bytes: float  # read per instruction per SM
    smem_bound: bool  # the SMEM reads, not the tensor cores, set the II


def operand_timing(latency: float, ii: float, m: int, n: int, sms: int, source: str,
                   bytes_per_cycle: float, measured_with: str = "TS") -> OperandTiming:
    """The table's timing, measured with A in ``measured_with``, for A in ``source``: the II
    no faster than the SMEM reads; A's arrival added to the latency where the table's rows
    did not already read A from SMEM (an SS-measured table, as Hopper's, keeps its latency)."""
    read = instruction_smem_bytes(m, n, sms, source)
    if math.isinf(bytes_per_cycle):
        return OperandTiming(latency, ii, read, False)
    stream = read / bytes_per_cycle
    a_from_smem = source == "SS" and measured_with != "SS"
    a_arrival = (m * ROW_BYTES / sms) / bytes_per_cycle if a_from_smem else 0.0
    pace = max(ii, stream)
    # an instruction completes no sooner than its operands have streamed in: latency >= the pace
    return OperandTiming(max(latency + a_arrival, pace), pace, read, stream > ii)


def staging_ps(nbytes: int, smem_bandwidth: float) -> int:
    """Picoseconds ``nbytes`` of an epilogue's C take through one SM's shared memory (staged on
    the way to their TMA store); 0 where shared memory is unlimited."""
    return 0 if math.isinf(smem_bandwidth) else round(nbytes / smem_bandwidth)


def k_step_smem_bytes(mma_reads: float, tma_writes: int, a_once: int) -> float:
    """All SMEM traffic of one k-step on one SM: the MMAs' reads, the TMA's writes, and (TS/RS)
    the one read of the A box into TMEM or registers."""
    return mma_reads + tma_writes + a_once


def k_step_smem_hold(reads: float, writes: int, a_once: int, mma_ps: int, smem_bandwidth: float,
                     write_bandwidth: float | None = None, overlap: bool = False) -> int:
    """Picoseconds the SM's SMEM stays busy after a k-step's MMAs (``mma_ps`` long).

    ``write_bandwidth`` None: reads, writes and the A copy share ``smem_bandwidth``, and the
    writes use what the MMAs' time leaves spare: (all bytes / bandwidth) - MMA time, if positive.
    ``write_bandwidth`` set (B200, fitted on the one-CTA mainloop table): the TMA's writes do not
    overlap the MMAs' operand reads; they take ``writes / write_bandwidth`` after them, on top of
    whatever the reads and the A copy need beyond the MMAs' time (see module doc). ``overlap`` (a
    2-SM pair on a preset with ``pair_writes_overlap``): the writes first use the SMEM time the
    MMAs' reads leave idle, and only the rest comes after them."""
    if math.isinf(smem_bandwidth):
        return 0
    if write_bandwidth is None:
        return max(0, round((reads + writes + a_once) / smem_bandwidth) - mma_ps)
    busy = round((reads + a_once) / smem_bandwidth)
    spare = max(0, mma_ps - busy) if overlap else 0  # the SMEM time the MMAs' reads leave idle
    after = max(0, busy - mma_ps)
    return after + (0 if math.isinf(write_bandwidth) else max(0, round(writes / write_bandwidth) - spare))
