"""A sweep survives its own death: kill -9 of the main process alone ends its pool workers too
(they die with their parent), and the same command run again takes the lock over and resumes
exactly. A real process, --jobs 2, Parquet and CSV."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
TILES = [10_000 + i for i in range(8)]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process trees from /proc")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def until(condition, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_kill_9_of_the_main_process_alone_ends_its_workers_and_the_rerun_resumes_exactly(tmp_path, suffix):
    out = tmp_path / f"s{suffix}"
    journal = out.with_name(out.name + ".partial.jsonl")
    argv = [sys.executable, "-m", "tmasim.cli", "sweep", "reference", "--set", "run.fast_forward=false",
            "--vary", f"workload.tiles={','.join(map(str, TILES))}", "--jobs", "2", "--out", str(out), "--quiet"]
    main = subprocess.Popen(argv, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        until(lambda: journal.exists() and len(journal.read_text().splitlines()) >= 2, "a first finished point")
        workers = children(main.pid)
        assert workers, "no pool workers"
        os.kill(main.pid, signal.SIGKILL)   # the main process alone: its workers get no signal from us
        main.wait(timeout=30)
        until(lambda: not any(alive(w) for w in workers), "the workers to end with their parent", 30)
    finally:  # whatever happened, nothing of this sweep outlives the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(main.pid, signal.SIGKILL)
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "read from an earlier run" in again.stdout
    table = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
    assert table["point"].tolist() == list(range(len(TILES)))
    assert (table["status"] == "ok").all()
    # the anchor formula, S = 2: 3 us + N x 5 us for every point, computed before or after the kill
    assert table["makespan_ps"].tolist() == [3_000_000 + 5_000_000 * n for n in TILES]
    assert not journal.exists() and not out.with_name(out.name + ".lock").exists()
