"""``tmasim learn``: nine lessons, each a scenario under ``scenarios/lessons/`` the learner can change.

A lesson states a concept in a few sentences, asks for a prediction, runs the scenario (and the
variants the concept needs), compares, explains why with the run's numbers, and says what to
try next. Every number is simulated here; the tests check them against the closed forms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tmasim.errors import ScenarioError
from tmasim.teach import lesson_attention
from tmasim.teach import lesson_runs as runs
from tmasim.teach.answers import Reading, answer_text, is_right, read_answer
from tmasim.teach.lab import Lab, Outcome
from tmasim.teach.prose import paragraph


@dataclass(frozen=True)
class Lesson:
    number: int
    slug: str
    title: str
    concept: str
    question: str
    unit: str
    runs: Callable[[Lab], Outcome]
    try_next: tuple[str, ...]

    @property
    def scenario(self) -> str:
        return f"lessons/{self.number:02d}-{self.slug}"



LESSONS: tuple[Lesson, ...] = (
    Lesson(1, "overlap", "Overlap turns a sum into a bottleneck",
           "A kernel copies each tile from global memory into shared memory with the TMA (the Tensor "
           "Memory Accelerator, a copy engine on each SM), then computes on it with the tensor cores. With "
           "one shared-memory slot (a stage) the two take turns. With two slots the copy of the next tile "
           "runs while this one is computed: the sum of the two times per tile becomes their maximum.",
           "Four tiles, each copied in 3 us and computed in 5 us. One slot takes 4 x (3 + 5) = 32 us. "
           "With two slots, how long (us)?", "us", runs.overlap,
           ("tmasim explain lessons/01-overlap", "tmasim animate lessons/01-overlap --out overlap.gif",
            "tmasim run lessons/01-overlap --set pipeline.stages=3")),
    Lesson(2, "cadence", "The slower stage sets the cadence",
           "Once the pipeline is full, one tile leaves it per interval, and the interval is the slower "
           "stage's time: T = l + c + (N - 1) x max(l, c) for N tiles with load time l and compute time c. "
           "The faster stage only appears in the fill and drain.",
           "Eight tiles, load 5 us, compute 3 us, two slots: how long (us)?", "us", runs.cadence,
           ("tmasim run lessons/02-cadence --set workload.load=\"6 us\"",
            "tmasim run lessons/02-cadence --set workload.compute=\"4 us\"")),
    Lesson(3, "fill-drain", "Fill and drain",
           "Before the first compute the pipe is filling (nothing to compute yet); after the last copy it "
           "is draining (nothing left to copy). Both are paid once per run, so their share shrinks with the "
           "number of tiles N, and the pipelined time approaches max(l, c) / (l + c) of the serial time.",
           "256 tiles of 3 us load and 5 us compute, two slots: the pipelined time is what percentage of "
           "the serial time?", "%", runs.fill_drain,
           ("tmasim run lessons/03-fill-drain --set workload.tiles=4",
            "tmasim sweep lessons/03-fill-drain --vary workload.tiles=1,2,4,16,256")),
    Lesson(4, "latency", "Asynchronous is not instantaneous",
           "A TMA copy is asynchronous: the producer issues it and moves on, but its bytes land only after "
           "a copy latency (from issue to the first byte, through L2 and HBM) plus the transfer. One slot "
           "exposes the whole latency; S slots keep S copies in flight and hide it, but nothing hides the "
           "transfer itself: "
           "the copy path's bandwidth is a floor no number of stages can beat.",
           "32 tiles: 6 us latency, 2 us transfer, 1.5 us compute. How many stages until adding one more "
           "stops helping?", "stages", runs.latency,
           ("tmasim run lessons/04-latency --set pipeline.stages=5",
            "tmasim sweep lessons/04-latency --vary pipeline.stages=1,2,3,4,5,6,7,8")),
    Lesson(5, "residency", "Buffers cost residency",
           "Every stage is shared memory (SMEM) that a CTA (a block of threads resident on one SM) holds for "
           "its whole life. An SM has 228 KiB of it, so more stages per CTA can mean fewer CTAs resident per "
           "SM (lower occupancy): the trade-off behind every stage count.",
           "A 128x128x64 bf16 GEMM tile on an H100 (32 KiB per stage): at how many stages does the SM lose "
           "its second resident CTA?", "stages", runs.residency,
           ("tmasim run lessons/05-residency --set pipeline.stages=4",
            "tmasim run lessons/05-residency --set 'workload.tile=[128,256,64]' --set 'pipeline.registers={}'")),
    Lesson(6, "contention", "Shared bandwidth can remove overlap",
           "An SM's copies share the chip's L2 and HBM bandwidth with every other SM's. Overlap hides the "
           "shorter of copy and compute; when many SMs stream at once, each one's share of bandwidth "
           "shrinks, its copies stretch, and the copies become the bottleneck.",
           "Alone, one SM streams its 64 boxes (8 KiB, 205 ns of compute each) in about 13.7 us. With all "
           "132 SMs doing the same, how long (us)?", "us", runs.contention,
           ("tmasim explain lessons/06-contention",
            "tmasim run lessons/06-contention --set workload.ctas=1 --set 'workload.shape=[64,4096]'")),
    Lesson(7, "sync", "The completion signal makes a tile safe to read",
           "An mbarrier (a barrier object in shared memory) tells the consumer when a slot's bytes have all "
           "landed: the producer announces the bytes with expect_tx, the TMA counts them down as they land, "
           "and the barrier's phase flips when the count is zero. The consumer waits on that flip. Break it "
           "and the run is wrong, or never ends.",
           "The reference pipeline takes 23 us. If the consumer skips its full-barrier wait, when does the "
           "run end (us)?", "us", runs.sync,
           ("tmasim explain lessons/07-sync --set pipeline.consumer_waits_full=false",
            "tmasim animate lessons/07-sync --set pipeline.empty_arrivals=2 --out stuck.gif",
            "tmasim run lessons/07-sync --set pipeline.consumer_waits_full=false --trace race.json")),
    Lesson(8, "tmem", "TMA is not Tensor Memory",
           "The TMA moves operands (the A and B tiles) from global memory into shared memory. Tensor Memory "
           "(TMEM, Blackwell only) is storage on the SM for MMA accumulators: nothing is copied into it by "
           "the TMA. On Hopper the accumulators live in registers instead. Different places, different "
           "limits.",
           "On a B200, a 128x256 fp32 accumulator in TMEM (128 lanes x 512 columns of 32 bits): how many "
           "columns does it take?", "columns", runs.tmem,
           ("tmasim run lessons/08-tmem", "tmasim run lessons/08-tmem --set gpu=h100-sxm",
            "tmasim run lessons/08-tmem --set pipeline.stages=5")),
    Lesson(9, "softmax", "The softmax hides under the tensor cores",
           "Attention (FlashAttention) computes, per block of keys, S = Q·Kᵀ on the tensor cores, then the "
           "softmax of S (exponentials on the SM's multi-function units, sums and maxima on its FP32 units), "
           "then O += P·V on the tensor cores. The exponential units are far slower than the tensor cores, so "
           "the softmax is a resource of its own. Two consumer warpgroups (128 threads each, 64 query rows "
           "each) can play ping-pong: a named barrier makes them take turns issuing GEMMs, so one's softmax "
           "runs while the other's GEMMs keep the tensor cores busy.",
           "One CTA, 128 queries against 64 blocks of 128 keys, head dim 128, on an H100: with ping-pong it "
           "takes about 75 us. With ping-pong off (the two warpgroups in lockstep), how long (us)?", "us",
           lesson_attention.softmax,
           ("tmasim run lessons/09-softmax --set pipeline.consumer_mode=cooperative",
            "tmasim run lessons/09-softmax --set workload.softmax_overlap=true",
            "tmasim explain attention-h100")),
)


FIGURES = (1, 2, 3, 4, 7, 9)   # the lessons that draw figures (the others are about chip-wide numbers)


def lesson(number: int) -> Lesson:
    if not 1 <= number <= len(LESSONS):
        raise ScenarioError("lesson", number, f"is not a lesson number (1 to {len(LESSONS)})")
    return LESSONS[number - 1]


def parse_prediction(text: str, unit: str) -> Reading:
    """A prediction read as the quiz reads answers (:func:`tmasim.teach.answers.read_answer`)."""
    return read_answer(text, unit, "--predict")


def verdict(predicted: Reading | None, answer: float, unit: str) -> str:
    shown = answer_text(answer, unit)
    if predicted is None:
        return f"The run's answer: {shown}. (No prediction: give one with --predict VALUE next time.)"
    off = predicted.value - answer
    grade = "right (within 5%)" if is_right(predicted.value, answer) else ("too high" if off > 0 else "too low")
    note = f" ({predicted.note}.)" if predicted.note else ""
    return f"You predicted {predicted.shown}; the run gives {shown}: {grade}.{note}"


def teach(number: int, predicted: Reading | None, out: Path | None = None) -> tuple[str, Outcome]:
    """The lesson's text and its outcome (the answer and the evidence)."""
    item = lesson(number)
    outcome = item.runs(Lab(item.scenario, out))
    said = paragraph(verdict(predicted, outcome.answer, item.unit))
    lines = [f"Run: tmasim run {item.scenario}", *outcome.table, "", said,
             "", *[part if part.startswith(" ") else paragraph(part) for part in ("Why: " + outcome.why).split("\n")]]
    if outcome.figures:
        lines += ["", "Figures:", *[f"  {p}" for p in outcome.figures]]
    elif out is None and number in FIGURES:
        lines += ["", f"Figures: tmasim learn {number} --out DIR writes them"]
    elif out is not None:
        drawn = ", ".join(str(n) for n in FIGURES)
        lines += ["", paragraph(f"Figures: none; lesson {number} is about chip-wide numbers and draws no figure, "
                                f"so nothing was written to {out} (lessons {drawn} draw them).")]
    lines += ["", "Try next:", *[f"  {cmd}" for cmd in item.try_next]]
    return "\n".join(lines), outcome


def header(number: int) -> str:
    item = lesson(number)
    return "\n".join([f"Lesson {item.number} of {len(LESSONS)}: {item.title}", "", paragraph(item.concept), "",
                      paragraph(f"Predict: {item.question}")])


def listing() -> str:
    rows = [f"  {x.number}. {x.title:<50} {x.scenario}" for x in LESSONS]
    return "\n".join(["Lessons (tmasim learn N; --glossary for the terms):", *rows])
