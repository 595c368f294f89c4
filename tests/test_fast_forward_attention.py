"""Fast-forward and attention: FA3/FA4 forwards skip the repeated middle of their K/V loops
(engine/fast_forward/attention.py) and agree with the full run in every figure, bit for bit:
plain and causal (the load-balanced launch's many SM classes), Hopper's and Blackwell's
schedules, 2-SM pairs, on small chips and on the bundled scenarios; with records, the spans and
events tables are the full run's, row for row."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both
from test_record_shift import both as records_both
from test_record_shift import skipped as records_skipped

from tmasim.errors import ScenarioError
from tmasim.scenario import from_dict, load
from tmasim.simulation import plan_scenario


def small(name: str, sms: int, **workload: Any) -> dict[str, Any]:
    raw = dict(load(name).raw)
    gpu = raw["gpu"] if isinstance(raw["gpu"], dict) else {"preset": raw["gpu"]}
    return {**raw, "gpu": {**gpu, "sms": sms, "gpc_sms": [sms]}, "workload": {**raw["workload"], **workload}}


# (scenario, SMs, workload, the least share of the K/V blocks skipped)
CASES = [
    ("attention-h100-causal", 6, {"batch": 1, "heads": 2, "seqlen_q": 1024}, 0.0),  # units of 1-8 blocks
    ("attention-h100-causal", 5, {"batch": 1, "heads": 3, "seqlen_q": 1536}, 0.0),
    ("attention-h100-causal", 6, {"batch": 1, "heads": 2, "seqlen_q": 8192}, 0.3),
    ("attention-h100", 4, {"batch": 1, "heads": 2, "seqlen_q": 1024}, 0.0),
    ("attention-h100", 4, {"batch": 1, "heads": 2, "seqlen_q": 4096}, 0.6),
    ("attention-h100-hdim256", 3, {"batch": 1, "heads": 2, "seqlen_q": 4096}, 0.6),
    ("attention-b200", 4, {"batch": 1, "heads": 2, "seqlen_q": 1024}, 0.0),
    ("attention-b200", 4, {"batch": 1, "heads": 2, "seqlen_q": 4096}, 0.6),
    ("attention-b200", 3, {"batch": 1, "heads": 3, "seqlen_q": 8192, "causal": True}, 0.3),
    # grid launches: the waves' CTAs adopted as they start, the exited ones leaving the state
    ("attention-h100", 3, {"batch": 1, "heads": 2, "seqlen_q": 4096, "launch": "grid"}, 0.3),
    ("attention-h100-causal", 3, {"batch": 1, "heads": 2, "seqlen_q": 4096, "launch": "grid"}, 0.1),
    ("attention-b200-2sm", 4, {"batch": 1, "heads": 3, "seqlen_q": 4352, "launch": "grid"}, 0.3),
]


@pytest.mark.parametrize(("name", "sms", "workload", "skipped"), CASES)
def test_attention_agrees_exactly_with_the_skip_off(name, sms, workload, skipped):
    fast, full = both(small(name, sms, **workload))
    assert fast["simulated_steps"] == full["simulated_steps"] > 0
    assert fast["fast_forward_skipped_steps"] >= skipped * full["simulated_steps"]
    assert fast["fast_forward"].startswith("on")


def test_the_causal_launch_runs_several_sm_classes_on_a_small_chip():
    fast, _ = both(small("attention-h100-causal", 6, batch=1, heads=2, seqlen_q=1024))
    assert fast["sm_classes"] > 1


@pytest.mark.parametrize(("sms", "workload"), [
    (4, {"batch": 1, "heads": 2, "seqlen_q": 1024}),
    (6, {"batch": 1, "heads": 3, "seqlen_q": 1536}),  # the last pair of each head: an idle follower
    (4, {"batch": 1, "heads": 2, "seqlen_q": 4096}),
    (4, {"batch": 1, "heads": 2, "seqlen_q": 4096, "softmax_overlap": False}),
    (6, {"batch": 1, "heads": 3, "seqlen_q": 4352, "correction_warpgroup": True}),
])
def test_2sm_pairs_skip_and_agree_exactly(sms, workload):
    """A pair's remote arrivals and joint softmax completions are objects the state reads
    (engine/attention/pair.py), its follower's unused full barriers kept as they are."""
    fast, full = both(small("attention-b200-2sm", sms, **workload))
    if workload["seqlen_q"] >= 4096:
        assert fast["fast_forward_skipped_steps"] > 0.6 * full["simulated_steps"]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(overlap=st.booleans(), correction=st.booleans(), pingpong=st.booleans(), stages=st.integers(2, 3),
       seqlen=st.sampled_from([1024, 2304, 4352]), sms=st.sampled_from([2, 4, 6]),
       latency=st.sampled_from(["0 ns", "59 ns"]))
def test_any_2sm_pair_schedule_agrees_exactly_with_the_skip_off(overlap, correction, pingpong, stages, seqlen, sms,
                                                                latency):
    raw = small("attention-b200-2sm", sms, batch=1, heads=2, seqlen_q=seqlen, softmax_overlap=overlap,
                correction_warpgroup=correction)
    raw["gpu"] = {**raw["gpu"], "cluster_arrive_latency": latency}
    raw["pipeline"] = {**raw["pipeline"], "stages": stages, "consumer_mode": "pingpong" if pingpong else "cooperative"}
    try:
        plan_scenario(from_dict(raw))
    except ScenarioError:
        return
    both(raw)


