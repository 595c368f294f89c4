"""``tmasim sweep --search``: the full sweep's answer (best, knee, what binds, next step) from the
points whose lower bound leaves them a chance to change it; the others are ``pruned`` rows."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tmasim.sweep import answer, points, run_sweep, search
from tmasim.sweep.executors import Pool
from tmasim.sweep.points import OK, Outcome
from tmasim.sweep.spec import Point

REPO = Path(__file__).resolve().parents[1]
GEMM = ["workload.m=2048", "workload.n=2048", "workload.k=2048"]
TILES = "workload.tile=[128,128,64],[128,256,64],[128,64,64]"
GRIDS = {
    "gemm stages x tiles": ("gemm-h100", GEMM, ["pipeline.stages=2,3,4", TILES]),
    "gemm per problem (k)": ("gemm-h100", GEMM[:2], ["workload.k=1024,4096", "pipeline.stages=2,4", TILES]),
    "gemm with replicates": ("gemm-h100", GEMM, ["pipeline.stages=2,3", TILES, "run.seed=1,2"]),
    "gemm rasters": ("gemm-h100", GEMM, ["workload.raster=row,column", "pipeline.stages=2,4", TILES]),
    "attention tiles": ("attention-h100", ["workload.seqlen_q=2048", "workload.batch=1", "workload.heads=8"],
                        ["pipeline.stages=1,2", "workload.tile=[128,128],[128,64],[64,128]"]),
}


def _sweep(grid: str, **options: Any) -> pd.DataFrame:
    name, overrides, vary = GRIDS[grid]
    return run_sweep(name, overrides, vary, progress=False, **options)


def _pruned(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["status"] == "pruned"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("grid", list(GRIDS))
def test_a_search_gives_the_full_sweeps_answer_from_fewer_simulations(tmp_path, grid, suffix):
    full = _sweep(grid, out=tmp_path / f"full{suffix}")
    found = _sweep(grid, out=tmp_path / f"search{suffix}", search=True)
    assert answer.answer_lines(found) == answer.answer_lines(full)
    assert len(found) == len(full) and 0 < len(_pruned(found)) < len(found)
    path = tmp_path / f"search{suffix}"
    again = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert (again["status"] == "pruned").sum() == len(_pruned(found))


@pytest.mark.parametrize("grid", list(GRIDS))
def test_pruned_points_are_bounded_above_the_tolerance_by_the_bound_a_run_reports(grid):
    full, found = _sweep(grid), _sweep(grid, search=True)
    problems = answer.roles(full)["problem"]
    best: dict[tuple[Any, ...], float] = {}
    for row in answer.valid_rows(full).to_dict("records"):
        key = tuple(row[f] for f in problems)
        best[key] = min(best.get(key, math.inf), row["makespan_ns"])
    for row in _pruned(found).to_dict("records"):
        ran = full.loc[row["point"]]
        key = tuple(row[f] for f in problems)
        # the run's own bound, or the quick one a search orders by before it needs that (never above it)
        assert row["bound_ns"] <= ran["bound_ns"] * (1 + 1e-12)
        assert row["bound_ns"] > best[key] * (1 + answer.KNEE_TOLERANCE)
        assert row["bound_ns"] * 1000 <= ran["makespan_ps"] + 1


def test_a_tiles_sweep_whose_bounds_cannot_tell_points_apart_simulates_them_all():
    """The tiles bound (every transfer, or one consumer's every compute) is the same at any stage
    count, so no point is above the best by the tolerance: nothing is pruned."""
    vary = ["workload.tiles=4,8", "pipeline.stages=1,2,3", "run.seed=1,2"]
    base = ["workload.load={dist = \"normal\", mean = \"3 us\", std = \"0.3 us\"}"]
    full = run_sweep("reference", base, vary, progress=False)
    found = run_sweep("reference", base, vary, progress=False, search=True)
    assert answer.answer_lines(found) == answer.answer_lines(full)
    assert (found["status"] == "ok").all()
    pd.testing.assert_frame_equal(found, full)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_an_interrupted_search_resumes_to_the_same_answer(tmp_path, monkeypatch, suffix):
    out, calls = tmp_path / f"s{suffix}", [0]
    real = points.simulate

    def interrupted_after_two(scenario: Any) -> Any:
        calls[0] += 1
        if calls[0] > 2:
            raise KeyboardInterrupt
        return real(scenario)

    monkeypatch.setattr(points, "simulate", interrupted_after_two)
    with pytest.raises(KeyboardInterrupt):
        _sweep("gemm per problem (k)", out=out, search=True)
    calls[0] = -100
    resumed = _sweep("gemm per problem (k)", out=out, search=True)
    assert resumed.attrs["sweep"]["resumed"] == 2
    assert calls[0] + 100 == (resumed["status"] == "ok").sum() - 2  # only the points not run before
    assert answer.answer_lines(resumed) == answer.answer_lines(_sweep("gemm per problem (k)"))


def test_a_finished_search_rerun_computes_nothing_and_without_search_runs_what_it_pruned(tmp_path):
    out = tmp_path / "s.parquet"
    found = _sweep("gemm stages x tiles", out=out, search=True)
    before = out.read_bytes()
    again = _sweep("gemm stages x tiles", out=out, search=True)
    assert out.read_bytes() == before and again.attrs["sweep"]["computed"] == 0
    whole = _sweep("gemm stages x tiles", out=out)
    assert whole.attrs["sweep"]["computed"] == len(_pruned(found)) and (whole["status"] == "ok").all()
    columns = ["point", "makespan_ns"]
    pd.testing.assert_frame_equal(whole[columns], _sweep("gemm stages x tiles")[columns])


def test_two_processes_give_the_same_answer():
    found = _sweep("gemm per problem (k)", search=True, jobs=2)
    assert answer.answer_lines(found) == answer.answer_lines(_sweep("gemm per problem (k)"))
    assert len(_pruned(found)) > 0


def test_the_spread_of_a_search_counts_what_it_pruned():
    """A search that ran only points within 1% of each other still has pruned ones far slower:
    it must not say that all its points are within 1%, as the full sweep does not."""
    table = pd.DataFrame({"point": [0, 1, 2], "pipeline.stages": [1, 2, 3], "seed": [0, 0, 0],
                          "status": ["ok", "ok", "pruned"], "stages": [1, 2, None],
                          "makespan_ns": [100.0, 100.5, None], "bound_ns": [90.0, 90.0, 150.0],
                          "smem_per_cta_bytes": [1024, 2048, None], "workload": ["gemm", "gemm", None]})
    found = answer.find(table)
    assert found is not None and found.spread == pytest.approx(0.5)
    assert "valid points within" not in answer.answer_lines(table)[0]
    assert "(all 2 valid points within 0.5% of each other)" in answer.answer_lines(table[table["status"] == "ok"])[0]


class _Recorded(Pool):
    """Runs nothing: each point's time is given, and the order of submissions is kept."""

    def __init__(self, times: dict[int, float]) -> None:
        self.times, self.order, self.queue = times, list[int](), list[list[Point]]()

    def submit(self, batch: Any) -> None:
        self.queue.append(list(batch))
        self.order += [p.id for p in batch]

    def next_done(self) -> list[Outcome]:
        return [Outcome(p.id, 0, OK, None, {"makespan_ns": self.times[p.id], "valid": True})
                for p in self.queue.pop(0)]


def test_points_run_lowest_bound_first_and_stop_past_the_best_by_the_tolerance():
    bounds = {0: 50.0, 1: 10.0, 2: 30.0, 3: 30.4, 4: 31.0, 5: None}
    times = {0: 60.0, 1: 40.0, 2: 30.0, 3: 35.0, 4: 31.0, 5: 90.0}
    units = [search.Unit([Point(i, ())], [Point(i, ())], {i: bounds[i]}) for i in bounds]
    problem = search.Problem(sorted(units, key=lambda u: u.bound_ns))
    workers, finished = _Recorded(times), dict[int, Outcome]()
    search.run([problem], workers, 1, finished, lambda outcomes: finished.update((o.point, o) for o in outcomes))
    # no bound first, then 10, 30 (best 30: limit 30.3), 30.4 is over it: 30.4, 31 and 50 are pruned
    assert workers.order == [5, 1, 2] and problem.best_ns == 30.0
    assert sorted(p.id for u in problem.units[problem.next:] for p in u.todo) == [0, 3, 4]
    assert math.isinf(units[5].bound_ns)


def test_cli_search_prints_the_same_answer_and_counts_the_pruned(tmp_path):
    name, overrides, vary = GRIDS["gemm stages x tiles"]
    args = [sys.executable, "-m", "tmasim", "sweep", name, *(f"--set={o}" for o in overrides),
            *(f"--vary={v}" for v in vary), "--quiet"]
    full = subprocess.run([*args, "--out", str(tmp_path / "f.csv")], capture_output=True, text=True, cwd=REPO,
                          timeout=120, check=True).stdout
    found = subprocess.run([*args, "--out", str(tmp_path / "s.csv"), "--search"], capture_output=True, text=True,
                           cwd=REPO, timeout=120, check=True).stdout
    assert "pruned by their bounds" in found.splitlines()[0]
    assert found.split("\nbest: ")[1] == full.split("\nbest: ")[1]


def test_dask_gives_the_same_answer(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=":0") as cluster:
        found = _sweep("gemm per problem (k)", search=True, executor="dask", scheduler=cluster.scheduler_address,
                       out=tmp_path / "d.parquet")
    assert answer.answer_lines(found) == answer.answer_lines(_sweep("gemm per problem (k)"))
    assert len(_pruned(found)) > 0


def test_a_search_extended_with_a_replicate_decides_each_unit_whole(tmp_path):
    out = tmp_path / "s.parquet"
    name, overrides, vary = GRIDS["gemm stages x tiles"]
    first = run_sweep(name, overrides, [*vary, "run.seed=1"], out=out, progress=False, search=True)
    more = run_sweep(name, overrides, [*vary, "run.seed=1,2"], out=out, progress=False, search=True)
    full = run_sweep(name, overrides, [*vary, "run.seed=1,2"], progress=False)
    assert answer.answer_lines(more) == answer.answer_lines(full)
    units = more.groupby(["pipeline.stages", more["workload.tile"].astype(str)])["status"]
    assert all(len(set(statuses)) == 1 for _, statuses in units)  # both replicates ran, or both were pruned
    assert (more["status"] == "pruned").sum() == 2 * (first["status"] == "pruned").sum()


def test_the_points_sure_to_run_are_priced_by_their_own_sample(monkeypatch):
    """A search's estimate gives the least (the points sure to run) and the most: each part from
    the plans of points of its own, so that cheap sure points and slow doubtful ones do not set
    each other's price."""
    from tmasim.sweep import estimate

    plan = type("Plan", (), {"base_raw": {}, "base_dir": None})()
    todo = [Point(i, (("pipeline.stages", i),)) for i in range(40)]
    sure = todo[:10]
    monkeypatch.setattr(estimate, "_point_cost", lambda plan, point: (2.0 if point.id < 10 else 200.0, ""))
    monkeypatch.setattr(estimate, "NOTE_SECONDS", 0.0)
    notes: list[str] = []
    estimate.check(plan, todo, 1, max_points=None, max_seconds=None, notify=notes.append, expected=todo,
                   certain=sure)
    per = estimate.POINT_SECONDS
    least = 10 * (2.0 + per) + estimate.SWEEP_SECONDS
    most = least + 30 * (200.0 + per)
    assert "10 to 40 of 40 points" in notes[0]
    assert f"{estimate.budget.about(least)} to {estimate.budget.about(most)}" in notes[0], notes[0]
    with pytest.raises(estimate.ResourceError, match="10 to 40 of 40"):  # only what is sure is refused
        estimate.check(plan, todo, 1, max_points=None, max_seconds=least - 1, notify=None, expected=todo,
                       certain=sure)
    assert estimate.check(plan, todo, 1, max_points=None, max_seconds=least + 1, notify=None, expected=todo,
                          certain=sure) == pytest.approx(2.0 + per)
