"""Every ``tmasim`` command the README and the docs show runs as printed, top to bottom, one page
to a fresh folder.

Commands are taken from the code blocks of README.md and of every page under docs/:
``$ tmasim ...`` lines of a ``text`` block (followed by what they print) and ``tmasim ...``
lines of a ``sh`` block (a trailing ``\\`` continues a line). Each runs in bash through
``python -m tmasim``, in the page's order, in one temporary folder per page, so a file must be
written before a later command of the same page reads it; the repository's ``tests/data`` is
there too (a link), so a page may run a command on a bundled test file as a reader at the
repository's root would. A command whose printed output
starts with ``tmasim: error:`` must fail with that one-line error (no traceback); every other
command must succeed.

What a page shows a command print must be what it prints: each shown line is one of the lines
the command writes (stdout, then stderr), in the page's order, whitespace runs counted as one.
A page may leave lines out, and ``...`` (or ``…``) inside or at the end of a line stands for any
text; a shown line that wraps a long printed one may continue on the next shown lines; an elapsed
time (``in 6.6 s``) may differ. So a number quoted under a command is the number it prints.

A command marked in a trailing comment with ``[gpu]`` (needs a GPU), ``[slow]`` (takes
minutes) or ``[skip: why]`` is not run; docs/getting-started.md says so where it defines the markers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = (README, *sorted((REPO / "docs").rglob("*.md")))
MARKER = re.compile(r"#.*\[(gpu|slow|skip)\b[^\]]*\]")
PROGRAM = re.compile(r"^(tmasim|python3? -m tmasim)(\s|$)")
TIMEOUT_S = 120


@dataclass(frozen=True)
class Command:
    line: int    # in its page, 1-based
    text: str
    fails: bool  # the page shows it failing with "tmasim: error: ..."
    skip: str | None
    page: str = "README.md"
    shown: tuple[str, ...] = ()  # what the page shows it print (a ``text`` block's lines after it)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def readme_commands(text: str, page: str = "README.md") -> list[Command]:
    """The README's tmasim commands, in order (see the module's docstring for the rules)."""
    found: list[Command] = []
    lines = text.splitlines()
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            i += 1
            continue
        start, command = i, None
        if fence == "text" and line.startswith("$ "):
            command = line[2:]
        elif fence in ("sh", "bash", "shell") and PROGRAM.match(line):
            command = line
        i += 1
        if command is None or not PROGRAM.match(command):
            continue
        while command.rstrip().endswith("\\") and i < len(lines):
            command = command.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        shown: list[str] = []
        if fence == "text":
            while i < len(lines) and not lines[i].startswith(("$ ", "```")):
                shown.append(lines[i])
                i += 1
        fails = bool(shown) and shown[0].startswith("tmasim: error:")
        marker = MARKER.search(command)
        found.append(Command(start + 1, command, fails, marker.group(0) if marker else None, page,
                             tuple(line for line in shown if line.strip())))
    return found


ELAPSED = re.compile(r"\bin \d+(?:\.\d+)? (?:s|ms|min)\b")
ELISION = re.compile(r"\.\.\.|…")
MOST_WRAPPED = 4  # shown lines one printed line may be wrapped over


def _normal(line: str) -> str:
    return " ".join(ELAPSED.sub("in <elapsed>", line).split())


def not_printed(shown: tuple[str, ...], printed: str) -> list[str]:
    """The shown lines that are not among the printed ones, in order (see the module's rules)."""
    lines = [_normal(line) for line in printed.splitlines()]
    at, lost, i = 0, [], 0
    while i < len(shown):
        for span in range(1, min(MOST_WRAPPED, len(shown) - i) + 1):
            pieces = ELISION.split(_normal(" ".join(shown[i:i + span])))
            pattern = re.compile(".*?".join(re.escape(piece.strip()) for piece in pieces))
            hit = next((j for j in range(at, len(lines)) if pattern.fullmatch(lines[j])), None)
            if hit is not None:
                at, i = hit + 1, i + span
                break
        else:
            lost.append(shown[i])
            i += 1
    return lost


COMMANDS = [command for page in PAGES
            for command in readme_commands(page.read_text(encoding="utf-8"), page.relative_to(REPO).as_posix())]


def test_the_readme_and_the_docs_show_commands_and_mark_few():
    assert sum(c.page == "README.md" for c in COMMANDS) >= 8
    assert len(COMMANDS) >= 30
    assert sum(c.skip is not None for c in COMMANDS) <= len(COMMANDS) // 4


def test_the_extractor_reads_both_block_kinds_and_the_markers():
    text = ("```text\n$ tmasim run\nreference: ...\n$ tmasim run --set pipeline.stages=9  # [slow] minutes\n"
            "$ tmasim run nope\ntmasim: error: no scenario\n```\n"
            "```sh\ntmasim sweep reference \\\n    --vary pipeline.stages=1,2\npip install x\n```\n")
    assert readme_commands(text) == [
        Command(2, "tmasim run", False, None, shown=("reference: ...",)),
        Command(4, "tmasim run --set pipeline.stages=9  # [slow] minutes", False, "# [slow]"),
        Command(5, "tmasim run nope", True, None, shown=("tmasim: error: no scenario",)),
        Command(9, "tmasim sweep reference  --vary pipeline.stages=1,2", False, None)]


def test_shown_output_must_be_printed_lines_in_order():
    printed = ("reference: 4 tiles\n  predicted time   23 µs\n  bound   20 µs, binding: compute   (copy 3 µs)\n"
               "sweep of reference: 2 points in 0.4 s\n")
    assert not_printed(("reference: ...", "  predicted time   23 µs"), printed) == []
    assert not_printed(("  bound   20 µs, binding: ...",), printed) == []  # lines left out, elision
    assert not_printed(("  bound   20 µs,", "binding: compute (copy 3 µs)"), printed) == []  # wrapped
    assert not_printed(("sweep of reference: 2 points in 6.6 s",), printed) == []  # elapsed time
    assert not_printed(("  predicted time   24 µs",), printed) == ["  predicted time   24 µs"]  # a wrong number
    assert not_printed(("  bound   20 µs",), printed) == ["  bound   20 µs"]  # a cut line needs "..."
    assert not_printed(("  predicted time   23 µs", "reference: ..."), printed) == ["reference: ..."]  # order


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A ``tmasim`` on PATH that is ``python -m tmasim``, and one work folder per page (made
    when the page's first command runs)."""
    root = tmp_path_factory.mktemp("readme")
    bin_dir = root / ".bin"
    bin_dir.mkdir()
    for name in ("tmasim", "python", "python3"):
        script = bin_dir / name
        tail = "-m tmasim " if name == "tmasim" else ""
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" {tail}"$@"\n')
        script.chmod(0o755)
    return {"": root}


@pytest.fixture
def folder(folders: dict[str, Path], request: pytest.FixtureRequest) -> Path:
    page = request.node.callspec.params["command"].page
    if page not in folders:
        folders[page] = folders[""] / f"work-{len(folders)}"
        (folders[page] / "tests").mkdir(parents=True)
        (folders[page] / "tests" / "data").symlink_to(REPO / "tests" / "data", target_is_directory=True)
    return folders[page]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.page}:L{c.line}")
def test_readme_command_runs_as_printed(command: Command, folder: Path) -> None:
    if command.skip:
        pytest.skip(f"marked {command.skip}")
    env = {**os.environ, "PATH": f"{folder.parent / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"}
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command.text], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    said = f"{command}\nexit {done.returncode}\nstdout: {done.stdout[-1500:]}\nstderr: {done.stderr[-1500:]}"
    assert "Traceback" not in done.stderr, said
    if command.fails:
        assert done.returncode != 0 and "tmasim: error:" in done.stderr, said
    else:
        assert done.returncode == 0, said
    lost = not_printed(command.shown, done.stdout + "\n" + done.stderr)
    assert not lost, f"{command}\nshown but not printed:\n" + "\n".join(lost) + f"\n{said}"
