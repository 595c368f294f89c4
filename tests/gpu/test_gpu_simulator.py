"""Run the simulator test modules (tests/gpu/sim) in subprocesses with the simulator on.

NUMBA_ENABLE_CUDASIM is read when numba is first imported, so the simulator cannot
be switched on inside this process without breaking tests that use numba's real
target; each module gets a fresh interpreter instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

REPO_ROOT = Path(__file__).resolve().parents[2]

SIM_DIR = REPO_ROOT / "tests" / "gpu" / "sim"
MODULES = sorted(p.name for p in SIM_DIR.glob("test_*.py"))


@pytest.mark.parametrize("module", MODULES)
def test_simulator_module(module: str) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("this run already uses the simulator and collects tests/gpu/sim directly")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", str(SIM_DIR / module)]
    res = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         timeout=900, check=False)
    assert res.returncode == 0, f"{module} failed under the simulator:\n" \
        f"{res.stdout[-6000:]}\n{res.stderr[-3000:]}"


def test_simulator_modules_exist() -> None:
    assert len(MODULES) >= 2
