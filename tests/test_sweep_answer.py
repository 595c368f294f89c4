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
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.errors import TmasimError
from tmasim.sweep import answer, run_sweep

REPO = Path(__file__).resolve().parents[1]


WITHIN = "next step: none: the best is within 1% at the knee; no further step is worth its cost"


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
    assert found.next_step is None  # 4 stages gain 0.79% over the knee: within its 1%
    text = "\n".join(answer.lines(found))
    assert "best: pipeline.stages = 4: 50 ns" in text
    assert "knee (the cheapest point within 1% of the best): pipeline.stages = 3: 50.4 ns, 0.8% slower" in text
    assert answer.lines(found)[-1] == WITHIN


def test_a_next_step_is_offered_only_when_it_gains_more_than_the_knee_tolerance():
    """The rule both ways: a step gaining more than 1% over the knee is offered with what it costs;
    one gaining 1% or less (0.2% here, the cheapest faster point) is not."""
    assert answer.worth_a_step(100.0, 98.9) and not answer.worth_a_step(100.0, 99.0)
    assert not answer.worth_a_step(100.0, 99.8) and not answer.worth_a_step(100.0, 101.0)
    assert not answer.worth_a_step(0.0, 0.0)
    frame = _table([90.0, 50.0, 50.0, 60.0, 49.9], [1, 2, 3, 4, 5], [1, 1, 1, 1, 1])
    found = answer.find(frame)
    assert found.knee["pipeline.stages"] == 2 and found.next_step is None
    assert answer.lines(found)[-1] == WITHIN
    # a knee and a step 5% faster than it (as a table whose knee came from another rule would hold)
    rows = frame.to_dict("records")
    constructed = answer.Answer(best=rows[4], knee=rows[1], next_step={**rows[4], "makespan_ns": 47.5,
                                "smem_per_cta_bytes": 4098, "ctas_per_sm": 2}, fields=("pipeline.stages",),
                                spread=0.8, valid=5)
    assert answer.lines(constructed)[-1] == ("next step: pipeline.stages = 5: 5% faster, at +4 KiB SMEM per CTA, "
                                             "CTAs per SM 1 → 2")
    flat = answer.find(_table([90.0, 50.0, 50.0, 60.0], [1, 2, 3, 4], [1, 1, 1, 1]))
    assert flat.next_step is None and flat.knee is flat.best
    assert answer.lines(flat)[-1] == "next step: none: the knee is the best point; no further step is worth its cost"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=1e6, allow_nan=False), min_size=1, max_size=8))
def test_within_one_problem_no_step_beats_the_knee_by_more_than_its_tolerance(times):
    """The knee is within 1% of the best, so no point can gain more than 1% over it: the answer
    never chases a fraction of a percent."""
    n = len(times)
    found = answer.find(_table(times, [1024 * i for i in range(1, n + 1)], [1] * n))
    assert found.next_step is None
    assert answer.lines(found)[-1].startswith("next step: none: ")


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
    binds = next(line for line in lines if line.startswith("binding there: "))
    assert " bind" in binds.split(": ", 1)[1]  # the explanation names the bound
    step = next(line for line in lines if line.startswith("next step: "))
    assert step.startswith("next step: none: ") and step.endswith("; no further step is worth its cost"), step


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


def _gemm_table(ks, stages, times, **extra):
    n = len(times)
    return pd.DataFrame({"point": range(n), "workload.k": ks, "pipeline.stages": stages, "status": ["ok"] * n,
                         "stages": stages, "makespan_ns": times, "smem_per_cta_bytes": [s * 1024 for s in stages],
                         "ctas_per_sm": [1] * n, "workload": ["gemm"] * n, **extra})


def test_a_sweep_over_the_problem_answers_per_problem():
    """k changes the work: the smallest k is never 'best'; each k gets its own best, knee and
    next step, along stages only."""
    frame = _gemm_table([1024, 1024, 4096, 4096], [2, 3, 2, 3], [10.0, 8.0, 40.0, 30.0])
    found = answer.find_all(frame)
    assert [a.problem for a in found] == [(("workload.k", 1024),), (("workload.k", 4096),)]
    assert [a.best["pipeline.stages"] for a in found] == [3, 3] and [a.fields for a in found] == [
        ("pipeline.stages",)] * 2
    text = answer.answer_lines(frame)
    assert text[0].startswith("workload.k changes the work (problem fields): times compare only within one problem")
    assert "workload.k = 1024:" in text and "workload.k = 4096:" in text
    assert "  best: pipeline.stages = 3: 8 ns" in text and "  best: pipeline.stages = 3: 30 ns" in text
    assert not any("best: workload.k" in line or "next step: workload.k" in line for line in text)


