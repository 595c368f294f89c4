"""`import tmasim` (and the pure parts of tmasim.gpu) must not pull in numba."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_light_imports_do_not_load_numba() -> None:
    code = ("import sys, tmasim, tmasim.gpu, tmasim.gpu.params, tmasim.gpu.reference, "
            "tmasim.gpu.backend; print(sorted(m for m in sys.modules if m.startswith('numba')))")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
