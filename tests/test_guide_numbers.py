"""Numbers quoted in the guides' prose are the program's: each is checked against the output of
the command that produces it, as tests/test_readme_commands.py checks the outputs shown under
commands.

A prose block (a paragraph, or one row of a table) that quotes simulated numbers ends with a
marker naming the command whose output holds them::

    ... 13.69, 16.28 and 21.28 µs. <!-- numbers: tmasim learn 6 -->

Every number in the block that has a decimal point or a unit after it (``21.28``, ``97 %``,
``13.02 GB``, ``1.45 ms``) must appear, as written, among the numbers that command prints; code
spans (commands, field values) are not quoted numbers and are left out. A block whose numbers
are given rather than simulated (inputs, datasheet values, arithmetic on them) says so with
``<!-- numbers: given -->``. In the guides listed in :data:`CHECKED`, a prose block with a time,
a rate or a share in it must carry one of the two markers, so a new simulated number cannot come
in unchecked. The HTML comments do not show on the built site or on GitHub.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUIDES = REPO / "docs" / "guides"
CHECKED = ("teaching.md", "stage-counts.md", "timelines.md")  # every prose number checked (more to come)
MARK = re.compile(r"<!--\s*numbers:\s*(.*?)\s*-->")
CODE = re.compile(r"`[^`]*`")
UNIT = r"(?:µs|us|ns|ms|s|TFLOP/s|GFLOP/s|TB/s|GB/s|KiB|MiB|GB|MB|%|x)"
QUOTED = re.compile(rf"(?<![\w.])(\d[\d,]*\.\d+|\d[\d,]*)(?=\s?{UNIT}(?![\w]))|(?<![\w.,])(\d[\d,]*\.\d+)(?![\w.])")
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
SIMULATED = re.compile(r"\d\s?(?:µs|ns|ms|TFLOP/s|TB/s|GB/s|%)")


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
    """The numbers a block quotes: decimals, and numbers followed by a unit; not in code spans."""
    prose = CODE.sub(" ", MARK.sub(" ", block))
    return [m.group(1) or m.group(2) for m in QUOTED.finditer(prose)]


@functools.cache
def output(command: str) -> frozenset[str]:
    """The numbers a tmasim command prints (stdout and stderr), run from the repository's root."""
    words = shlex.split(command)
    assert words[0] == "tmasim", command
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-m", "tmasim", *words[1:]], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return frozenset(NUMBER.findall(done.stdout + "\n" + done.stderr))


def _cases() -> list[tuple[str, int, str, tuple[str, ...]]]:
    """Per marked block of every guide: its page, line, text and the commands it quotes."""
    out = []
    for page in sorted(GUIDES.glob("*.md")):
        for line, block in blocks(page.read_text(encoding="utf-8")):
            sources = tuple(m.group(1) for m in MARK.finditer(block) if m.group(1) != "given")
            if sources:
                out.append((page.name, line, block, sources))
    return out


@pytest.mark.parametrize(("page", "line", "block", "sources"), _cases(),
                         ids=[f"{p}:{n}" for p, n, _, _ in _cases()])
def test_each_quoted_number_is_printed_by_its_command(page: str, line: int, block: str, sources: tuple[str, ...]):
    printed = frozenset().union(*(output(source) for source in sources))
    missing = [n for n in quoted_numbers(block) if n not in printed and n.replace(",", "") not in printed]
    assert not missing, f"docs/guides/{page}:{line}: {', '.join(sources)} print none of {missing}"


@pytest.mark.parametrize("name", CHECKED)
def test_every_simulated_number_in_a_checked_guide_is_marked(name: str):
    unmarked = [f"{name}:{line}: {block[:90]}" for line, block in blocks((GUIDES / name).read_text(encoding="utf-8"))
                if SIMULATED.search(CODE.sub(" ", block)) and not MARK.search(block)]
    assert unmarked == []


def test_the_checker_finds_quoted_numbers_and_leaves_code_out():
    block = "13.7 µs on 1 SM, 15.0 on 66, 97 % busy, `--set pipeline.stages=5` 4 stages <!-- numbers: tmasim x -->"
    assert quoted_numbers(block) == ["13.7", "15.0", "97"]
    assert blocks("a\nb\n\n| x | y |\n```\n1.5 µs\n```\nc\n") == [(1, "a b"), (4, "| x | y |"), (8, "c")]


def test_the_old_lesson_6_row_would_fail():
    """The row once quoted 15.0, 16.5 and 21.4 µs; the lesson prints 13.69, 16.28 and 21.28."""
    printed = output("tmasim learn 6")
    block = "15.0 on 66, 16.5 on 100, 21.4 on 132"
    assert [n for n in quoted_numbers(block) if n not in printed] == ["15.0", "16.5", "21.4"]
    assert {"13.69", "16.28", "21.28"} <= printed
