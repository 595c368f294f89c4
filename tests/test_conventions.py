"""What people expect of a command: python -m, --version, did-you-mean, a scenario to start from."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import tmasim

REPO = Path(__file__).resolve().parents[1]


def python_m(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tmasim", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_python_m_tmasim_version():
    proc = python_m("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"tmasim {tmasim.__version__}"


@pytest.mark.parametrize(("args", "hint"), [
    (["run", "--set", "pipeline.stagse=3"], "did you mean 'stages'?"),
    (["rnu"], "did you mean 'run'?"),
    (["run", "referense"], "did you mean 'reference'?"),
    (["run", "--set", "workload.kind=gem"], "did you mean 'gemm'?"),
    (["scenarios", "latency-hiden"], "did you mean 'latency-hidden'?"),
])
def test_a_typo_gets_a_suggestion(args, hint):
    proc = python_m(*args)
    assert proc.returncode == 2
    assert hint in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_no_suggestion_when_nothing_is_close():
    proc = python_m("run", "--set", "pipeline.zzzzzz=3")
    assert proc.returncode == 2 and "did you mean" not in proc.stderr


def test_scenarios_name_prints_a_file_that_runs(tmp_path):
    proc = python_m("scenarios", "reference")
    assert proc.returncode == 0
    assert tomllib.loads(proc.stdout)["workload"]["tiles"] == 4
    (tmp_path / "mine.toml").write_text(proc.stdout)
    run = python_m("run", str(tmp_path / "mine.toml"))
    assert run.returncode == 0 and "pipelined time       23 µs" in run.stdout


def test_package_all_is_the_public_api():
    errors = {"TmasimError", "ScenarioError", "ResourceError", "ModelError"}  # what a caller catches
    assert set(tmasim.__all__) == {"simulate", "load_scenario", "run_sweep", "tune", "__version__"} | errors
    assert all(hasattr(tmasim, name) for name in tmasim.__all__)


def test_the_package_namespace_has_no_typing_names():
    public = {name for name in vars(tmasim) if not name.startswith("_")}
    submodules = {m.name for m in pkgutil.iter_modules(tmasim.__path__)}
    submodules |= {old.split(".")[1] for old in tmasim.old_paths.MOVED}  # the paths before the rooms
    errors = {"TmasimError", "ScenarioError", "ResourceError", "ModelError"}
    assert public <= {"simulate", "load_scenario", "run_sweep", "tune"} | errors | submodules
    frame = tmasim.run_sweep("reference", vary=["pipeline.stages=1,2"], progress=False)
    assert frame["makespan_ns"].tolist() == [32000.0, 23000.0]


def test_presets_read_as_the_preset_writes_them():
    listing = python_m("presets").stdout
    h100 = next(line for line in listing.splitlines() if line.startswith("h100-sxm"))
    assert "989.4 TFLOP/s" in h100 and "319 cycles (174.3 ns)" in h100
    assert next(line for line in listing.splitlines() if line.startswith("ideal")).endswith("none")
    detail = python_m("presets", "h100-sxm").stdout
    flops = next(line for line in detail.splitlines() if line.strip().startswith("tensor_flops"))
    assert "bf16 989.4 TFLOP/s, fp16 989.4 TFLOP/s" in flops and "{" not in flops
    assert "0 (unlimited)" in detail
