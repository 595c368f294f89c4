"""Fast-forward of periodic steady states (tmasim/engine/fast_forward/jump.py): exact, or off.

Every comparison is bit for bit: the fast-forwarded run's summary equals the full run's
(``run.fast_forward = false``) in every figure but the ones that say how it was run.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tmasim_helpers import US, costly_gpu, ps

from tmasim import analytic
from tmasim.engine.fast_forward import exact_sum
from tmasim.engine.fast_forward import jump as fast_forward
from tmasim.errors import ModelError, ScenarioError
from tmasim.scenario import bundled_names, from_dict, load
from tmasim.simulation import lower_bound_ns, quick_lower_bound_ns, simulate

HOW_RUN = ("fast_forward", "fast_forward_skipped_steps")


def both(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fast-forwarded, full) summaries of one scenario, which must agree exactly."""
    runs = []
    for skip in (True, False):
        scenario = from_dict({**raw, "run": {**raw.get("run", {}), "records": False, "fast_forward": skip}})
        runs.append(simulate(scenario).stats)
    fast, full = runs
    assert {k: v for k, v in fast.items() if k not in HOW_RUN} == {k: v for k, v in full.items() if k not in HOW_RUN}
    assert full["fast_forward"] == "off: run.fast_forward = false" and full["fast_forward_skipped_steps"] == 0
    return fast, full


def tiles(n: int, load: int, compute: int, stages: int, **extra: Any) -> dict[str, Any]:
    gpu = extra.pop("gpu", "ideal")
    pipeline = {"stages": stages, **extra.pop("pipeline", {})}
    return {"name": "ff", "gpu": gpu, "workload": {"kind": "tiles", "tiles": n, "load": ps(load),
                                                   "compute": ps(compute), **extra}, "pipeline": pipeline}


def test_the_anchor_formula_holds_to_the_picosecond_with_most_steps_skipped():
    n, load, compute = 1000, 3 * US, 5 * US
    fast, _ = both(tiles(n, load, compute, 2))
    assert fast["makespan_ps"] == analytic.anchor_time(n, load, compute, 2) == 5_003_000_000
    assert fast["fast_forward_skipped_steps"] > 0.9 * n
    serial, _ = both(tiles(n, load, compute, 1))
    assert serial["makespan_ps"] == n * (load + compute)


def test_the_gemm_skips_most_of_its_k_loops_and_agrees_in_every_figure():
    fast, full = both(dict(load("gemm-h100").raw))
    assert fast["makespan_ps"] == full["makespan_ps"] == 1490222122
    # two classes of SMs (16 and 15 output tiles of 128 k-steps), one representative each
    assert fast["simulated_steps"] == full["simulated_steps"] == (16 + 15) * 128
    # the state description must keep up with the engine: a GEMM's k-loops repeat
    assert fast["fast_forward_skipped_steps"] > 0.8 * fast["simulated_steps"]
    assert fast["fast_forward"].startswith("on: ")


@pytest.mark.parametrize("name", bundled_names())
def test_every_bundled_scenario_agrees_with_its_full_run(name):
    scenario = load(name)
    raw = dict(scenario.raw)
    if scenario.workload.kind == "gemm" and scenario.pipeline.cluster != (1, 1):  # a smaller GEMM: CI time
        raw = {**raw, "workload": {**raw["workload"], "m": 2048, "n": 2048, "k": 1024}}
    if scenario.workload.kind == "attention":  # fewer heads, same sequence: the causal grid's 120 classes take minutes
        raw = {**raw, "workload": {**raw["workload"], "batch": 1, "heads": 2, "kv_heads": 2}}
    try:
        fast, _ = both(raw)
    except ModelError as err:  # the bug scenarios deadlock on purpose: the same error either way
        with pytest.raises(type(err)) as again:
            simulate(from_dict({**raw, "run": {**raw.get("run", {}), "records": False, "fast_forward": False}}))
        assert str(again.value) == str(err)
        return
    # the bounds a search prunes with (sweep --search, tune) are true lower bounds of the run
    planned = from_dict({**raw, "run": {**raw.get("run", {}), "records": False}})
    for bound in (lower_bound_ns(planned), quick_lower_bound_ns(planned)):  # None: a workload without one
        assert bound is None or bound * 1000 <= fast["makespan_ps"] + 1, (name, bound, fast["makespan_ps"])


def test_the_cuts_float_sums_stay_exact_when_they_fold_at_every_new_value(monkeypatch):
    """The float counters' parts (one per cut, fractional where L2 serves part of a copy) are kept
    by count and folded into one integer past ``DISTINCT`` values: folding at every new value,
    skipping or not, changes no bit of any counter."""
    finals: list[list[float]] = []
    finish = fast_forward.FastForward.finish

    def keep(ff: fast_forward.FastForward) -> None:
        finish(ff)
        finals.append([getattr(owner, attr) for owner, attr, _ in ff.floats])

    monkeypatch.setattr(fast_forward.FastForward, "finish", keep)
    raw = dict(load("gemm-ideal").raw)
    kept, _ = both(raw)
    monkeypatch.setattr(exact_sum, "DISTINCT", 0)
    monkeypatch.setattr(fast_forward, "DISTINCT", 0)
    folded, _ = both(raw)
    assert folded == kept and kept["fast_forward_skipped_steps"] > 0
    assert finals[0] == finals[1] == finals[2] == finals[3]
    assert any(not value.is_integer() for value in finals[0])  # some parts were fractional


