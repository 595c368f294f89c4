"""tmasim calibrate: recover known GPU parameters from tables the simulator produced.

The "measured" table is simulated on h100-sxm with copy_latency 700 ns and sm_port_bandwidth
90 GB/s; calibrating the unmodified h100-sxm against it must find those values again, say how
well it predicts the held-out points, and write a preset that loads and reproduces the table.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tmasim.analytic import maxplus_makespan
from tmasim.errors import ScenarioError, TmasimError
from tmasim.hardware import load_gpu
from tmasim.units import PS_PER_S
from tmasim.validation import Options, calibrate, validate
from tmasim.validation.calibration import split
from tmasim.validation.fit import fit_least_squares
from tmasim.validation.synthetic import Grid, backend_files

REPO = Path(__file__).resolve().parents[1]
# The TMA request ceiling (tma_request_time) would hide the port from the fit: off in the table and in the
# calibrations of it (NO_REQUESTS), so the port binds where the bytes are many.
TRUE_GPU = {"preset": "h100-sxm", "copy_latency": "700 ns", "sm_port_bandwidth": "90 GB/s", "tma_request_time": "0 ns"}
NO_REQUESTS = Options(overrides=("gpu.tma_request_time=0 ns",))
GRID = Grid(stages=(1, 2, 4), tile_bytes=(4096, 16384), compute_iters=(0, 16), ctas=(1,), tiles_per_cta=8)
FIT = ["copy_latency", "sm_port_bandwidth"]


def tmasim(*args: str, module: str = "tmasim.cli") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 single-CTA launches on the modified GPU; meta.json names an H100, so h100-sxm is the start."""
    folder = tmp_path_factory.mktemp("measured")
    backend_files(folder, TRUE_GPU, GRID, device="NVIDIA H100 80GB HBM3 (synthetic: tmasim)")
    return folder / "measured_runs.csv"


@pytest.fixture(scope="module")
def calibrated(measured: Path) -> object:
    return calibrate(measured, FIT, NO_REQUESTS, holdout=0.25, seed=3)


def test_calibrate_recovers_the_parameters_that_made_the_table(calibrated: object) -> None:
    fitted = calibrated.fitted  # type: ignore[attr-defined]
    assert fitted["copy_latency"] == pytest.approx(700_000, rel=0.02)          # ps
    assert fitted["sm_port_bandwidth"] * PS_PER_S == pytest.approx(90e9, rel=0.02)
    start = load_gpu("h100-sxm")
    assert [p.start for p in calibrated.parameters] == [start.copy_latency, start.sm_port_bandwidth]  # type: ignore


def test_calibrate_reports_held_out_error_on_points_it_did_not_fit(calibrated: object) -> None:
    table = calibrated.table  # type: ignore[attr-defined]
    assert (table["split"] == "holdout").sum() == 3 and (table["split"] == "train").sum() == 9
    assert calibrated.holdout_mape < 0.5 and calibrated.train_mape < 0.5  # type: ignore[attr-defined]
    held = table[table["split"] == "holdout"]
    assert held["start_error_pct"].abs().mean() > 10  # the base preset was far off on them
    text = calibrated.text()  # type: ignore[attr-defined]
    assert "9 training points, 3 held out (seed 3)" in text and "MAPE holdout" in text


def test_the_written_preset_loads_and_reproduces_the_table(calibrated: object, measured: Path,
                                                           tmp_path: Path) -> None:
    path = calibrated.write_preset(tmp_path / "my-h100.toml")  # type: ignore[attr-defined]
    gpu = load_gpu(str(path))
    assert gpu.name == "my-h100"
    assert gpu.copy_latency == pytest.approx(700_000, rel=0.02)
    assert gpu.hbm_bandwidth == load_gpu("h100-sxm").hbm_bandwidth  # what was not fitted stays
    raw = tomllib.loads(path.read_text())
    source = raw["copy_latency"]["source"]
    assert source.startswith("calibrated by tmasim calibrate from measured_runs.csv on ")
    assert "(holdout MAPE 0." in source
    assert raw["hbm_bandwidth"]["source"].startswith("datasheet")
    again = validate(measured, Options(overrides=[f"gpu={path}"]))
    assert again.mape < 0.5


def test_calibrate_fits_the_backend_maps_compute_constant(tmp_path: Path) -> None:
    grid = Grid(stages=(1, 2), tile_bytes=(4096,), compute_iters=(4, 16, 64), ctas=(1,), tiles_per_cta=8)
    backend_files(tmp_path, "h100-sxm", grid, device="NVIDIA H100", ps_per_iter_byte=6.0)
    cal = calibrate(tmp_path / "measured_runs.csv", ["ps_per_iter_byte"], holdout=0.0)
    assert cal.fitted["ps_per_iter_byte"] == pytest.approx(6.0, rel=0.01)
    assert cal.holdout_mape is None and "none held out" in cal.text()
    text = cal.write_preset(tmp_path / "p.toml").read_text()
    assert "ps_per_iter_byte = 6" in text  # a comment: the constant is no GPU field
    load_gpu(str(tmp_path / "p.toml"))


