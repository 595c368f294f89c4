"""Numbers Python or numpy cannot take are one-line errors, exit 2, never a traceback: integers of
more than 4,300 digits from --set, --vary, a scenario file or the API, and a latency noise so
small its gamma overflows."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tmasim

HUGE = "9" * 5000


def tmasim_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tmasim", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ("run", "reference", "--set", f"workload.tiles={HUGE}"),
    ("sweep", "reference", "--vary", f"workload.tiles=3,{HUGE}", "--out", "never.csv"),
    ("run", "reference", "--set", "run.drift={latency_cv=1e-160}"),
])
def test_the_command_line_says_so_in_one_line(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = tmasim_cli(*args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "4300 digits" in done.stderr or "run.drift.latency_cv: 1e-160 must be 0 (no noise) or from" in done.stderr
    assert not (tmp_path / "never.csv").exists()


def test_a_scenario_file_with_a_huge_integer_names_the_file(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text(f'name = "big"\ngpu = "ideal"\n[workload]\nkind = "tiles"\ntiles = {HUGE}\n'
                    'load = "1 us"\ncompute = "1 us"\n[pipeline]\nstages = 2\n')
    done = tmasim_cli("run", str(path))
    assert done.returncode == 2 and "holds a number of more than 4300 digits" in done.stderr
    assert str(path) in done.stderr


def test_the_api_raises_the_packages_error():
    with pytest.raises(tmasim.ScenarioError, match="more than 4300 digits"):
        tmasim.load_scenario("reference", [f"workload.tiles={HUGE}"])
    with pytest.raises(tmasim.ScenarioError, match="latency_cv"):
        tmasim.load_scenario("reference", ["run.drift={latency_cv=1e-160}"])
    assert tmasim.load_scenario("reference", ["run.drift={latency_cv=1e-6}"]).run.drift.latency_cv == 1e-6


def test_a_scenario_file_nested_thousands_deep_is_one_line(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text('name = "x"\n' + ".".join(["a"] * 3000) + " = 1\n")
    done = tmasim_cli("run", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "nests tables 3,000 deep, where no scenario field is deeper than 16" in done.stderr


def test_plot_into_a_folder_is_one_line(tmp_path):
    run = tmp_path / "run"
    assert tmasim_cli("run", "reference", "--out", str(run)).returncode == 0
    for folder in (".", str(tmp_path)):
        done = subprocess.run([sys.executable, "-m", "tmasim", "plot", str(run), "--out", folder], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "is a directory" in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("makespan", ["fast", None, float("nan"), float("inf"), -1.0, 0, True])
def test_a_journal_line_whose_ok_row_has_no_time_is_not_folded_in(makespan):
    """A damaged journal line is skipped (its point runs again), never read as a finished point."""
    from tmasim.sweep.points import Outcome
    from tmasim.sweep.store import _outcome_or_none

    record = {"point": 3, "seed": None, "status": "ok", "error": None, "stats": {"makespan_ns": makespan}}
    assert _outcome_or_none(record) is None
    with pytest.raises(ValueError):
        Outcome.from_json(record)
    good = {**record, "stats": {"makespan_ns": 23000.0}}
    assert Outcome.from_json(good).stats["makespan_ns"] == 23000.0
    assert _outcome_or_none({**record, "status": "error", "stats": {}}) is not None  # errors carry no time
