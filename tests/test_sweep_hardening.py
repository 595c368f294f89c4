"""Sweeps that meet trouble: failing points, bad --out, big grids, two sweeps on one file, damaged journals."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tmasim.cli import main
from tmasim.errors import TmasimError
from tmasim.sweep import lock, points, run_sweep

REPO = Path(__file__).resolve().parents[1]
STAGES = ["pipeline.stages=1,2,3"]


def sweep(vary: list[str], **kwargs: Any) -> pd.DataFrame:
    return run_sweep("reference", [], vary, progress=False, **kwargs)


def test_a_point_that_raises_anything_is_an_error_row_and_the_sweep_goes_on(monkeypatch):
    real = points.simulate

    def broken_at_two_stages(scenario: Any) -> Any:
        if scenario.pipeline.stages == 2:
            raise RuntimeError("something\nunexpected")
        return real(scenario)

    monkeypatch.setattr(points, "simulate", broken_at_two_stages)
    frame = sweep(STAGES)
    assert frame["status"].tolist() == ["ok", "error", "ok"]
    assert frame["error"][1] == "RuntimeError: something unexpected"
    assert frame["makespan_ns"][2] == 23_000


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_nan_value_beside_good_ones_is_an_invalid_row(jobs):
    frame = sweep(["workload.load=3 us,nan us"], jobs=jobs)
    assert frame["status"].tolist() == ["ok", "invalid"]
    assert frame["error"][1].startswith("workload.load: 'nan us' is not a quantity")


@pytest.mark.parametrize(("out", "message"), [
    ("", "is not a file name"),
    (".", "is not a file name"),
    ("missing/s.parquet", "does not exist"),
])
def test_a_bad_out_is_refused_before_any_point_runs(tmp_path, monkeypatch, out, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(points, "simulate", lambda scenario: pytest.fail("a point ran"))
    with pytest.raises(TmasimError, match=message):
        sweep(STAGES, out=out)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_out_is_refused_before_any_point_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(points, "simulate", lambda scenario: pytest.fail("a point ran"))
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(TmasimError, match="is not writable"):
            sweep(STAGES, out=folder / "s.parquet")
    finally:
        folder.chmod(0o700)
    existing = tmp_path / "s.csv"
    existing.write_text("x\n")
    existing.chmod(0o400)
    with pytest.raises(TmasimError, match="exists and is read-only"):
        sweep(STAGES, out=existing)


def test_a_big_grid_asks_for_yes_with_an_estimate(tmp_path, capsys):
    out = tmp_path / "big.parquet"
    argv = ["sweep", "reference", "--vary", f"run.seed={','.join(map(str, range(101)))}",
            "--vary", f"workload.tiles={','.join(map(str, range(1, 101)))}", "--out", str(out), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tmasim: error: sweep: 10,100 points to run, over 10,000: about ")
    assert err.strip().endswith("add --yes (or pass max_points=None from Python) to run them")
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_max_points_counts_only_what_is_left_to_run(tmp_path):
    out = tmp_path / "s.parquet"
    sweep(["pipeline.stages=1,2"], out=out)
    refusal = "4 points to run, over 1: (about|under) .* with --jobs 1 \\(from the plans of 4 of them\\)"
    with pytest.raises(TmasimError, match=refusal):
        sweep(["pipeline.stages=1,2,3,4"], max_points=1, out=tmp_path / "t.parquet")
    assert not (tmp_path / "t.parquet").exists()
    assert len(sweep(["pipeline.stages=1,2"], out=out, max_points=0)) == 2  # nothing left to run


def test_a_second_sweep_on_a_locked_file_refuses_in_one_line(tmp_path):
    out = tmp_path / "s.parquet"
    with lock.held(tmp_path / "s.parquet.lock", out), pytest.raises(TmasimError) as caught:
        sweep(STAGES, out=out)
    message = str(caught.value)
    assert f"is being written by another sweep (pid {os.getpid()}" in message and "\n" not in message
    assert not out.exists()
    assert len(sweep(STAGES, out=out)) == 3 and not (tmp_path / "s.parquet.lock").exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    out = tmp_path / "s.parquet"
    (tmp_path / "s.parquet.lock").write_text("999999999\n")  # no live process holds it
    assert sweep(STAGES, out=out)["status"].tolist() == ["ok"] * 3
    assert not (tmp_path / "s.parquet.lock").exists()


WAITS_FOR_GO = """
import os, sys, time
from pathlib import Path
from tmasim.sweep import points, run_sweep
real, go = points.simulate, Path(sys.argv[2])
def waits(scenario):
    for _ in range(1200):
        if go.exists():
            break
        time.sleep(0.05)
    return real(scenario)