def test_noisy_measurements_fit_within_the_noise(measured: Path, tmp_path: Path) -> None:
    """3 % multiplicative noise: the fit stays within a few percent and the error near the noise."""
    shutil.copytree(measured.parent, tmp_path / "noisy")
    runs = pd.read_csv(measured)
    runs["kernel_ns"] *= np.exp(np.random.default_rng(7).normal(0.0, 0.03, len(runs)))
    runs.to_csv(tmp_path / "noisy" / "measured_runs.csv", index=False)
    cal = calibrate(tmp_path / "noisy" / "measured_runs.csv", FIT, NO_REQUESTS, holdout=0.0)
    assert cal.fitted["copy_latency"] == pytest.approx(700_000, rel=0.06)
    assert cal.train_mape is not None and cal.train_mape < 4.0


# --- the pieces -------------------------------------------------------------------------------

def test_split_is_seeded_and_holds_out_the_fraction_asked_for() -> None:
    points = list(range(20))
    train, held = split(points, 0.25, seed=1)
    assert len(held) == 5 and sorted(train + held) == points
    assert split(points, 0.25, seed=1) == (train, held) and split(points, 0.25, seed=2) != (train, held)
    assert split(points, 0.0, seed=1) == (points, [])
    assert len(split(points[:3], 0.01, seed=0)[1]) == 1  # a fraction > 0 holds out at least one
    assert len(split(points[:2], 0.9, seed=0)[0]) == 1   # and keeps at least one to fit


def test_fit_least_squares_on_a_kinked_max_plus_model() -> None:
    """Residuals of log(max(a, b) + c) style, the simulator's shape: exact answer, few evaluations."""
    truth = np.log([3.0, 0.5])
    xs = np.linspace(0.5, 12, 9)  # b binds from x = 6 on, a below

    def model(x: np.ndarray) -> np.ndarray:
        a, b = np.exp(x)
        return np.maximum(a, b * xs) + xs

    target = model(truth)
    calls = []

    def batch(vectors):  # noqa: ANN001, ANN202
        calls.append(len(vectors))
        return [np.log(model(v) / target) for v in vectors]

    fit = fit_least_squares(batch, np.zeros(2), max_evals=60)
    assert fit.stopped == "converged" and np.allclose(fit.x, truth, atol=1e-4)
    assert fit.evaluations == sum(calls) <= 60 and 2 in calls  # Jacobians come as one batch of 2


def test_fit_least_squares_respects_its_budget_and_reports_a_flat_parameter() -> None:
    def batch(vectors):  # noqa: ANN001, ANN202
        return [np.array([v[0] - 1.0, 2 * (v[0] - 1.0)]) for v in vectors]  # v[1] moves nothing

    fit = fit_least_squares(batch, np.zeros(2), max_evals=4)
    assert fit.evaluations <= 4 and fit.insensitive == (1,)


