"""tmasim validate: measured tables against the simulator, error per point and MAPE.

Tables the simulator itself produced must validate with zero error; a copy perturbed by known
factors must show exactly those errors; the anchor formula, written down as a "measured" table
by hand, must validate with zero error through column maps with units.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tmasim.errors import ScenarioError, TmasimError
from tmasim.validation import Options, validate
from tmasim.validation.mapping import ColumnMap, parse_map, preset_for_device
from tmasim.validation.runner import Runner, read_journal
from tmasim.validation.synthetic import RUN_COLUMNS, TILE_COLUMNS, Grid, backend_files

REPO = Path(__file__).resolve().parents[1]
GRID = Grid(stages=(1, 2), tile_bytes=(4096, 16384), compute_iters=(0, 16), ctas=(1, 2), tiles_per_cta=8)
DEVICE = "NVIDIA H100 80GB HBM3 (synthetic: tmasim)"


def tmasim(*args: str, module: str = "tmasim.cli", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd or REPO,
                          timeout=120)


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The backend's three files, simulated on the unmodified h100-sxm preset."""
    folder = tmp_path_factory.mktemp("backend")
    backend_files(folder, "h100-sxm", GRID, device=DEVICE)
    return folder


def copy_backend(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target / "measured_runs.csv"


# --- the simulator against itself --------------------------------------------------------------

def test_a_table_the_simulator_produced_validates_with_zero_error(backend: Path) -> None:
    v = validate(backend / "measured_runs.csv")
    assert len(v.table) == 16 and (v.table["status"] == "ok").all()
    assert v.mape == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(v.table["predicted"], v.table["measured"], rtol=1e-12)
    assert v.study.table.provenance.device == DEVICE
    assert "MAPE 0.00% over 16 points" in v.text()


def test_a_perturbed_copy_shows_the_known_error_at_every_point(backend: Path, tmp_path: Path) -> None:
    runs = pd.read_csv(backend / "measured_runs.csv")
    errors = np.resize([0.10, -0.05, 0.20, 0.0, -0.30], len(runs))
    runs["kernel_ns"] = runs["kernel_ns"] / (1 + errors)  # predicted / measured - 1 = error
    path = copy_backend(backend, tmp_path / "perturbed")
    runs.to_csv(path, index=False)
    v = validate(path)
    assert np.allclose(v.table["error_pct"], 100 * errors, atol=1e-9)
    assert v.mape == pytest.approx(100 * np.abs(errors).mean())
    # points 4, 9 and 14 all miss by -30 %: which one rounding makes the worst is not the point
    assert any(f"worst: point {i}, -30.0%" in v.text() for i in (4, 9, 14))


def test_repeats_are_one_point_compared_through_their_median(backend: Path, tmp_path: Path) -> None:
    runs = pd.read_csv(backend / "measured_runs.csv")
    repeats = pd.concat([runs.assign(repeat=k, kernel_ns=runs["kernel_ns"] * f) for k, f in enumerate((0.9, 1, 1.3))])
    path = copy_backend(backend, tmp_path / "repeats")
    repeats.to_csv(path, index=False)
    v = validate(path)
    assert len(v.table) == len(runs) and (v.table["repeats"] == 3).all()
    assert v.mape == pytest.approx(0.0, abs=1e-9)


def test_failed_runs_and_the_no_tma_baseline_are_left_out_with_a_note(backend: Path, tmp_path: Path) -> None:
    runs = pd.read_csv(backend / "measured_runs.csv")
    extra = pd.concat([runs.head(2).assign(variant="sync_ld_st", kernel_ns=1.0),
                       runs.head(1).assign(status="ResultCheckError: wrong sum", kernel_ns=np.nan)])
    path = copy_backend(backend, tmp_path / "mixed")
    pd.concat([runs, extra]).to_csv(path, index=False)
    v = validate(path)
    assert len(v.table) == len(runs) and v.mape == pytest.approx(0.0, abs=1e-9)
    assert any("2 runs of sync_ld_st" in note for note in v.study.table.notes)
    assert any("1 run whose status is not ok" in note for note in v.study.table.notes)


def test_a_measured_table_cut_at_a_row_boundary_is_refused(backend: Path, tmp_path: Path) -> None:
    assert json.loads((backend / "meta.json").read_text())["rows"] == {"measured_runs.csv": 16,
                                                                        "measured_tiles.csv": 128}
    path = copy_backend(backend, tmp_path / "cut")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-3]))  # three whole rows lost: every line still ends
    with pytest.raises(ScenarioError, match="has 13 rows where meta.json beside it says 16 were written: it is "
                                            "truncated"):
        validate(path)
    tiles = path.parent / "measured_tiles.csv"
    path.write_text("".join(lines))
    tiles.write_text("".join(tiles.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(ScenarioError, match="measured_tiles.csv' has 127 rows where"):
        validate(path)


def test_bandwidths_compare_with_their_units_converted(backend: Path) -> None:
    v = validate(backend / "measured_runs.csv", Options(measure="gbps", predict="achieved_bytes_per_s"))
    assert v.study.measure_unit == "GB/s"
    assert v.table["measured"].iloc[0] == pytest.approx(pd.read_csv(backend / "measured_runs.csv")["gbps"][0] * 1e9)
    assert v.mape == pytest.approx(0.0, abs=1e-9)


def test_where_keeps_the_rows_asked_for(backend: Path) -> None:
    v = validate(backend / "measured_runs.csv", Options(where=["ctas=2", "stages=2"]))
    assert len(v.table) == 4 and set(v.table["ctas"]) == {2} and set(v.table["stages"]) == {2}


def test_the_timeline_overlays_one_run_and_matches_tile_by_tile(backend: Path) -> None:
    v = validate(backend / "measured_runs.csv")
    assert v.timeline is not None and v.timeline_run is not None
    measured = v.timeline[v.timeline["source"] == "measured"].reset_index(drop=True)
    simulated = v.timeline[v.timeline["source"] == "simulated"].reset_index(drop=True)
    assert len(measured) == len(simulated) == GRID.tiles_per_cta
    times = ["issue_ns", "ready_ns", "compute_start_ns", "compute_end_ns"]
    assert np.allclose(measured[times], simulated[times], atol=1e-3)
    row = v.table[v.table["run_id"] == v.timeline_run].iloc[0]
    assert row["stages"] == 2 and row["compute_iters"] == 16 and row["ctas"] == 2  # the default's choice


def test_anchor_formula_as_a_measured_table_through_maps_with_units(tmp_path: Path) -> None:
    """N = 4 tiles: S = 1 takes N(l + c); S >= 2 takes l + c + (N - 1) max(l, c) (docs/design.md §2)."""
    rows = [(s, ld, c, 4 * (ld + c) * 1000 if s == 1 else (ld + c + 3 * max(ld, c)) * 1000)
            for s in (1, 2, 3) for ld, c in ((3, 5), (5, 3), (2.5, 2.5))]
    path = tmp_path / "anchor.csv"
    pd.DataFrame(rows, columns=["stages", "load_us", "compute_us", "total_ns"]).to_csv(path, index=False)
    maps = ["stages=pipeline.stages", "load_us=workload.load:us", "compute_us=workload.compute:us"]
    v = validate(path, Options(maps=maps, measure="total_ns"))
    assert len(v.table) == 9 and v.mape == pytest.approx(0.0, abs=1e-12)
    assert v.timeline is None


def test_a_runner_journal_lets_a_rerun_skip_finished_simulations(tmp_path: Path) -> None:
    base = {"name": "t", "gpu": "ideal", "workload": {"kind": "tiles", "tiles": 4, "load": "3 us", "compute": "5 us"}}
    batch = [(("pipeline.stages", s),) for s in (1, 2, 1)]
    journal = tmp_path / "journal.jsonl"
    with Runner(base, None, journal=journal) as runner:
        first = runner.run(batch)
    assert runner.simulations == 2  # the repeated point once
    journal.write_text(journal.read_text() + '{"key": "torn')  # a kill mid-line
    with Runner(base, None, journal=journal) as again:
        second = again.run(batch)
    assert again.simulations == 0 and [o.stats["makespan_ns"] for o in second] == [32000.0, 23000.0, 32000.0]
    assert [o.stats for o in first] == [o.stats for o in second] and len(read_journal(journal)) == 2


# --- the --map syntax -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("stages=pipeline.stages", ColumnMap("stages", "pipeline.stages")),
    ("latency_ns=workload.latency:ns", ColumnMap("latency_ns", "workload.latency", "ns")),
    (" tile_bytes = workload.tile_bytes : B ", ColumnMap("tile_bytes", "workload.tile_bytes", "B")),
    ("bw=gpu.hbm_bandwidth:GB/s", ColumnMap("bw", "gpu.hbm_bandwidth", "GB/s")),
])
def test_map_syntax(text: str, expected: ColumnMap) -> None:
    assert parse_map(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("stages", "--map: 'stages' must look like COLUMN=FIELD[:UNIT]"),
    ("stages=", "must look like COLUMN=FIELD[:UNIT]"),
    ("=pipeline.stages", "must look like COLUMN=FIELD[:UNIT]"),
    ("a=workload.load:", "must look like COLUMN=FIELD[:UNIT]"),
    ("a=workload..load", "must look like COLUMN=FIELD[:UNIT]"),
    ("a=workload.load:furlongs", "--map a: 'furlongs' is not a unit tmasim knows"),
])
def test_map_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_map(text)


