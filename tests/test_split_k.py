"""Split-K and stream-K (tmasim.workloads.gemm_split): CUTLASS's decomposition rules by hand,
every k-iteration computed once, the fix-ups' order and traffic, and the decode GEMM they speed up."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.cli import main
from tmasim.errors import ScenarioError
from tmasim.scenario import load
from tmasim.simulation import lower_bound_ns, simulate
from tmasim.workloads import gemm_split
from tmasim.workloads.gemm_split import Work


def coverage(decomposition: gemm_split.Decomposition, tiles: int, k_tiles: int) -> None:
    """Every tile's k-tiles, each computed exactly once."""
    seen: dict[int, list[int]] = {t: [] for t in range(tiles)}
    for works in decomposition.ctas:
        for work in works:
            assert work.k_count > 0
            seen[work.tile] += range(work.k_first, work.k_first + work.k_count)
    assert all(sorted(ks) == list(range(k_tiles)) for ks in seen.values()), seen


def test_split_k_follows_cutlass_order():
    """Unit L is split L // tiles of tile L mod tiles; the first K mod S splits take one more."""
    split = gemm_split.split_k(3, 10, 3, None)  # a grid: one CTA per unit
    assert [w for (w,) in split.ctas] == [Work(0, 0, 4), Work(1, 0, 4), Work(2, 0, 4), Work(0, 4, 3),
                                          Work(1, 4, 3), Work(2, 4, 3), Work(0, 7, 3), Work(1, 7, 3),
                                          Work(2, 7, 3)]
    persistent = gemm_split.split_k(3, 10, 3, 4)  # CTA g takes units g, g + 4, ...
    assert persistent.ctas[0] == [Work(0, 0, 4), Work(1, 4, 3), Work(2, 7, 3)]
    assert [len(c) for c in persistent.ctas] == [3, 2, 2, 2]
    assert split.split_tiles == 3


def test_stream_k_spreads_one_partial_wave_over_every_cta():
    """The decode GEMM: 112 tiles of 256 k-tiles on 148 CTAs, all stream-K (fewer than two full
    waves), min(148, 112 x 256 / 8) units, 193 or 194 k-tiles each, walked from the last tile back."""
    split = gemm_split.stream_k(112, 256, 148, 1)
    assert split is not None and (split.sk_tiles, split.sk_units, split.groups) == (112, 148, 1)
    coverage(split, 112, 256)
    assert len(split.ctas) == 148
    # unit 0: k-tiles 0..193 (112 x 256 = 28672 = 148 x 193 + 108: the first 108 units take 194)
    assert split.ctas[0] == [Work(0, 0, 194)]
    # unit 1 starts at 194 (k-tile 194 of tile 0) and ends at 388 (132 of tile 1): tile 1 first
    assert split.ctas[1] == [Work(1, 0, 132), Work(0, 194, 62)]
    assert sum(w.k_count for w in split.ctas[147]) == 193


def test_stream_k_boundaries_move_off_a_tile_edge():
    """A unit boundary 8 or fewer k-tiles from a tile's edge moves onto the edge."""
    assert gemm_split._align(2 * 64 + 5, 64) == 128  # 5 into a tile: back to its start
    assert gemm_split._align(2 * 64 + 60, 64) == 192  # 4 before its end: on to the next tile
    assert gemm_split._align(2 * 64 + 30, 64) == 158


def test_stream_k_hybrid_keeps_the_full_waves_data_parallel():
    """2 full waves and 10 tiles more: the first wave data-parallel, the last full one and the
    partial one stream-K; CTA g runs unit g, then data-parallel tile sk_tiles + g."""
    split = gemm_split.stream_k(2 * 20 + 10, 64, 20, 4)
    assert split is not None and split.sk_tiles == 30 and split.sk_units == 20
    coverage(split, 50, 64)
    assert split.ctas[3][-1] == Work(30 + 3, 0, 64)
    assert split.groups == 2
    assert gemm_split.stream_k(2 * 20, 64, 20, 4) is None  # whole waves: data-parallel
    assert gemm_split.stream_k(10, 8, 20, 4) is None  # 8 k-tiles: nothing worth splitting


