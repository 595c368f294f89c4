"""``tmasim tune``: the design space (count, validity), the search's answer against every point
simulated, the quick bound under the tight one, the command's output and table, bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tmasim
from tmasim import load_scenario
from tmasim.errors import TmasimError
from tmasim.simulation import lower_bound_ns, quick_lower_bound_ns, same_run, simulate
from tmasim.sweep import answer, run_sweep
from tmasim.tuning import space as spaces

REPO = Path(__file__).resolve().parents[1]
# A problem small enough to simulate its whole space's valid points in a test
SMALL = ["workload.m=256", "workload.n=256", "workload.k=256"]


def test_the_gemm_space_on_hopper_counts_every_tile_stage_cluster_multicast_and_raster():
    space = spaces.design_space(load_scenario("gemm-h100"))
    assert space.fields == ("workload.tile", "pipeline.stages", "pipeline.cluster", "workload.multicast",
                            "pipeline.mma_cta_group", "workload.raster")
    # 16 tiles; stage counts 2..(227 KiB // stage bytes); 9 cluster x multicast; 3 rasters
    stage_counts = sum(len(range(2, 232448 // ((bm + bn) * 128) + 1))
                       for bm in (64, 128, 192, 256) for bn in (64, 128, 192, 256))
    assert len(space) == stage_counts * 9 * 3 == 2160
    assert {tuple(p[0]) for p in space.points} >= {(128, 256, 64), (64, 256, 64), (128, 192, 64), (128, 128, 64)}
    assert {(tuple(p[2]), p[3]) for p in space.points} == {
        ((1, 1), "none"), ((2, 1), "none"), ((2, 1), "b"), ((1, 2), "none"), ((1, 2), "a"),
        ((2, 2), "none"), ((2, 2), "a"), ((2, 2), "b"), ((2, 2), "both")}
    assert {p[4] for p in space.points} == {1}  # no 2-SM MMA on Hopper


def test_the_gemm_space_on_blackwell_has_2sm_pairs_only_where_a_cluster_has_two_ctas_along_m():
    space = spaces.design_space(load_scenario("gemm-b200"))
    pairs = [p for p in space.points if p[4] == 2]
    assert pairs and all(p[2][0] == 2 for p in pairs)
    assert {p[0][0] for p in space.points} == {64, 128}  # tcgen05: M 64 or 128 per SM
    assert {p[3] for p in pairs if p[2] == [2, 1]} == {"none"}  # one pair along M shares no B


def test_fp8_tiles_take_128_elements_of_k_a_128_byte_row():
    space = spaces.design_space(load_scenario("gemm-h100", ["workload.dtype=fp8"]))
    assert {p[0][2] for p in space.points} == {128}


def test_the_attention_space_varies_tiles_stages_consumers_mode_and_overlap():
    space = spaces.design_space(load_scenario("attention-h100"))
    assert space.fields == ("workload.tile", "pipeline.stages", "pipeline.consumers", "pipeline.consumer_mode",
                            "workload.softmax_overlap")
    assert {p[2] for p in space.points} == {1, 2, 3}
    assert {p[3] for p in space.points} == {"cooperative", "pingpong"}
    assert {p[4] for p in space.points} == {True, False}


def test_a_workload_without_a_design_space_is_refused_in_one_line():
    with pytest.raises(TmasimError, match="workload.kind = 'tiles' has no design space"):
        tmasim.tune("reference")


@pytest.mark.parametrize("overrides", [
    [], ["pipeline.cluster=[2,2]"], ["pipeline.cluster=[2,1]", "workload.multicast=none"],
    ["workload.launch=grid"], ["workload.m=1000", "workload.n=3000", "workload.k=700"],
    ["workload.tile=[64,128,64]", "pipeline.stages=6", "workload.raster=column"],
    ["workload.scheduler=stream-k"], ["workload.scheduler=stream-k", "pipeline.cluster=[2,1]"],
    ["workload.split_k=2"], ["workload.split_k=3", "workload.launch=grid", "workload.m=1000"],
    ["workload.split_k=4", "workload.m=512", "workload.n=1024", "pipeline.cluster=[2,2]"],
    # a grid of split tiles: a CTA per split, resident at once beyond the plain launch's tiles
    ["workload.split_k=4", "workload.m=1000", "workload.n=256", "workload.k=2048", "workload.launch=grid"]])
def test_the_quick_bound_is_never_above_the_tight_one_nor_the_run(overrides):
    """Split runs too: their quick bound takes the busiest cluster's share of k-tiles (or a grid's
    busiest SM), at a tenth of the tight bound's cost, and is never far below it here."""
    scenario = load_scenario("gemm-h100", ["workload.k=1024", *overrides])
    quick, tight = quick_lower_bound_ns(scenario), lower_bound_ns(scenario)
    assert quick is not None and tight is not None
    assert 0.5 * tight < quick <= tight * (1 + 1e-12)
    assert tight <= simulate(scenario).stats["makespan_ns"] * (1 + 1e-12)


