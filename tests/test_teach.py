"""Teaching: explain, the nine lessons (numbers against the closed forms) and the glossary."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tmasim import analytic, cli
from tmasim.scenario import load
from tmasim.teach import explain, lessons
from tmasim.teach.glossary import TERMS, glossary

REPO = Path(__file__).resolve().parents[1]
US = 10**6


def explain_text(name: str, *overrides: str, what_ifs: bool = True) -> str:
    return explain.explain(load(name, overrides), what_ifs=what_ifs)


def test_explain_reference_substitutes_the_closed_form():
    text = explain_text("reference")
    assert "T = l + c + (N - 1) x max(l, c) = 3 + 5 + 3 x max(3, 5) = 23 µs" in text
    assert "T = N x (l + c) = 4 x (3 + 5) = 32 µs" in text
    assert "compute binds" in text
    # the workload's own one-sentence account (the protocol's explain) closes the story
    assert "In short: The tensor core binds" in text
    # what-ifs were simulated: a third stage does not help, halving compute saves 8.5 µs
    assert "a third stage: 23 µs, no change" in text
    assert "halving the compute time: 14.5 µs, saves 8.5 µs" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_explain_load_bound_names_the_copy():
    text = explain_text("load-bound", what_ifs=False)
    assert "6 + 2 + 7 x max(6, 2) = 50 µs" in text and "copy binds" in text


def test_explain_missing_wait_is_invalid_first():
    text = explain_text("bug-missing-wait")
    first = text.splitlines()[0]
    assert first.startswith("INVALID") and "race" in first
    assert "takes 23 µs: that is the valid time" in text.replace("\n", " ")
    assert "pipelined" not in text.lower().split("invalid", 1)[0]


def test_validity_prefers_the_run_keys():
    assert explain.validity({"valid": False, "invalid_reason": "broken", "races": 0}) == (False, "broken")
    assert explain.validity({"races": 0})[0] is True
    assert explain.validity({"races": 3})[0] is False


def test_explain_deadlock_exits_3_with_who_waits(capsys: Any):
    assert cli.main(["explain", "bug-arrival-count"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("INVALID: this run cannot finish (deadlock)")
    assert "empty barriers expect 2 arrivals per phase but 1 consumer" in out


def test_explain_chip_gives_demand_against_capacity():
    text = explain_text("contention", what_ifs=False)
    assert "HBM binds" in text
    assert "its capacity is 3.35 TB/s" in text.replace("\n", " ")
    assert "In short: HBM bandwidth binds" in text


def test_run_explain_flag(capsys: Any):
    assert cli.main(["run", "--explain", "--set", "pipeline.stages=1"]) == 0
    out = capsys.readouterr().out
    assert "pipelined time       32 µs" in out and "Serial (no overlap, one slot)" in out


# --------------------------------------------------------------------------- lessons

PREDICTIONS = {1: "23 us", 2: "40", 3: "62.5%", 4: "5", 5: "4", 6: "21", 7: "20", 8: "256", 9: "120"}


@pytest.fixture(scope="module")
def outcomes() -> dict[int, Any]:
    """Every lesson run once, through the command line as a script would run it."""
    found: dict[int, Any] = {}
    real = lessons.teach

    def spy(number: int, predicted: Any, out: Any = None) -> Any:
        text, outcome = real(number, predicted, out)
        found[number] = (text, outcome)
        return text, outcome

    mp = pytest.MonkeyPatch()
    mp.setattr(lessons, "teach", spy)
    try:
        for number, guess in PREDICTIONS.items():
            assert cli.main(["learn", str(number), "--predict", guess]) == 0
    finally:
        mp.undo()
    return found


def test_learn_lists_nine_lessons():
    proc = subprocess.run([sys.executable, "-m", "tmasim.cli", "learn"], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sum(1 for line in proc.stdout.splitlines() if line.strip()[:2].rstrip(".").isdigit()) == 9


def test_every_lesson_scores_the_prediction(outcomes: dict[int, Any]):
    assert set(outcomes) == set(range(1, 10))
    for number, (text, _) in outcomes.items():
        assert "the run gives" in text, number
        assert max(len(line) for line in text.splitlines()) <= 100, number
    assert "right (within 5%)" in outcomes[1][0]
    assert "too low" in outcomes[2][0]


def anchor_us(n: int, load: float, comp: float, stages: int = 2) -> float:
    return analytic.anchor_time(n, round(load * US), round(comp * US), stages) / US


def test_lesson_1_2_against_the_anchor(outcomes: dict[int, Any]):
    one = outcomes[1][1].values
    assert one["pipelined_us"] == anchor_us(4, 3, 5) == 23
    assert one["serial_us"] == anchor_us(4, 3, 5, 1) == 32
    two = outcomes[2][1].values
    assert two["base_us"] == anchor_us(8, 5, 3) == anchor_us(8, 3, 5)
    assert two["slower_plus_1_us"] == anchor_us(8, 6, 3) - anchor_us(8, 5, 3) == 8
    assert two["faster_plus_1_us"] == anchor_us(8, 5, 4) - anchor_us(8, 5, 3) == 1


def test_lesson_3_ratio_tends_to_max_over_sum(outcomes: dict[int, Any]):
    values = outcomes[3][1].values
    for n in (1, 2, 4, 16, 256):
        assert values[f"ratio_{n}"] == pytest.approx(anchor_us(n, 3, 5) / (8 * n), abs=1e-12)
    assert values["ratio_1"] == 1 and values["ratio_256"] - 5 / 8 < 0.002


def test_lesson_4_stages_hide_latency_until_the_copy_binds(outcomes: dict[int, Any]):
    values = outcomes[4][1].values
    assert values["stages_needed"] == math.ceil((6 + 2 + 1.5) / 2)
    assert values["time_1_us"] == 32 * (6 + 2 + 1.5)
    assert values["time_8_us"] == values["time_5_us"] >= 32 * 2


def test_lesson_5_fourth_stage_costs_a_cta(outcomes: dict[int, Any]):
    values = outcomes[5][1].values
    kib = 1024
    for stages in range(2, 7):
        cta = stages * 32 * kib + 16 * kib + 16 * stages + kib   # stages, epilogue, barriers, reserved
        assert values[f"ctas_{stages}"] == 228 * kib // cta
    assert values["stage_that_loses_a_cta"] == 4


def test_lesson_6_contention_is_hbm_bound(outcomes: dict[int, Any]):
    values = outcomes[6][1].values
    assert values["hbm_bound_us"] <= values["full_us"] <= 1.05 * values["hbm_bound_us"]
    assert values["alone_us"] >= 64 * 0.2048 and values["alone_us"] < values["full_us"]
    assert values["eight_stages_us"] == values["full_us"]
    # below the break-even SM count compute binds (time ~ one SM's); above it HBM does
    assert values["break_even_sms"] == pytest.approx(3.35e12 * 204.8e-9 / 8192)
    assert values["alone_us"] < values["sms_66_us"] <= 1.15 * values["alone_us"]
    assert values["sms_66_us"] < values["sms_100_us"] < values["full_us"]


def test_lesson_7_breaks_sync_three_ways(outcomes: dict[int, Any], tmp_path: Path):
    text, outcome = outcomes[7]
    assert outcome.values["racy_us"] == 20 and outcome.values["correct_us"] == 23
    assert outcome.values["races"] == 2
    assert "INVALID" in text and "deadlock at 13 µs" in text and "transaction-count underflow" in text
    assert "deadlock at 6 µs" in text
    _, with_figures = lessons.teach(7, None, tmp_path)
    names = sorted(p.name for p in with_figures.figures)
    assert names == ["lesson7-deadlock.png", "lesson7-missing-wait.png", "lesson7-never.png",
                     "lesson7-underflow.png"]
    assert all(p.stat().st_size > 10_000 for p in with_figures.figures)


def test_lesson_8_tmem_and_registers(outcomes: dict[int, Any]):
    values = outcomes[8][1].values
    assert values["tmem_columns"] == 256 and values["registers_per_thread"] == 128 * 256 / (128 * 2)
    assert values["b200_us"] < values["h100_us"]


def test_predictions_parse_and_refuse():
    assert lessons.parse_prediction("23 us", "us").value == 23
    assert lessons.parse_prediction("23000 ns", "us").value == pytest.approx(23)
    assert lessons.parse_prediction("62.5%", "%").value == 62.5
    with pytest.raises(Exception, match="--predict"):
        lessons.parse_prediction("many", "stages")
    assert cli.main(["learn", "10"]) == 2


@pytest.mark.parametrize("text", ["16 µs", "16µs", "16 μs", "0.016 ms", "16000 ns", "16 us", "16", " 16us "])
def test_one_reader_takes_a_time_in_any_unit(text: str):
    """learn --predict and the quiz read answers alike: the micro sign, the Greek mu, us, ms, ns,
    or a bare number in µs, all give 16 µs."""
    from tmasim.teach import answers, quiz

    reading = answers.read_answer(text, "us", "--predict")
    assert reading.value == pytest.approx(16) and reading.shown == "16 µs"
    question = quiz.Question("how long?", 16.0, "why", "us")
    assert question.check(text) and not question.check("17 us")


@pytest.mark.parametrize("text", ["16 apples", "lots", "16 GB", "nan", "1e999"])
def test_nonsense_is_an_error_not_a_wrong_answer(text: str):
    from tmasim.errors import ScenarioError
    from tmasim.teach import answers, quiz

    with pytest.raises(ScenarioError, match="--predict"):
        answers.read_answer(text, "us", "--predict")
    with pytest.raises(ScenarioError, match="answer"):
        quiz.Question("how long?", 16.0, "why", "us").check(text)


def test_one_tolerance_for_learn_and_quiz(capsys: Any):
    from tmasim.teach import answers, quiz

    q = quiz.Question("how long?", 100.0, "why", "us")
    assert q.check("105 us") and not q.check("105.1 us")   # 5%, both ways
    assert lessons.verdict(answers.read_answer("105", "us", "--predict"), 100.0, "us").endswith("right (within 5%).")
    assert "too high" in lessons.verdict(answers.read_answer("105.1", "us", "--predict"), 100.0, "us")
    for command in ("learn", "quiz"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        assert "within 5% of the simulated value counts as right" in " ".join(capsys.readouterr().out.split())


def test_predictions_echo_how_they_were_read():
    from tmasim.teach import answers

    seconds = lessons.verdict(answers.read_answer("23 s", "us", "--predict"), 23.0, "us")
    assert seconds.startswith("You predicted 23 s; the run gives 23 µs: too high")
    fraction = lessons.verdict(answers.read_answer("0.625", "%", "--predict"), 62.5, "%")
    assert fraction.startswith("You predicted 0.625%; the run gives 62.5%: too low. (0.625 was read as 0.625%; "
                               "if you meant the fraction 0.625, that is 62.5%: answer 62.5.)")
    assert "fraction" not in lessons.verdict(answers.read_answer("62.5", "%", "--predict"), 62.5, "%")
    assert "fraction" not in lessons.verdict(answers.read_answer("0.625%", "%", "--predict"), 62.5, "%")


def test_quiz_refuses_an_unreadable_answer_in_one_line(capsys: Any):
    from tmasim.teach import quiz

    qs = quiz.questions(seed=0, count=2)
    answers = ["b", f"{qs[1].answer:.6g}", "16 apples"]
    assert cli.main(["quiz", "--count", "2", "--answers", ",".join(answers)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--answers (answer 3)" in err and "16 apples" in err
    assert cli.main(["quiz", "--count", "2", "--answers", "e," + ",".join(answers[1:2] * 2)]) == 2
    assert "must be one of the letters a, b, c, d" in capsys.readouterr().err


def test_learn_out_for_a_lesson_without_figures_says_so(tmp_path: Path):
    text, outcome = lessons.teach(5, None, tmp_path / "figs")
    assert outcome.figures == [] and not (tmp_path / "figs").exists()
    flat = " ".join(text.split())
    assert "Figures: none; lesson 5 is about chip-wide numbers and draws no figure" in flat
    assert "lessons 1, 2, 3, 4, 7, 9 draw them" in flat


def test_glossary_defines_the_lesson_terms():
    for term in ("mbarrier", "phase", "parity", "expect_tx", "stage", "slot", "residency", "warpgroup", "TMA",
                 "TMEM"):
        assert term in TERMS
    assert max(len(line) for line in glossary().splitlines()) <= 100


# --------------------------------------------------------------------------- quiz


def test_quiz_answers_come_from_the_simulator():
    from tmasim.teach import quiz

    qs = quiz.questions(seed=3, count=10)
    assert len(qs) == 11 and qs[0].answer == "b" and len(qs[0].choices) == 4
    assert len({q.text for q in qs[1:]}) == 10
    assert quiz.questions(seed=3, count=10) == qs   # same seed, same quiz
    for q in qs[1:]:
        assert q.check(f"{q.answer}") and not q.check(f"{q.answer * 1.1 + 1}")


def test_the_quiz_asks_five_kinds_in_rounds_without_repeating_one():
    from tmasim.teach import quiz

    assert set(quiz.KINDS) == {"tile timing", "latency", "GEMM stages", "bandwidth", "residency"}
    for seed in (0, 1, 7):
        kinds = [q.kind for q in quiz.questions(seed, 12)[1:]]
        assert sorted(kinds[:5]) == sorted(kinds[5:10]) == sorted(quiz.KINDS)  # each round: every kind once
        assert len(set(kinds[10:])) == 2
    assert [q.kind for q in quiz.questions(0, 10)[1:]] != [q.kind for q in quiz.questions(1, 10)[1:]]


def _drawn(maker: Any, seeds: range = range(4)) -> list[Any]:
    return [maker(np.random.default_rng(seed)) for seed in seeds]


def test_quiz_tile_timing_answers_are_the_anchor_formula():
    from tmasim.teach import quiz

    for q in _drawn(quiz._pipelined):   # the simulator meets the anchor formula
        n, load, compute = map(int, re.match(r"(\d+) tiles, each copied in (\d+) us and computed in (\d+) us",
                                             q.text).groups())
        assert q.answer == analytic.anchor_time(n, load, compute, 2)
    for q in _drawn(quiz._serial):
        n, load, compute = map(int, re.match(r"(\d+) tiles, copy (\d+) us, compute (\d+) us", q.text).groups())
        assert q.answer == n * (load + compute)


def test_quiz_latency_answers_are_simulated_and_never_beat_the_round_trip_bound():
    from tmasim.teach import quiz

    for q in _drawn(quiz._latency):
        n, lat, load, compute, stages = map(int, re.match(
            r"(\d+) tiles; each copy waits (\d+) us of latency before a (\d+) us transfer; compute (\d+) us; "
            r"(\d+) stage", q.text).groups())
        assert q.answer == quiz.tiles_run(n, load, compute, stages, lat) / 1e6
        assert q.answer >= (n - 1) * max(load, compute, (lat + load + compute) / stages) + lat + load + compute - 1e-9
        if stages == 1:
            assert q.answer == n * (lat + load + compute)


def test_quiz_gemm_stage_answers_are_the_sweeps_knee():
    from tmasim.sweep import answer, run_sweep
    from tmasim.teach import quiz

    for q in _drawn(quiz._gemm_stages, range(2)):
        k, bm, bn, bk = map(int, re.search(r"512 x 512 x (\d+) \(bf16, tile (\d+)x(\d+)x(\d+)\)", q.text).groups())
        top = int(re.search(r"of 1 to (\d+)\?", q.text).group(1))
        table = run_sweep("gemm-h100", ["workload.m=512", "workload.n=512", f"workload.k={k}",
                                        f"workload.tile=[{bm},{bn},{bk}]"],
                          [f"pipeline.stages={','.join(map(str, range(1, top + 1)))}"], progress=False)
        assert q.answer == answer.find(table).knee["pipeline.stages"] and q.unit == "stages"
        assert q.check(f"{int(q.answer)} stages") and not q.check(f"{int(q.answer) + 1}")


def test_quiz_bandwidth_answers_are_littles_law_capped_by_hbm():
    from tmasim.teach import quiz

    for q in _drawn(quiz._bandwidth, range(6)):
        sms, kib, trip, hbm = re.search(r"(\d+) SMs each keep .*?\(([\d.]+) KiB each\) in flight; a copy's round "
                                        r"trip is ([\d.]+) ns; HBM carries (\d+) GB/s", q.text).groups()
        copies = int(re.search(r"keep (\d+) cop", q.text).group(1))
        little = int(sms) * copies * float(kib) * 1024 / float(trip)  # bytes per ns = GB/s
        assert q.answer == pytest.approx(min(little, float(hbm)), rel=1e-3) and q.unit == "GB/s"
        assert q.check(f"{q.answer:.0f} GB/s")


def test_quiz_residency_answers_are_the_smallest_limit_by_hand():
    from tmasim.teach import quiz

    for q in _drawn(quiz._residency, range(8)):
        text = q.text.replace("plus 0 B of", "plus 0 KiB of")
        stages, stage, other = map(int, re.search(r"has (\d+) stages of (\d+) KiB plus (\d+) KiB of other",
                                                   text).groups())
        per_cta = stages * stage * 1024 + other * 1024 + 16 * stages + 1024   # barriers, the reservation
        assert q.answer == min(228 * 1024 // per_cta, 2048 // 256, 32) and q.unit == "CTAs"


def test_quiz_scores_and_explains(capsys: Any):
    from tmasim.teach import quiz

    qs = quiz.questions(seed=0, count=10)
    answers = ["b"] + [f"{q.answer:.6g}" for q in qs[1:]]
    wrong = next(i for i, q in enumerate(qs) if q.kind == "residency")
    answers[wrong] = f"{qs[wrong].answer + 3:g}"
    assert cli.main(["quiz", "--answers", ",".join(answers)]) == 0
    out = capsys.readouterr().out
    assert "Score: 10 / 11" in out
    assert f"{wrong + 1:>2}. wrong: you said {qs[wrong].answer + 3:g} CTAs" in out
    assert "(the simulator's own residency rule)" in " ".join(out.split())
    assert cli.main(["quiz", "--answers", "b,1"]) == 2
    assert "has 2 answers; the quiz has 11 questions" in capsys.readouterr().err
    assert cli.main(["quiz", "--answers", "c," + ",".join(answers[1:])]) == 0
    out = capsys.readouterr().out
    assert " 1. wrong: you said c; the answer is b." in out and "nothing to do with" in out.replace("\n", " ")


def test_interactive_prompts_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: Any):
    import io

    answers = iter(["23"])
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    assert cli.main(["learn", "1"]) == 0
    assert "You predicted 23 µs; the run gives 23 µs: right" in capsys.readouterr().out
    replies = iter(["b"] + ["1"] * 3)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(replies))
    assert cli.main(["quiz", "--count", "3"]) == 0
    assert " 1. right: you said b" in capsys.readouterr().out


def test_interactive_prompt_asks_again_and_stops_at_end_of_input(monkeypatch: pytest.MonkeyPatch, capsys: Any):
    import io

    def replies(*items: str) -> Any:
        it = iter(items)

        def reply(prompt: str = "") -> str:
            try:
                return next(it)
            except StopIteration:
                raise EOFError from None
        return reply

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", replies("lots", "32"))
    assert cli.main(["learn", "1"]) == 0
    out = capsys.readouterr().out
    assert "--predict: 'lots' must be a time" in out   # asked again, one line
    assert "You predicted 32 µs; the run gives 23 µs: too high" in out
    monkeypatch.setattr("builtins.input", replies("b"))
    assert cli.main(["quiz", "--count", "2"]) == 0
    out = capsys.readouterr().out
    assert " 1. right: you said b" in out and " 2. wrong: you said (nothing)" in out
    qs = __import__("tmasim.teach.quiz", fromlist=["quiz"]).questions(0, 2)
    monkeypatch.setattr("builtins.input", replies("x", "b", "16 apples", f"{qs[1].answer:g} {qs[1].unit}"))
    assert cli.main(["quiz", "--count", "2"]) == 0
    out = capsys.readouterr().out
    assert "must be one of the letters a, b, c, d" in out and "'16 apples'" in out   # asked again, not graded
    assert " 1. right: you said b" in out and " 2. right: you said" in out and "Score: 2 / 3" in out


def test_run_explain_on_a_deadlock(capsys: Any):
    assert cli.main(["run", "bug-arrival-count", "--explain"]) == 3
    captured = capsys.readouterr()
    assert captured.out.startswith("INVALID: this run cannot finish (deadlock)")
    assert captured.err.startswith("tmasim: error: deadlock at 13 µs")


def test_lesson_9_pingpong_hides_the_softmax(outcomes: dict[int, Any]):
    text, outcome = outcomes[9]
    v = outcome.values
    assert "right (within 5%)" in text
    # Never faster than the steady-state closed form of each schedule, and within the fill's reach of it.
    for schedule in ("pingpong", "lockstep"):
        steady = v["blocks"] * v[f"{schedule}_block_ps"] / US
        assert steady <= v[f"{schedule}_us"] < 1.1 * steady
    assert v["pingpong_us"] < v["overlapped_us"] < v["lockstep_us"]
    assert v["lockstep_us"] / v["pingpong_us"] > 1.4


def test_lesson_texts_say_what_their_runs_did(outcomes: dict[int, Any]):
    flat = {n: " ".join(text.split()) for n, (text, _) in outcomes.items()}
    assert "the copy latency is the 6 us from issuing a copy to its first byte" in flat[4]
    assert "a slot's round trip is everything a slot goes through" in flat[4]
    assert "32 x 9.5 us = 304 µs" in flat[4]
    assert ("The scenario sets a leaner register split (pipeline.registers: 40 per producer thread, 104 per "
            "consumer thread, instead of the default 232)") in flat[5]
    assert "128 x (40 + 2 x 232) = 64,512 of the SM's 65,536 registers" in flat[5]
    assert "so registers alone would allow 1 CTA per SM" in flat[5] and "lets 2 CTAs share" in flat[5]
    assert "computes the 4 tiles back to back: 4 x 5 µs = 20 µs" in flat[7]
    assert "read tile 0 at the start (time 0)" in flat[7] and " 0 ps" not in flat[7]
    assert " = None" not in flat[8] and "registers_needed_per_thread" not in flat[8]
    assert "a TMEM row on the B200 (256 columns per CTA)" in flat[8]
    assert "a registers row on the H100 (160 needed per consumer thread: 128 for the accumulator" in flat[8]


def test_lesson_7_deadlock_figure_marks_the_open_waits_and_the_held_slot(tmp_path: Path):
    from tmasim.teach import lesson_runs
    from tmasim.teach.lab import Lab

    lab = Lab("lessons/07-sync")
    scenario = lab.scenario(pipeline__empty_arrivals=2)
    with pytest.raises(Exception) as info:
        lab.run(pipeline__empty_arrivals=2)
    captured: list[Any] = []
    lab.out = tmp_path
    lab.figure = lambda name, fig: captured.append(fig) or [tmp_path / name]   # type: ignore[method-assign]
    lesson_runs._partial_gantt(lab, scenario, info.value, "d.png", "deadlock")
    texts = [t.get_text() for t in captured[0].axes[0].texts]
    assert "still waiting on empty[0]  " in texts and "still waiting on full[0]  " in texts
    assert texts.count("computed, never released") == 1     # slot 0, held 8-13 µs; slot 1's use ends at the stop
    assert "stuck at 13 µs" in captured[0].axes[0].get_title()
    labels = [h.get_label() for h in captured[0].axes[0].get_legend().legend_handles]
    assert "slot computed, never released (empty barrier never flipped)" in labels
    import matplotlib.pyplot as plt

    plt.close(captured[0])


def test_explain_never_says_0_ps():
    racy = explain.explain(load("lessons/07-sync", ["pipeline.consumer_waits_full=false"]), what_ifs=False)
    assert "read at the start (time 0)" in racy and "0 ps" not in racy
    stream = explain.explain(load("stream-h100", ["workload.shape=[1024, 4096]"]), what_ifs=False)
    assert re.search(r"^  compute +none", stream, re.M) and "0 ps" not in stream  # no compute: none


def test_quiz_says_how_it_read_a_bare_fraction_for_a_percentage(capsys: Any):
    """The quiz, like learn --predict, says that a bare 0.56 on a percentage question was read as 0.56 %."""
    from tmasim.teach import quiz

    qs = quiz.questions(0, 10)
    number = next(i for i, q in enumerate(qs) if q.unit == "%")
    answers = ["b" if q.choices else "1" for q in qs]
    answers[number] = "0.56"
    _, report = quiz.grade(qs, answers)
    assert "Note: 0.56 was read as 0.56%; if you meant the fraction 0.56, that is 56%: answer 56" in report
