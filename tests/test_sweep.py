"""Parameter sweeps: expansion, exact values, failures as rows, files, resume, executors, CLI."""

from __future__ import annotations

import argparse
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tmasim.errors import ScenarioError, TmasimError
from tmasim.scenario import parse_value
from tmasim.sweep import points, register, run_sweep
from tmasim.sweep.spec import Axis, expand, parse_vary, split_values
from tmasim.sweep.store import read_metadata
from tmasim.sweep.table import toml_text

REPO = Path(__file__).resolve().parents[1]
GRID = ["pipeline.stages=1,2,3", "workload.load=1 us,3 us,7 us"]


def sweep(vary: list[str], overrides: tuple[str, ...] = (), **kwargs: Any) -> pd.DataFrame:
    return run_sweep("reference", overrides, vary, progress=False, **kwargs)


@pytest.fixture
def count_simulations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the points simulated in this process (jobs=1 runs them here)."""
    calls = [0]
    real = points.simulate

    def counting(scenario: Any) -> Any:
        calls[0] += 1
        return real(scenario)

    monkeypatch.setattr(points, "simulate", counting)
    return calls


# --- what a sweep is ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "pieces"), [
    ("1,2,3", ["1", "2", "3"]),
    ("10 ns,20 ns", ["10 ns", "20 ns"]),
    (" 1 , 2 ", ["1", "2"]),
    ('["3 us","4 us"],["5 us","6 us"]', ['["3 us","4 us"]', '["5 us","6 us"]']),
    ('{dist = "normal", mean = "3 us", std = "1 us"},2 us', ['{dist = "normal", mean = "3 us", std = "1 us"}', "2 us"]),
    ("\"a,b\",'c,d',e", ['"a,b"', "'c,d'", "e"]),
    ('"say \\"x, y\\"",z', ['"say \\"x, y\\""', "z"]),
    ("[[1,2],[3]],4", ["[[1,2],[3]]", "4"]),
])
def test_values_split_on_top_level_commas_only(text, pieces):
    assert split_values(text) == pieces


def test_values_are_read_like_set_values():
    assert parse_vary('workload.load=["3 us","4 us"],5 us').values == (["3 us", "4 us"], "5 us")
    assert parse_vary("pipeline.stages=1, 2").values == (1, 2)
    assert parse_vary("pipeline.consumer_waits_full=true,false").values == (True, False)


def test_grid_order_first_field_slowest_and_ids_from_zero():
    pts = expand([Axis("a", (1, 2)), Axis("b", ("x", "y", "z"))], zipped=False)
    assert [p.id for p in pts] == list(range(6))
    assert [tuple(v for _, v in p.values) for p in pts] == [
        (1, "x"), (1, "y"), (1, "z"), (2, "x"), (2, "y"), (2, "z")]


def test_zip_pairs_values_in_order():
    pts = expand([Axis("a", (1, 2, 3)), Axis("b", ("x", "y", "z"))], zipped=True)
    assert [(p.id, dict(p.values)) for p in pts] == [
        (0, {"a": 1, "b": "x"}), (1, {"a": 2, "b": "y"}), (2, {"a": 3, "b": "z"})]


@pytest.mark.parametrize(("vary", "zip_", "message"), [
    (["workload.lod=1,2"], False, "workload.lod: 1 is not a known field"),
    (["pipeline.stages=two,three"], False, "pipeline.stages: 'two' must be a whole number"),
    (["workload.load=3 GB,4 GB"], False, "workload.load: '3 GB' is not a time"),
    (["pipeline.stages="], False, "--vary pipeline.stages: '' has no values"),
    (["pipeline.stages=1,,2"], False, "has an empty value at position 2"),
    (["pipeline.stages"], False, "--vary: 'pipeline.stages' must look like FIELD=V1,V2,..."),
    (["=1,2"], False, "must look like FIELD=V1,V2,..."),
    (["workload.load=[1 us,2 us"], False, "has an unclosed '['"),
    (["workload.load=1 us]"], False, "has an unmatched ']'"),
    (['name="a,b'], False, "has an unclosed '\"'"),
    (["pipeline.stages=1", "pipeline.stages=2"], False, "is given twice"),
    (["pipeline.stages=1,2,3", "workload.tiles=2,4"], True,
     "--zip: every --vary needs the same number of values (pipeline.stages has 3, workload.tiles has 2)"),
    ([], False, "give at least one --vary"),
])
def test_bad_input_is_one_line_naming_the_problem_and_writes_nothing(tmp_path, vary, zip_, message):
    with pytest.raises(TmasimError) as caught:
        sweep(vary, zip_=zip_, out=tmp_path / "s.parquet")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_field_is_a_scenario_error_naming_it():
    with pytest.raises(ScenarioError) as caught:
        sweep(["workload.lod=1,2", "pipeline.stages=1,2"])
    assert caught.value.field == "workload.lod"


# --- exact values --------------------------------------------------------------------------------

def anchor_ns(tiles: int, load_us: float, compute_us: float, stages: int) -> float:
    """T = N (l + c) with one stage; T = l + c + (N - 1) max(l, c) with two or more."""
    if stages == 1:
        return tiles * (load_us + compute_us) * 1000
    return (load_us + compute_us + (tiles - 1) * max(load_us, compute_us)) * 1000


def test_three_by_three_sweep_of_the_reference_matches_the_anchor_formula():
    frame = sweep(GRID)
    assert list(frame.columns[:6]) == ["point", "pipeline.stages", "workload.load", "seed", "status", "error"]
    assert list(frame.columns).count("seed") == 1 and "makespan_ns" in frame.columns
    assert frame["point"].tolist() == list(range(9))
    assert frame["pipeline.stages"].tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert frame["workload.load"].tolist() == ["1 us", "3 us", "7 us"] * 3
    assert (frame["status"] == "ok").all() and frame["error"].isna().all()
    expected = [anchor_ns(4, load, 5, stages) for stages in (1, 2, 3) for load in (1, 3, 7)]
    assert expected == [24_000, 32_000, 48_000, 21_000, 23_000, 33_000, 21_000, 23_000, 33_000]
    assert frame["makespan_ns"].tolist() == expected
    assert frame["closed_form_ns"].tolist() == expected


def test_zip_sweep_varies_fields_together():
    frame = sweep(["workload.tiles=2,3", 'workload.load=["3 us","3 us"],["3 us","3 us","3 us"]'], zip_=True)
    assert frame["makespan_ns"].tolist() == [anchor_ns(2, 3, 5, 2), anchor_ns(3, 3, 5, 2)]
    assert frame["workload.load"].tolist() == ['["3 us", "3 us"]', '["3 us", "3 us", "3 us"]']


# --- failures are rows --------------------------------------------------------------------------

def test_points_that_cannot_run_are_recorded_and_the_sweep_goes_on():
    frame = sweep(["pipeline.stages=0,1,2", "pipeline.empty_arrivals=1,2"])
    assert frame["status"].tolist() == ["invalid", "invalid", "ok", "error", "ok", "error"]
    invalid, deadlock = frame.iloc[0], frame.iloc[3]
    assert invalid["error"] == "pipeline.stages: 0 must be >= 1"
    assert math.isnan(invalid["makespan_ns"]) and invalid["seed"] == 0
    assert deadlock["error"].startswith("deadlock at")
    assert frame.loc[frame["status"] == "ok", "makespan_ns"].tolist() == [32_000, 23_000]


def test_a_value_of_the_wrong_kind_beside_good_ones_is_an_invalid_row():
    frame = sweep(["workload.load=3 us,3 GB"])
    assert frame["status"].tolist() == ["ok", "invalid"]
    assert "workload.load: '3 GB' is not a time" in frame["error"].iloc[1]


# --- files ---------------------------------------------------------------------------------------

def test_parquet_carries_the_scenario_and_the_vary_spec(tmp_path):
    out = tmp_path / "s.parquet"
    frame = sweep(GRID, ("workload.tiles=4",), out=out)
    pd.testing.assert_frame_equal(pd.read_parquet(out), frame)
    meta = read_metadata(out)
    assert meta["scenario"]["name"] == "reference" and meta["scenario"]["run"]["records"] is False
    assert meta["vary"] == [["pipeline.stages", [1, 2, 3]], ["workload.load", ["1 us", "3 us", "7 us"]]]
    assert meta["zip"] is False and meta["points"] == meta["points_finished"] == 9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.parquet"]  # no journal left behind


def test_csv_has_a_sidecar_with_the_same_metadata(tmp_path):
    out = tmp_path / "s.csv"
    sweep(["pipeline.stages=1,2"], out=out)
    assert pd.read_csv(out)["makespan_ns"].tolist() == [32_000, 23_000]
    assert json.loads((tmp_path / "s.csv.meta.json").read_text())["vary"] == [["pipeline.stages", [1, 2]]]


# --- resume --------------------------------------------------------------------------------------

def test_rerunning_a_finished_sweep_computes_nothing_and_leaves_the_file(tmp_path, count_simulations):
    out = tmp_path / "s.parquet"
    first = sweep(GRID, out=out)
    assert count_simulations[0] == 9
    before = out.read_bytes()
    again = sweep(GRID, out=out)
    assert count_simulations[0] == 9 and out.read_bytes() == before
    pd.testing.assert_frame_equal(again, first)


def test_an_interrupted_sweep_keeps_finished_points_and_resumes(tmp_path, monkeypatch):
    out, calls = tmp_path / "s.parquet", [0]
    real = points.simulate

    def interrupted_after_four(scenario: Any) -> Any:
        calls[0] += 1
        if calls[0] > 4:
            raise KeyboardInterrupt
        return real(scenario)

    monkeypatch.setattr(points, "simulate", interrupted_after_four)
    with pytest.raises(KeyboardInterrupt):
        sweep(GRID, out=out)
    assert pd.read_parquet(out)["point"].tolist() == [0, 1, 2, 3]
    assert read_metadata(out)["points_finished"] == 4

    calls[0] = -100  # no more interruptions; count what the rerun computes
    resumed = sweep(GRID, out=out)
    assert calls[0] + 100 == 5
    assert (resumed.attrs["sweep"]["resumed"], resumed.attrs["sweep"]["computed"]) == (4, 5)
    pd.testing.assert_frame_equal(resumed, sweep(GRID))


KILLED_AFTER_THREE = """
import os, sys
from tmasim.sweep import points, run_sweep
real, calls = points.simulate, [0]
def dies(scenario):
    calls[0] += 1
    if calls[0] > 3:
        os._exit(9)  # as a kill -9: no cleanup, no finally
    return real(scenario)