@pytest.mark.parametrize(("name", "sms", "workload"), [
    ("attention-h100", 2, {"batch": 1, "heads": 2, "seqlen_q": 4096}),
    ("attention-h100-causal", 3, {"batch": 1, "heads": 2, "seqlen_q": 4096}),
    ("attention-b200", 2, {"batch": 1, "heads": 2, "seqlen_q": 4096, "correction_warpgroup": True}),
    ("attention-b200-2sm", 4, {"batch": 1, "heads": 2, "seqlen_q": 4352}),
])
def test_with_records_the_tables_are_the_full_runs(name, sms, workload):
    """The skipped blocks' spans and events regenerated by shifting (a Q wait's tile, -1, and Q's
    copy, slot 2S with its unit for a tile, stay where they are): the tables row for row."""
    fast, _ = records_both(small(name, sms, **workload))
    assert records_skipped(fast) > 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(producer=st.booleans(), overlap=st.booleans(), pingpong=st.booleans(), causal=st.booleans(),
       stages=st.integers(1, 3), consumers=st.sampled_from([1, 2, 3]), sms=st.integers(1, 3))
def test_with_records_any_hopper_schedule_keeps_the_full_runs_tables(producer, overlap, pingpong, causal, stages,
                                                                     consumers, sms):
    raw = {"name": "att", "gpu": {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]},
           "workload": {"kind": "attention", "batch": 1, "heads": 2, "seqlen_q": 1024, "seqlen_kv": 1536,
                        "head_dim": 64, "tile": [64 * consumers, 64], "causal": causal, "softmax_overlap": overlap},
           "pipeline": {"stages": stages, "consumers": consumers,
                        "consumer_mode": "pingpong" if pingpong else "cooperative", "warp_specialized": producer}}
    try:
        from_dict(raw).validate()
    except ScenarioError:
        return
    records_both(raw)


def test_the_bundled_fa3_forward_skips_nine_tenths_of_its_blocks():
    fast, full = both(dict(load("attention-h100").raw))
    assert fast["makespan_ps"] == full["makespan_ps"] == 2454867414
    assert fast["fast_forward_skipped_steps"] > 0.85 * full["simulated_steps"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(producer=st.booleans(), overlap=st.booleans(), pingpong=st.booleans(), causal=st.booleans(),
       seqlen_q=st.sampled_from([256, 640]), seqlen_kv=st.sampled_from([None, 1024, 1200, 2048]),
       stages=st.integers(1, 3), sms=st.integers(1, 3), consumers=st.sampled_from([1, 2, 3]),
       quick_q=st.booleans())
def test_any_hopper_schedule_agrees_exactly_with_the_skip_off(producer, overlap, pingpong, causal, seqlen_q,
                                                               seqlen_kv, stages, sms, consumers, quick_q):
    """Producer warpgroup or not, the in-warpgroup overlap, ping-pong or lockstep, one to three
    consumer warpgroups, causal units (runs of full blocks, then masked ones; units without keys),
    one to three stages, several units per CTA: the same figures with the skip on and off."""
    workload: dict[str, Any] = {"kind": "attention", "batch": 1, "heads": 2, "seqlen_q": seqlen_q, "head_dim": 64,
                                "tile": [64 * consumers, 64], "causal": causal, "softmax_overlap": overlap}
    if seqlen_kv is not None:
        workload["seqlen_kv"] = seqlen_kv
    gpu: dict[str, Any] = {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]}
    if quick_q:
        gpu["hbm_latency"] = "0 ns"  # Q as quick as the K/V copies: the unit boundaries' orders change
    raw = {"name": "att", "gpu": gpu, "workload": workload,
           "pipeline": {"stages": stages, "consumers": consumers,
                        "consumer_mode": "pingpong" if pingpong else "cooperative", "warp_specialized": producer}}
    try:
        from_dict(raw).validate()
    except ScenarioError:
        return  # a schedule the workload refuses (one stage with the overlap and no producer, ...)
    both(raw)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(overlap=st.booleans(), correction=st.booleans(), causal=st.booleans(), stages=st.integers(2, 3),
       seqlen=st.sampled_from([1024, 1536, 2048]), sms=st.integers(1, 3))
def test_any_blackwell_schedule_agrees_exactly_with_the_skip_off(overlap, correction, causal, stages, seqlen, sms):
    """FA4's order (P·V before S), O in its own buffer or over Q, the correction warpgroup or not."""
    raw = small("attention-b200", sms, batch=1, heads=2, seqlen_q=seqlen, causal=causal, softmax_overlap=overlap,
                correction_warpgroup=correction)
    raw["pipeline"] = {**raw["pipeline"], "stages": stages}
    try:
        plan_scenario(from_dict(raw))
    except ScenarioError:
        return  # (3 stages do not fit beside O's own buffer, ...)
    both(raw)