points.simulate = waits
run_sweep("reference", [], sys.argv[3:], out=sys.argv[1], progress=False)
"""


def test_two_sweeps_on_one_out_one_refuses_and_every_point_lands_once(tmp_path):
    out, go, lock_file = tmp_path / "s.csv", tmp_path / "go", tmp_path / "s.csv.lock"
    first = subprocess.Popen([sys.executable, "-c", WAITS_FOR_GO, str(out), str(go), *STAGES], cwd=REPO)
    try:
        for _ in range(1200):  # until the first sweep holds the lock (its pid is in the file)
            if lock_file.exists() and lock_file.read_text().strip() == str(first.pid):
                break
            time.sleep(0.05)
        second = subprocess.run([sys.executable, "-m", "tmasim.cli", "sweep", "reference", "--vary", *STAGES,
                                 "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
        assert second.returncode == 2
        assert f"is being written by another sweep (pid {first.pid}" in second.stderr
        go.touch()
        assert first.wait(timeout=120) == 0
    finally:
        first.kill()
    assert pd.read_csv(out)["point"].tolist() == [0, 1, 2]
    assert not lock_file.exists()


def test_a_journal_line_that_does_not_parse_is_reported_and_skipped(tmp_path, capsys):
    """A line that is not JSON is what a kill leaves: skipped, its point run again."""
    out = tmp_path / "s.parquet"
    proc = subprocess.run([sys.executable, "-c", KILLED_AFTER_TWO, str(out), *STAGES], cwd=REPO, timeout=120)
    assert proc.returncode == 9
    journal = tmp_path / "s.parquet.partial.jsonl"
    lines = journal.read_text().splitlines()
    lines[1] = lines[1][:20]  # point 0's line, cut short
    lines.insert(2, lines[2][:35] + "garbage")
    journal.write_text("\n".join(lines) + "\n")
    assert main(["sweep", "reference", "--vary", *STAGES, "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "2 journal lines did not parse and were skipped (line 2, 3); their points ran again" in printed
    assert pd.read_parquet(out)["point"].tolist() == [0, 1, 2]


def test_a_journal_line_that_parses_but_is_no_outcome_is_refused_with_its_line(tmp_path):
    """JSON that is not an outcome tmasim writes is damage, not a kill: never folded in, the file
    and line named, the journal kept."""
    out = tmp_path / "s.parquet"
    proc = subprocess.run([sys.executable, "-c", KILLED_AFTER_TWO, str(out), *STAGES], cwd=REPO, timeout=120)
    assert proc.returncode == 9
    journal = tmp_path / "s.parquet.partial.jsonl"
    lines = journal.read_text().splitlines()
    lines.insert(2, '{"point": 2, "seed": 0, "status": "ok", "error": null, "stats": 5}')
    journal.write_text("\n".join(lines) + "\n")
    before = journal.read_text()
    with pytest.raises(TmasimError, match=r"s.parquet.partial.jsonl' is damaged at line 3 \(its stats are 5, not an "
                                          r"object\); remove that line"):
        sweep(STAGES, out=out)
    assert journal.read_text() == before and not out.exists()


def test_a_journal_that_is_not_one_is_refused_and_kept(tmp_path):
    out = tmp_path / "s.parquet"
    journal = tmp_path / "s.parquet.partial.jsonl"
    journal.write_text("my notes\nmore notes\n")
    with pytest.raises(TmasimError, match="is not a tmasim sweep journal"):
        sweep(STAGES, out=out)
    assert journal.read_text() == "my notes\nmore notes\n"


KILLED_AFTER_TWO = """
import os, sys
from tmasim.sweep import points, run_sweep
real, calls = points.simulate, [0]
def dies(scenario):
    calls[0] += 1
    if calls[0] > 2:
        os._exit(9)
    return real(scenario)
points.simulate = dies
run_sweep("reference", [], sys.argv[2:], out=sys.argv[1], progress=False)
"""


WORKER_DIES = """
import os, sys
from tmasim.errors import TmasimError
from tmasim.sweep import points, run_sweep
real = points.simulate
def dies_at_three_stages(scenario):
    if scenario.pipeline.stages == 3:
        os._exit(9)  # the worker process is killed outright
    return real(scenario)
points.simulate = dies_at_three_stages  # inherited by the forked workers
try:
    run_sweep("reference", [], sys.argv[2:], jobs=2, out=sys.argv[1], progress=False)
except TmasimError as err:
    print(err)
"""


def test_a_worker_that_dies_ends_the_sweep_in_one_line(tmp_path):
    out = tmp_path / "s.csv"
    proc = subprocess.run([sys.executable, "-c", WORKER_DIES, str(out), "pipeline.stages=1,2,3,4,5,6"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.stdout.startswith("--jobs: a worker process died"), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "s.csv.lock").exists()