points.simulate = dies
run_sweep("reference", [], sys.argv[2:], out=sys.argv[1], progress=False)
"""


def test_a_killed_sweep_resumes_from_its_journal(tmp_path, count_simulations):
    out = tmp_path / "s.parquet"
    proc = subprocess.run([sys.executable, "-c", KILLED_AFTER_THREE, str(out), *GRID], cwd=REPO, timeout=120)
    assert proc.returncode == 9
    journal = tmp_path / "s.parquet.partial.jsonl"
    assert not out.exists() and len(journal.read_text().splitlines()) == 1 + 3
    with journal.open("a") as handle:
        handle.write('{"point": 3, "seed": 0, "sta')  # a line torn by the kill
    resumed = sweep(GRID, out=out)
    assert count_simulations[0] == 6 and not journal.exists()
    pd.testing.assert_frame_equal(resumed, sweep(GRID))


@pytest.mark.parametrize(("overrides", "vary", "zip_", "names"), [
    (("workload.load=4 us",), GRID, False, 'scenario field workload.load is "3 us" in the file, "4 us" in this run'),
    ((), ["pipeline.stages=1,2,3", "workload.load=1 us,3 us"], False, "this run has --vary pipeline.stages=1,2,3"),
    ((), ["pipeline.stages=1,2,3", "workload.load=1 us,3 us,7 us"], True, "the file is a grid, this run pairs"),
])
def test_resuming_with_a_file_of_another_sweep_is_refused_and_the_file_untouched(tmp_path, overrides, vary,
                                                                                   zip_, names):
    out = tmp_path / "s.parquet"
    sweep(GRID, out=out)
    before = out.read_bytes()
    with pytest.raises(TmasimError) as caught:
        sweep(vary, overrides, zip_=zip_, out=out)
    assert "holds another sweep" in str(caught.value) and names in str(caught.value)
    assert "\n" not in str(caught.value)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.parquet"]


def test_a_file_that_is_not_a_sweep_result_is_refused_and_untouched(tmp_path):
    out = tmp_path / "s.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(out)
    before = out.read_bytes()
    with pytest.raises(TmasimError, match="exists but is not a tmasim sweep result"):
        sweep(GRID, out=out)
    assert out.read_bytes() == before


# --- executors -----------------------------------------------------------------------------------

def test_two_processes_give_the_same_table_as_one():
    vary = [*GRID, "run.seed=0,1"]
    pd.testing.assert_frame_equal(sweep(vary, jobs=2), sweep(vary, jobs=1))


def test_dask_gives_the_same_table_as_local(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=":0") as cluster:
        on_dask = sweep(GRID, executor="dask", scheduler=cluster.scheduler_address, out=tmp_path / "d.parquet")
    pd.testing.assert_frame_equal(on_dask, sweep(GRID))


def test_a_scheduler_without_dask_is_an_error():
    with pytest.raises(TmasimError, match="--scheduler: a Dask scheduler address needs --executor dask"):
        sweep(GRID, scheduler="tcp://127.0.0.1:8786")


# --- the command line ----------------------------------------------------------------------------

def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tmasim")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_sweep_command_writes_the_default_file_and_a_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = parse(["sweep", "reference", "--vary", "pipeline.stages=0,1,2", "--quiet"])
    assert args.handler(args) == 0
    printed = capsys.readouterr()
    assert "3 points (2 ok, 1 invalid, 0 error)" in printed.out
    assert "  1 x invalid (point 0): pipeline.stages: 0 must be >= 1" in printed.out
    assert "wrote sweep-reference.parquet" in printed.out and printed.err == ""
    assert pd.read_parquet(tmp_path / "sweep-reference.parquet")["status"].tolist() == ["invalid", "ok", "ok"]

    assert args.handler(args) == 0
    again = capsys.readouterr().out
    assert "3 read from an earlier run, 0 computed now" in again
    assert "nothing new: sweep-reference.parquet is unchanged" in again


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_not_when_quiet(monkeypatch):
    def stderr_of_a_sweep(stream: io.StringIO, progress: bool) -> str:
        monkeypatch.setattr(sys, "stderr", stream)
        run_sweep("reference", [], ["pipeline.stages=1,2,3"], progress=progress)
        return stream.getvalue()

    assert "sweep reference: 100%" in stderr_of_a_sweep(Terminal(), progress=True)
    assert stderr_of_a_sweep(Terminal(), progress=False) == ""
    assert stderr_of_a_sweep(io.StringIO(), progress=True) == ""




def run_cli(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *prefix, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_cli_sweep_through_a_subprocess(tmp_path):
    out = tmp_path / "s.csv"
    prefix = ["-m", "tmasim.cli"]
    proc = run_cli(prefix, "sweep", "reference", "--vary", "pipeline.stages=1,2", "--vary", "workload.load=1 us,7 us",
                   "--jobs", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "4 points (4 ok, 0 invalid, 0 error)" in proc.stdout
    assert pd.read_csv(out)["makespan_ns"].tolist() == [24_000, 48_000, 21_000, 33_000]

    bad = run_cli(prefix, "sweep", "reference", "--vary", "workload.lod=1,2", "--out", str(tmp_path / "bad.parquet"))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("tmasim: error: workload.lod: 1 is not a known field")
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad.parquet").exists()


# --- the varied-value text reads back as the value ------------------------------------------------

toml_values = st.recursive(
    st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(toml_values)
@example({"0\n": False})  # a key ending in a newline must be quoted (found by hypothesis)
def test_toml_text_reads_back_as_the_same_value(value):
    assert parse_value(toml_text(value)) == value


def test_chunks_of_slow_points_hold_one_and_quick_points_share_a_chunk() -> None:
    """Workers take chunks as they free up, so the sweep's tail is its last chunk: a chunk of
    seconds-long points (causal launches, ragged tiles) holds one point; quick points share
    chunks of about CHUNK_SECONDS, never more than eight chunks a worker's worth of them."""
    from tmasim.sweep.executors import CHUNK_SECONDS, chunked

    grid = list(range(192))
    assert [len(c) for c in chunked(grid, 2)] == [12] * 16  # no estimate: eight chunks a worker
    assert [len(c) for c in chunked(grid, 2, point_seconds=2.0)] == [1] * 192
    quick = chunked(grid, 2, point_seconds=CHUNK_SECONDS / 4)
    assert [len(c) for c in quick] == [4] * 48 and [p for c in quick for p in c] == grid  # order kept
    assert [len(c) for c in chunked(grid, 2, point_seconds=1e-6)] == [12] * 16
    assert [len(c) for c in chunked([0], 2, point_seconds=5.0)] == [1]


def test_a_sweep_returns_the_estimated_time_a_point_that_sizes_its_chunks() -> None:
    from tmasim.sweep import estimate
    from tmasim.sweep.spec import plan_sweep

    plan = plan_sweep("reference", [], {"pipeline.stages": [1, 2]}, False)
    per_point = estimate.check(plan, plan.points, 2, max_points=None, max_seconds=None, notify=None)
    assert per_point is not None and 0 < per_point < 1
    assert estimate.check(plan, [], 2, max_points=None, max_seconds=None, notify=None) is None
