"""A sweep ends with an answer (best point, knee, what binds, the next step's cost), and can be
extended with more values without recomputing what it has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet
import pytest

from tmasim.errors import TmasimError
from tmasim.sweep import answer, run_sweep

REPO = Path(__file__).resolve().parents[1]


def _table(times, smem, ctas, **extra):
    n = len(times)
    return pd.DataFrame({"point": range(n), "pipeline.stages": range(1, n + 1), "status": ["ok"] * n,
                         "stages": range(1, n + 1), "makespan_ns": times, "smem_per_cta_bytes": smem,
                         "ctas_per_sm": ctas, "workload": ["gemm"] * n, **extra})


def test_knee_is_the_cheapest_point_within_one_percent_of_the_best():
    frame = _table([100.0, 60.0, 50.4, 50.0, 50.0], [1024, 2048, 3072, 4096, 5120], [4, 3, 2, 1, 1])
    found = answer.find(frame)
    assert found.best["pipeline.stages"] == 4
    assert found.knee["pipeline.stages"] == 3
    assert found.next_step["pipeline.stages"] == 4
    text = "\n".join(answer.lines(found))
    assert "best: pipeline.stages = 4: 50 ns" in text
    assert "knee (the cheapest point within 1% of the best): pipeline.stages = 3: 50.4 ns, 0.8% slower" in text
    assert "next step: pipeline.stages = 4: 0.79% faster, at +1 KiB SMEM per CTA, CTAs per SM 2 → 1" in text


def test_points_with_races_or_errors_never_count():
    frame = _table([10.0, 20.0, 30.0], [1, 2, 3], [1, 1, 1], races=[4, 0, 0])
    frame.loc[1, "status"] = "error"
    assert answer.find(frame).best["pipeline.stages"] == 3
    frame["races"] = 1
    assert answer.find(frame) is None
    assert answer.summary(frame).endswith("no answer: no point ran to a valid time")


def test_a_flat_sweep_says_so():
    found = answer.find(_table([1000.0, 1000.1, 1000.05], [1, 2, 3], [1, 1, 1]))
    assert "(all 3 valid points within 0.01% of each other)" in answer.lines(found)[0]
    assert found.knee["pipeline.stages"] == 1


def test_sweep_prints_the_answer(tmp_path):
    """The issue's question (which stage count for 128x128x64?) on a smaller GEMM, as a user runs it."""
    smaller = ["--set", "workload.m=2048", "--set", "workload.n=2048", "--set", "workload.k=1024"]
    proc = subprocess.run([sys.executable, "-m", "tmasim.cli", "sweep", "gemm-h100", *smaller,
                           "--set", "workload.tile=[128,128,64]", "--vary", "pipeline.stages=2,3,4,5,6", "--quiet",
                           "--out", str(tmp_path / "s.parquet")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("pipeline.stages  time") for line in lines)
    assert any(line.startswith("best: pipeline.stages = ") for line in lines)
    knee = next(line for line in lines if line.startswith("knee (the cheapest point within 1% of the best): "))
    assert "SMEM per CTA" in knee
    binds = next(line for line in lines if line.startswith("what binds there: "))
    assert " binds" in binds
    assert any(line.startswith("next step: pipeline.stages = ") for line in lines)


def test_a_sweep_with_more_values_extends_the_file(tmp_path):
    out = tmp_path / "s.parquet"
    run_sweep("reference", [], ["pipeline.stages=1,2"], out=out, progress=False)
    frame = run_sweep("reference", [], ["pipeline.stages=1,2,3"], out=out, progress=False)
    assert frame.attrs["sweep"]["resumed"] == 2 and frame.attrs["sweep"]["computed"] == 1
    assert frame["pipeline.stages"].tolist() == [1, 2, 3]
    assert frame["makespan_ns"].tolist() == [32000.0, 23000.0, 23000.0]
    again = run_sweep("reference", [], ["pipeline.stages=3,1,2,4"], out=out, progress=False)
    assert again.attrs["sweep"]["resumed"] == 3 and again.attrs["sweep"]["computed"] == 1
    assert again.set_index("pipeline.stages")["makespan_ns"].to_dict() == {3: 23000.0, 1: 32000.0, 2: 23000.0,
                                                                           4: 23000.0}
    with pytest.raises(TmasimError, match="keeps every value the file has and adds more extends it"):
        run_sweep("reference", [], ["pipeline.stages=1,3"], out=out, progress=False)
    with pytest.raises(TmasimError, match="holds another sweep"):
        run_sweep("reference", ["workload.tiles=5"], ["pipeline.stages=1,2,3,4,5"], out=out, progress=False)


def test_list_valued_fields_are_lists_in_parquet(tmp_path):
    out = tmp_path / "tiles.parquet"
    small = ["workload.m=256", "workload.n=256", "workload.k=128"]
    run_sweep("gemm-ideal", small, ["workload.tile=[64,64,64],[128,128,64]"], out=out, progress=False)
    back = pd.read_parquet(out)
    assert [list(v) for v in back["workload.tile"]] == [[64, 64, 64], [128, 128, 64]]
    assert pa.types.is_list(pa.parquet.read_schema(out).field("workload.tile").type)
    again = run_sweep("gemm-ideal", small, ["workload.tile=[64,64,64],[128,128,64]"], out=out, progress=False)
    assert again.attrs["sweep"]["resumed"] == 2
