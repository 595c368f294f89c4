"""Trust beside every prediction: the summary, explain, sweep answers and the report quote how
well the model did on the validated cases closest to the run, from the committed results."""

from __future__ import annotations

import pandas as pd

from tmasim.review import report
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.summary import describe
from tmasim.sweep import answer
from tmasim.teach.explain import explain_result
from tmasim.validation.trust import baseline, trust_for_row

ONE_CTA = ["workload.m=128", "workload.n=128", "workload.k=4096", "workload.tile=[128,128,64]",
           "pipeline.consumers=1"]


def _mainloop_line() -> str:
    part = baseline()["b200-mainloop"]["all"]
    return (f"B200 one-CTA mainloop: stage answer (the fewest stages within 2% of the best) right on "
            f"{part['stage_answer_right']} of {part['sweeps']} tiles (within one stage on "
            f"{part['stage_answer_within_one']}), mean error "
            f"{part['mean_error']:.0%}")


def test_a_one_cta_b200_gemm_quotes_the_mainloop_figures_everywhere() -> None:
    result = simulate(load("gemm-b200", ONE_CTA))
    line = _mainloop_line()
    assert trust_for_row(result.stats) == line
    assert f"  validated        {line}" in describe(result.stats, result.scenario).splitlines()
    assert f"How far to trust it: {line}." in " ".join(explain_result(result, what_ifs=False).split())
    assert report._verdict(result.stats).endswith(f" Validated: {line}.")


def test_a_whole_chip_gemm_says_it_is_not_validated() -> None:
    assert trust_for_row({"workload": "gemm", "gpu": "h100-sxm", "tiles": 2048}) == (
        "h100-sxm whole-chip GEMM: not validated against a measured pipeline (tmasim validate public lists what is)")
    assert trust_for_row({"workload": "tiles", "gpu": "ideal", "tiles": 4}).startswith(
        "tiles of given load and compute times: exact against the closed forms")
    assert trust_for_row({"makespan_ns": 1.0}) is None  # a row that names no workload and preset


def test_the_sweep_answer_ends_with_the_knee_points_trust_once() -> None:
    rows = [{"pipeline.stages": s, "makespan_ns": t, "status": "ok", "workload": "gemm", "gpu": "b200", "tiles": 1,
             "smem_per_cta_bytes": 1024 * s, "ctas_per_sm": 1, "binding": "latency"}
            for s, t in ((2, 300.0), (3, 200.0), (4, 199.0))]
    text = answer.answer_lines(pd.DataFrame(rows))
    assert text[-1] == f"validated: {_mainloop_line()}"
    assert sum(line.startswith("validated:") for line in text) == 1


def test_a_whole_chip_b200_sweeps_answer_names_the_knees_nearest_cases() -> None:
    """A sweep's or tune's answer quotes the line the knee's run wrote: for a whole-chip B200 GEMM,
    the table's cases nearest its shape class, tile and cluster, not the whole table's error."""
    from tmasim.sweep import run_sweep

    sets = ["workload.m=2048", "workload.n=2048", "workload.k=1024", "workload.tile=[128,256,64]",
            "pipeline.cluster=[2,2]", "pipeline.mma_cta_group=2", "workload.multicast=a"]
    frame = run_sweep("gemm-b200", sets, ["pipeline.stages=3,4"], progress=False)
    knee = simulate(load("gemm-b200", [*sets, f"pipeline.stages={answer.find(frame).knee['stages']}"]))
    line = answer.answer_lines(frame)[-1]
    assert line == f"validated: {knee.validated}"
    assert "nearest cases (large shapes, 128x256 tiles, cluster (2,2))" in line


def test_without_the_committed_results_the_line_says_they_are_missing(monkeypatch, tmp_path) -> None:
    """An installed package has no validation/ folder: say so, never "not validated"."""
    from tmasim.validation import trust

    monkeypatch.setattr(trust, "BASELINE", tmp_path / "pipelines.json")
    line = trust_for_row({"workload": "gemm", "gpu": "b200", "tiles": 1})
    assert line is not None and line.startswith("the validation results are not installed")


ATTENTION = ["workload.batch=1", "workload.heads=2", "workload.kv_heads=2", "run.records=false"]


def test_each_attention_run_names_the_check_that_applies_to_it() -> None:
    """The FA3 checks measured non-causal head-dim-128 and head-dim-64 runs: a causal run (or another
    head dim) is not covered, and its line says so, naming the check nearest it; a covered run quotes
    its own check."""
    check = baseline()["fa3-d128"]
    covered = simulate(load("attention-h100", ATTENTION))
    assert covered.validated.startswith("H100 FlashAttention-3 forward at 1830 MHz (d128, non-causal, a check of "
                                        "shape): ")
    causal = simulate(load("attention-h100-causal", ATTENTION))
    assert causal.validated.startswith("H100 attention forward (causal, head dim 128): not validated")
    assert f"mean error {check['mean_error']:.0%}" in causal.validated
    assert trust_for_row(causal.stats) == causal.validated  # a sweep's row or explain: the same line
    assert f"  validated        {causal.validated}" in describe(causal.stats, causal.scenario).splitlines()
    narrow = simulate(load("attention-h100", [*ATTENTION, "workload.head_dim=64"]))
    assert narrow.validated.startswith("H100 FlashAttention-3 forward at 1830 MHz (d64, non-causal")
    assert f"mean error {baseline()['fa3-d64']['mean_error']:.0%}" in narrow.validated
    wide = simulate(load("attention-h100", [*ATTENTION, "workload.head_dim=96", "workload.tile=[128,96]"]))
    assert "(non-causal, head dim 96): not validated" in wide.validated and "(d128, non-causal" in wide.validated
    assert trust_for_row({"workload": "attention", "gpu": "h100-sxm", "tiles": 8}).startswith(
        "H100 FlashAttention-3 forward at 1830 MHz (d128, non-causal")  # an older row: the check, its scope in the line
