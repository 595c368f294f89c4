"""What a sweep prints and how it is asked: the table's throughput and share of peak, every
failing point's reason (grouped), ``--zip A,B`` (pair some fields, cross the rest), and
``report`` taking every option ``sweep`` takes."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from tmasim.cli import _parser
from tmasim.errors import ScenarioError, TmasimError
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.summary import describe
from tmasim.sweep import answer, run_sweep
from tmasim.sweep.command import failure_lines
from tmasim.sweep.spec import Axis, expand, point_count

SMALL = ["workload.m=1024", "workload.n=1024", "workload.k=512"]


# ------------------------------------------------------------------ throughput and share of peak


def test_the_table_shows_each_points_throughput_and_share_of_peak_as_its_summary_does():
    table = run_sweep("gemm-h100", SMALL, ["pipeline.stages=1,2"], progress=False)
    lines = answer.table_lines(table)
    assert lines[0].split()[:6] == ["pipeline.stages", "time", "throughput", "of", "peak", "binding"]
    for row, line in zip(table.to_dict("records"), lines[1:], strict=True):
        rate, peak = row["achieved_flops_per_s"], row["peak_flops_per_s"]
        assert peak == pytest.approx(989.42976e12 * row["sms_used"] / 132)  # the SMs it uses
        cells = line.split()
        assert f"{rate / 1e12:.4g}" == cells[3] and cells[4] == "TFLOP/s"
        assert cells[5] == f"{rate / peak:.0%}"
        scenario = load("gemm-h100", [*SMALL, f"pipeline.stages={row['pipeline.stages']}"])
        assert f"{cells[5]} of the " in describe(simulate(scenario).stats, scenario)  # the summary's share


def test_a_table_without_tensor_core_work_has_no_throughput_columns():
    table = run_sweep("reference", [], ["pipeline.stages=1,2"], progress=False)
    assert "throughput" not in answer.table_lines(table)[0]


def test_attention_rows_show_the_useful_rate():
    row = {"status": "ok", "useful_flops_per_s": 4e14, "achieved_flops_per_s": 6e14, "peak_flops_per_s": 8e14}
    assert answer.rate(row) == 4e14
    old = {"status": "ok", "achieved_flops_per_s": 5e14}  # a table written before peak_flops_per_s
    assert answer._rate_cells(old) == ("500 TFLOP/s", "-")


# ------------------------------------------------------------------------ every failure, grouped


def test_every_failing_point_is_listed_grouped_by_reason():
    table = run_sweep("gemm-h100", SMALL, ["pipeline.stages=0,1,5,6,-1,7"], progress=False)
    lines = failure_lines(table)
    assert lines[0] == "  5 points did not run, by reason (2 reasons; the first point's message):"
    assert lines[1].startswith("    3 x invalid (points 2, 3, 5): pipeline.stages: 5 needs 256.1 KiB of shared memory")
    assert lines[2] == "    2 x invalid (points 0, 4): pipeline.stages: 0 must be >= 1"
    assert failure_lines(table[table["status"] == "ok"]) == []


# --------------------------------------------------------------------------------- --zip A,B


AXES = [Axis("pipeline.cluster", ("[1,1]", "[2,1]")), Axis("pipeline.stages", (3, 4, 5)),
        Axis("workload.multicast", ("none", "b"))]


def test_zip_names_the_fields_it_pairs_and_crosses_the_rest():
    points = expand(AXES, ("pipeline.cluster", "workload.multicast"))
    assert [dict(p.values) for p in points] == [
        {"pipeline.cluster": c, "pipeline.stages": s, "workload.multicast": m}
        for c, m in (("[1,1]", "none"), ("[2,1]", "b")) for s in (3, 4, 5)]
    assert point_count(AXES, ("pipeline.cluster", "workload.multicast")) == len(points) == 6
    assert [p.id for p in points] == list(range(6))
    assert len(expand(AXES, False)) == point_count(AXES, False) == 12


def test_zip_alone_keeps_its_meaning_and_naming_every_field_is_the_same():
    axes = [Axis("a", (1, 2)), Axis("b", (3, 4))]
    assert [dict(p.values) for p in expand(axes, True)] == [{"a": 1, "b": 3}, {"a": 2, "b": 4}]
    table = run_sweep("reference", [], ["workload.tiles=2,3", "pipeline.stages=1,2"], zip_=["workload.tiles",
                                                                                           "pipeline.stages"],
                      progress=False)
    assert table.attrs["sweep"]["zip"] is True and len(table) == 2  # every field named: --zip alone


def test_zip_of_some_fields_runs_and_resumes_from_its_file(tmp_path):
    vary = ["workload.tiles=2,3", "pipeline.stages=1,2,3", "workload.load=1 us,3 us"]
    out = tmp_path / "z.parquet"
    table = run_sweep("reference", [], vary, zip_=["workload.tiles", "workload.load"], out=out, progress=False)
    assert len(table) == 6
    pairs = list(zip(table["workload.tiles"], table["workload.load"], strict=True))
    assert pairs == [(2, "1 us")] * 3 + [(3, "3 us")] * 3
    assert table["pipeline.stages"].tolist() == [1, 2, 3] * 2
    again = run_sweep("reference", [], vary, zip_=["workload.tiles", "workload.load"], out=out, progress=False)
    assert again.attrs["sweep"]["resumed"] == 6 and again.attrs["sweep"]["computed"] == 0
    with pytest.raises(TmasimError, match=r"pairs workload.tiles, workload.load .*this run is a grid"):
        run_sweep("reference", [], vary, out=out, progress=False)


@pytest.mark.parametrize(("zip_", "message"), [
    (["workload.tiles", "workload.lod"], "--zip: 'workload.lod' is not a --vary field (this sweep varies"),
    (["workload.tiles"], "--zip: 'workload.tiles' names one field; pair two or more"),
    ("workload.tiles", "run_sweep: zip_='workload.tiles' must be True or False, or a list of the fields to pair"),
])
def test_bad_zip_fields_are_one_line_errors(zip_, message):
    with pytest.raises((ScenarioError, TmasimError)) as caught:
        run_sweep("reference", [], ["workload.tiles=2,3", "pipeline.stages=1,2", "workload.compute=1 us,2 us"],
                  zip_=zip_, progress=False)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_zip_of_unequal_fields_names_only_the_paired_ones():
    with pytest.raises(TmasimError, match=r"every field it pairs needs the same number of values "
                                          r"\(workload.tiles has 2, workload.compute has 3\)"):
        run_sweep("reference", [], ["workload.tiles=2,3", "pipeline.stages=1,2,3", "workload.compute=1 us,2 us,3 us"],
                  zip_=["workload.tiles", "workload.compute"], progress=False)


def test_the_command_line_zip_takes_fields_or_nothing():
    parser = _parser()
    args = parser.parse_args(["sweep", "reference", "--vary", "a=1,2", "--zip", "a,b", "--vary", "b=1,2"])
    assert args.zip == ("a", "b")
    assert parser.parse_args(["sweep", "reference", "--zip", "--vary", "a=1"]).zip is True
    assert parser.parse_args(["sweep", "reference", "--vary", "a=1"]).zip is False


# ------------------------------------------------------------------- report takes sweep's options


def _options(parser: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
    return {action.dest: (tuple(action.option_strings), action.nargs, action.const, action.default, action.type,
                          action.choices)
            for action in parser._actions if action.dest not in ("help", "out")}


def test_report_takes_every_option_sweep_takes():
    parser = _parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    sweep, report = _options(subcommands["sweep"]), _options(subcommands["report"])
    assert set(sweep) <= set(report), set(sweep) - set(report)
    assert {k: report[k] for k in sweep} == sweep  # the same flags, defaults and parsing
    assert {"zip", "executor", "scheduler", "search", "quiet", "jobs", "yes"} <= set(sweep)


def test_report_runs_its_sweep_with_zip_and_keeps_its_table(tmp_path):
    from tmasim.review.plot_cli import SweepOptions, build_report

    table = tmp_path / "sweep.csv"
    index = build_report("reference", [], ["workload.tiles=2,3", "workload.load=1 us,3 us"], tmp_path / "r",
                         sweep=SweepOptions(zip_=True, out=table))
    kept = pd.read_csv(table)
    assert len(kept) == 2 and kept["workload.tiles"].tolist() == [2, 3]
    assert "tmasim report reference --vary=workload.tiles=2,3" in index.read_text(encoding="utf-8")
    assert "--zip" in index.read_text(encoding="utf-8")  # the command that makes it, as typed


# ------------------------------------------------------------------ the validated column


def test_each_ok_row_carries_the_summarys_validated_line():
    table = run_sweep("gemm-b200", SMALL, ["pipeline.stages=2,3"], progress=False)
    for row in table.to_dict("records"):
        scenario = load("gemm-b200", [*SMALL, f"pipeline.stages={row['pipeline.stages']}"])
        assert row["validated"] == simulate(scenario).validated
        assert row["validated"].startswith("B200 whole-chip GEMMs")
