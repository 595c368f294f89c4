"""``tmasim quiz``: check your understanding. One conceptual question, then numeric ones.

The numeric questions are of five kinds (:data:`KINDS`): tile timing, latency hiding, GEMM stage
counts, bandwidth (Little's law) and residency. They are asked in rounds of one question of each
kind, in an order the seed draws, so no kind repeats within a round; ten questions are two
rounds. Each is drawn from a seeded random generator (``--seed``); its answer is computed by the
program here (a simulation of the question's scenario, or the residency rule the simulator
itself applies), never read from a table, and each explanation shows the closed form or bound
with the question's numbers beside the program's.
Answers are read as ``learn --predict`` reads predictions (:mod:`tmasim.teach.answers`: a time
with or without its unit, a percentage with or without ``%``), with the same tolerance; an
answer that is not one (``16 apples``) is a one-line error that asks again, not a wrong answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tmasim.errors import ScenarioError
from tmasim.inputs.scenario import from_dict
from tmasim.teach.answers import TOLERANCE_TEXT, answer_text, is_right, read_answer
from tmasim.teach.prose import bullet, paragraph
from tmasim.values import format as fmt

US = 10**6


@dataclass(frozen=True)
class Question:
    text: str
    answer: float | str          # a number (in ``unit``) or a choice letter
    why: str
    unit: str = ""
    choices: tuple[str, ...] = ()
    kind: str = ""               # which of KINDS it is (the conceptual question: none)

    def read(self, given: str, where: str = "answer") -> str:
        """How ``given`` was read (``b``, ``23 µs``, ``62.5%``); a ScenarioError if it is not an
        answer to this question. Empty: no answer."""
        given = given.strip()
        if not given:
            return ""
        if self.choices:
            letters = "abcd"[: len(self.choices)]
            if given.lower() not in letters:
                raise ScenarioError(where, given, f"must be one of the letters {', '.join(letters)}")
            return given.lower()
        return read_answer(given, self.unit, where, signed=True).shown

    def check(self, given: str) -> bool:
        """Right or wrong; raises a ScenarioError for an answer that cannot be read."""
        given = given.strip()
        if not given:
            return False
        if self.choices:
            return self.read(given) == str(self.answer)
        assert isinstance(self.answer, float)
        return is_right(read_answer(given, self.unit, "answer", signed=True).value, self.answer)


CONCEPT = Question(
    "How does a pipelined kernel benefit from TMA?",
    "b",
    "The TMA copies asynchronously: the producer issues the copy of a future tile into a free stage and "
    "the tensor cores keep computing on the current one, so copy time hides under compute. It does not "
    "remove HBM or shared memory (it moves data from one to the other), and it has nothing to do with "
    "matrix dimensions.",
    choices=("It eliminates the need for HBM or shared memory.",
             "It can prepare a future tile (copy it into shared memory) while computing on the current one.",
             "It makes every model use the same matrix dimensions.",
             "It makes each copy instantaneous, so no barrier is needed."),
)


def tiles_run(n: int, load: int, compute: int, stages: int, latency: int = 0) -> int:
    """Simulate the question's scenario; its makespan in ps."""
    from tmasim.simulation import simulate

    workload: dict[str, Any] = {"kind": "tiles", "tiles": n, "load": f"{load} us", "compute": f"{compute} us"}
    if latency:
        workload["latency"] = f"{latency} us"
    raw = {"name": "quiz", "gpu": "ideal", "workload": workload, "pipeline": {"stages": stages},
           "run": {"records": False}}
    return simulate(from_dict(raw)).makespan_ps


