"""The teaching subcommands: ``explain``, ``learn``, ``quiz`` and ``animate``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tmasim.teach.answers import Reading

SET_HELP = "override a field; VALUE is read as TOML (3, \"3 us\", [1, 2]) or else as a plain string"
ANSWER_HELP = ("a time with or without its unit (23, 23 us, 23000 ns, 0.023 ms; bare: µs), a percentage with or "
               "without %%, or a count; within 5%% of the simulated value counts as right")


def register(sub: Any) -> None:
    explain = sub.add_parser("explain", help="simulate a scenario and explain the run in words, with what-ifs")
    explain.add_argument("scenario", nargs="?", help="a scenario file or bundled name (default: reference)")
    explain.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                         help=SET_HELP)
    explain.add_argument("--no-what-if", dest="what_ifs", action="store_false",
                         help="skip the what-ifs (each one is another simulation)")
    explain.add_argument("--yes", action="store_true",
                         help="run the scenario and its what-ifs even if one is estimated to take long or much "
                              "memory (a large one is noted before it starts)")
    explain.set_defaults(handler=_explain)
    register_learn(sub)
    register_animate(sub)
    register_quiz(sub)


def _explain(args: argparse.Namespace) -> int:
    from tmasim.estimates import budget
    from tmasim.inputs import scenario as scenarios
    from tmasim.teach.explain import explain

    raw, base_dir = scenarios.read_raw(args.scenario)
    scenario = scenarios.from_dict(scenarios.apply_overrides(raw, args.overrides), base_dir)
    limits = budget.command_line(args.yes, what="explain")
    text = explain(scenario, base_dir=base_dir, what_ifs=args.what_ifs, overrides=args.overrides, limits=limits)
    print(text)
    return 3 if text.startswith("INVALID: this run cannot finish") else 0


def base_dir_of(source: str | None) -> Path | None:
    from tmasim.inputs import scenario as scenarios

    return scenarios.read_raw(source)[1]


def register_learn(sub: Any) -> None:
    learn = sub.add_parser("learn", help="lessons on TMA pipelining: list them, or run lesson N")
    learn.add_argument("number", nargs="?", type=int, help="the lesson to run (omit to list them)")
    learn.add_argument("--predict", metavar="VALUE", help="your prediction (non-interactive; otherwise asked on a "
                                                          f"terminal): {ANSWER_HELP}")
    learn.add_argument("--out", type=Path, metavar="DIR", help="write the lesson's figures here")
    learn.add_argument("--glossary", action="store_true", help="define every term the lessons use")
    learn.set_defaults(handler=_learn)


def _learn(args: argparse.Namespace) -> int:
    import sys

    from tmasim.output.paths import check_folder
    from tmasim.teach import glossary, lessons

    if args.glossary:
        print(glossary.glossary())
        return 0
    if args.number is None:
        print(lessons.listing())
        return 0
    item = lessons.lesson(args.number)
    predicted = None if args.predict is None else lessons.parse_prediction(args.predict, item.unit)
    if args.out is not None:
        check_folder("--out", args.out)  # before anything is printed
    print(lessons.header(args.number))
    if predicted is None and sys.stdin.isatty():
        predicted = _ask_prediction(item.unit)
    print()
    if args.out is None:
        text, _ = lessons.teach(args.number, predicted, None)
    else:  # the figures staged beside --out and moved in whole: a full disk leaves no part
        from tmasim.output.paths import staged_folder

        with staged_folder(args.out) as stage:
            text, _ = lessons.teach(args.number, predicted, stage)
        text = text.replace(str(stage), str(args.out))
    print(text)
    return 0


def _ask_prediction(unit: str) -> Reading | None:
    """Ask on the terminal until the answer is a number (empty or end of input: no prediction)."""
    from tmasim.errors import ScenarioError
    from tmasim.teach import lessons

    while True:
        try:
            answer = input(f"Your prediction ({unit}): ").strip()
        except EOFError:
            return None
        if not answer:
            return None
        try:
            return lessons.parse_prediction(answer, unit)
        except ScenarioError as err:
            print(f"  {err}")


def register_animate(sub: Any) -> None:
    anim = sub.add_parser("animate", help="animate one CTA's pipeline: slots, barriers, copy engine, tensor core")
    anim.add_argument("scenario", nargs="?", help="a scenario file or bundled name (default: reference)")
    anim.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                      help=SET_HELP)
    anim.add_argument("--out", type=Path, required=True, metavar="FILE",
                      help="FILE.gif, FILE.mp4 (needs ffmpeg) or FILE.html (a self-contained player with a slider)")
    anim.add_argument("--fps", type=int, default=8, help="frames per second (default 8)")
    anim.add_argument("--yes", action="store_true",
                      help="animate even if the run's estimated time or memory is past the limits")
    anim.set_defaults(handler=_animate)


def _animate(args: argparse.Namespace) -> int:
    import sys

    from tmasim.errors import DeadlockError, ModelError, TmasimError
    from tmasim.estimates import budget
    from tmasim.inputs import scenario as scenarios
    from tmasim.output.paths import check_file
    from tmasim.output.result import Result
    from tmasim.review.animate import FORMATS, animate
    from tmasim.simulation import simulate

    if args.out.suffix.lower() not in FORMATS:
        raise TmasimError(f"--out: {str(args.out)!r} must end in .gif, .mp4 or .html")
    if not 1 <= args.fps <= 60:
        raise TmasimError(f"--fps: {args.fps} must be between 1 and 60")
    scenario = scenarios.load(args.scenario, args.overrides)
    check_file("--out", args.out)
    if not scenario.run.records:
        raise TmasimError(f"animate: {scenario.name} keeps no per-event records (run.records = false); add "
                          "--set run.records=true and shrink the problem first")
    limits = budget.command_line(args.yes, what="animation", **budget.after_run(animation=True))
    try:
        result = simulate(scenario, limits=limits)
    except ModelError as err:   # a run that cannot finish: animate it up to the failure, then report
        if err.records is None or not err.records.span_count:
            raise
        partial = Result(scenario, {"scenario": scenario.name, "stages": scenario.pipeline.stages}, [], err.records)
        kind = "deadlock" if isinstance(err, DeadlockError) else "mbarrier misuse"
        title = f"{scenario.name}: stuck ({kind}), never finishes"
        print(f"wrote {animate(partial, args.out, fps=args.fps, title=title)}", file=sys.stderr)
        raise
    print(f"wrote {animate(result, args.out, fps=args.fps)}", file=sys.stderr)
    return 0


def register_quiz(sub: Any) -> None:
    quiz = sub.add_parser("quiz", help="check your understanding: one conceptual and ten numeric questions")
    quiz.add_argument("--answers", metavar="A,B,...", help="your answers, comma-separated, in order (for scripts; "
                                                           "otherwise asked on a terminal): a letter for a choice, "
                                                           f"else {ANSWER_HELP}")
    quiz.add_argument("--seed", type=int, default=0, help="which numeric questions (default 0)")
    quiz.add_argument("--count", type=int, default=10, help="how many numeric questions (default 10)")
    quiz.set_defaults(handler=_quiz)


def _quiz(args: argparse.Namespace) -> int:
    import sys

    from tmasim.errors import ScenarioError
    from tmasim.teach import quiz

    if args.count < 1 or args.count > 50:
        raise ScenarioError("--count", args.count, "must be between 1 and 50")
    if args.seed < 0:
        raise ScenarioError("--seed", args.seed, "must be 0 or more")
    qs = quiz.questions(args.seed, args.count)
    given = None if args.answers is None else quiz.parse_answers(args.answers, qs)   # one-line error if not
    interactive = given is None and sys.stdin.isatty()
    answers: list[str] = []
    for number, question in enumerate(qs, start=1):
        print(quiz.show(number, question))
        if interactive:
            reply = _ask_answer(question)
            if reply is None:   # end of input: the rest unanswered
                interactive = False
                answers += [""] * (len(qs) - len(answers))
                break
            answers.append(reply)
        print()
    if given is None and not answers:
        print(f"Answer with: tmasim quiz --seed {args.seed} --answers b,23,... "
              f"({len(qs)} answers, comma-separated)")
        return 0
    score, report = quiz.grade(qs, given if given is not None else answers)
    print(report)
    return 0


def _ask_answer(question: Any) -> str | None:
    """Ask until the answer can be read (an empty one is no answer); None at end of input."""
    from tmasim.errors import ScenarioError

    while True:
        try:
            reply = input("   your answer: ").strip()
        except EOFError:
            return None
        try:
            question.read(reply, "answer")
        except ScenarioError as err:
            print(f"   {err}")
            continue
        return reply
