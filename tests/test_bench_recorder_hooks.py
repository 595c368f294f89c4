"""benchmarks/bench_recorder_hooks.py measures what it says: its three forms of the record places
simulate the same pipeline (the places change no time), and it prints the share of a run
without records that hooks would add (the figure docs/development.md quotes for keeping the
tests in the loops). No timing is asserted: the machines are shared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_recorder_hooks as bench  # noqa: E402


def test_every_form_simulates_the_same_pipeline() -> None:
    ends = {form: bench.pipeline(50, form) for form in ("none", "test", "hook")}
    # 4 slots, load 3 us, compute 5 us: the first load, then 50 computes back to back
    assert set(ends.values()) == {bench.LOAD_PS + 50 * bench.COMPUTE_PS}


def test_it_reports_the_share_hooks_would_add() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_recorder_hooks.py"), "--tiles", "200",
                           "--repeat", "1"], capture_output=True, text=True, timeout=120, check=True)
    assert "4 record places a tile" in done.stdout
    assert "hooks would add" in done.stdout and "to the engine without records" in done.stdout