def test_the_quick_bound_of_a_2sm_pair_is_below_the_tight_one():
    scenario = load_scenario("gemm-b200-2sm", ["workload.k=1024"])
    assert quick_lower_bound_ns(scenario) <= lower_bound_ns(scenario) * (1 + 1e-12)


@pytest.mark.parametrize(("name", "overrides"), [
    ("gemm-h100", []), ("gemm-h100", ["workload.tile=[128,192,64]"]),
    ("gemm-h100", ["workload.m=1000", "workload.n=3000", "workload.k=700", "pipeline.cluster=[2,1]"]),
    ("gemm-b200-2sm", ["workload.k=1024"]), ("gemm-b200", ["workload.k=512", "pipeline.cluster=[2,2]"])])
def test_a_grid_launchs_quick_bound_counts_the_ctas_its_busiest_sm_runs(name, overrides):
    """Some SM runs at least ceil(CTAs / SMs) of a grid's CTAs: the quick bound counts them all (one
    CTA's work alone left it a tenth of the tight bound, and a tune of a grid launch simulated most
    of its space), and stays below the tight bound and the run."""
    scenario = load_scenario(name, ["workload.launch=grid", *overrides])
    quick, tight = quick_lower_bound_ns(scenario), lower_bound_ns(scenario)
    assert quick is not None and tight is not None
    assert 0.5 * tight < quick <= tight * (1 + 1e-12)
    assert tight <= simulate(load_scenario(name, ["workload.launch=grid", "run.records=false", *overrides])
                             ).stats["makespan_ns"] * (1 + 1e-12)


def test_invalid_candidates_are_left_out_and_counted_by_the_field_that_refuses_them():
    result = tmasim.tune("gemm-h100", SMALL)
    assert result.candidates == 2160
    assert result.valid + sum(result.left_out.values()) == result.candidates
    assert result.left_out["pipeline.stages"] > 0 and result.left_out["workload.tile"] > 0  # residency, registers
    assert "shared memory" in result.examples["pipeline.stages"]
    stages = result.frame["pipeline.stages"]
    tiles = result.frame["workload.tile"].map(tuple)
    assert not (tiles == (256, 256, 64)).any()  # its accumulator needs more registers than a consumer has
    assert stages.min() == 2
    smem = result.frame.loc[result.frame["status"] == "ok", "smem_per_cta_bytes"]
    assert (smem <= 232448).all()


@pytest.fixture(scope="module")
def small_space():
    """A small slice of the space (two tiles, every stage count and cluster, one raster), searched by
    tune's machinery and simulated point by point."""
    from tmasim.tuning import run as tuning

    base = load_scenario("gemm-h100", SMALL)
    space = spaces.design_space(base)
    keep = [p for p in space.points if p[0] in ([128, 128, 64], [64, 128, 64]) and p[5] == "row"]
    return spaces.Space(space.kind, space.fields, tuple(keep)), tuning


def test_the_search_gives_the_answer_of_every_valid_point_simulated(small_space, monkeypatch, tmp_path):
    space, tuning = small_space
    monkeypatch.setattr(tuning, "design_space", lambda base, **_: space)
    found = tmasim.tune("gemm-h100", SMALL, out=tmp_path / "tune.csv")
    ok = found.frame[found.frame["status"] != "pruned"]
    vary = {f: [list(v) if hasattr(v, "__len__") and not isinstance(v, str) else v for v in found.frame[f]]
            for f in answer.varied_fields(found.frame)}
    full = run_sweep("gemm-h100", SMALL, vary, zip_=True, progress=False)
    assert len(full) == found.valid and (full["status"] == "ok").all()
    assert answer.answer_lines(found.frame) == answer.answer_lines(full)
    assert found.best["makespan_ns"] == full["makespan_ns"].min()
    assert 0 < len(ok) < len(full)
    top = found.top()
    assert list(top["makespan_ns"]) == sorted(full["makespan_ns"])[:len(top)] and len(top) >= 1
    # every pruned point's bound is a true bound, above the best by the tolerance
    def key(frame: pd.DataFrame) -> pd.Series:
        return frame[list(vary)].astype(str).agg("|".join, axis=1)

    times = dict(zip(key(full), full["makespan_ns"], strict=True))
    pruned = found.frame[found.frame["status"] == "pruned"]
    assert len(pruned) > 0
    for point, bound in zip(key(pruned), pruned["bound_ns"], strict=True):
        assert found.best["makespan_ns"] * (1 + answer.KNEE_TOLERANCE) < bound <= times[point] * (1 + 1e-12)


