"""Every output path of every command: a one-line error before any output when it cannot be
written; a damaged or truncated sweep file read back is one line too. Predictions follow the
rules of every quantity; a field the run would ignore is refused."""

from __future__ import annotations

import pytest

from tmasim.cli import main
from tmasim.errors import ScenarioError
from tmasim.scenario import load
from tmasim.simulation import simulate


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str], *fragments: str) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: "), err
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture
def paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir.gif").mkdir()
    (tmp_path / "file").write_text("x")
    return tmp_path


@pytest.mark.parametrize(("argv", "fragments"), [
    (["learn", "1", "--predict", "23", "--out", "file"], ["--out: 'file' exists and is not a directory"]),
    (["learn", "1", "--predict", "23", "--out", "file/sub"], ["--out: 'file/sub' cannot be made"]),
    (["animate", "--out", "dir.gif"], ["--out: 'dir.gif' is a directory"]),
    (["animate", "--out", "file/x.gif"], ["--out: folder of 'file' exists and is not a directory"]),
    (["run", "--trace", "dir.gif"], ["--trace: 'dir.gif' is a directory"]),
    (["run", "--out", "file"], ["--out: 'file' exists and is not a directory"]),
])
def test_an_output_that_cannot_be_written_is_one_line_before_any_output(capsys, paths, argv, fragments):
    one_line(capsys, argv, *fragments)


def test_a_journal_path_that_is_a_directory_is_refused_before_any_point(capsys, paths):
    (paths / "s.csv.partial.jsonl").mkdir()
    one_line(capsys, ["sweep", "reference", "--vary", "pipeline.stages=1,2", "--out", "s.csv"],
             "where the sweep keeps its journal, is a directory")
    assert not (paths / "s.csv").exists()


def test_damaged_and_truncated_sweep_files_are_one_line_and_never_plotted(capsys, paths):
    assert main(["sweep", "reference", "--vary", "pipeline.stages=1,2,3", "--out", "s.csv", "--quiet"]) == 0
    assert main(["sweep", "reference", "--vary", "pipeline.stages=1,2,3", "--out", "s.parquet", "--quiet"]) == 0
    capsys.readouterr()
    text = (paths / "s.csv").read_text()
    (paths / "cut.csv").write_text(text[: len(text) - 40])          # cut inside the last row
    (paths / "cut.parquet").write_bytes((paths / "s.parquet").read_bytes()[:900])
    one_line(capsys, ["plot", "cut.csv", "--out", "x.png"], "truncated: its last line is cut off")
    one_line(capsys, ["plot", "cut.parquet", "--out", "x.png"], "cannot be read")
    assert not (paths / "x.png").exists()
    (paths / "s.csv").write_text(text[: len(text) - 40])             # a sweep resuming from a cut table
    one_line(capsys, ["sweep", "reference", "--vary", "pipeline.stages=1,2,3", "--out", "s.csv"],
             "cannot be read back (it is truncated")


def test_a_sweep_table_cut_at_a_row_boundary_is_refused_by_its_row_count(capsys, paths):
    assert main(["sweep", "reference", "--vary", "pipeline.stages=1,2,3", "--out", "s.csv", "--quiet"]) == 0
    capsys.readouterr()
    lines = (paths / "s.csv").read_text().splitlines(keepends=True)
    assert len(lines) == 4  # the header and three points
    (paths / "s.csv").write_text("".join(lines[:3]))  # the last row gone, the file still ends a line
    one_line(capsys, ["plot", "s.csv", "--out", "x.png"], "truncated: it has 2 rows where 3 were written")
    one_line(capsys, ["sweep", "reference", "--vary", "pipeline.stages=1,2,3", "--out", "s.csv"],
             "cannot be read back (it is truncated: it has 2 rows where 3 were written")
    assert not (paths / "x.png").exists()


@pytest.mark.parametrize(("lesson", "text", "rule"), [
    (1, "nan", "must be a finite number"), (1, "inf us", "must be a finite number"),
    (1, "1e400", "must be a finite number"), (1, "-5", "must be >= 0 (a time)"), (1, "-5 us", "must be >= 0 (a time)"),
    (3, "150", "must be a percentage from 0 to 100"),
    (3, "-3%", "must be a percentage from 0 to 100"),
])
def test_a_prediction_is_read_with_the_rules_of_every_quantity(capsys, lesson, text, rule):
    one_line(capsys, ["learn", str(lesson), f"--predict={text}"], f"--predict: {text!r} {rule}")


@pytest.mark.parametrize("name", ["reference", "gemm-b200", "gemm-ideal", "stream-h100"])
def test_registers_where_the_run_has_no_register_model_are_refused(name):
    with pytest.raises(ScenarioError, match="pipeline.registers: .* would be ignored"):
        simulate(load(name, ["pipeline.registers={producer = 40}", "run.records=false"]))


def test_registers_on_a_hopper_gemm_still_count():
    stats = simulate(load("gemm-h100", ["pipeline.registers={producer = 40, consumer = 232}",
                                        "workload.m=1024", "workload.n=1024", "run.records=false"])).stats
    assert stats["registers_per_producer_thread"] == 40 and stats["registers_per_consumer_thread"] == 232
