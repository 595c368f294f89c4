"""The command line, through a subprocess, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def tmasim(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tmasim.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=120)


def test_run_with_no_scenario_runs_the_reference():
    proc = tmasim("run")
    assert proc.returncode == 0, proc.stderr
    assert "pipelined time       23 µs" in proc.stdout
    assert "no-overlap time      32 µs" in proc.stdout
    assert "binding: compute" in proc.stdout


def test_json_output():
    proc = tmasim("run", "--json", "--set", "pipeline.stages=1")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["makespan_ns"] == 32_000 and data["serial_ns"] == 32_000 and data["closed_form_ns"] == 32_000
    assert data["tiles"] == 4 and data["stages"] == 1


def test_json_closed_form_is_null_where_none_applies():
    data = json.loads(tmasim("run", "--json", "--set", "workload.latency=1 us").stdout)
    assert data["closed_form_ns"] is None
    assert data["maxplus_ns"] == data["makespan_ns"]


def test_out_writes_tables_and_a_gantt_chart(tmp_path):
    proc = tmasim("run", str(REPO / "scenarios" / "reference.toml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["events.csv", "gantt.png", "scenario.json", "spans.csv", "summary.csv"]
    assert (tmp_path / "out" / "gantt.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "out" / "scenario.json").read_text())["name"] == "reference"


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "workload.lod=3"], "workload.lod: 3 is not a known field"),
    (["--set", "pipeline.stages=0"], "pipeline.stages: 0 must be >= 1"),
    (["--set", "workload.tiles=0"], "workload.tiles: 0 must be >= 1"),
    (["--set", "workload.compute=0 us"], "workload.compute: '0 us' must be > 0"),
    (["--set", "workload.load=3 GB"], "workload.load: '3 GB' is not a time"),
    (["--set", "workload.load=fast"], "workload.load: 'fast' is not a quantity"),
    (["--set", 'workload.load=["3 us"]'], "has 1 entries but workload.tiles = 4"),
    (["missing.toml"], "scenario: 'missing.toml' is not a file"),
])
def test_bad_input_is_one_line_exit_2_no_traceback(args, message, tmp_path):
    proc = tmasim("run", *args, "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_file_that_is_not_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    proc = tmasim("run", str(bad))
    assert proc.returncode == 2 and "is not valid TOML" in proc.stderr


def test_deadlock_is_reported_with_who_waits_on_what():
    proc = tmasim("run", "--set", "pipeline.empty_arrivals=2")
    assert proc.returncode == 3
    assert "deadlock at 13 µs" in proc.stderr
    assert "sm0.cta0.producer waits on sm0.cta0.empty[0]" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("override", "message"), [
    ("pipeline.expect_tx=8 KiB", "transaction-count underflow"),
    ("pipeline.empty_arrivals=1", None),
])
def test_barrier_misuse_is_reported(override, message):
    proc = tmasim("run", "--set", override)
    if message is None:
        assert proc.returncode == 0
    else:
        assert proc.returncode == 3 and message in proc.stderr


def test_extra_arrivals_are_reported():
    proc = tmasim("run", "--set", "pipeline.consumers=2", "--set", "pipeline.empty_arrivals=1")
    assert proc.returncode == 3
    assert "more arrivals than the barrier was initialized for" in proc.stderr
    assert "sm0.cta0.consumer1 arrives" in proc.stderr


def test_a_phase_that_can_never_complete_is_a_deadlock():
    proc = tmasim("run", "--set", "pipeline.full_arrivals=2")
    assert proc.returncode == 3
    assert "consumer0 waits on sm0.cta0.full[0] parity 0 (phase 0 in progress: 1/2 arrivals" in proc.stderr


def test_skipping_the_full_wait_runs_and_reports_the_race():
    proc = tmasim("run", "--json", "--set", "pipeline.consumer_waits_full=false")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["races"] == 2
    assert "read-before-ready race" in proc.stderr
    assert "tile 0 from slot 0 at 0 ps, before it landed at 3 µs" in proc.stderr


def test_presets_lists_every_gpu_with_key_figures():
    proc = tmasim("presets")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "SMs", "SMEM/SM"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {"b200", "h100-sxm", "h200", "ideal"}
    assert "3.35 TB/s" in rows["h100-sxm"] and "3.913 TB/s" in rows["h200"] and "148" in rows["b200"]


def test_presets_shows_each_value_with_its_source():
    proc = tmasim("presets", "h100-sxm")
    assert proc.returncode == 0
    assert "hbm_bandwidth" in proc.stdout and "[datasheet" in proc.stdout and "[estimated" in proc.stdout
    far = [line for line in proc.stdout.splitlines() if line.strip().startswith("l2_far_")]
    assert len(far) == 2 and all("none (no far part)" in line for line in far)  # Hopper: one L2, no far part


def test_gemm_json_has_the_chip_figures():
    data = json.loads(tmasim("run", "gemm-h100", "--json", "--set", "workload.k=1024").stdout)
    for key in ("achieved_flops_per_s", "achieved_bytes_per_s", "hbm_bytes", "smem_per_cta_bytes", "ctas_per_sm",
                "waves", "copy_utilization", "compute_utilization", "hbm_utilization", "makespan_ns", "serial_ns",
                "tiles", "stages"):
        assert data[key] is not None, key
    assert data["closed_form_ns"] is None
    assert (data["ctas_per_sm"], data["waves"], data["tiles"]) == (1, 16, 2048)
    assert data["smem_per_cta_bytes"] == 4 * 49152 + 16384 + 64


def test_a_cta_that_fits_nowhere_is_exit_2_with_the_numbers():
    proc = tmasim("run", "gemm-h100", "--set", "pipeline.stages=5")
    assert proc.returncode == 2
    assert "pipeline.stages: 5 needs 256.1 KiB of shared memory per CTA" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_gpu_can_be_set_by_name_or_path(tmp_path):
    assert json.loads(tmasim("run", "--json", "--set", "gpu=h200").stdout)["gpu"] == "h200"
    preset = tmp_path / "mine.toml"
    preset.write_text((REPO / "tmasim" / "presets" / "h100-sxm.toml").read_text().replace('"h100-sxm"', '"mine"'))
    assert json.loads(tmasim("run", "--json", "--set", f"gpu={preset}").stdout)["gpu"] == "mine"


def test_trace_writes_a_valid_chrome_trace(tmp_path):
    from tmasim.review.trace import validate

    path = tmp_path / "reference.json"
    proc = tmasim("run", "--trace", str(path))
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(path.read_text())
    assert validate(trace) == []
    computes = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("compute")]
    assert max(e["ts"] + e["dur"] for e in computes) == pytest.approx(23.0)


def test_trace_without_records_is_refused_before_anything_is_written(tmp_path):
    proc = tmasim("run", "gemm-h100", "--trace", str(tmp_path / "t.json"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "run.records = false" in proc.stderr
    assert not (tmp_path / "t.json").exists() and not (tmp_path / "out").exists()