@pytest.mark.parametrize(("cell", "value"), [(3, 3), (3.0, 3), (2.5, 2.5), ("[64, 64]", [64, 64]), ("fast", "fast")])
def test_cells_without_a_unit_read_as_set_reads_them(cell: object, value: object) -> None:
    assert ColumnMap("c", "f").value(cell) == value


def test_cells_with_a_unit_become_quantities() -> None:
    assert ColumnMap("c", "workload.load", "us").value(np.int64(3)) == "3 us"
    assert ColumnMap("c", "workload.load", "us").value(2.5) == "2.5 us"
    with pytest.raises(ScenarioError, match="has no value in this row"):
        ColumnMap("c", "workload.load", "us").value(float("nan"))


def test_device_names_choose_presets() -> None:
    assert preset_for_device("NVIDIA H200") == "h200"
    assert preset_for_device("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert preset_for_device("numba CUDA simulator") is None


def test_an_unknown_device_asks_for_a_preset(backend: Path, tmp_path: Path) -> None:
    path = copy_backend(backend, tmp_path / "sim")
    (path.parent / "meta.json").write_text(json.dumps({"probe": {"metadata": {
        "device": {"name": "numba CUDA simulator"}, "simulator": True}}}))
    with pytest.raises(TmasimError, match="'numba CUDA simulator', which matches no GPU preset: .*--set gpu=h200"):
        validate(path)
    assert validate(path, Options(overrides=["gpu=h100-sxm"])).mape == pytest.approx(0.0, abs=1e-9)


def test_synthetic_columns_are_the_backends() -> None:
    """tmasim.gpu.driver needs numba to import: read its column tuples from the source instead."""
    tree = ast.parse((REPO / "tmasim" / "gpu" / "driver.py").read_text())
    found = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name) and t.id in ("RUN_COLUMNS", "TILE_COLUMNS")}
    assert found == {"RUN_COLUMNS": RUN_COLUMNS, "TILE_COLUMNS": TILE_COLUMNS}


