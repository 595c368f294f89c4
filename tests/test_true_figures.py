"""Figures that are true: a run never beats its own lower bound (every workload, both launches),
the achieved FLOP rate counts only useful work, and a GEMM's HBM bytes follow the L2's capacity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.scenario import load
from tmasim.simulation import lower_bound_ns, quick_lower_bound_ns, simulate
from tmasim.workloads.bound_figures import any_placement_bound

LAUNCH = st.sampled_from(["persistent", "grid"])


@st.composite
def gemms(draw):  # type: ignore[no-untyped-def]
    dims = [draw(st.integers(1, 12)) * 64 + draw(st.sampled_from([0, 8, 40])) for _ in range(3)]
    return "gemm-h100", [f"workload.m={dims[0]}", f"workload.n={dims[1]}", f"workload.k={dims[2]}",
                         f"workload.launch={draw(LAUNCH)}", f"pipeline.stages={draw(st.integers(1, 4))}"]


# the multicasts each cluster shape allows (tmasim.cluster.check_multicast)
MULTICASTS = {"[1, 1]": ["none"], "[2, 1]": ["none", "b"], "[1, 2]": ["none", "a"],
              "[2, 2]": ["none", "a", "b", "both"]}


@st.composite
def split_gemms(draw):  # type: ignore[no-untyped-def]
    """Split-K (either launch) and stream-K (persistent), on the H100 and the B200, with clusters
    and their multicasts, and with the B200's 2-SM pairs; small enough that stream-K finds a
    partial wave and split tiles wait on each other."""
    dims = [draw(st.integers(1, 6)) * 64 + draw(st.sampled_from([0, 8, 40])) for _ in range(2)]
    k = draw(st.integers(1, 40)) * 64 + draw(st.sampled_from([0, 8]))
    split = draw(st.sampled_from(["workload.scheduler=stream-k", "split_k"]))
    if split == "split_k":
        split = f"workload.split_k={draw(st.integers(2, min(6, -(-k // 64))))}" if k > 64 else "workload.split_k=1"
    launch = "persistent" if "stream-k" in split else draw(LAUNCH)
    name = draw(st.sampled_from(["gemm-h100", "gemm-b200", "gemm-b200-2sm"]))
    if name == "gemm-b200-2sm":  # pairs along M: the multicast the shape allows by default
        shape = [f"pipeline.cluster={draw(st.sampled_from(['[2, 1]', '[4, 1]', '[2, 2]']))}"]
    else:
        cluster = draw(st.sampled_from(sorted(MULTICASTS)))
        shape = [f"pipeline.cluster={cluster}", f"workload.multicast={draw(st.sampled_from(MULTICASTS[cluster]))}"]
    return name, [f"workload.m={dims[0]}", f"workload.n={dims[1]}", f"workload.k={k}", split,
                  f"workload.launch={launch}", f"pipeline.stages={draw(st.integers(1, 4))}", *shape]


@st.composite
def attentions(draw):  # type: ignore[no-untyped-def]
    q, kv = draw(st.integers(1, 400)), draw(st.integers(1, 400))
    return "attention-h100", [f"workload.seqlen_q={q}", f"workload.seqlen_kv={kv}", "workload.batch=1",
                              f"workload.heads={draw(st.integers(1, 3))}",
                              f"workload.causal={str(draw(st.booleans())).lower()}",
                              f"workload.launch={draw(LAUNCH)}"]


@st.composite
def streams(draw):  # type: ignore[no-untyped-def]
    return "stream-h100", [f"workload.shape=[{draw(st.integers(1, 8)) * 64}, {draw(st.integers(1, 8)) * 64}]",
                           f"workload.launch={draw(LAUNCH)}", f"pipeline.stages={draw(st.integers(1, 4))}"]


@st.composite
def tiles(draw):  # type: ignore[no-untyped-def]
    return "reference", [f"workload.tiles={draw(st.integers(1, 12))}",
                         f"workload.load=\"{draw(st.integers(1, 9))} us\"",
                         f"workload.compute=\"{draw(st.integers(1, 9))} us\"",
                         f"pipeline.stages={draw(st.integers(1, 4))}"]


@settings(max_examples=30, deadline=None)
@given(st.one_of(gemms(), split_gemms(), attentions(), streams(), tiles()))
def test_no_run_beats_its_own_lower_bound(case):  # type: ignore[no-untyped-def]
    name, overrides = case
    scenario = load(name, [*overrides, "run.records=false"])
    stats = simulate(scenario).stats
    makespan = stats["makespan_ps"]
    if "bound_ns" in stats:
        assert stats["bound_ns"] * 1000 <= makespan + 1, (overrides, stats["binding"], stats["bound_ns"], makespan)
        assert stats["efficiency"] <= 1 + 1e-6
        assert stats["achieved_flops_per_s"] <= stats["bound_flops_per_s"] * (1 + 1e-6)
    if stats.get("workload") == "gemm":  # the bounds a search orders and prunes with: quick, then tight
        tight = lower_bound_ns(scenario)
        assert stats["bound_ns"] <= tight <= stats["makespan_ns"] * (1 + 1e-12)
        assert quick_lower_bound_ns(scenario) <= tight * (1 + 1e-12)
    if "interval_bound_ns" in stats:  # tiles: each tile's copy and compute are serial on one SM
        assert stats["tiles"] * max(stats["copy_term_ns"], stats["compute_term_ns"]) * 1000 <= makespan + 1


def test_a_ragged_grid_bound_is_a_bound_for_every_placement():
    """The issue's case: a grid of 276 CTAs on 132 SMs, 23 of them edge tiles with half a B box."""
    stats = simulate(load("gemm-h100", ["workload.m=2944", "workload.n=2944", "workload.k=2944",
                                        "workload.launch=grid", "run.records=false"])).stats
    assert stats["bound_ns"] * 1000 <= stats["makespan_ps"]
    # k = 1: some SM runs 2 of the 133 largest CTAs (full tiles); k = 2 gives 3 edge tiles only
    assert any_placement_bound([3.0] * 253 + [1.0] * 23, 132) == 6.0
    assert any_placement_bound([2.0] * 265 + [1.0] * 10, 132) == 6.0  # k = 2: three of the 265 largest
    assert any_placement_bound([5.0, 1.0, 1.0], 2) == 5.0
    assert any_placement_bound([1.0] * 10, 2) == 5.0


