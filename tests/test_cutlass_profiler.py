"""``tmasim validate cutlass-profiler``: the profiler's CSV read, joined with the simulation, the
error arithmetic and the per-problem pick. The CSV's runtimes are SYNTHETIC (the file says so):
these tests check the plumbing, not the model's accuracy."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tmasim.errors import TmasimError
from tmasim.validation import cutlass_profiler as profiler

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "cutlass_profiler_h100_synthetic.csv"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tmasim", "validate", "cutlass-profiler", *args, "--quiet"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_reads_the_cutlass_rows_and_leaves_out_cublas():
    rows, notes = profiler.read(DATA)
    assert [r.line for r in rows] == [6, 7, 8, 10, 11]  # four comment lines, the header on line 5
    assert rows[0].shape == (2048, 2048, 2048) and rows[0].measured_ms == 0.03 and rows[0].stages == 4
    assert rows[3].shape == (4096, 1024, 2048) and rows[3].kernel.endswith("_128x256x64_2x1x1_0_tnn_align8"
                                                                            "_warpspecialized_cooperative_epi_tma")
    assert notes == ["left out 1 row: provider cuBLAS (only CUTLASS rows name a kernel)"]


def test_the_row_runs_at_its_shape_and_reported_stages():
    rows, _ = profiler.read(DATA)
    assert profiler.overrides(rows[1], "h100-sxm", ["gpu.clock=1.5 GHz"]) == [
        "workload.m=2048", "workload.n=2048", "workload.k=2048", "pipeline.stages=6", "gpu=h100-sxm",
        "gpu.clock=1.5 GHz"]


def test_joined_table_error_mean_and_picks(tmp_path: Path):
    out = tmp_path / "joined.csv"
    done = cli(str(DATA), "--gpu", "h100-sxm", "--out", str(out))
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as handle:
        joined = list(csv.DictReader(handle))
    assert len(joined) == 5 and joined[0]["Provider"] == "CUTLASS" and joined[0]["cta_m"] == "128"
    errors = [float(r["error"]) for r in joined]
    for row, error in zip(joined, errors, strict=True):
        measured, predicted = float(row["Runtime"]), float(row["predicted_ms"])
        assert predicted > 0 and error == pytest.approx(predicted / measured - 1, rel=1e-4)
    mean = float(re.search(r"mean error ([\d.]+)% over 5 row", done.stdout).group(1)) / 100
    assert mean == pytest.approx(sum(abs(e) for e in errors) / 5, abs=6e-4)
    for problem, lines, fastest in (("2048x2048x2048", (0, 1, 2), 6), ("4096x1024x2048", (3, 4), 11)):
        pick = min(lines, key=lambda i: float(joined[i]["predicted_ms"]))
        verdict = "right" if pick == min(lines, key=lambda i: float(joined[i]["Runtime"])) else "wrong"
        assert f"problem {problem}: the profiler's fastest of {len(lines)} is line {fastest}; the simulator's " \
               f"pick is {verdict}" in done.stdout


def write(tmp_path: Path, change: tuple[str, str]) -> Path:
    path = tmp_path / "report.gemm.csv"
    path.write_text(DATA.read_text().replace(*change, 1))
    return path


@pytest.mark.parametrize(("change", "message"), [
    ((",2048,2048,2048,", ",2048,two,2048,"), "row at line 6: n 'two' is not a number"),
    (("128x256x64_2x1x1_0", "128x256x64_2x1x1_x"), "row at line 6: cutlass3x_sm90"),
    (("_align8_warpspecialized_cooperative_epi_tma,passed,success,universal,4096",
      "_align8_cpasync_warpspecialized_cooperative_epi_tma,passed,success,universal,4096"),
     "row at line 10: .*kernel schedule: 'cpasync_warpspecialized_cooperative' is not modelled"),
    ((",passed,success,universal,2048,2048,2048,bf16:row,", ",passed,success,universal,2048,2048,bf16:row,"),
     "row at line 6: 50 cells, the header has 51"),
    (("Runtime,", "Time,"), "line 5: the header lacks Runtime"),
])
def test_malformed_rows_are_one_line_errors_naming_the_row(tmp_path: Path, change: tuple[str, str], message: str):
    done = cli(str(write(tmp_path, change)), "--gpu", "h100-sxm", "--out", str(tmp_path / "j.csv"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert re.search(message, done.stderr), done.stderr
    assert not (tmp_path / "j.csv").exists()


def test_no_cutlass_rows_is_an_error(tmp_path: Path):
    path = tmp_path / "empty.csv"
    path.write_text(DATA.read_text().splitlines()[4] + "\n")
    with pytest.raises(TmasimError, match="no CUTLASS GEMM row"):
        profiler.read(path)


def test_split_k_slices_run_as_serial_split_k_and_parallel_ones_are_left_out(tmp_path: Path):
    serial = write(tmp_path, (",serial,1,1,heuristic,", ",serial,2,1,heuristic,"))
    rows, _ = profiler.read(serial)
    assert [r.split_k for r in rows[:2]] == [2, 1]  # the first row changed only
    assert "workload.split_k=2" in profiler.overrides(rows[0], "h100-sxm", [])
    assert "workload.split_k" not in " ".join(profiler.overrides(profiler.read(DATA)[0][0], "h100-sxm", []))
    parallel = write(tmp_path, (",serial,1,1,heuristic,", ",parallel,2,1,heuristic,"))
    rows, notes = profiler.read(parallel)
    assert [r.line for r in rows] == [7, 8, 10, 11] and all(r.split_k == 1 for r in rows)
    assert any("parallel split-K" in note for note in notes)
