"""Numbers quoted in the docs' prose are the program's: each is checked against the output of
the command that produces it, as tests/test_readme_commands.py checks the outputs shown under
commands.

A prose block (a paragraph, or one row of a table) that quotes simulated numbers ends with a
marker naming where they come from, its parts separated by ``;``::

    ... 13.69, 16.28 and 21.28 µs. <!-- numbers: tmasim learn 6 -->
    ... 2.449 against 2.455 ms, 0.2% faster. <!-- numbers: tmasim run X; 0.2 = 100 * (1 - 2.449 / 2.455) -->
    ... at the preset's 1.83 GHz, 3% below ... <!-- numbers: given 1.83, 3 -->

- ``tmasim ...`` (or ``python -m tmasim.MODULE ...``): a command whose output (stdout and
  stderr) holds numbers of the block.
- ``N = EXPR``: the quoted number N is arithmetic on printed ones (a share, a ratio, a
  difference): EXPR's numbers other than 1 and 100 must be printed by the block's commands, and N
  must be EXPR rounded to N's digits (an input may instead be given, below).
- ``shown``: the numbers of the page's ``text`` blocks (what the page shows commands and
  examples print, checked as printed by tests/test_readme_commands.py and, for the Triton
  example, tests/test_triton_prune.py).
- ``baseline``: the validation's committed figures (``tmasim validate public``'s, kept in
  validation/public/results/pipelines.json, which tests/test_validate_public.py holds against
  fresh runs), as tmasim prints them: a share as a percentage with 0 or 1 decimal, a count whole.
- ``results FILE``: a file of validation/public/results/ that ``python validation/calibrate_public.py``
  writes (the single-mechanism fits' table, summary.md; the checks' .md files), committed with the
  presets they fit: the numbers in it as written (a re-fit takes minutes; tests/test_public_calibration.py
  holds the presets against their sources).
- ``checked by TEST: N, M``: these numbers are checked by TEST, a test of this module (where
  the program prints them only after minutes of work, as a run's estimate before it runs).
- ``benchmark PATH: N, M``: these numbers are what a script under benchmarks/ measured (times
  on the development machine, ratios over a grid of runs): too slow or too machine-bound for the
  suite; the script must exist, and rerunning it is how they are checked.
- ``earlier: N, M``: a record taken once and not recomputed: what an earlier state of the model or
  a variant tried and not kept gave, or a wall time measured when a change was made, with no
  script under benchmarks/ to rerun (the program as shipped does not print them).
- ``given N, M``: these numbers are inputs (a preset's or a datasheet's value, a count the reader
  chose), not results; ``given`` alone says so of every number of the block.

Every number in the block that has a decimal point or a unit after it (``21.28``, ``97 %``,
``13.02 GB``, ``1.45 ms``, the first of ``738 → 579 µs``), and every table cell that is a number
alone, must be one of these: printed as written by one of the block's commands, derived, or given. Code spans (commands,
field values) are not quoted numbers and are left out. On a checked page (:data:`CHECKED`), a
prose block with a time, a rate or a share in it must carry a marker, so a new simulated number
cannot come in unchecked. The HTML comments do not show on the built site or on GitHub.

A command the docs already show with its output (a ``$ tmasim ...`` line of a ``text`` block)
is not run again when the numbers a block needs are among the shown ones:
tests/test_readme_commands.py checks that each shown line is printed, so they are the
program's. Other commands run once each, here.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from test_readme_commands import COMMANDS

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = ("README.md", *sorted(p.relative_to(REPO).as_posix() for p in DOCS.rglob("*.md")))
RESULTS = REPO / "validation" / "public" / "results"
# every prose number of these pages checked (marked)
CHECKED = ("README.md", "docs/getting-started.md", "docs/testing.md", "docs/calibration.md", "docs/model.md",
           "docs/design.md", *sorted(p.relative_to(REPO).as_posix() for p in (DOCS / "guides").glob("*.md")))
MARK = re.compile(r"<!--\s*numbers:\s*(.*?)\s*-->")
CODE = re.compile(r"`[^`]*`")
UNIT = r"(?:µs|us|ns|ms|s|TFLOP/s|GFLOP/s|PFLOP/s|TB/s|GB/s|KiB|MiB|GiB|GB|MB|B|%|x|×|GHz|MHz|cycles)"
# a number with a unit after it, or before another that has one ("738 → 579 µs", "13–16%"), or a decimal
THEN = r"(?:\s?(?:→|–|->)\s?\d[\d,]*(?:\.\d+)?)?"
QUOTED = re.compile(rf"(?<![\w.])(\d[\d,]*\.\d+|\d[\d,]*)(?={THEN}\s?{UNIT}(?![\w]))"
                    r"|(?<![\w.,])(\d[\d,]*\.\d+)(?![\w.])")
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
CELL = re.compile(r"^\s*(\d[\d,]*(?:\.\d+)?)\s*$")
SIMULATED = re.compile(r"\d\s?(?:µs|ns|ms|s|min|TFLOP/s|PFLOP/s|TB/s|GB/s|%|GiB|GB|MB|MiB|KiB|×)(?![\w])")


def blocks(text: str) -> list[tuple[int, str]]:
    """The prose blocks of a page (outside code fences): paragraphs, and table rows one by one,
    each with its first line's number."""
    out: list[tuple[int, str]] = []
    fence, start, lines = False, 0, []
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        if line.startswith("|"):
            if lines:
                out.append((start, " ".join(lines)))
                lines = []
            out.append((number, line))
        elif line.strip():
            if not lines:
                start = number
            lines.append(line)
        elif lines:
            out.append((start, " ".join(lines)))
            lines = []
    return out