def test_achieved_flops_count_useful_work_only():
    padded = simulate(load("attention-h100", ["workload.seqlen_q=129", "workload.batch=1", "workload.heads=2",
                                              "run.records=false"])).stats
    assert padded["flops"] == 4 * 129 * 129 * 128 * 2
    assert padded["achieved_flops_per_s"] == padded["flops"] / (padded["makespan_ps"] * 1e-12)
    assert padded["achieved_flops_per_s"] <= padded["bound_flops_per_s"]
    lopsided = simulate(load("attention-h100", ["workload.seqlen_q=4096", "workload.seqlen_kv=128",
                                                "workload.causal=true", "workload.batch=1", "workload.heads=1",
                                                "run.records=false"])).stats
    assert lopsided["flops"] == 4 * (128 * 129 // 2) * 128  # only the last 128 query rows see a key
    pair = simulate(load("gemm-b200-2sm", ["workload.m=512", "workload.n=512", "workload.k=512",
                                           "run.records=false"])).stats
    assert pair["flops"] == 2 * 512**3
    assert pair["achieved_flops_per_s"] == pair["flops"] / (pair["makespan_ps"] * 1e-12)


def test_a_gemm_uses_the_l2_capacity():
    def hbm(size: str) -> int:
        return int(simulate(load("gemm-h100", [f"gpu.l2_size={size}", "workload.m=2048", "workload.n=2048",
                                              "workload.k=2048", "run.records=false"])).stats["hbm_bytes"])

    operands = 2 * 2048 * 2048 * 2
    full, small, none = hbm("50 MiB"), hbm("256 KiB"), hbm("0 B")
    assert full < small < none
    assert none >= (2048 // 128) * (2048 // 256) * 2048 * (128 + 256) * 2  # every box from HBM
    assert full < operands + 2048 * 2048 * 2 + 1  # each operand once, and the output's store


def test_attention_refuses_the_barrier_counts_it_does_not_model(capsys):  # type: ignore[no-untyped-def]
    from tmasim.cli import main

    for field, value in (("full_arrivals", "2"), ("empty_arrivals", "1"), ("expect_tx", '"1 KiB"')):
        assert main(["run", "attention-h100", "--set", f"pipeline.{field}={value}"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1, err
        assert f"pipeline.{field}:" in err and "would be ignored: the attention workload does not read it" in err, err


@settings(max_examples=12, deadline=None)
@given(split_gemms())
def test_no_split_run_beats_its_own_lower_bound(case):  # type: ignore[no-untyped-def]
    """Split-K and stream-K: each CTA's share of its tiles and the partials' traffic stay bounds."""
    name, overrides = case
    stats = simulate(load(name, [*overrides, "run.records=false"])).stats
    assert stats["bound_ns"] * 1000 <= stats["makespan_ps"] + 1, (overrides, stats["binding"], stats["bound_ns"])
    assert stats["achieved_flops_per_s"] <= stats["bound_flops_per_s"] * (1 + 1e-6)


def test_a_multicast_slot_round_trip_counts_the_remote_release_only_after_the_shared_slices():
    """An edge tile's CTA lands its smaller B box sooner, so its release reaches the peer that
    multicast A to it while that peer still waits for its own B: the remote arrival is on the
    peer's path only after the shared slices landed, not after every copy of the peer's."""
    stats = simulate(load("gemm-h100", ["workload.m=64", "workload.n=384", "workload.k=384", "pipeline.stages=1",
                                        "pipeline.cluster=[1, 2]", "workload.multicast=a", "run.records=false"])).stats
    assert stats["binding"] == "round trip"
    assert stats["bound_ns"] * 1000 <= stats["makespan_ps"] < 1.1 * stats["bound_ns"] * 1000


BANDWIDTHS = ("smem_bandwidth", "sm_port_bandwidth", "l2_bandwidth", "hbm_bandwidth")


@st.composite
def slow_or_fast_links(draw):  # type: ignore[no-untyped-def]
    """Small GEMMs and attention on both architectures with one of the chip's bandwidths scaled
    from 1/50 to 20 times the preset's: a bound that counts a link the engine does not slow for
    (attention's operand reads once did) fails here."""
    name = draw(st.sampled_from(["gemm-h100", "gemm-b200", "gemm-b200-2sm", "attention-h100", "attention-b200"]))
    if name.startswith("gemm"):
        dims = [draw(st.integers(1, 6)) * 128 for _ in range(3)]
        shape = [f"workload.m={dims[0]}", f"workload.n={dims[1]}", f"workload.k={dims[2]}"]
    else:
        shape = [f"workload.seqlen_q={draw(st.integers(1, 4)) * 128}", "workload.batch=1", "workload.heads=2",
                 f"workload.seqlen_kv={draw(st.integers(1, 8)) * 128}"]
    field = draw(st.sampled_from(BANDWIDTHS))
    factor = draw(st.sampled_from([0.02, 0.1, 0.5, 2.0, 20.0]))
    return name, shape, field, factor


@settings(max_examples=12, deadline=None)
@given(slow_or_fast_links())
def test_no_run_beats_its_bound_whatever_its_links_bandwidth(case):  # type: ignore[no-untyped-def]
    name, shape, field, factor = case
    base = load(name, [*shape, "run.records=false"])
    tb_per_s = getattr(base.gpu, field) * factor  # the field in bytes per ps: TB/s
    scenario = load(name, [*shape, "run.records=false", f"gpu.{field}={tb_per_s} TB/s"])
    stats = simulate(scenario).stats
    assert stats["bound_ns"] * 1000 <= stats["makespan_ps"] + 1, (name, shape, field, factor, stats["binding"])
