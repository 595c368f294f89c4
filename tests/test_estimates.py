"""Estimates that hold: the counts an estimate is made of (ring steps simulated and skipped,
records, the bytes of each) against what a small run then does, and the mechanisms the
constants stand for. No timing is asserted (machines are noisy): the seconds-per-step figures
are fitted by ``benchmarks/bench_estimates.py``, whose grid prints estimate against measured."""

from __future__ import annotations

import pytest

from tmasim import budget
from tmasim.cli import main
from tmasim.scenario import load
from tmasim.simulation import estimate, plan_scenario, simulate
from tmasim.workloads import attention, attention_pair, attention_plan

DRIFT = 'run.drift={start="200 ns", latency_cv=0.05}'


@pytest.mark.parametrize("sets", [["workload.seqlen_q=1000000"], ["workload.seqlen_kv=16777216"],
                                  ["workload.seqlen_q=1000000", "workload.launch=grid"]])
def test_a_huge_attention_problem_is_refused_in_one_line_before_planning(capsys, monkeypatch, sets):
    for module, name in ((attention_plan, "plan"), (attention_plan, "unit_order"), (attention_pair, "plan_pair")):
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("the plan was built"))
    args = ["run", "attention-h100"]
    for value in sets:
        args += ["--set", value]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("tmasim: error: run: about ") and "estimated before planning" in err
    assert "over the limit of 5.0 min or 4 GiB" in err and "MemoryError" not in err


@pytest.mark.parametrize(("name", "sets"), [
    ("attention-h100", ["workload.batch=1", "workload.seqlen_q=1000"]),
    ("attention-h100", ["workload.batch=1", "workload.seqlen_q=1000", "workload.launch=grid"]),
    ("attention-h100-causal", ["workload.batch=1", "workload.seqlen_q=1000", "workload.seqlen_kv=1500"]),
    ("attention-h100-causal", ["workload.batch=1", "workload.seqlen_q=1500", "workload.seqlen_kv=1000"]),
    ("attention-b200-2sm", ["workload.batch=1", "workload.seqlen_q=1000"]),
])
def test_attention_is_counted_from_the_problem_exactly_as_the_plan_then_holds_it(name, sets):
    scenario = load(name, sets)
    steps, units, _ = attention.plan_size(scenario.workload, scenario)
    plan, _ = plan_scenario(scenario)
    assert (steps, units) == (sum(p.steps for p in plan.programs), plan.units)


def test_long_spans_are_estimated_at_the_side_tables_record_size():
    sets = ["workload.tiles=2000", "run.records=true", "run.fast_forward=false"]
    short = estimate(load("reference", sets))
    long = estimate(load("reference", [*sets, 'workload.load="3 ms"', 'workload.compute="5 ms"']))
    assert long.records == short.records
    assert long.memory - short.memory == long.records * budget.WIDE_RECORD_BYTES
    assert budget.WIDE_RECORD_BYTES + budget.RECORD_BYTES["timed"] == 120  # 32 in the buffer, 88 whole
    # and the records of such a run are indeed kept whole (the side table holds them)
    run = simulate(load("reference", [*sets, 'workload.load="3 ms"', 'workload.compute="5 ms"']))
    assert run.recorder is not None and len(run.recorder._whole_at) >= run.recorder.count // 3


@pytest.mark.parametrize(("name", "sets"), [
    ("gemm-h100", ["workload.m=4096", "workload.n=4096", "run.aggregate=false"]),
    ("gemm-h100-cluster", ["workload.m=4096", "workload.n=4096", "workload.k=4096", "run.aggregate=false"]),
    ("gemm-b200-2sm", ["gpu.pair_writes_overlap=false"]),  # with it pairs skip little: a known gap
])
def test_the_steps_a_flow_run_simulates_are_forecast_within_2x(name, sets):
    """GEMM runs count the skip the plan forecasts (every SM, a cluster, 2-SM pairs): their steps
    simulated are estimated within 2x of the run's, high rather than low. (Runs of a few hundred
    steps, where the transients are most of it, are off by more, at no cost that shows.)"""
    scenario = load(name, [*sets, "run.records=false"])
    predicted = estimate(scenario)
    stats = simulate(scenario).stats
    ran = stats["simulated_steps"] - stats["fast_forward_skipped_steps"]
    assert predicted.skipped > 0 and predicted.steps == stats["simulated_steps"]
    assert ran <= predicted.steps - predicted.skipped <= 2 * ran


@pytest.mark.parametrize(("name", "sets"), [
    ("reference", ["workload.tiles=3000", "run.fast_forward=false"]),
    ("jitter", ["workload.tiles=3000"]),
    ("gemm-h100", ["workload.m=2048", "workload.n=2048", "workload.k=1024"]),
    ("attention-h100", ["workload.batch=1", "workload.heads=2", "workload.seqlen_q=1024"]),
])
def test_the_records_a_run_keeps_are_estimated_within_2x(name, sets):
    scenario = load(name, [*sets, "run.records=true"])
    predicted = estimate(scenario)
    kept = simulate(scenario).recorder
    assert kept is not None
    assert kept.count <= predicted.records <= 2 * kept.count


def test_drift_in_clusters_costs_more_per_step_than_drift_alone_and_both_more_than_lockstep():
    """With drift every SM is its own flow; in a cluster the multicast ties the peers' flows, and
    each step costs ten times more (the grid: 870-1010 us a step against 73-85 us)."""
    sets = ["workload.m=2048", "workload.n=2048", "workload.k=2048", "run.records=false"]
    plain = estimate(load("gemm-h100", [*sets, "run.aggregate=false", "run.fast_forward=false"]))
    drift = estimate(load("gemm-h100", [*sets, DRIFT]))
    cluster = estimate(load("gemm-h100-cluster", [*sets, DRIFT]))
    assert plain.steps == drift.steps == cluster.steps == 4096
    assert plain.seconds < drift.seconds < cluster.seconds / 5


def test_the_whole_process_is_counted_the_interpreter_included():
    tiny = estimate(load("reference", []))
    assert budget.INTERPRETER_BYTES <= tiny.memory < budget.INTERPRETER_BYTES + 2**20


@pytest.mark.parametrize(("name", "sets", "fragment"), [
    ("reference", ["workload.tiles=80000000", "run.records=false", "run.fast_forward=false"],
     "80,000,000 ring steps simulated"),
    ("gemm-h100-cluster", ["workload.k=16384", DRIFT], "524,288 ring steps simulated"),
    ("gemm-h100", ["workload.m=65536", "workload.n=65536", "workload.k=65536", "run.aggregate=false"],
     "134,217,728 ring steps"),
])
def test_runs_well_over_the_line_are_estimated_over_it(name, sets, fragment):
    predicted = estimate(load(name, sets))
    assert predicted.too_large and fragment in predicted.text()