def quoted_numbers(block: str) -> list[str]:
    """The numbers a block quotes: decimals, numbers followed by a unit, and table cells that are a
    number alone; not in code spans."""
    prose = CODE.sub(" ", MARK.sub(" ", block))
    found = [m.group(1) or m.group(2) for m in QUOTED.finditer(prose)]
    if prose.lstrip().startswith("|"):
        found += [m.group(1) for cell in prose.strip().strip("|").split("|") if (m := CELL.match(cell))
                  and m.group(1) not in found]
    return found


def parts(block: str) -> tuple[list[str], dict[str, str], set[str] | None]:
    """A block's marker: its commands, its derived numbers (number -> expression) and its given
    numbers (None: every number is given)."""
    commands, derived, given = [], {}, set()
    for mark in MARK.finditer(block):
        for part in (p.strip() for p in mark.group(1).split(";") if p.strip()):
            if part.startswith(("tmasim ", "python -m tmasim")) or part in ("baseline", "shown"):
                commands.append(part)
            elif part.startswith("results "):
                assert (RESULTS / part.removeprefix("results ").strip()).is_file(), part
                commands.append(part)
            elif part == "given":
                return commands, derived, None
            elif part.startswith("benchmark "):
                script, _, numbers = part.removeprefix("benchmark ").partition(":")
                assert (REPO / script.strip()).is_file() and script.strip().startswith("benchmarks/"), part
                given |= {n.strip() for n in numbers.split(",")}
            elif part.startswith("checked by "):
                test, _, numbers = part.removeprefix("checked by ").partition(":")
                assert callable(globals().get(test.strip())) and test.strip().startswith("test_"), part
                given |= {n.strip() for n in numbers.split(",")}
            elif part.startswith("earlier:"):
                given |= {n.strip() for n in part.removeprefix("earlier:").split(",")}
            elif part.startswith("given "):
                given |= {n.strip() for n in part[len("given "):].split(",")}
            elif "=" in part:
                number, expression = (s.strip() for s in part.split("=", 1))
                derived[number] = expression
            else:
                raise AssertionError(f"a marker part is a command, 'N = EXPR' or 'given ...': {part!r}")
    return commands, derived, given


@functools.cache
def baseline_numbers() -> frozenset[str]:
    """The committed validation figures as tmasim prints them (see ``baseline`` above)."""
    from tmasim.validation import pipelines

    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, bool):
            return
        elif isinstance(value, int):
            found.append(str(value))
        elif isinstance(value, float):
            found.extend([f"{value:.1f}", f"{value:.0f}", f"{abs(value):.0%}"[:-1], f"{abs(value):.1%}"[:-1]])

    walk(pipelines.baseline())
    return frozenset(found)


