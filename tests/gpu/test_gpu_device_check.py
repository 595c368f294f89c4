"""validation/device_check.py end to end on the simulator, and its summary on fake data.

The real run happens once, on a lent GPU, with no second chance: here the whole
flow (worker processes, deadlines, merging, files, summary) runs on numba's CUDA
simulator, and the summary's GPU-only branches run on synthetic tables.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

pytest.importorskip("numba")

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "validation" / "device_check.py"
EXPECTED_FILES = {"log.txt", "measured_runs.csv", "measured_tiles.csv", "meta.json",
                  "summary.txt"}


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_simulated_device_check_writes_its_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, str(SCRIPT), str(out), "--simulate"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-3000:]
    assert {p.name for p in out.iterdir()} == EXPECTED_FILES
    runs = pd.read_csv(out / "measured_runs.csv")
    assert (runs.status == "ok").all() and runs.run_id.is_unique
    assert sorted(runs.variant.unique()) == ["sync_ld_st", "tma_bulk_1d", "tma_tensor_2d"]
    tiles = pd.read_csv(out / "measured_tiles.csv")
    assert set(tiles.run_id) <= set(runs.run_id) and len(tiles) > 0
    meta = json.loads((out / "meta.json").read_text())
    assert [w["status"] for w in meta["device_check"]["workers"]] == ["ok"] * 5
    assert set(meta["sweeps"]) == {"tma_bulk_1d", "sync_ld_st", "tma_tensor_2d"}
    assert "DEVICE CHECK PASS" in (out / "log.txt").read_text()
    assert "runs per variant" in (out / "summary.txt").read_text()


def _runs(kernel_ns_on: float, kernel_ns_off: float) -> pd.DataFrame:
    rows = []
    for instrumented, ns in ((True, kernel_ns_on), (False, kernel_ns_off)):
        for stages in (1, 2):
            rows.append(dict(run_id=len(rows), variant="tma_bulk_1d", stages=stages,
                             tile_bytes=4096, compute_iters=16, ctas=132,
                             instrumented=instrumented, kernel_ns=ns, gbps=100.0 * stages,
                             status="ok"))
    return pd.DataFrame(rows)


def test_summary_reports_ceilings_throughput_and_instrumentation_cost() -> None:
    dc = load_script()
    probe = {"metadata": {"device": {"name": "GPU X", "compute_capability": [9, 0],
                                     "multiprocessor_count": 132},
                          "driver_version": "13.0", "packages": {"numba-cuda": "0.30"}},
             "copy_bandwidth": {"gbps_best": 4321.0}, "read_bandwidth": {"gbps_best": 4000.0},
             "globaltimer": {"min_step_ns": 32, "update_period_ns": 32.0},
             "sm_clock": {"sm_clock_ghz": 1.98}}
    metas = {"tma_tensor_2d": {"error": "no results (worker failed before saving)"}}
    text = dc.summary_text(_runs(110.0, 100.0), probe, metas)
    assert "device: GPU X cc=[9, 0] SMs=132 driver=13.0" in text
    assert "copy D2D best 4321 GB/s" in text and "min step 32 ns" in text
    assert "SM clock under load 1.98 GHz" in text
    assert "tma_bulk_1d    ok=   4 failed=  0" in text
    assert "tma_tensor_2d  ok=   0 failed=  0 skipped=  0 no results" in text
    assert "ctas=132, compute_iters=16" in text
    assert "median 1.100, max 1.100 over 2 configurations" in text


def test_summary_without_any_run() -> None:
    dc = load_script()
    text = dc.summary_text(pd.DataFrame(), {}, {})
    assert "runs per variant" in text and "GB/s (median" not in text


def test_merge_survives_a_worker_that_died_while_saving(tmp_path: Path) -> None:
    dc = load_script()
    parts, out = tmp_path / "parts", tmp_path / "out"
    parts.mkdir()
    out.mkdir()
    for variant, n in (("tma_bulk_1d", 3), ("sync_ld_st", 2)):
        pd.DataFrame({"run_id": range(n), "variant": variant, "status": "ok"}).to_csv(
            parts / f"{variant}_runs.csv", index=False)
        pd.DataFrame({"run_id": [0, 0, n - 1], "tile": [0, 1, 0]}).to_csv(
            parts / f"{variant}_tiles.csv", index=False)
        (parts / f"{variant}_meta.json").write_text("{}")
    (parts / "tma_tensor_2d_runs.csv").write_text("run_id,varia")  # cut short
    log = dc.Log(out / "log.txt")
    runs, tiles, metas = dc.merge_parts(parts, out, log)
    log.close()
    assert list(runs.run_id) == [0, 1, 2, 3, 4]  # the second variant's ids are shifted
    assert list(tiles.run_id) == [0, 0, 2, 3, 3, 4]
    assert "no results" in metas["tma_tensor_2d"]["error"]
    assert "tma_tensor_2d: no results" in (out / "log.txt").read_text()


def test_summary_prints_one_line_per_pipe_probe() -> None:
    dc = load_script()
    load = {"mhz": {"min": 1650.0, "median": 1755.4, "max": 1800.0}, "sms": 132, "load_s": 5.02}
    pipes = {
        "f2fp": {"pack_per_clk_per_sm": 63.84, "exp_per_clk_per_sm": 15.96,
                 "mixed_pack_per_clk_per_sm": 7.9, "mixed_exp_per_clk_per_sm": 15.8,
                 "shared_pipe_index": 0.031},
        "clock_load": {"wgmma_exp": load, "ffma_exp": {"error": "RuntimeError: boom"}},
        "wgmma_exp": {"flop_per_clk_per_sm": {"mma_alone": 3900.4, "mma_two_warpgroups": 4010.0},
                      "exp_per_clk_per_sm": {"exp_alone": 15.9},
                      "same_warpgroup_tensor_fraction": 0.71, "same_warpgroup_index": 0.42,
                      "other_warpgroup_tensor_fraction": 0.96, "other_warpgroup_index": 0.05}}
    lines = dc.summary_text(pd.DataFrame(), {"pipes": pipes}, {}).splitlines()
    assert ("F2FP.PACK_AB: 63.8 packs/clk/SM alone, MUFU.EX2 16.0/clk/SM alone; mixed 1:2 7.9 + "
            "15.8/clk/SM, shared-pipe index 0.03 (0 separate pipes, 1 one pipe)") in lines
    assert ("SM clock, chip-filling load: wgmma+MUFU 1755 MHz median (min 1650, max 1800) over "
            "132 SMs, 5.0 s; FFMA+MUFU FAILED RuntimeError: boom") in lines
    assert ("wgmma + MUFU.EX2: wgmma 3900 FLOP/clk/SM alone (2 warpgroups 4010), MUFU.EX2 "
            "15.9/clk/SM alone; same warpgroup: tensor x0.71, index 0.42; other warpgroup: "
            "tensor x0.96, index 0.05") in lines


def test_a_pipe_probe_that_wrote_nothing_reads_as_failed(tmp_path: Path) -> None:
    dc = load_script()
    (tmp_path / "pipe_f2fp.json").write_text(json.dumps({"error": "RuntimeError: no sm_90a"}))
    pipes = dc.read_pipes(tmp_path)
    assert pipes["clock_load"] == {"error": "no result (FileNotFoundError)"}
    text = dc.summary_text(pd.DataFrame(), {"pipes": pipes}, {})
    assert "F2FP.PACK_AB: FAILED RuntimeError: no sm_90a" in text
    assert "wgmma + MUFU.EX2: FAILED no result (FileNotFoundError)" in text