def test_stream_k_groups_follow_calculate_groups():
    """At most 8 groups and the tiles along the raster; the most dividing units and tiles evenly."""
    assert gemm_split._groups(8, 112, 148, 256) == 4  # 148 % 8 != 0; 4 divides 148 and 112
    assert gemm_split._groups(1, 112, 148, 256) == 1
    # 7 tiles: no grouping divides them; 8 groups leave units too small; 4 is the largest valid fallback
    assert gemm_split._groups(8, 7, 16, 256) == 4
    assert gemm_split._groups(4, 30, 20, 64) == 2  # 4 does not divide 30 tiles; 2 divides both


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(1, 400), st.integers(1, 300), st.integers(1, 40))
def test_stream_k_computes_every_k_iteration_once(tiles, k_tiles, ctas, along):  # type: ignore[no-untyped-def]
    split = gemm_split.stream_k(tiles, k_tiles, ctas, along)
    if split is not None:
        coverage(split, tiles, k_tiles)
        assert len(split.ctas) <= ctas


DECODE = "gemm-b200-decode"


def run(name: str, *overrides: str) -> dict:  # type: ignore[type-arg]
    return simulate(load(name, ["run.records=false", *overrides])).stats


def test_decode_split_k_and_stream_k_use_more_sms_and_finish_sooner():
    """The acceptance: 112 data-parallel tiles leave 36 of 148 SMs idle; both splits use them all."""
    plain = run(DECODE)
    assert plain["sms_used"] == 112 and "decomposition" not in plain
    for setting in ("workload.split_k=2", "workload.scheduler=stream-k"):
        split = run(DECODE, setting)
        assert split["sms_used"] == 148, setting
        assert split["makespan_ps"] < 0.9 * plain["makespan_ps"], (setting, split["makespan_ns"], plain["makespan_ns"])
        assert split["bound_ns"] * 1000 <= split["makespan_ps"]


COUNTERS = ("makespan_ps", "l2_bytes", "hbm_bytes", "workspace_traffic_bytes", "fixup_wait_ns", "fixup_wait_max_ns",
            "flops", "store_bytes")


@pytest.mark.parametrize("overrides", [
    ("workload.m=4096", "workload.n=4096", "workload.k=2048", "workload.scheduler=stream-k"),
    ("workload.m=4096", "workload.n=4096", "workload.k=4096", "workload.scheduler=stream-k", "pipeline.cluster=[2,1]",
     "workload.multicast=b"),
    ("workload.m=2048", "workload.n=2048", "workload.k=4096", "workload.split_k=2"),
    ("workload.m=1024", "workload.n=2048", "workload.k=4096", "workload.split_k=3", "workload.launch=grid")])
def test_a_split_runs_skip_is_exact(overrides):
    """Fast-forward skips periods inside split runs' k-loops (never a unit with a fix-up: its peers
    wait on its partial), and the run is the full run's, to the picosecond and the byte."""
    fast = run("gemm-h100", *overrides)
    full = run("gemm-h100", *overrides, "run.fast_forward=false")
    assert {key: fast[key] for key in COUNTERS} == {key: full[key] for key in COUNTERS}
    assert fast["fast_forward_skipped_steps"] > 0, fast["fast_forward"]


def test_split_k_partials_and_workspace_are_counted_exactly():
    """S splits of T tiles: S - 1 partials written and S - 1 read per tile, BM x BN x 4 bytes each."""
    bm, bn, splits = 128, 256, 3
    stats = run("gemm-h100", "workload.m=256", "workload.n=512", "workload.k=1024", f"workload.split_k={splits}")
    tiles = 2 * 2
    assert stats["decomposition"] == "split-K" and stats["work_units"] == tiles * splits
    assert stats["workspace_traffic_bytes"] == 2 * (splits - 1) * tiles * bm * bn * 4
    assert stats["workspace_bytes"] == tiles * bm * bn * 4 + 128  # and the flags, one 128-byte line
    plain = run("gemm-h100", "workload.m=256", "workload.n=512", "workload.k=1024")
    assert stats["l2_bytes"] == pytest.approx(plain["l2_bytes"] + stats["workspace_traffic_bytes"], rel=1e-3)
    assert stats["flops"] == plain["flops"] and stats["tensor_core_flops"] == plain["tensor_core_flops"]


