"""The consumer chain bound: one consumer warpgroup runs its MMAs and its tiles' epilogues one after
another, so where each epilogue outlasts the next tile's MMAs, the chain binds and a search may
prune with it (tmasim.workloads.gemm_bounds.consumer_chain)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim import scenario as scenarios
from tmasim.output.summary import describe
from tmasim.simulation import lower_bound_ns, quick_lower_bound_ns, simulate

# 256 tiles of 256 x 256 over 74 pairs: four tiles (work units) for the busiest pair, three
# k-steps each; at the whole-chip table's clock (tmasim validate public), where C's drain from
# Tensor Memory (in cycles) outlasts the next tile's three k-steps
SHORT_K = ["gpu.clock=1.3 GHz", "workload.m=4096", "workload.n=4096", "workload.k=192", "workload.dtype=fp16",
           "workload.out_dtype=fp16", "workload.tile=[128,256,64]", "pipeline.mma_cta_group=2",
           "pipeline.cluster=[2,1]", "pipeline.consumers=1", "pipeline.stages=auto", "workload.launch=persistent",
           "run.records=false"]


def test_each_tiles_epilogue_beyond_the_next_tiles_mmas_adds_to_the_chain():
    scenario = scenarios.load("gemm-b200", SHORT_K)
    stats = simulate(scenario).stats
    drain, mainloop = stats["epilogue_drain_ns"], stats["epilogue_mainloop_ns"]
    assert drain > mainloop  # three k-steps a tile: the drain is the longer
    assert stats["compute_bound_ns"] == stats["smem_bound_ns"] == pytest.approx(4 * mainloop)  # no SMEM hold
    # four tiles' MMAs, and three epilogues' excess over the next tile's MMAs beyond C's staging
    # through shared memory (which every tile pays; the last tile's epilogue, which the CTA waits
    # for too, is left out as well: see consumer_chain)
    staging = 128 * 256 * 2 / scenario.gpu.smem_bandwidth / 1000  # a CTA's C tile through SMEM, ns
    assert stats["chain_bound_ns"] == pytest.approx(4 * mainloop + 3 * (drain - mainloop - staging), abs=5e-3)
    assert stats["binding"] == "consumer chain" and stats["bound_ns"] == stats["chain_bound_ns"]
    assert stats["chain_bound_ns"] <= stats["makespan_ns"] - stats["launch_overhead_ns"]


def test_the_chain_does_not_bind_where_the_mmas_hide_every_epilogue():
    stats = simulate(scenarios.load("gemm-b200", [*SHORT_K, "workload.k=4096"])).stats
    assert stats["epilogue_drain_ns"] < stats["epilogue_mainloop_ns"]
    assert stats["chain_bound_ns"] == pytest.approx(stats["smem_bound_ns"])  # MMAs and their holds only
    assert stats["binding"] != "consumer chain"


def test_two_consumer_warpgroups_have_no_chain():
    stats = simulate(scenarios.load("gemm-b200", [*SHORT_K, "pipeline.consumers=2"])).stats
    assert stats["chain_bound_ns"] == 0 and stats["binding"] != "consumer chain"
    text = describe(stats, scenarios.load("gemm-b200", [*SHORT_K, "pipeline.consumers=2"]))
    assert "consumer chain" not in text  # the bounds row leaves out a bound that does not apply


def test_the_summary_names_the_chain_and_explains_it():
    scenario = scenarios.load("gemm-b200", SHORT_K)
    stats = simulate(scenario).stats
    text = describe(stats, scenario)
    bound = next(line for line in text.splitlines() if line.strip().startswith("bound "))
    assert "binding: consumer chain" in bound
    bounds = next(line for line in text.splitlines() if line.strip().startswith("bounds "))
    assert bounds.rstrip().endswith(f"consumer chain {stats['chain_bound_ns'] / 1000:.4g} µs")
    from tmasim.workloads.gemm_summary import explain

    assert explain(stats).startswith("The consumer chain binds: the busiest CTA's one consumer warpgroup")


def test_a_search_prunes_with_the_chain():
    """The tight bound a search prunes with counts the chain; the quick one never passes it."""
    scenario = scenarios.load("gemm-b200", SHORT_K)
    stats = simulate(scenario).stats
    tight = lower_bound_ns(scenario)
    assert tight >= stats["chain_bound_ns"] + stats["launch_overhead_ns"] - 1e-6
    assert quick_lower_bound_ns(scenario) <= tight * (1 + 1e-12) and tight <= stats["makespan_ns"]


@st.composite
def single_consumer_gemms(draw):  # type: ignore[no-untyped-def]
    """One consumer warpgroup, short k-loops (epilogues that outlast them), several tiles a CTA,
    both launches, on the H100 and the B200 with and without 2-SM pairs."""
    name = draw(st.sampled_from(["gemm-h100", "gemm-b200", "gemm-b200-2sm"]))
    dims = [draw(st.integers(4, 16)) * 128 + draw(st.sampled_from([0, 40])) for _ in range(2)]
    k = draw(st.sampled_from([64, 128, 192, 640]))
    tile = ["workload.tile=[128,128,64]"] if name == "gemm-h100" else []  # one warpgroup's registers
    return name, [*tile, f"workload.m={dims[0]}", f"workload.n={dims[1]}", f"workload.k={k}", "pipeline.consumers=1",
                  f"workload.launch={draw(st.sampled_from(['persistent', 'grid']))}",
                  f"pipeline.stages={draw(st.integers(2, 4))}"]


@settings(max_examples=12, deadline=None)
@given(single_consumer_gemms())
def test_no_run_beats_its_consumer_chain(case):  # type: ignore[no-untyped-def]
    name, overrides = case
    scenario = scenarios.load(name, [*overrides, "run.records=false"])
    stats = simulate(scenario).stats
    work_ps = stats["makespan_ps"] - round(stats.get("launch_overhead_ns", 0) * 1000)
    assert stats["chain_bound_ns"] * 1000 <= work_ps + 1, (name, overrides, stats["chain_bound_ns"], work_ps)
    assert quick_lower_bound_ns(scenario) <= lower_bound_ns(scenario) * (1 + 1e-12)
