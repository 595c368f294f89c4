"""Reliability round 3 (issue 30): a full disk or a folder that cannot be written is one line
naming the path and the cause, exit 2, with nothing half-written left behind; a CSV sweep killed
at any step of its final save resumes; limits and strict reading of values."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tmasim.cli import main
from tmasim.errors import TmasimError
from tmasim.outputs import replacing, staged_folder, write_text
from tmasim.sweep import run_sweep

STAGES = ["pipeline.stages=1,2,3"]


# --- a small full disk ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 256 KiB tmpfs of this test's own (skipped where mounting is not permitted)."""
    where = tmp_path_factory.mktemp("disk")
    try:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("cannot run mount here")
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode(errors='replace').strip()})")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True, timeout=20)


@pytest.fixture
def full(disk: Path) -> Iterator[Path]:
    """The disk with (almost) no space left: a filler file takes all but ``leave`` bytes."""
    for entry in disk.iterdir():
        _remove(entry)
    yield disk
    for entry in disk.iterdir():
        _remove(entry)


def _remove(path: Path) -> None:
    if path.is_dir():
        import shutil

        shutil.rmtree(path)
    else:
        path.unlink()


def fill(disk: Path, leave: int = 0) -> None:
    """Write a filler until the disk is full, then give back ``leave`` bytes."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))


def left_on(disk: Path) -> list[str]:
    """Everything on the disk but the filler, hidden files included."""
    return sorted(str(p.relative_to(disk)) for p in disk.rglob("*") if p.name != "filler")


def one_line_error(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    last = err[-1]
    assert last.startswith("tmasim: error: "), err
    assert "Traceback" not in "\n".join(err)
    for word in words:
        assert word in last, last
    return last


def test_run_out_on_a_full_disk_is_one_line_and_leaves_no_folder(full, capsys):
    fill(full, leave=24 * 1024)  # room for the tables, not the Gantt chart
    assert main(["run", "--out", str(full / "out")]) == 2
    one_line_error(capsys, "--out", "No space left on device", "gantt.png")
    assert left_on(full) == []


def test_run_out_into_an_existing_folder_keeps_its_old_files_whole(full, capsys):
    old = full / "out"
    old.mkdir()
    (old / "summary.csv").write_text("old\n")
    fill(full, leave=8 * 1024)
    assert main(["run", "--out", str(old)]) == 2
    one_line_error(capsys, "No space left on device")
    assert left_on(full) == ["out", "out/summary.csv"]
    assert (old / "summary.csv").read_text() == "old\n"


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_a_trace_on_a_full_disk_is_one_line_and_no_empty_file(full, capsys, name):
    fill(full)
    assert main(["run", "--trace", str(full / name)]) == 2
    one_line_error(capsys, "--trace", name, "No space left on device")
    assert left_on(full) == []


@pytest.mark.parametrize("name", ["a.gif", "a.html"])
def test_animate_on_a_full_disk_is_one_line_and_no_partial_file(full, capsys, name):
    fill(full, leave=4096)
    assert main(["animate", "--out", str(full / name)]) == 2
    one_line_error(capsys, name, "No space left on device")
    assert left_on(full) == []


def test_learn_out_on_a_full_disk_is_one_line(full, capsys):
    fill(full)
    assert main(["learn", "1", "--predict", "23 us", "--out", str(full / "lesson")]) == 2
    one_line_error(capsys, "No space left on device")
    assert left_on(full) == []


@pytest.mark.parametrize("name", ["s.csv", "s.parquet"])
def test_a_sweep_on_a_full_disk_is_one_line_and_leaves_no_empty_lock(full, capsys, name):
    fill(full)
    assert main(["sweep", "reference", "--vary", *STAGES, "--out", str(full / name), "--quiet"]) == 2
    one_line_error(capsys, "No space left on device")
    assert left_on(full) == []


# --- folders that cannot be written (tests run as root: a path under a regular file) -----------
@pytest.fixture
def under_a_file(tmp_path: Path) -> Path:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    return blocker


def test_calibrate_out_under_a_file_is_refused_before_the_fit(under_a_file, capsys):
    argv = ["calibrate", "no-such-table.csv", "--fit", "copy_latency", "--out", str(under_a_file / "p.toml")]
    assert main(argv) == 2
    one_line_error(capsys, "--out", "not a directory")


def test_validate_out_under_a_file_is_refused_before_any_simulation(under_a_file, capsys):
    assert main(["validate", "no-such-table.csv", "--out", str(under_a_file / "v")]) == 2
    one_line_error(capsys, "--out")


def test_a_write_into_a_path_under_a_file_names_the_path_and_cause(under_a_file):
    with pytest.raises(TmasimError, match=r"--out: cannot write '.*afile/x.csv' \(Not a directory\)"):
        write_text(under_a_file / "x.csv", "a\n")


def test_replacing_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old\n")
    with pytest.raises(TmasimError, match="No space left on device"), replacing(target) as tmp:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_staged_folder_names_the_file_as_the_user_gave_it(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(TmasimError, match=r"cannot write '.*out/b.csv' \(No space"), staged_folder(out) as stage:
        write_text(stage / "a.csv", "a\n")
        with replacing(stage / "b.csv") as tmp:
            tmp.write_text("b")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert list(tmp_path.iterdir()) == []


# --- the sweep's final save, failed or killed at every step -------------------------------------
def sweep(out: Path, vary: list[str] = STAGES) -> pd.DataFrame:
    return run_sweep("reference", [], vary, out=out, progress=False)


def test_a_failed_final_save_keeps_the_journal_and_a_rerun_resumes(tmp_path, monkeypatch):
    out = tmp_path / "s.csv"

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(pd.DataFrame, "to_csv", no_space)
        with pytest.raises(TmasimError, match="No space left on device.*journal s.csv.partial.jsonl keeps"):
            sweep(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv.partial.jsonl"]
    again = sweep(out)
    assert again.attrs["sweep"]["computed"] == 0 and again["point"].tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.csv.meta.json"]


class Killed(BaseException):
    """A kill: nothing after it runs but the finally blocks."""


@pytest.mark.parametrize("step", range(4))
@pytest.mark.parametrize("first", [["pipeline.stages=2,3"], None])
def test_a_csv_sweep_killed_at_any_step_of_its_save_resumes(tmp_path, monkeypatch, step, first):
    """Step 0 is the CSV's write; 1-3 the renames (pending metadata, CSV, metadata). With
    ``first`` the file held an earlier sweep that this one extends (its points renumbered)."""
    out = tmp_path / "s.csv"
    if first is not None:
        sweep(out, first)
    calls = {"n": 0}
    real_replace, real_to_csv = os.replace, pd.DataFrame.to_csv

    def replace(src, dst):
        calls["n"] += 1
        if calls["n"] == step:
            raise Killed
        return real_replace(src, dst)

    def to_csv(self, *args, **kwargs):
        if step == 0:
            raise Killed
        return real_to_csv(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace)
        patch.setattr(pd.DataFrame, "to_csv", to_csv)
        with pytest.raises(Killed):
            sweep(out)
    again = sweep(out)
    assert again.attrs["sweep"]["computed"] == 0
    assert again["point"].tolist() == [0, 1, 2] and again["pipeline.stages"].tolist() == [1, 2, 3]
    assert (again["status"] == "ok").all()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.csv.meta.json"]
    assert pd.read_csv(out)["pipeline.stages"].tolist() == [1, 2, 3]


def test_a_parquet_save_that_fails_keeps_the_journal(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    out = tmp_path / "s.parquet"

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(pq, "write_table", no_space)
        with pytest.raises(TmasimError, match="No space left on device"):
            sweep(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.parquet.partial.jsonl"]
    assert sweep(out).attrs["sweep"]["computed"] == 0


def test_a_lock_that_is_a_link_to_a_device_is_one_line(tmp_path):
    out = tmp_path / "s.parquet"
    (tmp_path / "s.parquet.lock").symlink_to("/dev/null")
    with pytest.raises(TmasimError, match="lock .* is not a regular file"):
        sweep(out)


# --- limits before work --------------------------------------------------------------------------
def values(n: int, start: int = 1) -> str:
    return ",".join(str(i) for i in range(start, start + n))


def test_a_grid_past_what_a_sweep_holds_is_refused_before_it_is_built_even_with_yes(tmp_path, capsys, monkeypatch):
    from tmasim.sweep import spec

    monkeypatch.setattr(spec, "expand", lambda *a: pytest.fail("the grid was built"))
    argv = ["sweep", "reference", "--vary", f"run.seed={values(100)}", "--vary", f"workload.tiles={values(100)}",
            "--vary", f"pipeline.stages={values(100)}", "--vary", f"run.max_events={values(100, 10**6)}",
            "--out", str(tmp_path / "s.csv"), "--quiet", "--yes"]
    assert main(argv) == 2
    one_line_error(capsys, "100,000,000 points (100 x 100 x 100 x 100 values)", "past the 10,000,000")
    assert list(tmp_path.iterdir()) == []


def test_a_big_grid_without_yes_is_refused_from_its_axes_lengths(tmp_path, capsys, monkeypatch):
    from tmasim.sweep import spec

    monkeypatch.setattr(spec, "expand", lambda *a: pytest.fail("the grid was built"))
    argv = ["sweep", "reference", "--vary", f"run.seed={values(1000)}", "--vary", f"workload.tiles={values(1000)}",
            "--out", str(tmp_path / "s.csv"), "--quiet"]
    assert main(argv) == 2
    one_line_error(capsys, "1,000,000 points to run", "over 10,000", "add --yes")


@pytest.mark.parametrize("jobs", ["100000", "1" * 23, "0"])
def test_jobs_out_of_range_is_one_line_before_any_worker(tmp_path, capsys, jobs):
    argv = ["sweep", "reference", "--vary", *STAGES, "--jobs", jobs, "--out", str(tmp_path / "s.csv"), "--quiet"]
    assert main(argv) == 2
    one_line_error(capsys, "--jobs")
    assert list(tmp_path.iterdir()) == []


def test_run_sweep_refuses_too_many_jobs_in_python_too():
    from tmasim.budget import max_jobs

    with pytest.raises(TmasimError, match=f"over the {max_jobs()} worker processes"):
        run_sweep("reference", [], STAGES, jobs=max_jobs() + 1, progress=False)


# --- values read strictly ------------------------------------------------------------------------
@pytest.mark.parametrize("setting", ["workload.head_dim=128.0", "workload.head_dim_v=64.0"])
def test_an_integral_float_for_a_head_dim_is_one_line(capsys, setting):
    assert main(["run", "attention-h100", "--set", setting]) == 2
    one_line_error(capsys, setting.split("=")[0], "must be a whole number")


def test_replace_with_an_integral_float_head_dim_is_refused():
    import dataclasses

    from tmasim import scenario as scenarios
    from tmasim.errors import ScenarioError

    workload = scenarios.load("attention-h100").workload
    with pytest.raises(ScenarioError, match="workload.head_dim: 128.0 must be a whole number"):
        dataclasses.replace(workload, head_dim=128.0)


@pytest.mark.parametrize("text", ["\u0663 us", "\uff13 us", "3\u0660 ns"])
def test_only_ascii_digits_make_a_quantity(text):
    from tmasim import units
    from tmasim.errors import UnitError

    with pytest.raises(UnitError, match="is not a quantity"):
        units.parse(text, "time", "workload.load")


def test_a_pebibyte_is_a_unit():
    from tmasim import units

    assert units.size_bytes("1 PiB", "x") == 2**50


def test_a_field_path_of_5000_parts_is_one_line(capsys):
    assert main(["run", "--set", ".".join(["a"] * 5000) + "=1"]) == 2
    one_line_error(capsys, "5,000 parts", "at most 16 parts")


@pytest.mark.parametrize("tiles", ["0", "-3", "x"])
def test_first_tiles_must_be_at_least_one(tmp_path, capsys, tiles):
    with pytest.raises(SystemExit) as exit_:
        main(["plot", str(tmp_path), "--kind", "gantt", "--first-tiles", tiles])
    assert exit_.value.code == 2
    one_line_error(capsys, "--first-tiles")


# --- duplicates ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("vary", "words"), [
    ("pipeline.stages=1,1,2", ["pipeline.stages: 1 is given twice, at positions 1 and 2"]),
    ("workload.load=3 us,3000 ns,0.003 ms", ["'3000 ns' is given twice", "the same as '3 us'"]),
    ("run.seed=1,2,2.0", ["2.0 is given twice, at positions 2 and 3"]),
])
def test_a_value_given_twice_in_vary_is_refused_by_name(tmp_path, capsys, vary, words):
    assert main(["sweep", "reference", "--vary", vary, "--out", str(tmp_path / "s.csv"), "--quiet"]) == 2
    one_line_error(capsys, *words)
    assert list(tmp_path.iterdir()) == []


def test_a_value_given_twice_in_the_python_api_is_refused():
    with pytest.raises(TmasimError, match="given twice"):
        run_sweep("reference", [], {"pipeline.stages": [1, 2, 1]}, progress=False)


def test_a_result_file_with_a_point_twice_is_refused_on_resume_naming_it(tmp_path):
    out = tmp_path / "s.csv"
    sweep(out)
    lines = out.read_text().splitlines()
    out.write_text("\n".join([*lines, lines[-1]]) + "\n")
    with pytest.raises(TmasimError, match="point 2 appears twice"):
        sweep(out)
