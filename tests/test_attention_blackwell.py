"""Attention's Blackwell form (FlashAttention-4): the correction warpgroup on vector units
shared by processor sharing."""

from __future__ import annotations

import pytest

from tmasim import scenario as scenarios
from tmasim.simulation import plan_scenario, simulate

SMALL = ["workload.batch=1", "workload.heads=2", "workload.seqlen_q=2048"]


def _b200(*changes: str):
    return scenarios.load("attention-b200", [*SMALL, *changes])


@pytest.mark.parametrize("overlap", [True, False])
def test_the_correction_warpgroup_changes_nothing_when_the_exponentials_end_each_softmax(overlap):
    """The rescale's FP32 multiplies share the FP32 pipe beside the softmax's exponentials,
    which take longer (1,032 cycles against 576 of FP32 work with the rescale), so whether the
    softmax warpgroup rescales O itself or a correction warpgroup does, each softmax ends when
    its exponentials do: the same run, to the picosecond."""
    block = plan_scenario(_b200(f"workload.softmax_overlap={str(overlap).lower()}"))[0].programs[0].block(0)
    assert block.softmax.exp > block.softmax.fp32 + block.correction.fp32
    off = simulate(_b200(f"workload.softmax_overlap={str(overlap).lower()}")).stats
    on = simulate(_b200(f"workload.softmax_overlap={str(overlap).lower()}", "workload.correction_warpgroup=true")).stats
    assert on["makespan_ps"] == off["makespan_ps"]