@pytest.mark.parametrize(("fit", "kwargs", "error", "message"), [
    (["copy_latencyy"], {}, ScenarioError, "--fit: 'copy_latencyy' is not a field calibrate can fit (fittable: "),
    (["sms"], {}, ScenarioError, "'sms' is not a field calibrate can fit"),
    ([], {}, TmasimError, "--fit: name at least one field"),
    (FIT, {"holdout": 1.0}, ScenarioError, "--holdout: 1.0 must be a fraction in [0, 1)"),
    (FIT, {"max_evals": 2}, ScenarioError, "--max-evals: 2 must be at least 3"),
    (["copy_latency", "copy_latency"], {}, ScenarioError, "names a field twice"),
    (["tma_issue"], {"options": Options(overrides=["gpu=ideal"])}, ScenarioError,
     "gpu.tma_issue: 0.0 cannot be fitted from a zero or unlimited start"),
])
def test_calibrate_errors(measured: Path, fit: list[str], kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        calibrate(measured, fit, **kwargs)
    assert message in str(info.value)


def test_the_compute_constant_needs_a_backend_table(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pd.DataFrame({"stages": [1, 2], "t_ns": [32000.0, 23000.0]}).to_csv(path, index=False)
    with pytest.raises(ScenarioError, match="constant of the backend map"):
        calibrate(path, ["ps_per_iter_byte"], Options(maps=["stages=pipeline.stages"], measure="t_ns"))


def test_calibrate_on_a_generic_table_against_the_max_plus_recurrence(tmp_path: Path) -> None:
    """The reference scenario (4 tiles, 3 us / 5 us) with copy latencies from a column, "measured" on a
    GPU whose mbarrier wake-up costs 200 ns and TMA issue 40 ns (the recurrence of tmasim.analytic);
    calibrating both from 50 ns and 10 ns finds them again."""
    rows = []
    for stages, latency_ns in ((1, 0), (2, 0), (2, 2500), (3, 6000), (4, 9000), (1, 1000)):
        total = maxplus_makespan([3_000_000] * 4, [5_000_000] * 4, stages, [latency_ns * 1000] * 4,
                                 issue=40_000, wake=200_000)
        rows.append((stages, latency_ns, total / 1000))
    path = tmp_path / "t.csv"
    pd.DataFrame(rows, columns=["stages", "latency_ns", "t_ns"]).to_csv(path, index=False)
    options = Options(maps=["stages=pipeline.stages", "latency_ns=workload.latency:ns"], measure="t_ns",
                      overrides=["gpu.preset=ideal", "gpu.barrier_wake=50 ns", "gpu.tma_issue=10 ns"])
    cal = calibrate(path, ["barrier_wake", "tma_issue"], options, holdout=0.0)
    assert cal.fitted["barrier_wake"] == pytest.approx(200_000, rel=0.01)
    assert cal.fitted["tma_issue"] == pytest.approx(40_000, rel=0.05)
    assert cal.train_mape is not None and cal.train_mape < 0.01


# --- the command line -------------------------------------------------------------------------

def test_cli_calibrate_writes_a_preset_and_reports_both_errors(measured: Path, tmp_path: Path) -> None:
    out = tmp_path / "presets" / "my-h100.toml"
    proc = tmasim("calibrate", str(measured), "--fit", "copy_latency,sm_port_bandwidth", "--seed", "3",
                  "--set", "gpu.tma_request_time=0 ns", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "MAPE train" in proc.stdout and "MAPE holdout" in proc.stdout
    assert "iteration 1:" in proc.stderr and f"wrote {out}" in proc.stderr
    assert load_gpu(str(out)).copy_latency == pytest.approx(700_000, rel=0.02)
    assert not out.with_name("my-h100.simulations.jsonl").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--fit", "copy_latencyy"], "--fit: 'copy_latencyy' is not a field calibrate can fit"),
    (["--fit", "copy_latency", "--holdout", "1.5"], "--holdout: 1.5 must be a fraction in [0, 1)"),
    (["--fit", "copy_latency", "--map", "nope=pipeline.stages"], "--map nope: 'nope' is not a column"),
    (["--fit", "copy_latency,sm_port_bandwidth", "--where", "stages=1", "--where", "compute_iters=0",
      "--holdout", "0.5"], "--fit: 2 parameters need at least as many training points; 1 remain"),
])
def test_cli_calibrate_errors_write_nothing(measured: Path, tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "p.toml"
    proc = tmasim("calibrate", str(measured), "--out", str(out), *args)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_cli_calibrate_needs_a_toml_out(measured: Path, tmp_path: Path) -> None:
    proc = tmasim("calibrate", str(measured), "--fit", "copy_latency", "--out", str(tmp_path / "p.json"))
    assert proc.returncode == 2 and "must be a preset file ending in .toml" in proc.stderr


def test_tmasim_cli_runs_calibrate(measured: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.toml"
    proc = tmasim("calibrate", str(measured), "--fit", "copy_latency", "--out", str(out), "--quiet",
                  module="tmasim.cli")
    assert proc.returncode == 0, proc.stderr
    assert math.isfinite(load_gpu(str(out)).copy_latency)


def test_parameters_that_only_add_up_are_reported(measured: Path) -> None:
    """copy_latency and hbm_latency both delay every copy: only their sum is determined."""
    cal = calibrate(measured, ["copy_latency", "hbm_latency"], holdout=0.0, max_evals=12)
    assert any("copy_latency and hbm_latency change the predictions alike" in note for note in cal.notes)
    assert "note: copy_latency and hbm_latency" in cal.text()


def test_a_size_parameter_is_written_as_a_size_everywhere() -> None:
    from tmasim.validation.calibration import Parameter

    p = Parameter("l2_fit_size", "size", 40 * 2**20)
    assert p.override(42.6 * 2**20) == f"{round(42.6 * 2**20)} B"   # a scenario value, to the byte
    assert p.preset_value(42.64 * 2**20) == "42.64 MiB"
    gpu = load_gpu({"preset": "h200", "l2_fit_size": p.preset_value(42.64 * 2**20)})
    assert gpu.l2_fit_size == round(42.64 * 2**20)
