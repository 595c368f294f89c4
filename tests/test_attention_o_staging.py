"""Where attention's O waits for its TMA store, and what waits for it.

Hopper (FA3, ``hopper/flash_fwd_kernel_sm90.h``): O is staged over the start of V's ring; the
consumers first wait for each other (all done reading V), and the producer's first V copy of
the next unit waits until O's store has read the buffer, while the next unit's first K and Q
load. Blackwell (FA4): O has a buffer of its own where it fits, else it is staged over Q's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmasim.errors import ScenarioError
from tmasim.scenario import from_dict, load
from tmasim.simulation import plan_scenario, simulate

STAGES = 2
Q_SLOT = 2 * STAGES  # the copy engine's slot index for Q (K slots 0..S-1, V slots S..2S-1)


def _h100(records: bool = True, pipeline: dict[str, Any] | None = None, **workload: Any):
    raw = {"name": "att", "gpu": "h100-sxm",
           "workload": {"kind": "attention", "batch": 4, "heads": 16, "seqlen_q": 512, "head_dim": 128,
                        "tile": [128, 128], **workload},
           "pipeline": {"stages": STAGES, "consumers": 2, "consumer_mode": "pingpong", **(pipeline or {})},
           "run": {"records": records}}
    return from_dict(raw)


def _first_cta(result):
    spans, events = result.spans, result.events
    cta = spans.loc[spans["sm"] == 0, "cta"].min()
    return (spans[(spans["sm"] == 0) & (spans["cta"] == cta)], events[(events["sm"] == 0) & (events["cta"] == cta)])


def test_the_next_units_first_v_waits_for_o_s_store_its_k_and_q_do_not():
    result = simulate(_h100())
    assert result.stats["o_staged_over"] == "v"
    spans, events = _first_cta(result)
    issues = events[events["kind"] == "issue"]
    per_unit = 512 // 128  # K/V blocks a unit: unit 1 starts at step 4

    def issued(tile: int, slot: int) -> int:
        return int(issues.loc[(issues["tile"] == tile) & (issues["stage"] == slot), "time_ps"].iloc[0])

    store = int(events.loc[(events["kind"] == "store") & (events["tile"] == 0), "time_ps"].iloc[0])
    k_next, q_next, v_next = issued(per_unit, 0), issued(1, Q_SLOT), issued(per_unit, STAGES)
    assert k_next < q_next < store < v_next  # K first (FA3's order), Q once released, V after the store
    # V's slot itself was free before the store was issued: O's store is what held the copy.
    freed = events[(events["kind"] == "flip_empty") & (events["name"].str.endswith(".v.empty[0]"))]
    assert (freed["time_ps"] < store).any()
    epilogue = spans[(spans["kind"] == "epilogue") & (spans["tile"] == 0)]
    assert v_next > epilogue["end_ps"].max()


def test_every_consumer_finishes_its_last_p_v_before_o_is_written_over_v():
    spans, _ = _first_cta(simulate(_h100()))
    tensor = spans[(spans["lane"] == "tensor") & (spans["kind"] == "pv")]
    for unit in (0, 1):
        last_step = 4 * unit + 3
        read_v = tensor.loc[tensor["tile"] == last_step, "end_ps"].max()
        epilogue = spans[(spans["kind"] == "epilogue") & (spans["tile"] == unit)]
        assert len(epilogue) == 2 and (epilogue["start_ps"] >= read_v).all()


def test_without_a_producer_o_over_v_runs_and_conserves_flops():
    s = _h100(records=False, pipeline={"warp_specialized": False})
    stats = simulate(s).stats
    assert stats["o_staged_over"] == "v"
    assert stats["achieved_flops_per_s"] * stats["makespan_ps"] / 1e12 == pytest.approx(s.workload.useful_flops,
                                                                                        rel=1e-12)


def test_causal_units_that_see_no_key_stage_o_after_the_previous_store():
    # Bottom-right causal alignment: 512 queries against 128 keys, so the first three query blocks see
    # no key; their O (zeros) is written over V only once the previous unit's store has read it.
    s = _h100(causal=True, seqlen_kv=128, heads=64)
    result = simulate(s)
    stats = result.stats
    assert stats["tiles"] == 4 * 64 * 4
    # Only the last query block of each head computes: its one K/V block, masked; the useful FLOPs
    # are its 128 * 129 / 2 pairs under the diagonal (4 * d each), the achieved rate counts only them.
    assert stats["flops"] == 4 * 64 * 4 * (128 * 129 // 2) * 128
    achieved = stats["achieved_flops_per_s"] * stats["makespan_ps"] / 1e12
    assert achieved == pytest.approx(stats["flops"], rel=1e-12)
    spans, events = result.spans, result.events
    ends = spans[spans["kind"] == "epilogue"]
    sm, cta = ends.groupby(["sm", "cta"]).size().idxmax()  # the CTA that took the units without keys
    spans = spans[(spans["sm"] == sm) & (spans["cta"] == cta)]
    events = events[(events["sm"] == sm) & (events["cta"] == cta)]
    epilogues = spans[spans["kind"] == "epilogue"].groupby("tile")["start_ps"].min()
    stores = events[events["kind"] == "store"].set_index("tile")["time_ps"]
    tensor = spans[spans["lane"] == "tensor"]
    keyless = [u for u in epilogues.index[1:]
               if not ((tensor["start_ps"] > stores[u - 1]) & (tensor["start_ps"] < epilogues[u])).any()]
    assert keyless  # consecutive units without keys, in this CTA
    latency_ps = 319 / 1.83e9 * 1e12  # the preset's copy latency: no store reads its buffer sooner
    assert all(epilogues[u] - stores[u - 1] > latency_ps for u in keyless)


@pytest.mark.parametrize(("name", "where"), [("attention-b200", "q"), ("attention-h100", "v"),
                                              ("attention-h100-hdim256", "v")])
def test_each_architecture_stages_o_where_its_kernel_does(name, where):
    stats = simulate(load(name, ["workload.batch=1", "workload.heads=2", "workload.seqlen_q=1024"])).stats
    assert stats["o_staged_over"] == where


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(producer=st.booleans(), overlap=st.booleans(), pingpong=st.booleans(), causal=st.booleans(),
       seqlen_q=st.sampled_from([256, 384, 640]), seqlen_kv=st.sampled_from([None, 128, 200, 512]),
       stages=st.integers(1, 3), sms=st.integers(1, 3), store=st.booleans())
def test_any_hopper_schedule_runs_to_its_end_with_o_over_v(producer, overlap, pingpong, causal, seqlen_q, seqlen_kv,
                                                            stages, sms, store):
    """Producer or not, the overlap, ping-pong or lockstep, causal units with and without keys, one
    to three stages, several units per CTA on a small chip: every run ends (no barrier misuse, no
    deadlock) with its MMAs' FLOPs all executed, O staged over V."""
    workload: dict[str, Any] = {"kind": "attention", "batch": 1, "heads": 3, "seqlen_q": seqlen_q, "head_dim": 64,
                                "tile": [128, 64], "causal": causal, "softmax_overlap": overlap}
    if seqlen_kv is not None:
        workload["seqlen_kv"] = seqlen_kv
    gpu: dict[str, Any] = {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]}
    if not store:
        gpu["hbm_latency"] = "0 ns"  # Q as quick as the K/V copies: the unit boundaries' orders change
    raw = {"name": "att", "gpu": gpu, "workload": workload,
           "pipeline": {"stages": stages, "consumers": 2, "consumer_mode": "pingpong" if pingpong else "cooperative",
                        "warp_specialized": producer},
           "run": {"records": False}}
    if not producer and overlap and stages == 1:  # refused: see the test below
        with pytest.raises(ScenarioError, match=r"pipeline\.stages: 1 must be at least 2"):
            from_dict(raw).validate()
        return
    s = from_dict(raw)
    plan, _ = plan_scenario(s)
    stats = simulate(s).stats
    assert stats["o_staged_over"] == "v"
    executed = stats["tensor_core_flops"]
    assert stats["achieved_flops_per_s"] * stats["makespan_ps"] / 1e12 == pytest.approx(stats["flops"], rel=1e-9)
    per_process = sum(program.block(step).qk.flops + program.block(step).pv.flops
                      for program in plan.programs for step in range(program.steps))
    assert executed == pytest.approx(per_process * plan.info["processes"], rel=1e-9)


def test_one_stage_with_the_overlap_and_no_producer_is_refused_in_one_line():
    """The consumer that issues the copies would wait for V_j's only slot, which its own P·V_{j-1}
    holds until S_j (on K_j, loaded with V_j) is done: a deadlock, refused before the run."""
    from tmasim.cli import main

    with pytest.raises(ScenarioError, match=r"pipeline\.stages: 1 must be at least 2 with workload\.softmax_overlap"):
        load("attention-h100", ["pipeline.warp_specialized=false", "pipeline.stages=1"]).validate()
    assert main(["run", "attention-h100", "--set", "pipeline.warp_specialized=false", "--set",
                 "pipeline.stages=1"]) == 2
    # with two stages, or the overlap off, or a producer, it runs
    for sets in (["pipeline.stages=2"], ["workload.softmax_overlap=false"], ["pipeline.warp_specialized=true"]):
        s = load("attention-h100", ["pipeline.warp_specialized=false", "pipeline.stages=1", "workload.batch=1",
                                    "workload.heads=1", "workload.seqlen_q=512", *sets])
        assert simulate(s).stats["makespan_ps"] > 0