def test_the_out_table_holds_every_valid_point_and_resumes(small_space, monkeypatch, tmp_path):
    space, tuning = small_space
    monkeypatch.setattr(tuning, "design_space", lambda base, **_: space)
    out = tmp_path / "tune.csv"
    first = tmasim.tune("gemm-h100", SMALL, out=out)
    table = pd.read_csv(out)
    assert len(table) == first.valid
    assert set(table["status"]) == {"ok", "pruned"}
    assert table.loc[table["status"] == "pruned", "bound_ns"].notna().all()
    assert table.loc[table["status"] == "ok", "makespan_ns"].notna().all()
    again = tmasim.tune("gemm-h100", SMALL, out=out)
    assert again.frame.attrs["sweep"]["computed"] == 0  # read back, nothing simulated twice
    assert answer.answer_lines(again.frame) == answer.answer_lines(first.frame)


def test_the_best_listed_are_only_those_no_pruned_point_can_outrank():
    from tmasim.tuning.run import TuneResult

    times = [100.0, 100.5, 101.0, 103.0, 104.0]
    frame = pd.DataFrame({"workload.tile": [f"[{i}]" for i in range(6)], "status": ["ok"] * 5 + ["pruned"],
                          "makespan_ns": times + [None], "bound_ns": [90.0] * 5 + [102.0]})
    found = TuneResult("x", "a problem", 6, {}, frame, 1.0)
    assert list(found.top()["makespan_ns"]) == [100.0, 100.5, 101.0]  # 103 and 104: the pruned point may beat them
    assert "the 3 best (a pruned point, with only its bound, could come next):" in found.text().splitlines()
    frame.loc[5, "bound_ns"] = 104.0  # at or past every simulated time: all five stand
    assert list(found.top()["makespan_ns"]) == times
    assert "the 5 best:" in found.text().splitlines()


