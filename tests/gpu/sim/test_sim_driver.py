"""The sweep driver under the simulator: table schemas, relative times, skips, files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("numba")

from tmasim.gpu.backend import simulator_enabled  # noqa: E402

if not simulator_enabled():
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported",
                allow_module_level=True)

from tmasim.gpu import driver, sim_primitives  # noqa: E402
from tmasim.gpu.driver import RUN_COLUMNS, TILE_COLUMNS, SweepSpec, run_sweep  # noqa: E402
from tmasim.gpu.launch import Launcher  # noqa: E402

TIME_COLUMNS = [c for c in TILE_COLUMNS if c.startswith("t_")]


def small_spec(**kw: Any) -> SweepSpec:
    base: dict[str, Any] = dict(stages=(2,), tile_bytes=(512, 49152), compute_iters=(2,),
                                ctas=(1, "2sms"), tiles_per_cta=4, consumer_warps=1, warmup=0,
                                repeats=2, timeout_s=30.0)
    base.update(kw)
    return SweepSpec(**base)


@pytest.fixture(scope="module")
def result() -> driver.SweepResult:
    return run_sweep(small_spec())


def test_runs_table(result: driver.SweepResult) -> None:
    runs = result.runs
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert len(runs) == 3 * 2 * 2  # variants x CTA counts (1 and 2 x 1 simulated SM) x repeats
    assert (runs.status == "ok").all(), runs.status.tolist()
    assert runs.run_id.is_unique
    assert sorted(runs.ctas.unique()) == [1, 2]
    assert (runs.bytes == runs.ctas * 4 * 512).all()
    np.testing.assert_allclose(runs.gbps, runs.bytes / runs.kernel_ns)
    assert (runs.timing == "wall_clock").all()
    assert (runs.order_violations == 0).all()
    assert (runs.distinct_sms == runs.ctas).all()
    assert (runs.smem_bytes_per_cta == 2 * 512 + 256).all()
    assert sorted(runs.repeat.unique()) == [0, 1]


def test_tiles_table(result: driver.SweepResult) -> None:
    tiles = result.tiles
    assert list(tiles.columns) == list(TILE_COLUMNS)
    assert all(tiles[c].dtype == np.int64 for c in TIME_COLUMNS + ["sm", "cta", "tile"])
    first = result.runs[result.runs.repeat == 0]
    assert sorted(tiles.run_id.unique()) == sorted(first.run_id)  # tile rows of repeat 0 only
    for run_id, rows in tiles.groupby("run_id"):
        run = first[first.run_id == run_id].iloc[0]
        assert len(rows) == run.ctas * 4  # every CTA kept (fewer than tile_rows_ctas)
        assert rows[TIME_COLUMNS].to_numpy().min() == 0  # relative to the run's first stamp
        assert (rows.stage == rows.tile % run.stages).all()
    ordered = [("t_empty_wait_ns", "t_issue_ns"), ("t_issue_ns", "t_ready_ns"),
               ("t_full_wait_ns", "t_ready_ns"), ("t_ready_ns", "t_compute_start_ns"),
               ("t_compute_start_ns", "t_compute_end_ns")]
    for early, late in ordered:
        assert (tiles[early] <= tiles[late]).all(), (early, late)


def test_oversized_configurations_are_listed_with_the_rule(result: driver.SweepResult) -> None:
    big = [s for s in result.skipped if s["tile_bytes"] == 49152]
    assert len(big) == 3 * 2
    assert all("stages*tile_bytes='2*49152'" in s["reason"] for s in big)


def test_save_writes_tables_and_metadata(result: driver.SweepResult, tmp_path: Path) -> None:
    paths = result.save(tmp_path)
    assert [p.name for p in paths] == ["measured_tiles.csv", "measured_runs.csv", "meta.json"]
    tiles = pd.read_csv(paths[0])
    assert list(tiles.columns) == list(TILE_COLUMNS) and len(tiles) == len(result.tiles)
    assert list(pd.read_csv(paths[1]).columns) == list(RUN_COLUMNS)
    meta = json.loads(paths[2].read_text())
    assert meta["simulator"] is True and meta["spec"]["tiles_per_cta"] == 4
    assert len(meta["skipped"]) == 6 and "numba-cuda" in meta["packages"]
    assert meta["rows"] == {"measured_tiles.csv": len(result.tiles), "measured_runs.csv": len(result.runs)}


def test_time_budget_skips_the_rest_after_the_first_point() -> None:
    res = run_sweep(small_spec(time_budget_s=0.0, tile_bytes=(512,)))
    assert list(res.runs.columns) == list(RUN_COLUMNS)
    assert len(res.runs) == 2 and (res.runs.status == "ok").all()  # 1 point x 2 repeats
    assert len(res.skipped) == 5
    assert {s["reason"] for s in res.skipped} == {"time budget spent"}


def test_a_failed_check_is_recorded_and_the_sweep_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_primitives, "COPY_DELAY_S", 0.5)  # every first wait must expire
    spec = small_spec(variants=("tma_bulk_1d",), tile_bytes=(512,), ctas=(1,), stages=(1, 2),
                      timeout_s=1e-9)
    res = run_sweep(spec)
    assert len(res.runs) == 2 and "aborted" not in res.meta
    assert all(s.startswith("KernelTimeoutError") for s in res.runs.status)
    assert res.tiles.empty


def test_an_unexpected_error_ends_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_args: Any) -> None:
        raise RuntimeError("context lost")

    monkeypatch.setattr(Launcher, "launch", boom)
    res = run_sweep(small_spec(tile_bytes=(512,)))
    assert len(res.runs) == 1
    assert res.runs.status.iloc[0] == "aborted: RuntimeError: context lost"
    assert "context lost" in res.meta["aborted"]


def test_a_refused_tensor_map_fails_its_points_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from tmasim.gpu import launch
    from tmasim.gpu.tensormap import CudaCallError

    def refuse(*_args: Any) -> None:
        raise CudaCallError("cuTensorMapEncodeTiled", "CUDA_ERROR_INVALID_VALUE")

    monkeypatch.setattr(launch, "build_tensor_map", refuse)
    res = run_sweep(small_spec(tile_bytes=(512,), ctas=(1,)))
    by_variant = res.runs.groupby("variant").status.first()
    assert by_variant["tma_tensor_2d"].startswith("CudaCallError: cuTensorMapEncodeTiled failed")
    assert by_variant["tma_bulk_1d"] == "ok" and by_variant["sync_ld_st"] == "ok"
    assert "aborted" not in res.meta