def test_clusters_with_multicast_skip_too():
    raw = dict(load("gemm-h100-cluster").raw)
    fast, _ = both({**raw, "workload": {**raw["workload"], "m": 4096, "n": 4096, "k": 8192}})
    assert fast["fast_forward_skipped_steps"] > 0.4 * fast["simulated_steps"]  # 128 k-steps a tile: most repeat


def test_two_sm_mma_pairs_skip_too():
    raw = dict(load("gemm-b200-2sm").raw)  # the writes' overlap off: with it pairs skip little (docs/model.md)
    fast, full = both({**raw, "gpu": {"preset": "b200", "pair_writes_overlap": False}})
    assert fast["fast_forward"].startswith("on: ")
    # 1024 tiles of 256 x 256 on 74 pairs: two classes of pairs (14 and 13 tiles of 128 k-steps)
    assert full["simulated_steps"] == (14 + 13) * 128 * 2
    assert fast["fast_forward_skipped_steps"] > 0.8 * fast["simulated_steps"]


def test_jitter_runs_in_full_and_says_why():
    raw = dict(load("jitter").raw)
    fast, _ = both({**raw, "workload": {**raw["workload"], "tiles": 300}})
    assert fast["fast_forward_skipped_steps"] == 0
    assert fast["fast_forward"] == "off: per-tile times vary (jitter, or a list of times): no period repeats"


def test_records_are_regenerated_for_the_skipped_periods():
    scenario = from_dict({**tiles(200, 3 * US, 5 * US, 2), "run": {"records": True}})
    result = simulate(scenario)
    assert result.stats["fast_forward"].endswith("their records regenerated by shifting a simulated period's")
    assert result.stats["fast_forward_skipped_steps"] > 150
    assert len(result.spans[result.spans["kind"] == "compute"]) == 200  # tests/test_record_shift.py: row for row


def test_drift_turns_the_skip_off():
    raw = dict(load("gemm-h100").raw)
    scenario = from_dict({**raw, "workload": {**raw["workload"], "m": 1024, "n": 1024, "k": 1024},
                          "run": {"records": False, "drift": {"start": "200 ns"}}})
    assert simulate(scenario).stats["fast_forward"] == "off: SM drift makes durations random"


def test_a_mistyped_switch_is_an_error_naming_the_field():
    with pytest.raises(ScenarioError, match=r"run\.fast_forward"):
        from_dict({**tiles(4, US, US, 2), "run": {"fast_forward": "yes"}})


# --- properties: random pipelines, fast-forward against the full run --------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 120), stages=st.integers(1, 5), load=st.integers(1, 9), compute=st.integers(1, 9),
       latency=st.integers(0, 30), issue=st.integers(0, 3), wake=st.integers(0, 3),
       consumers=st.integers(1, 3), pingpong=st.booleans())
def test_random_tile_pipelines_agree_exactly(n, stages, load, compute, latency, issue, wake, consumers, pingpong):
    mode = "pingpong" if pingpong else "cooperative"
    raw = tiles(n, load * 1_000_003, compute * 999_983, stages, latency=ps(latency * 250_007),
                gpu=costly_gpu(issue * 10_007, wake * 20_011),
                pipeline={"consumers": consumers, "consumer_mode": mode})
    both(raw)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 6), n=st.integers(1, 6), k=st.integers(1, 64), ragged=st.booleans(),
       tile=st.sampled_from([(64, 64, 64), (128, 64, 32), (64, 128, 64), (128, 128, 64)]),
       stages=st.integers(1, 4), consumers=st.integers(1, 2), pingpong=st.booleans(),
       sms=st.integers(2, 12), persistent=st.booleans(), aggregate=st.booleans(),
       cluster=st.sampled_from([(1, 1), (1, 1), (2, 1), (1, 2)]))
def test_random_gemms_on_small_chips_agree_exactly(m, n, k, ragged, tile, stages, consumers, pingpong, sms,
                                                     persistent, aggregate, cluster):
    """Several SM classes share L2 and HBM; ragged tiles give edge units and ragged last waves;
    clusters multicast and arrive on each other's barriers."""
    bm, bn, bk = tile
    extra = 40 if ragged else 0
    # a cluster that does not divide the grid of output tiles launches CTAs past its edge
    raw = {"name": "ff", "gpu": {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]},
           "workload": {"kind": "gemm", "m": m * bm + extra, "n": n * bn + extra, "k": k * bk, "dtype": "bf16",
                        "tile": list(tile), "launch": "persistent" if persistent else "grid"},
           "pipeline": {"stages": stages, "consumers": consumers,
                        "consumer_mode": "pingpong" if pingpong else "cooperative", "cluster": list(cluster)},
           "run": {"aggregate": aggregate}}
    try:
        from_dict(raw)
    except ScenarioError:
        return  # a shape the GPU refuses (e.g. too many stages for shared memory)
    both(raw)


def test_a_stream_skips_across_its_units():
    raw = dict(load("stream-h100").raw)
    fast, _ = both(raw)
    assert fast["fast_forward_skipped_steps"] > 0