def test_noise_is_averaged_never_ranked_and_never_a_next_step():
    frame = _gemm_table([1024] * 4, [2, 2, 3, 3], [10.0, 12.0, 8.0, 9.0], **{"run.seed": [0, 1, 0, 1]})
    found = answer.find_all(frame)
    assert len(found) == 1 and found[0].noise == ("run.seed",) and found[0].fields == ("pipeline.stages",)
    assert found[0].best["makespan_ns"] == 8.5 and found[0].best["replicates"] == 2
    text = "\n".join(answer.answer_lines(frame))
    assert "run.seed only changes the draw (noise)" in text
    assert "best: pipeline.stages = 3: 8.5 ns (mean of 2 replicates, 8 ns to 9 ns)" in text
    assert "run.seed =" not in text


def test_only_noise_varied_gives_the_spread_not_a_best_seed():
    frame = _gemm_table([1024] * 3, [2] * 3, [10.0, 11.0, 12.0], **{"run.seed": [0, 1, 2]})
    text = answer.answer_lines(frame.drop(columns=["pipeline.stages", "workload.k"]))
    assert text == ["run.seed only changes the draw (noise): points that differ only there are replicates, and "
                    "their mean time is compared", "time: 11 ns (mean of 3 replicates, 10 ns to 12 ns)"]


def test_field_roles_are_one_table():
    from tmasim import field_roles as roles

    assert roles.role("workload.k", "gemm") == roles.PROBLEM and roles.role("workload.tile", "gemm") == roles.DESIGN
    assert roles.role("workload.load", "tiles") == roles.PROBLEM   # the reference workload's durations are its work
    assert roles.role("workload.tiles") == roles.PROBLEM and roles.role("workload.box", "stream") == roles.DESIGN
    assert roles.role("pipeline.stages") == roles.DESIGN and roles.role("pipeline.registers.consumer") == roles.DESIGN
    assert roles.role("gpu.hbm_bandwidth") == roles.DESIGN and roles.role("gpu") == roles.DESIGN
    assert roles.role("run.seed") == roles.NOISE and roles.role("run.drift.start") == roles.NOISE
    assert roles.role("workload.kind") == roles.PROBLEM
    with pytest.raises(KeyError, match="'pipe.stages' is not a scenario field"):
        roles.role("pipe.stages")


def test_a_workload_declares_its_own_problem_fields(monkeypatch: pytest.MonkeyPatch):
    """A new workload (attention, say) says which of its fields are the work; the rest are design."""
    import types

    from tmasim import field_roles as roles
    from tmasim.workloads import WORKLOADS

    toy = types.SimpleNamespace(KIND="toy", FIELDS=("kind", "seqlen", "block"), PROBLEM_FIELDS=("seqlen",))
    monkeypatch.setitem(WORKLOADS, "toy", toy)
    assert roles.role("workload.seqlen", "toy") == roles.PROBLEM and roles.role("workload.block", "toy") == roles.DESIGN
    assert ("workload.seqlen (toy)", roles.PROBLEM) in roles.table()


def test_the_design_doc_lists_every_field_role():
    from tmasim import field_roles as roles

    doc = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    for field, role in roles.table():
        assert f"| `{field}` | {role} |" in doc, field


def test_counts_read_back_from_a_table_print_as_counts(tmp_path):
    """A column with a missing value (an invalid point) comes back from Parquet as floats: the
    answer's sentence still says "2 stages x 1 CTA per SM", never "2.0 stages"."""
    from tmasim import format as fmt
    from tmasim.scenario import load
    from tmasim.simulation import simulate
    from tmasim.summary_rows import plural

    assert plural(2.0, "stage") == "2 stages" and plural(1.0, "CTA") == "1 CTA" and plural(3, "class") == "3 classes"
    assert fmt.as_written({"a": 2.0, "b": 2.5, "c": float("nan"), "d": "x"})["a"] == 2
    assert fmt.whole(2.5) == 2.5 and isinstance(fmt.whole(2.0), int)
    small = load("gemm-h100", ["workload.m=256", "workload.n=256", "workload.k=4096", "pipeline.stages=2"])
    stats = simulate(small).stats
    assert stats["binding"] == "round trip"  # it binds: its sentence counts stages and CTAs
    ok = {**stats, "point": 0, "pipeline.stages": 2, "status": "ok", "workload": "gemm"}
    bad = {"point": 1, "pipeline.stages": 9, "status": "invalid", "workload": "gemm"}
    pd.DataFrame([ok, bad]).to_parquet(tmp_path / "s.parquet")
    back = pd.read_parquet(tmp_path / "s.parquet")
    assert back["stages"].dtype == float
    there = next(line for line in answer.answer_lines(back) if line.startswith("binding there: "))
    assert "with 2 stages x 1 CTA per SM in flight" in there and ".0 " not in there, there
