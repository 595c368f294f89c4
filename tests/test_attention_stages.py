"""Why attention-h100 is slower with 3 K/V stages than with 2 (the stage sweep 1..4, reduced to
one batch of four heads: two work units per CTA).

Two mechanisms of the model, both at a work unit's start, and nothing else:
1. *O staged in Q's buffer.* Three stages of K and V (3 x 64 KiB) and Q (32 KiB) leave no room
   for O's own 32 KiB staging buffer under the 227 KiB a CTA may use, so O is staged in Q's
   buffer and the next unit's Q load waits until O's TMA store has read it.
2. *Q overtaken.* By then every K and V slot is free, and the producer issues up to 2·S K/V
   copies right after Q. They hit L2, Q comes from HBM (216 ns more latency), so they become
   ready first and the TMA unit, streaming one box after another in the order they became
   ready, lands all of them before Q. More stages, more copies ahead of Q.
With O given its own buffer (more shared memory) and Q read at L2 latency, more stages are
never slower (a third stage hides the K/V copies' row requests through the TMA unit); with
the producer loading in the consumers' order (K_j before V_{j-1}, FA3's IntraWGOverlap), either
mechanism alone already makes the third stage slower, and with O in its own buffer a fourth
stage is slower again, Q now overtaken by eight copies.
"""

from __future__ import annotations

import pytest

from tmasim.errors import ScenarioError
from tmasim.scenario import load
from tmasim.simulation import simulate

REDUCED = ["workload.batch=1", "workload.heads=4", "run.records=false"]
ROOMY = ['gpu.smem_per_sm="400 KiB"', 'gpu.smem_per_cta="400 KiB"']  # O gets its own buffer at any stage count
Q_AT_L2 = ['gpu.hbm_latency="0 ns"']  # Q's copy is ready as early as the K/V copies issued after it


def _run(stages: int, *extra: str) -> dict:
    return simulate(load("attention-h100", [*REDUCED, f"pipeline.stages={stages}", *extra])).stats


def _times(stages: range, *extra: str) -> list[int]:
    return [_run(s, *extra)["makespan_ps"] for s in stages]


def test_three_stages_stage_o_in_q_and_are_slower_four_do_not_fit():
    one, two, three = (_run(s) for s in (1, 2, 3))
    assert one["makespan_ps"] > 1.7 * two["makespan_ps"]  # one stage: every round trip exposed
    assert (one["o_in_q"], two["o_in_q"], three["o_in_q"]) == (False, False, True)
    assert three["makespan_ps"] > two["makespan_ps"]
    with pytest.raises(ScenarioError, match=r"pipeline\.stages: 4 needs 288\.1 KiB"):
        _run(4)


def test_without_both_mechanisms_more_stages_are_never_slower():
    times = _times(range(1, 5), *ROOMY, *Q_AT_L2)
    assert times == sorted(times, reverse=True) and len(set(times)) == 4


def test_q_overtaken_alone_makes_a_fourth_stage_slower():
    three, four = _times(range(3, 5), *ROOMY)
    assert three < four  # with O in its own buffer, 8 K/V copies land ahead of Q instead of 6


def test_either_mechanism_alone_makes_a_third_stage_slower():
    two, three = _times(range(2, 4))
    roomy_two, roomy_three = _times(range(2, 4), *ROOMY)
    fast_two, fast_three = _times(range(2, 4), *Q_AT_L2)
    both_two, both_three = _times(range(2, 4), *ROOMY, *Q_AT_L2)
    assert three > two and roomy_three > roomy_two and fast_three > fast_two
    assert both_three < both_two  # neither mechanism: the third stage helps


def test_explain_says_why_one_more_stage_is_slower():
    from tmasim.teach import explain

    text = " ".join(explain.explain_result(simulate(load("attention-h100", [*REDUCED, "pipeline.stages=2"]))).split())
    assert "3 stages: " in text and "O no longer fits beside the slots and is staged in Q's buffer" in text
    text = " ".join(explain.explain_result(simulate(load("attention-h100", [*REDUCED, *ROOMY]))).split())
    assert "3 stages: " in text and "staged in Q's buffer" not in text
