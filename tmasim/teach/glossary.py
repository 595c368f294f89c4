"""The terms the lessons, ``explain`` and the quiz use, defined for a first-year graduate student."""

from __future__ import annotations

from tmasim import names
from tmasim.teach.prose import paragraph

TERMS: dict[str, str] = {
    "SM": "Streaming multiprocessor: one of the GPU's cores (132 on an H100). Each has its own shared "
          "memory, tensor cores, registers and TMA unit.",
    "CTA": "Cooperative thread array (a thread block): threads that run together on one SM and share its "
           "shared memory. Several CTAs can be resident on one SM at once.",
    "warpgroup": "Four warps (128 threads) that issue tensor-core instructions together on Hopper. A "
                 "warp-specialized kernel has a producer warpgroup that issues copies and one or more "
                 "consumer warpgroups that compute.",
    "HBM": "High-bandwidth memory: the GPU's main (global) memory, off the chip, shared by all SMs "
           "(3.35 TB/s on an H100).",
    "L2": "The on-chip cache between the SMs and HBM, shared by all SMs; a hit is served without HBM.",
    "SMEM": "Shared memory: fast on-SM memory (228 KiB per Hopper SM) that a CTA allocates for its whole "
            "life; the pipeline's stage slots live here.",
    "TMA": "Tensor Memory Accelerator: a copy engine on each SM that moves a tile (a box of a tensor) "
           "from global memory into shared memory asynchronously, and signals completion on an mbarrier. "
           "It moves data; it does not store it.",
    "TMEM": "Tensor Memory (Blackwell only): 256 KiB of on-SM storage (128 lanes x 512 columns of 32 "
            "bits) that holds MMA accumulators, written and read by tcgen05 instructions. Storage, not a "
            "copy engine: the TMA never writes into it.",
    "tensor core": "The SM's matrix-multiply unit. An MMA (matrix multiply-accumulate) instruction adds a "
                   "product of two operand tiles into an accumulator tile.",
    "accumulator": "The output tile an MMA adds into (fp32 for bf16 inputs): in registers on Hopper, in "
                   "TMEM on Blackwell.",
    "softmax": "In attention, the normalization of each row of scores S = Q·Kᵀ: subtract the row's "
               "maximum, exponentiate, divide by the row's sum. FlashAttention does it online, block by "
               "block, rescaling the output O whenever a row's maximum grows.",
    "MUFU": "The SM's multi-function units: exponentials, reciprocals, square roots (16 results a clock "
            "per Hopper SM, against 128 FP32 fused multiply-adds): attention's softmax runs on them.",
    "ping-pong": "Two consumer warpgroups taking turns on the tensor cores, ordered by a named barrier "
                 "(a hardware barrier among warps of a CTA): while one runs its GEMMs, the other runs its "
                 "softmax. Without it (lockstep) both do the same phase at once.",
    "box": "The rectangle of a tensor one TMA copy moves (each side at most 256 elements).",
    "work unit": "What one step of a chip scenario's schedule covers: an output tile of a GEMM (all its "
                 "k-steps), or one box of a stream.",
    "k-step": "One step of a GEMM tile's reduction loop: load a BK-wide slice of A and B, multiply-add it "
              "into the accumulator.",
    "tile": "The unit of work the pipeline moves and computes on; in a GEMM, one k-step's A and B boxes.",
    "stage": "One buffer of the pipeline's ring in shared memory; S stages let S copies be in flight. "
             "\"Stage\" and \"slot\" name the same buffer; \"stages\" also counts them.",
    "slot": "A stage buffer seen as a place: empty -> copy in flight -> full -> being computed on -> "
            "released (empty again). Step i uses slot i mod S.",
    "producer": "The thread (or warpgroup) that waits for an empty slot, announces its bytes with "
                "expect_tx and issues the TMA copy into it.",
    "consumer": "The warpgroup(s) that wait for a full slot, compute on it, and release it.",
    "mbarrier": "A barrier object in shared memory with an expected arrival count and a transaction byte "
                "count. When every expected arrival has come and the byte count is back at zero, the "
                "current phase completes.",
    "phase": "One round of an mbarrier: it starts counting arrivals and bytes and completes (flips) when "
             "both are done; then the next phase begins. A slot's barrier completes one phase per use.",
    "parity": "Phase number mod 2. A waiter waits for the phase with a given parity to complete; the "
              "consumer of step i waits on full[i mod S] with parity (i div S) mod 2.",
    "expect_tx": "The producer's arrive.expect_tx(bytes): one arrival plus the number of bytes the copy "
                 "will deliver; the TMA's complete_tx counts them down as they land. If the number is "
                 "wrong the phase never completes (too many) or the count underflows (too few).",
    "full barrier": "The mbarrier that says a slot's copy has landed (TMA -> consumer).",
    "empty barrier": "The mbarrier that says a slot was released by every consumer (consumer -> "
                     "producer), so it may be refilled.",
    "race": "A read of a slot before its copy landed: the computation uses stale bytes. A run with races "
            "is invalid: its time is not a result.",
    "deadlock": "Every remaining process waits on a barrier phase that nothing left can complete: the "
                "program never ends.",
    "latency": "The time from issuing a copy to its first byte arriving; asynchronous copies overlap their "
               "latencies, so stages can hide it.",
    "bandwidth": "Bytes per second a link (an SM's port, L2, HBM) can carry; shared links are divided "
                 "among the copies in flight.",
    "round trip": "One use of a slot, from the producer taking it to the consumer releasing it: issue, "
                  "latency, transfer, compute and two barrier wake-ups. S slots share it: round trip / S.",
    "speedup": "Serial time divided by pipelined time.",
    "copy engine": "The unit that executes copies: here, the TMA.",
    "serial time": "The time with no overlap (one slot): every tile's copy, then its compute.",
    "closed form": "A formula that gives the time exactly, e.g. T = l + c + (N - 1) x max(l, c) for N equal "
                   "tiles with load time l and compute time c and two or more stages.",
    "cadence": "The steady-state interval between tiles once the pipe is full: the slowest of the copy, "
               "the compute and the round trip / S.",
    "fill and drain": "The start (filling the pipe: nothing to compute yet) and the end (draining: nothing "
                      "left to copy) of a pipeline, where the stages do not overlap.",
    "residency": "How many CTAs fit on one SM at once, limited by shared memory, threads and registers. "
                 "More stages per CTA can mean fewer resident CTAs.",
    "occupancy": "Resident CTAs (or warps) per SM, as a count or as a fraction of the maximum.",
    "Little's law": "Bandwidth = bytes in flight / round-trip time, until a link saturates: the reason "
                    "more stages or bigger boxes raise bandwidth.",
    "binding": "The resource or stage whose limit sets the time: the largest of the lower bounds.",
}


def glossary() -> str:
    """The terms, then the bounds and traffic figures under the names every output uses."""
    sections = (("Glossary (terms used by tmasim learn, explain and quiz):", TERMS),
                ("Bounds: what can bind a run, as run, explain, sweep, report and figures name them:",
                 {name.text: name.meaning for name in names.BOUNDS.values()}),
                ("Traffic: what each byte count of a run counts:",
                 {name.text: name.meaning for name in names.TRAFFIC.values()}),
                ("Answers: what a sweep's answer and the validation pick:",
                 {term.text: term.meaning for term in names.TERMS.values()}))
    width = max(len(term) for _, terms in sections for term in terms)
    lines: list[str] = []
    for title, terms in sections:
        lines += [*([""] if lines else []), title, ""]
        lines += [paragraph(text, " " * (width + 4), first=f"  {term:<{width}}  ") for term, text in terms.items()]
    return "\n".join(lines)