# --- the command line -------------------------------------------------------------------------

def test_cli_validate_writes_the_table_the_metadata_and_the_figures(backend: Path, tmp_path: Path) -> None:
    out = tmp_path / "v"
    proc = tmasim("validate", str(backend / "measured_runs.csv"), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "MAPE 0.00% over 16 points" in proc.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == ["predicted_vs_measured.png", "timeline.csv", "timeline_overlay.png", "validation.csv",
                     "validation.json"]  # the journal is gone once the results are written
    for png in ("predicted_vs_measured.png", "timeline_overlay.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(out / "validation.csv")
    assert {"point", "stages", "measured", "predicted", "error_pct", "status"} <= set(table.columns)
    meta = json.loads((out / "validation.json").read_text())
    assert meta["device"] == DEVICE and meta["measured_on"] and meta["mape_pct"] == pytest.approx(0, abs=1e-9)


@pytest.mark.parametrize(("args", "message"), [
    (["--map", "nope=pipeline.stages"], "--map nope: 'nope' is not a column of measured_runs.csv (columns: run_id"),
    (["--map", "stages=pipeline.stagez"], "pipeline.stagez: 1 is not a known field"),
    (["--map", "kernel_ns=workload.shape"], "workload.shape: "),
    (["--map", "stages=workload.compute_per_byte"], "workload.compute_per_byte: 1 is not a time"),
    (["--map", "stages"], "--map: 'stages' must look like COLUMN=FIELD[:UNIT]"),
    (["--measure", "nope"], "--measure nope: 'nope' is not a column"),
    (["--measure", "gbps:GB"], "--measure gbps: 'GB' is a unit of size, but --predict makespan_ns is a time (in ns)"),
    (["--predict", "nope_ns"], "--predict: 'nope_ns' is not a summary figure"),
    (["--where", "nope=1"], "--where nope: 'nope' is not a column"),
    (["--timeline-run", "999"], "--timeline-run: 999 is not a recorded run of a simulated point"),
    (["--tiles", "nope.csv"], "--tiles: nope.csv is not a file"),
])
def test_cli_errors_are_one_line_exit_2_and_write_nothing(backend: Path, tmp_path: Path, args: list[str],
                                                          message: str) -> None:
    out = tmp_path / "v"
    proc = tmasim("validate", str(backend / "measured_runs.csv"), "--out", str(out), *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("tmasim: error: ") and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_cli_missing_unit_says_how_to_give_one(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pd.DataFrame({"latency_ns": [100, 200], "t_ns": [24000.0, 25000.0]}).to_csv(path, index=False)
    out = tmp_path / "v"
    proc = tmasim("validate", str(path), "--map", "latency_ns=workload.latency", "--measure", "t_ns",
                  "--out", str(out))
    assert proc.returncode == 2
    assert ("workload.latency: 100 is not a time: give a string with a unit, like '3 us'; the column 'latency_ns' "
            "has no unit: write --map latency_ns=workload.latency:UNIT (e.g. :ns)") in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()
    fixed = tmasim("validate", str(path), "--map", "latency_ns=workload.latency:ns", "--measure", "t_ns",
                   "--out", str(out), "--quiet")
    assert fixed.returncode == 0, fixed.stderr
    assert (out / "validation.csv").exists() and not (out / "timeline_overlay.png").exists()


def test_cli_a_generic_table_needs_a_measured_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pd.DataFrame({"stages": [1, 2], "t_ns": [32000.0, 23000.0]}).to_csv(path, index=False)
    proc = tmasim("validate", str(path), "--map", "stages=pipeline.stages", "--out", str(tmp_path / "v"))
    assert proc.returncode == 2 and "--measure: say which column of t.csv holds the measured value" in proc.stderr


def test_tmasim_cli_runs_validate(backend: Path, tmp_path: Path) -> None:
    proc = tmasim("validate", str(backend / "measured_runs.csv"), "--out", str(tmp_path / "v"), "--quiet",
                  module="tmasim.cli")
    assert proc.returncode == 0, proc.stderr
    assert "MAPE 0.00% over 16 points" in proc.stdout


def test_a_point_the_simulator_refuses_is_a_row_with_its_reason(backend: Path, tmp_path: Path) -> None:
    runs = pd.read_csv(backend / "measured_runs.csv")
    runs.loc[3, "ctas"] = 132 * 40  # 40 CTAs per SM: more than fit
    path = copy_backend(backend, tmp_path / "refused")
    runs.to_csv(path, index=False)
    v = validate(path)
    bad = v.table[v.table["status"] != "ok"]
    assert len(bad) == 1 and bad["status"].iloc[0] == "invalid" and "ctas_per_sm: 40 is more than fit" in bad[
        "error"].iloc[0]
    assert v.mape == pytest.approx(0.0, abs=1e-9) and len(v.ok) == len(runs) - 1
    assert "1 point could not be simulated (point 3: workload.ctas_per_sm: 40" in v.text()


@pytest.mark.parametrize(("column", "value", "message"), [
    ("consumer_warps", 0, "consumer_warps: 0 must be >= 1"),
    ("stages", 1.5, "stages: 1.5 must be a whole number"),
    ("ctas", float("inf"), "ctas: inf must be a whole number"),
])
def test_a_measured_cell_that_is_not_a_count_is_a_row_with_its_reason(backend: Path, tmp_path: Path, column: str,
                                                                      value: object, message: str) -> None:
    runs = pd.read_csv(backend / "measured_runs.csv")
    runs[column] = runs[column].astype(float) if column in runs else 4.0
    runs.loc[2, column] = value
    path = copy_backend(backend, tmp_path / "bad")
    runs.to_csv(path, index=False)
    v = validate(path)
    bad = v.table[v.table["status"] != "ok"]
    assert len(bad) >= 1 and message in bad["error"].iloc[0]


def test_an_infinite_mapped_value_is_refused_in_one_line() -> None:
    with pytest.raises(ScenarioError, match="--map load: inf must be a finite number"):
        ColumnMap("load", "workload.load", "us").value(float("inf"))


def test_tiles_of_the_wrong_kind_are_refused_in_one_line(backend: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.csv"
    pd.DataFrame({"x": [1, 2]}).to_csv(wrong, index=False)
    proc = tmasim("validate", str(backend / "measured_runs.csv"), "--tiles", str(wrong), "--out",
                  str(tmp_path / "v"), "--quiet", module="tmasim.cli")
    assert proc.returncode == 2 and "is not the backend's per-tile table" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