@functools.cache
def page_shown(page: str) -> frozenset[str]:
    """The numbers in a page's ``text`` blocks."""
    text = (REPO / page).read_text(encoding="utf-8")
    return _numbers("\n".join(re.findall(r"^```text\n(.*?)^```", text, re.S | re.M)))


@functools.cache
def output(command: str) -> frozenset[str]:
    """The numbers a tmasim command prints (stdout and stderr), run in this process from the
    repository's root (as ``tmasim`` would run it, without starting an interpreter each time)."""
    if command == "baseline":
        return baseline_numbers()
    if command.startswith("shown "):
        return page_shown(command.removeprefix("shown "))
    if command.startswith("results "):
        return _numbers((RESULTS / command.removeprefix("results ").strip()).read_text(encoding="utf-8"))
    import contextlib
    import importlib
    import io

    words = shlex.split(command)
    if words[0] == "tmasim":
        from tmasim.cli import main
        argv = words[1:]
    else:
        assert words[:2] == ["python", "-m"] and words[2].startswith("tmasim."), command
        main, argv = importlib.import_module(words[2]).main, words[3:]
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        os.chdir(REPO)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    finally:
        os.chdir(here)
    assert code in (0, None), f"{command}: exit {code}: {err.getvalue()[-2000:]}"
    return _numbers(out.getvalue() + "\n" + err.getvalue())


def _numbers(text: str) -> frozenset[str]:
    found = NUMBER.findall(text)
    return frozenset(found + [n.replace(",", "") for n in found])


@functools.cache
def shown(command: str) -> frozenset[str]:
    """The numbers the docs show a command print (checked as printed by test_readme_commands)."""
    lines = [line for c in COMMANDS if c.text.strip() == command and not c.skip and not c.fails for line in c.shown]
    return _numbers("\n".join(line for line in lines if "..." not in line and "…" not in line)
                    + "\n" + "\n".join(re.sub(r"\S*(?:\.\.\.|…)\S*", " ", line) for line in lines))


def printed_by(commands: list[str], needed: set[str]) -> frozenset[str]:
    """The numbers the commands print: what the docs show, then the output of the commands the
    docs do not show, then (only where numbers are still missing) of the shown ones."""
    seen = frozenset().union(*(shown(c) for c in commands)) if commands else frozenset()
    for c in sorted(commands, key=lambda c: bool(shown(c))):
        if needed <= seen:
            break
        seen |= output(c)
    return seen


def _plain(number: str) -> str:
    return number.replace(",", "")


def derives(number: str, expression: str, printed: frozenset[str],
            given: frozenset[str] = frozenset()) -> str | None:
    """Why ``number = expression`` does not hold on printed (or given) numbers (None when it does)."""
    inputs = [n for n in NUMBER.findall(expression) if n not in ("1", "100")]
    unprinted = [n for n in inputs if n not in printed and _plain(n) not in printed and n not in given]
    if unprinted:
        return f"{number} = {expression}: {unprinted} not printed"
    if re.search(r"[^\d.,\s+\-*/()]", expression):
        return f"{number} = {expression}: only numbers and + - * / ( )"
    value = eval(_plain(expression), {"__builtins__": {}})  # noqa: S307 (digits and operators only)
    digits = len(_plain(number).partition(".")[2])
    if abs(value - float(_plain(number))) > 0.5 * 10 ** -digits + 1e-9:
        return f"{number} = {expression}: the expression is {value:.{digits + 2}f}"
    return None


def problems(block: str, page: str = "") -> list[str]:
    """What in a marked block of ``page`` is not the program's: numbers neither printed, derived
    nor given."""
    commands, derived, given = parts(block)
    commands = [f"shown {page}" if c == "shown" else c for c in commands]
    if given is None:
        return []
    quoted = quoted_numbers(block)
    inputs = {n for e in derived.values() for n in NUMBER.findall(e)} - given - {"1", "100"}
    needed = {_plain(n) for n in quoted if n not in given and n not in derived} | {_plain(n) for n in inputs}
    printed = printed_by(commands, needed)
    out = [f"{n}: printed by none of {commands}" for n in quoted
           if n not in given and n not in derived and n not in printed and _plain(n) not in printed]
    out += [why for n, e in derived.items() if (why := derives(n, e, printed, frozenset(given)))]
    used = {n for e in derived.values() for n in NUMBER.findall(e)}
    out += [f"{n}: derived or given but neither quoted nor used" for n in (*derived, *given)
            if n not in quoted and n not in used]
    return out


