"""Why attention-h100 is a little slower with 3 K/V stages than with 2 (the stage sweep 1..4,
reduced to one batch of four heads: two work units per CTA).

O is staged over the start of V's ring at every stage count (FA3), so its TMA store holds up
only the next unit's first V copy. One mechanism of the model is left at a work unit's start:
*Q overtaken.* The producer issues the unit's first K, then Q, then (once O's store has read
the buffer) the V and K copies the free slots allow. They hit L2, Q comes from HBM (216 ns
more latency), so they become ready first and the TMA unit, streaming one box after another in
the order they became ready, lands them before Q. More stages, more copies ahead of Q. With Q
read at L2 latency, more stages are never slower (a third stage hides the K/V copies' row
requests through the TMA unit); with more shared memory a fourth stage fits and is slower again.
"""

from __future__ import annotations

import pytest

from tmasim.errors import ScenarioError
from tmasim.scenario import load
from tmasim.simulation import simulate

REDUCED = ["workload.batch=1", "workload.heads=4", "run.records=false"]
ROOMY = ['gpu.smem_per_sm="400 KiB"', 'gpu.smem_per_cta="400 KiB"']  # a fourth stage fits
Q_AT_L2 = ['gpu.hbm_latency="0 ns"']  # Q's copy is ready as early as the K/V copies issued after it


def _run(stages: int, *extra: str) -> dict:
    return simulate(load("attention-h100", [*REDUCED, f"pipeline.stages={stages}", *extra])).stats


def _times(stages: range, *extra: str) -> list[int]:
    return [_run(s, *extra)["makespan_ps"] for s in stages]


def test_o_is_staged_over_v_at_every_stage_count_and_four_stages_do_not_fit():
    one, two, three = (_run(s) for s in (1, 2, 3))
    assert one["makespan_ps"] > 1.7 * two["makespan_ps"]  # one stage: every round trip exposed
    assert {one["o_staged_over"], two["o_staged_over"], three["o_staged_over"]} == {"v"}
    # O adds nothing to the CTA's shared memory: two stages of K and V (64 KiB each) and Q (32 KiB)
    assert two["smem_per_cta_bytes"] - 2 * 64 * 1024 - 32 * 1024 < 1024
    assert three["makespan_ps"] > two["makespan_ps"]
    with pytest.raises(ScenarioError, match=r"pipeline\.stages: 4 needs 288\.1 KiB"):
        _run(4)


def test_with_q_at_l2_latency_more_stages_are_never_slower():
    times = _times(range(1, 5), *ROOMY, *Q_AT_L2)
    assert times == sorted(times, reverse=True) and times[0] > times[1] > times[2]


def test_q_overtaken_makes_each_further_stage_slower():
    two, three, four = _times(range(2, 5), *ROOMY)
    assert two < three < four  # 4, 6, then 8 K/V copies ready ahead of Q


def test_explain_costs_the_third_stage_without_blaming_q_s_buffer():
    from tmasim.teach import explain

    text = " ".join(explain.explain_result(simulate(load("attention-h100", [*REDUCED, "pipeline.stages=2"]))).split())
    assert "3 stages: " in text and "costs" in text and "staged in Q's buffer" not in text