def _pipelined(rng: np.random.Generator) -> Question:
    n, ld, c = int(rng.integers(3, 13)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    t = tiles_run(n, ld, c, 2) / US
    return Question(f"{n} tiles, each copied in {ld} us and computed in {c} us, with two stages (slots): "
                    "how long does the pipeline take (us)?", t,
                    f"T = l + c + (N - 1) x max(l, c) = {ld} + {c} + {n - 1} x {max(ld, c)} = "
                    f"{ld + c + (n - 1) * max(ld, c)} us; the simulator gives {t:g} us.", "us")


def _serial(rng: np.random.Generator) -> Question:
    n, ld, c = int(rng.integers(2, 11)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    t = tiles_run(n, ld, c, 1) / US
    return Question(f"{n} tiles, copy {ld} us, compute {c} us, one stage (no overlap): how long (us)?", t,
                    f"With one slot every tile pays its copy and then its compute: N x (l + c) = {n} x "
                    f"({ld} + {c}) = {n * (ld + c)} us; the simulator gives {t:g} us.", "us")


def _saving(rng: np.random.Generator) -> Question:
    n, ld, c = int(rng.integers(4, 13)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    faster = int(rng.integers(1, 9))
    base, cut = tiles_run(n, ld, c, 2), tiles_run(n, faster, c, 2)
    saved = (base - cut) / US
    return Question(f"{n} tiles, copy {ld} us, compute {c} us, two stages. The copy time changes to {faster} "
                    "us. How many us does the run save (negative if it takes longer)?", saved,
                    f"Only max(l, c) repeats N - 1 times; the faster stage counts once. Before: {ld} + {c} + "
                    f"{n - 1} x {max(ld, c)} = {base / US:g} us; after: {faster} + {c} + {n - 1} x "
                    f"{max(faster, c)} = {cut / US:g} us; the simulator's difference is {saved:g} us.", "us")


def _latency(rng: np.random.Generator) -> Question:
    n, lat = int(rng.integers(8, 17)), int(rng.integers(2, 9))
    ld, c, s = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    t = tiles_run(n, ld, c, s, lat) / US
    bound = max(ld, c, (lat + ld + c) / s)
    return Question(f"{n} tiles; each copy waits {lat} us of latency before a {ld} us transfer; compute {c} "
                    f"us; {fmt.plural(s, 'stage')}. How long does the run take (us)?", t,
                    f"A slot's round trip is latency + copy + compute = {lat + ld + c} us, so "
                    f"{fmt.plural(s, 'slot')} finish "
                    f"a tile every max({ld}, {c}, {lat + ld + c}/{s}) = {bound:.4g} us at best, plus filling and "
                    f"draining: the simulator gives {t:g} us.", "us")


def _ratio(rng: np.random.Generator) -> Question:
    n, ld, c = int(rng.integers(2, 33)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    piped, serial = tiles_run(n, ld, c, 2), tiles_run(n, ld, c, 1)
    pct = 100 * piped / serial
    return Question(f"{n} tiles, copy {ld} us, compute {c} us: the two-stage time is what percentage of "
                    "the one-stage time (%)?", pct,
                    f"({ld} + {c} + {n - 1} x {max(ld, c)}) / ({n} x {ld + c}) = {pct:.4g}%, approaching "
                    f"max(l, c) / (l + c) = {100 * max(ld, c) / (ld + c):.3g}% as N grows (simulated).", "%")


def gemm_time(tile: tuple[int, int, int], k: int, stages: int) -> float | None:
    """Simulate a small bf16 GEMM on the H100 preset (512 x 512 x k); its time in ns, None where
    the stages do not fit in shared memory."""
    from tmasim.errors import ResidencyError
    from tmasim.inputs.scenario import load
    from tmasim.simulation import simulate

    overrides = ["workload.m=512", "workload.n=512", f"workload.k={k}", f"workload.tile=[{','.join(map(str, tile))}]",
                 f"pipeline.stages={stages}", "run.records=false"]
    try:
        return float(simulate(load("gemm-h100", overrides)).stats["makespan_ns"])
    except ResidencyError:
        return None


def _gemm_stages(rng: np.random.Generator) -> Question:
    from tmasim.names import KNEE_TOLERANCE, term

    tile = ((128, 128, 64), (128, 256, 64), (128, 64, 64), (64, 128, 64))[int(rng.integers(4))]
    k = int(rng.choice([1024, 2048, 4096]))
    times = {s: t for s in range(1, 7) if (t := gemm_time(tile, k, s)) is not None}
    best = min(times.values())
    knee = min(s for s, t in times.items() if t <= best * (1 + KNEE_TOLERANCE))
    shown = ", ".join(f"{s}: {t / 1000:.4g}" for s, t in times.items())
    name = "x".join(map(str, tile))
    return Question(f"gemm-h100 at 512 x 512 x {k} (bf16, tile {name}): a slot's round trip (copy latency, "
                    "transfer, MMA, release) is several k-steps long, so more stages hide it until another bound "
                    f"takes over. How many stages does the {term('knee')} take, of 1 to {max(times)}?",
                    float(knee),
                    f"Simulated times (us) by stages: {shown}. The best is {best / 1000:.4g} us; the fewest stages "
                    f"within {KNEE_TOLERANCE:.0%} of it: {knee}. Past the knee the round trip no longer binds, "
                    "and more stages only cost shared memory.", "stages", kind="GEMM stages")


def _bandwidth(rng: np.random.Generator) -> Question:
    from tmasim.inputs.scenario import load
    from tmasim.names import bound_key
    from tmasim.simulation import simulate

    box = ([32, 64], [64, 64], [128, 64])[int(rng.integers(3))]
    stages = int(rng.integers(1, 5))
    scenario = load("stream-h100", [f"workload.box=[{box[0]},{box[1]}]", f"pipeline.stages={stages}"])
    s = simulate(scenario).stats
    sms, flight, trip = int(s["sms_used"]), float(s["bytes_in_flight_per_sm"]), float(s["round_trip_ns"])
    little, answer = sms * flight / trip, float(s["littles_law_bytes_per_s"]) / 1e9
    hbm = scenario.gpu.hbm_bandwidth * 1e3
    limit = ("bytes in flight over the round trip bind" if bound_key(s["binding"]) == "latency"
             else f"{s['binding']} binds: the links carry less than that")
    copies = "1 copy" if stages == 1 else f"{stages} copies"
    return Question(f"stream-h100: {sms} SMs each keep {copies} of {box[0]} x {box[1]} bf16 "
                    f"({flight / stages / 1024:g} KiB each) in flight; a copy's round trip is {trip:.4g} ns; HBM "
                    f"carries {hbm:.0f} GB/s. What bandwidth can the SMs reach at most (GB/s)?", answer,
                    f"Little's law: bytes in flight / round trip = {sms} x {flight / 1024:g} KiB / {trip:.4g} ns = "
                    f"{little:.4g} GB/s, capped by the links (HBM {hbm:.0f} GB/s): {answer:.4g} GB/s; {limit}. "
                    f"The simulated run achieves {float(s['achieved_bytes_per_s']) / 1e9:.4g} GB/s.", "GB/s",
                    kind="bandwidth")


def _residency(rng: np.random.Generator) -> Question:
    from tmasim.machine.hardware import load_gpu
    from tmasim.machine.residency import BARRIER_BYTES, residency
    from tmasim.values import format as fmt

    gpu = load_gpu("h100-sxm")
    stage = int(rng.choice([4, 8, 12, 16, 24])) * 1024
    stages = int(rng.integers(2, 7))
    other = int(rng.choice([0, 8, 16])) * 1024
    while stages * stage + other > gpu.smem_per_cta - 1024:  # a ring that fits one CTA
        stages -= 1
    res = residency(gpu, stage_bytes=stage, stages=stages, other_smem=other)
    per_cta = res.smem_per_cta + gpu.smem_reserved_per_cta
    return Question(f"On an H100 ({fmt.size(gpu.smem_per_sm)} of shared memory per SM, "
                    f"{fmt.size(gpu.smem_reserved_per_cta)} reserved per CTA), a CTA has {stages} stages of "
                    f"{fmt.size(stage)} plus {fmt.size(other)} of other buffers and two {BARRIER_BYTES}-byte "
                    "barriers per stage, one producer and one consumer warpgroup. How many CTAs fit on one SM?",
                    float(res.ctas_per_sm),
                    f"Shared memory: {fmt.size(gpu.smem_per_sm)} / ({stages} x {fmt.size(stage)} + {fmt.size(other)} "
                    f"+ {2 * stages * BARRIER_BYTES} B + {fmt.size(gpu.smem_reserved_per_cta)}) = "
                    f"{gpu.smem_per_sm / per_cta:.3g}, so {gpu.smem_per_sm // per_cta}; threads: "
                    f"{gpu.max_threads_per_sm} / {res.threads_per_cta} = "
                    f"{gpu.max_threads_per_sm // res.threads_per_cta}"
                    f"; at most {gpu.max_ctas_per_sm} CTAs. The smallest, {res.ctas_per_sm}, limited by "
                    f"{res.limited_by} (the simulator's own residency rule).", "CTAs", kind="residency")


# The kinds of numeric question, each with its generators (tile timing has several forms).
KINDS: dict[str, tuple[Callable[[np.random.Generator], Question], ...]] = {
    "tile timing": (_pipelined, _serial, _saving, _ratio),
    "latency": (_latency,),
    "GEMM stages": (_gemm_stages,),
    "bandwidth": (_bandwidth,),
    "residency": (_residency,),
}


def questions(seed: int = 0, count: int = 10) -> list[Question]:
    """The conceptual question, then ``count`` numeric ones from the seed's random stream: in
    rounds of one question of each kind, in an order the seed draws (no kind twice in a round)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    kinds = list(KINDS)
    order: list[str] = []
    while len(order) < count:
        order += [kinds[i] for i in rng.permutation(len(kinds))]
    out = [CONCEPT]
    for kind in order[:count]:
        makers = KINDS[kind]
        question = makers[int(rng.integers(len(makers)))](rng)
        out.append(dataclasses.replace(question, kind=kind))
    return out


def show(number: int, question: Question) -> str:
    lines = [paragraph(f"{number}. {question.text}")]
    for letter, choice in zip("abcd", question.choices, strict=False):
        lines.append(f"   {letter}) {choice}")
    return "\n".join(lines)


def parse_answers(text: str, qs: Sequence[Question]) -> list[str]:
    """``--answers``: one per question, comma-separated, each readable (a one-line error naming
    the answer otherwise)."""
    answers = [a.strip() for a in text.split(",")]
    if len(answers) != len(qs):
        raise ScenarioError("--answers", text, f"has {len(answers)} answers; the quiz has {len(qs)} questions "
                                               "(comma-separated, in order)")
    for number, (q, given) in enumerate(zip(qs, answers, strict=True), start=1):
        q.read(given, f"--answers (answer {number})")
    return answers


def grade(qs: Sequence[Question], answers: Sequence[str]) -> tuple[int, str]:
    """The score and a line per question: right or wrong, the answer and why."""
    lines, score = [], 0
    for number, (q, given) in enumerate(zip(qs, answers, strict=True), start=1):
        right = q.check(given)
        score += right
        shown = q.answer if q.choices else answer_text(float(q.answer), q.unit)
        lines.append(f"{number:>2}. {'right' if right else 'wrong'}: you said {q.read(given) or '(nothing)'}; "
                     f"the answer is {shown}.")
        note = read_answer(given, q.unit, "answer", signed=True).note if given.strip() and not q.choices else ""
        if note:  # a bare 0.625 for a percentage: said as learn --predict says it
            lines.append(bullet(f"Note: {note}"))
        lines.append(bullet(f"Why: {q.why}"))
    lines.append(f"Score: {score} / {len(qs)} (a numeric answer {TOLERANCE_TEXT})")
    return score, "\n".join(lines)

