"""Scripts beside the package (validation/, benchmarks/) import this checkout's tmasim, never an
installed copy: a tmasim that fails to import, put first on PYTHONPATH, is never reached."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_with_a_decoy(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    decoy = tmp_path / "site" / "tmasim"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text('raise ImportError("the installed tmasim was imported")\n')
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})


def test_calibrate_public_imports_the_checkout(tmp_path: Path) -> None:
    proc = run_with_a_decoy(tmp_path, str(REPO / "validation" / "calibrate_public.py"), "no-such-source")
    assert "the installed tmasim was imported" not in proc.stderr
    assert "KeyError: 'no-such-source'" in proc.stderr  # the checkout's calibration looked the source up


def test_the_benchmarks_import_the_checkout(tmp_path: Path) -> None:
    code = (f"import sys; sys.path.insert(0, {str(REPO / 'benchmarks')!r}); import checkout, tmasim; "
            "print(tmasim.__file__)")
    proc = run_with_a_decoy(tmp_path, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).resolve() == (REPO / "tmasim" / "__init__.py").resolve()