def _tmasim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tmasim", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_the_command_prints_the_space_what_ran_the_five_best_and_the_answer(tmp_path):
    done = _tmasim("tune", "gemm-h100", *(a for s in SMALL for a in ("--set", s)), "--jobs", "2", "--quiet",
                   "--out", "t.parquet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "tune gemm-h100: 256x256x256 bf16 GEMM on h100-sxm"
    assert lines[1].startswith("  design space: 2,160 points, ") and "left out by the rules" in lines[1]
    assert lines[2].startswith("  simulated ") and "pruned by their lower bounds" in lines[2]
    assert lines[3] == "the 5 best:"
    assert "binding" in lines[4] and len([x for x in lines[5:10] if x.strip().endswith("ok")]) == 5
    assert any(x.startswith("best: workload.tile = ") for x in lines)
    assert any(x.startswith("knee (the cheapest point within 1% of the best)") for x in lines)
    assert lines[-1] == "  wrote t.parquet"
    table = pd.read_parquet(tmp_path / "t.parquet")
    valid = int(lines[1].rsplit(": ", 1)[1].split()[0].replace(",", ""))
    assert len(table) == valid


@pytest.mark.parametrize("args, message", [
    (["reference"], "tmasim: error: tune: workload.kind = 'tiles' has no design space"),
    (["gemm-h100", "--jobs", "0"], "tmasim: error: --jobs: '0' must be a whole number >= 1"),
    (["gemm-h100", "--set", "workload.m=-4"], "tmasim: error: workload.m"),
    (["no-such-scenario"], "tmasim: error: "),
    (["gemm-h100", "--set", "workload.dtype=fp64"], "tmasim: error: workload.dtype"),
])
def test_bad_input_is_a_one_line_error(args, message, tmp_path):
    done = _tmasim("tune", *args, cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2


def test_a_long_tune_says_so_as_a_tune(small_space, monkeypatch):
    """The estimate's note names the command the user ran, not the sweep machinery under it."""
    from tmasim.sweep import estimate

    space, tuning = small_space
    monkeypatch.setattr(tuning, "design_space", lambda base, **_: space)
    monkeypatch.setattr(estimate, "NOTE_SECONDS", 0.0)
    notes: list[str] = []
    found = tmasim.tune("gemm-h100", SMALL, notify=notes.append)
    assert len(notes) == 1 and notes[0].startswith("tmasim: note: a long tune: ")
    assert "points expected to be simulated (by their bounds)" in notes[0] and "sweep" not in notes[0]
    # Given once each problem's lowest unit ran (and the next one started, a worker each): the
    # points sure to run, and the most the search can reach from the first time it has.
    counts = re.search(r"a long tune: ([\d,]+)(?: to ([\d,]+))? of", notes[0])
    assert counts is not None, notes[0]
    least, most = (int(c.replace(",", "")) for c in (counts[1], counts[2] or counts[1]))
    assert least <= found.simulated <= most + 1  # (+ the first unit, finished before the estimate)


def test_the_wide_gemm_space_adds_clusters_to_the_gpus_limit_the_launch_and_the_schedulers():
    space = spaces.design_space(load_scenario("gemm-h100"), wide=True)
    assert space.fields[-3:] == ("workload.launch", "workload.scheduler", "workload.split_k")
    shapes = {tuple(p[2]) for p in space.points}
    assert shapes == {(cx, cy) for cx in (1, 2, 4, 8, 16) for cy in (1, 2, 4, 8, 16) if cx * cy <= 16}
    ways = {p[6:] for p in space.points}
    # stream-K is persistent; 8192^3 has 2,048 tiles of 128 x 256 for 132 SMs: no split-K
    assert ways == {("persistent", "data-parallel", 1), ("persistent", "stream-k", 1), ("grid", "data-parallel", 1)}
    # 80 tile and stage pairs; 41 clusters with their multicasts; 3 rasters; 3 ways
    assert len(space) == 80 * 41 * 3 * 3 == 29520
    decode = spaces.design_space(load_scenario("gemm-h100", ["workload.m=256", "workload.n=1024"]), wide=True)
    splits = {(tuple(p[0]), p[8]) for p in decode.points}
    # split-K while tiles x splits <= 2 x 132: 16 tiles of 128 x 128 by 8; 64 tiles of 64 x 64 by 4, not 8
    assert ((128, 128, 64), 8) in splits and ((64, 64, 64), 4) in splits and ((64, 64, 64), 8) not in splits


def test_fields_given_with_set_stay_as_given():
    base = load_scenario("gemm-h100", ["pipeline.cluster=[2,1]", "workload.raster=row"])
    space = spaces.design_space(base, kept={"pipeline.cluster", "workload.raster"})
    assert "pipeline.cluster" not in space.fields and "workload.raster" not in space.fields
    multicast = space.fields.index("workload.multicast")
    assert {p[multicast] for p in space.points} == {"none", "b"}  # what a 2x1 cluster allows
    found = tmasim.tune("gemm-h100", [*SMALL, "workload.tile=[128,128,64]", "pipeline.stages=3"], jobs=1)
    assert "workload.tile" not in answer.varied_fields(found.frame)
    assert found.candidates == 9 * 3  # the clusters with their multicasts, and the rasters


def test_stream_k_that_splits_no_tile_is_the_data_parallel_run():
    whole = load_scenario("gemm-h100", ["workload.m=4096", "workload.n=4096", "workload.k=4096",
                                        "workload.scheduler=stream-k", "pipeline.cluster=[2,2]"])
    assert "the same run as \"data-parallel\"" in same_run(whole)  # 512 tiles: 4 waves of 128 CTAs
    ragged = load_scenario("gemm-h100", ["workload.m=4096", "workload.n=4096", "workload.k=4096",
                                         "workload.scheduler=stream-k", "pipeline.cluster=[2,1]"])
    assert same_run(ragged) is None  # 132 CTAs: a partial wave to spread
    plain = load_scenario("gemm-h100", ["workload.m=4096", "workload.n=4096", "workload.k=4096"])
    assert same_run(plain) is None


def test_a_wide_search_gives_the_answer_of_every_valid_point_simulated(monkeypatch):
    """A slice of the wide space (one tile, two stage counts, clusters of up to two CTAs, one
    raster, every launch and scheduler) searched, and simulated point by point."""
    from tmasim.tuning import run as tuning

    problem = ["workload.m=256", "workload.n=256", "workload.k=2048"]
    space = spaces.design_space(load_scenario("gemm-h100", problem), wide=True)
    keep = tuple(p for p in space.points if p[0] == [128, 128, 64] and p[1] in (2, 3) and p[2][0] * p[2][1] <= 2
                 and p[5] == "row")
    monkeypatch.setattr(tuning, "design_space", lambda base, **_: spaces.Space(space.kind, space.fields, keep))
    found = tmasim.tune("gemm-h100", problem, jobs=2)
    assert {p[6:] for p in keep} >= {("persistent", "stream-k", 1), ("grid", "data-parallel", 8)}
    vary = {f: [list(v) if hasattr(v, "__len__") and not isinstance(v, str) else v for v in found.frame[f]]
            for f in answer.varied_fields(found.frame)}
    full = run_sweep("gemm-h100", [*problem, "workload.tile=[128,128,64]", "workload.raster=row"], vary, zip_=True,
                     progress=False)
    assert answer.answer_lines(found.frame) == answer.answer_lines(full)
    assert 0 < found.simulated < len(full)
