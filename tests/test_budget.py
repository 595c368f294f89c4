"""Resource limits: a run's cost is estimated from its plan before any event runs; a large run
says so on its first line, one past the limits is refused in one line unless confirmed."""

from __future__ import annotations

import pytest

from tmasim import budget
from tmasim.cli import main
from tmasim.errors import ResourceError
from tmasim.scenario import load
from tmasim.simulation import estimate, simulate
from tmasim.sweep import estimate as sweep_estimate
from tmasim.sweep.spec import plan_sweep
from tmasim.workloads import gemm

DRIFT = 'run.drift={start="200 ns", latency_cv=0.05}'


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "over the limit of 5.0 min or 4 GiB; add --yes" in err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize(("name", "sets", "steps"), [
    ("reference", ["workload.tiles=1000"], 1000),
    ("gemm-h100", ["workload.m=1024", "workload.n=2048", "workload.k=1024"], 64 // 64 * 16),
    ("gemm-h100", ["workload.m=1024", "workload.n=2048", "workload.k=1024", "run.aggregate=false"], 64 * 16),
    ("gemm-h100-cluster", ["workload.m=1024", "workload.n=1024", "workload.k=512", "run.aggregate=false"], 32 * 8),
])
def test_the_estimate_counts_exactly_the_ring_steps_the_engine_then_simulates(name, sets, steps):
    scenario = load(name, [*sets, "run.records=false"])
    predicted = estimate(scenario)
    assert predicted.steps == steps
    assert simulate(scenario).stats["simulated_steps"] == steps


def test_a_plan_too_big_to_build_is_refused_before_planning(capsys, monkeypatch):
    monkeypatch.setattr(gemm, "plan", lambda *a: pytest.fail("the plan was built"))
    code, out, err = run_cli(capsys, "run", "gemm-ideal", "--set", "workload.tile=[8,8,8]")
    refused(code, err, "1,073,741,824 ring steps", "16.52 GiB")
    assert out == ""
    code, _, err = run_cli(capsys, "run", "gemm-h100", "--set", "workload.m=65536", "--set", "workload.n=65536",
                           "--set", "workload.k=65536", "--set", "run.aggregate=false")
    refused(code, err, "134,217,728 ring steps")


@pytest.mark.parametrize(("argv", "fragments"), [
    (["run", "--set", "workload.tiles=80000000", "--set", "run.fast_forward=false", "--set", "run.records=false"],
     ["80,000,000 ring steps simulated", "320,000,000 events"]),
    (["run", "gemm-h100-cluster", "--set", "workload.k=16384", "--set", DRIFT], ["524,288 ring steps simulated"]),
    (["animate", "--set", "workload.tiles=1000000", "--out", "x.gif"], ["animation: ", "5,000,000 records"]),
])
def test_runs_past_the_limits_are_refused_in_one_line_before_they_start(capsys, tmp_path, monkeypatch, argv,
                                                                       fragments):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *argv)
    refused(code, err, *fragments)
    assert out == "" and list(tmp_path.iterdir()) == []


def test_a_large_run_says_so_on_its_first_line_and_yes_lifts_the_limit(capsys, monkeypatch):
    monkeypatch.setattr(budget, "NOTE_SECONDS", 0.0)
    code, out, err = run_cli(capsys, "run")
    assert code == 0 and err.startswith("tmasim: note: a large run: under 1 s and ")
    assert "23 µs" in out
    monkeypatch.setattr(budget, "LIMIT_SECONDS", 0.0)
    code, out, err = run_cli(capsys, "run")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "(4 ring steps)" in err and "add --yes" in err
    assert run_cli(capsys, "run", "--yes")[0] == 0


def test_the_api_refuses_too_and_says_how_to_lift_it():
    scenario = load("gemm-h100-cluster", ["workload.k=16384", DRIFT])
    with pytest.raises(ResourceError, match="allow_large=True"):
        simulate(scenario)


def test_a_sweep_is_estimated_from_the_kind_of_point_it_runs(capsys, tmp_path):
    tiny = plan_sweep("reference", [], ["run.seed=0,1,2,3"])
    big = plan_sweep("gemm-h100", ["workload.launch=grid"], ["run.seed=0,1,2,3"])
    tiny_s, _ = sweep_estimate.sweep_seconds(tiny, tiny.points, 1)
    big_s, sampled = sweep_estimate.sweep_seconds(big, big.points, 2)
    assert sampled == 4 and big_s > 4 * tiny_s
    seeds = ",".join(map(str, range(100)))
    ks = ",".join(str(64 * i) for i in range(1, 101))
    code, out, err = run_cli(capsys, "sweep", "gemm-h100", "--set", "workload.launch=grid", "--vary",
                             f"run.seed={seeds}", "--vary", f"workload.k={ks}",
                             "--out", str(tmp_path / "g.parquet"), "--quiet", "--jobs", "2")
    assert code == 2 and len(err.strip().splitlines()) == 1 and out == ""
    assert err.startswith("tmasim: error: sweep: 10,000 points to run, about ") and "over the limit of 15.0 min" in err
    assert list(tmp_path.iterdir()) == []


def test_a_long_sweep_says_so_on_its_first_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_estimate, "NOTE_SECONDS", 0.0)
    code, _, err = run_cli(capsys, "sweep", "reference", "--vary", "pipeline.stages=1,2", "--out",
                           str(tmp_path / "s.csv"), "--quiet")
    assert code == 0 and err.startswith("tmasim: note: a long sweep: 2 points to run, under 1 s with --jobs 1")
