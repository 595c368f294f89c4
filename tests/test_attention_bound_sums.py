"""Attention's bounds are worked out once per kind of unit (units share their Q copy, runs and
epilogue; :func:`tmasim.workloads.attention_bounds.breakdown`): the sums must be those of every
unit on its own, and the slot round trips those of walking each K/V step onto its ring slot."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from tmasim.engine.attention.program import AttentionProgram
from tmasim.scenario import load
from tmasim.workloads import attention
from tmasim.workloads.attention_bounds import breakdown, round_trip

SMALL = ["workload.batch=1", "workload.heads=16", "workload.seqlen_q=2000", "run.records=false"]
CASES = [
    ("attention-h100-causal", ["pipeline.stages=3"]),  # unit lengths 1..16 blocks: most not a multiple of 3
    ("attention-h100-causal", ["pipeline.stages=2", "workload.softmax_overlap=false"]),
    ("attention-h100-causal", ["pipeline.consumer_mode=cooperative", "workload.tile=[128,64]"]),
    ("attention-h100-causal", ["workload.seqlen_kv=3001"]),  # a short last K/V block
    ("attention-h100", ["workload.launch=grid"]),
    ("attention-b200", ["workload.causal=true", "workload.correction_warpgroup=true"]),
    ("attention-b200-2sm", []),
]


def _plan(name: str, sets: list[str]):  # noqa: ANN202 (a Plan and its scenario)
    scenario = load(name, [*SMALL, *sets])
    plan, _ = attention.plan(scenario.workload, scenario)
    return scenario, plan


@pytest.mark.parametrize(("name", "sets"), CASES, ids=[f"{n} {' '.join(s)}" for n, s in CASES])
def test_shared_units_sum_as_units_of_their_own(name, sets):
    scenario, plan = _plan(name, sets)
    units = [u for p in plan.programs for u in p.units]
    if scenario.pipeline.mma_cta_group == 1:  # (a 2-SM pair's plan builds each unit's own)
        assert len({id(u.runs) for u in units}) < len(units)  # they do share
    alone = dataclasses.replace(plan, programs=[AttentionProgram([copy.deepcopy(u) for u in p.units], p.schedule)
                                                for p in plan.programs])
    stages = scenario.pipeline.stages
    assert breakdown(scenario.workload, scenario.gpu, plan, stages) == \
        breakdown(scenario.workload, scenario.gpu, alone, stages)


@pytest.mark.parametrize(("name", "sets"), CASES[:4], ids=[f"{n} {' '.join(s)}" for n, s in CASES[:4]])
def test_the_latency_bound_is_the_busiest_slot_walked_step_by_step(name, sets):
    scenario, plan = _plan(name, sets)
    gpu, stages = scenario.gpu, scenario.pipeline.stages
    latency = 0.0
    for program in plan.programs:
        procs, trips, step = program.schedule.consumers, [0.0] * stages, 0
        for unit in program.units:
            for block, count in unit.runs:
                for _ in range(count):
                    trips[step % stages] += round_trip(gpu, block, procs)
                    step += 1
        if step:
            latency = max(latency, max(trips) - gpu.barrier_wake)
    found = breakdown(scenario.workload, gpu, plan, stages)["latency_bound_ns"]
    assert found * 1000 == pytest.approx(latency, rel=1e-12)