def _cases() -> list[tuple[str, int, str]]:
    """Per marked block of every page: its page, line and text."""
    return [(page, line, block) for page in PAGES
            for line, block in blocks((REPO / page).read_text(encoding="utf-8")) if MARK.search(block)]


CASES = _cases()


@pytest.mark.parametrize(("page", "line", "block"), CASES, ids=[f"{p}:{n}" for p, n, _ in CASES])
def test_each_quoted_number_is_printed_by_its_command(page: str, line: int, block: str):
    assert problems(block, page) == [], f"{page}:{line}"


@pytest.mark.parametrize("page", CHECKED)
def test_every_simulated_number_in_a_checked_page_is_marked(page: str):
    unmarked = [f"{page}:{line}: {block[:90]}" for line, block in blocks((REPO / page).read_text(encoding="utf-8"))
                if SIMULATED.search(CODE.sub(" ", block)) and not MARK.search(block)]
    assert unmarked == []


def test_the_checker_finds_quoted_numbers_and_leaves_code_out():
    block = "13.7 µs on 1 SM, 15.0 on 66, 97 % busy, `--set pipeline.stages=5` 4 stages <!-- numbers: tmasim x -->"
    assert quoted_numbers(block) == ["13.7", "15.0", "97"]
    assert quoted_numbers("| as is | 2.455 ms | 953 | 2 stages |") == ["2.455", "953"]
    assert quoted_numbers("L2 bound 738 → 579 µs, 13–16% slow") == ["738", "579", "13", "16"]
    assert blocks("a\nb\n\n| x | y |\n```\n1.5 µs\n```\nc\n") == [(1, "a b"), (4, "| x | y |"), (8, "c")]


def test_derived_and_given_numbers_are_checked_as_such():
    printed = frozenset({"2.449", "2.455"})
    assert derives("0.2", "100 * (1 - 2.449 / 2.455)", printed) is None
    assert "expression is" in derives("0.3", "100 * (1 - 2.449 / 2.455)", printed)
    assert "not printed" in derives("0.2", "100 * (1 - 2.449 / 2.456)", printed)
    assert parts("x <!-- numbers: tmasim a; 3 = 1 + 2; given 1.83, 7 -->") == (["tmasim a"], {"3": "1 + 2"},
                                                                                  {"1.83", "7"})
    assert parts("x <!-- numbers: given -->")[2] is None
    assert parts("x <!-- numbers: benchmark benchmarks/bench_search.py: 20.7 -->")[2] == {"20.7"}
    with pytest.raises(AssertionError):
        parts("x <!-- numbers: benchmark benchmarks/no_such_bench.py: 20.7 -->")
    assert problems("1.83 GHz and 7 % and 9 % <!-- numbers: given 1.83, 7 -->") == [
        "9: printed by none of []"]


def test_a_shown_command_is_not_run_again(monkeypatch: pytest.MonkeyPatch):
    """gemm-h100-cluster's numbers are on the page under the command: no run needed."""
    def no_run(command: str) -> frozenset[str]:
        raise AssertionError(f"ran {command}")

    monkeypatch.setattr(sys.modules[__name__], "output", no_run)
    assert {"1.174", "936.8", "8.724"} <= printed_by(["tmasim run gemm-h100-cluster"], {"1.174", "936.8"})
    with pytest.raises(AssertionError, match="ran tmasim run gemm-h100-cluster"):
        printed_by(["tmasim run gemm-h100-cluster"], {"1.174", "99.99"})


def test_the_old_lesson_6_row_would_fail():
    """The row once quoted 15.0, 16.5 and 21.4 µs; the lesson prints 13.69, 16.28 and 21.28."""
    printed = output("tmasim learn 6")
    block = "15.0 on 66, 16.5 on 100, 21.4 on 132"
    assert [n for n in quoted_numbers(block) if n not in printed] == ["15.0", "16.5", "21.4"]
    assert {"13.69", "16.28", "21.28"} <= printed