def test_the_final_peer_stores_after_every_partial_was_added():
    """With records: each tile's final peer reads the partial only after its peers' writes
    landed, and only the final peers store C (one store per tile)."""
    result = simulate(load("gemm-h100", ["workload.m=256", "workload.n=512", "workload.k=1024",
                                         "workload.split_k=3", "run.records=true"]))
    spans = result.spans
    writes = spans[spans["kind"] == "workspace_write"]
    reads = spans[spans["kind"] == "workspace_read"]
    assert len(writes) == len(reads) == 2 * 4 * 2  # (S - 1) per tile, per consumer warpgroup
    # work unit u is split u // 4 of tile u % 4 (the records' tile column is the unit's position)
    assert reads["start_ps"].min() >= writes["end_ps"].min()
    assert result.stats["store_bytes"] == 256 * 512 * 2


def test_split_k_on_a_grid_launch_runs_every_unit():
    stats = run("gemm-h100", "workload.m=256", "workload.n=512", "workload.k=1024", "workload.split_k=4",
                "workload.launch=grid")
    assert stats["ctas"] == 16 and stats["decomposition"] == "split-K"
    assert stats["bound_ns"] * 1000 <= stats["makespan_ps"]


def test_split_k_of_one_is_the_plain_run():
    assert run("gemm-h100", "workload.m=512", "workload.split_k=1")["makespan_ps"] == \
        run("gemm-h100", "workload.m=512")["makespan_ps"]


def test_lower_bound_of_a_split_run_is_its_own_or_its_slot_chain():
    scenario = load("gemm-h100", ["workload.m=128", "workload.n=1024", "workload.k=4096", "workload.split_k=4",
                                  "run.records=false"])
    stats = simulate(scenario).stats
    assert stats["bound_ns"] <= lower_bound_ns(scenario) <= stats["makespan_ns"]


def test_summary_and_explain_say_what_the_split_cost(capsys):  # type: ignore[no-untyped-def]
    assert main(["run", DECODE, "--set", "workload.scheduler=stream-k"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("split tiles"))
    # 64x64 tiles: 3 CTAs fit an SM, 444 persistent CTAs take the 112 tiles' k-iterations
    assert "stream-K: the 256 k-tiles of 112 tiles spread over 444 CTAs (1 group), 0 data-parallel" in row
    assert "workspace 1.751 MiB (fp32 partials of 112 tiles and their flags)" in row and "consumers waited" in row
    assert "of split tiles' partials" in out
    assert main(["explain", DECODE, "--set", "workload.split_k=2", "--no-what-if"]) == 0
    out = capsys.readouterr().out
    assert "Split-K: 224 work units share the k-loops of 112 output tiles, so 148 SMs get work" in out


@pytest.mark.parametrize(("overrides", "field", "rule"), [
    (["workload.split_k=0"], "workload.split_k", "must be >= 1"),
    (["workload.split_k=1.5"], "workload.split_k", "whole number"),
    (["workload.split_k=300"], "workload.split_k", "at most the 256 k-tiles"),
    (["workload.split_k=2", "workload.scheduler=stream-k"], "workload.split_k", "must be 1 with"),
    (["workload.scheduler=stream-k", "workload.launch=grid"], "workload.scheduler", "persistent"),
    (["workload.scheduler=streamK"], "workload.scheduler", "must be one of"),
    (["workload.split_k=2", "pipeline.consumer_mode=pingpong"], "pipeline.consumer_mode", "ping-pong"),
])
def test_bad_split_settings_are_one_line_errors(overrides, field, rule, capsys):  # type: ignore[no-untyped-def]
    with pytest.raises(ScenarioError) as err:
        simulate(load(DECODE, overrides))
    assert str(err.value).startswith(field) and rule in str(err.value), str(err.value)
    args = ["run", DECODE] + [a for o in overrides for a in ("--set", o)]
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0]