def test_the_estimates_the_sweeps_guide_quotes():
    """What a run of 10,000,000 reference tiles is estimated at, as docs/guides/sweeps-and-reports.md
    quotes it (the estimate is made before the run; the run itself takes seconds and gigabytes)."""
    from tmasim.scenario import load
    from tmasim.simulation import estimate

    page = " ".join((DOCS / "guides" / "sweeps-and-reports.md").read_text(encoding="utf-8").split())
    tiles = "workload.tiles=10000000"
    skip, full, lean = (estimate(load("reference", [tiles, *more])).text() for more in
                        ([], ["run.fast_forward=false"], ["run.records=false"]))
    assert skip.startswith("about 6 s and 1.545 GiB of memory") and "9,999,990 of them skipped" in skip
    assert full.startswith("about 1.6 min and 1.545 GiB")
    assert lean.startswith("about 3 s and 56.01 MiB")
    for quoted in ("estimated at about 6 s and 1.545 GiB", "(9,999,990 of the ring steps skipped",
                   "with `run.fast_forward=false` at about 1.6 min", "the interpreter's 56 MiB"):
        assert quoted in page, quoted


def test_a_stale_derived_number_would_fail():
    """The tiles guide once said the padded run took 40 ns more; the runs it shows differ by 410 ns
    (and the padded one is the faster)."""
    runs = ("tmasim run gemm-b200-2sm --set workload.m=192 --set 'workload.tile=[64,64,64]'; "
            "tmasim run gemm-b200-2sm --set workload.m=256 --set 'workload.tile=[64,64,64]'")
    stale = f"about its time (here 40 ns more) <!-- numbers: {runs}; 40 = 1000 * (69.31 - 68.9); given 1000 -->"
    assert problems(stale, "docs/guides/tiles-and-clusters.md") == [
        "40 = 1000 * (69.31 - 68.9): the expression is 410.00"]


def test_the_mma_figures_the_model_page_quotes():
    """docs/model.md's B200 instruction figures, from the preset's [mma] table and its shared-memory
    bandwidth: an SS m128n64k16 issues every 49 cycles (its TS II 32.02), and the N = 128 II is 64.02."""
    from tmasim.hardware import load_gpu
    from tmasim.machine.operands import operand_timing

    gpu = load_gpu("b200")
    latency, ii = gpu.mma.timing("test", "bf16", 128, 64)
    assert f"{ii:.2f}" == "32.02"
    assert f"{operand_timing(latency, ii, 128, 64, 1, 'SS', gpu.smem_bytes_per_cycle()).ii:.0f}" == "49"
    assert [f"{gpu.mma.timing('test', 'bf16', 128, n)[1]:.2f}" for n in (256, 128, 64)] == ["128.03", "64.02", "32.02"]


def test_the_public_fits_per_row_figures():
    """docs/calibration.md's per-row errors of the single-mechanism fits, from the committed result
    tables (validation/public/results/, written by validation/calibrate_public.py with the presets)."""
    import pandas as pd

    def table(name: str) -> pd.DataFrame:
        return pd.read_csv(RESULTS / f"{name}.csv")

    b200 = table("b200-tma-throughput")
    big_one_stage = b200[(b200.NumStages == 1) & (b200.BytesInFlightPerSM >= 32768)].error_pct
    assert (f"{-big_one_stage.max():.0f}", f"{-big_one_stage.min():.0f}") == ("17", "26")  # 17-26 % low
    chase = table("h100-pcie-latency")
    far = chase[(chase.data_set_kib >= 24 * 1024) & (chase.data_set_kib <= 52 * 1024)].error_pct
    assert f"{far.abs().max():.0f}" == "41"
    umma = table("b200-umma-operands")
    pair = umma[(umma.CTAGroup == 2) & (umma.M == 256)].error_pct
    assert f"{pair.abs().max():.0f}" == "6" and f"{pair.abs().max():.1f}" == "6.1"
    boxes = table("h800-tma-throughput")
    narrow = boxes[(boxes.box == "[256, 4, 4]") & (boxes.ctas_per_sm == 1)].error_pct
    assert [f"{e:.0f}" for e in narrow] == ["-30"]
