"""Split-K and stream-K with clusters and the 2-SM MMA (tmasim.workloads.gemm_split): the units
and their k-ranges are decided per cluster, as CUTLASS's stream-K scheduler decides them for
each CTA; a hand-worked plan; the fix-ups of every CTA tile, a pair's follower included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.scenario import load
from tmasim.simulation import lower_bound_ns, quick_lower_bound_ns, simulate
from tmasim.workloads import gemm, gemm_split
from tmasim.workloads.gemm_split import Work


def cutlass_stream_k(tiles: int, k: int, wave: int, c: int, along: int) -> list[list[Work]] | None:
    """CUTLASS's rules at the CTA level, line by line (tile_scheduler_params.h: get_num_sk_tiles,
    get_num_sk_units, calculate_groups, set_params_stream_k; sm90_tile_scheduler_stream_k.hpp:
    assign_work, get_current_work_iter_start_possible_update_work_tile_k_remaining,
    update_output_tile_id_and_work_tile_k, continue_current_work). ``tiles`` and ``wave`` are
    CTAs, multiples of the cluster size ``c``; ``along``: clusters along the raster."""
    full, total = tiles // wave, -(-tiles // wave)
    if full == total or k <= 8:
        return None
    sk_tiles = (tiles - (full - 1 if full > 1 else 0) * wave) // c * c
    sk_units = min(wave // c * c, (k * sk_tiles // 8) // c * c)
    if sk_units == 0:
        return None
    sk_cluster_tiles, sk_cluster_units = sk_tiles // c, sk_units // c

    def too_small(g: int) -> bool:
        return (sk_cluster_tiles // g) * c * k // (sk_units // g) < 8

    groups, fallback = min(along, 8), 0
    while groups > 1 and not (sk_cluster_units % groups == 0 and sk_cluster_tiles % groups == 0
                              and not too_small(groups)):
        if fallback == 0 and sk_cluster_units % groups == 0 and not too_small(groups):
            fallback = groups
        groups -= 1
    groups = fallback if groups == 1 and fallback else groups
    units_per_group, big_groups = sk_units // groups, sk_cluster_tiles % groups
    units = tiles - sk_tiles + sk_units
    ctas = []
    for cta in range(min(wave, units)):
        works = []
        for linear in range(cta, units, wave):
            if linear >= sk_units:  # data-parallel
                works.append(Work(linear - sk_units + sk_tiles, 0, k))
                continue
            cluster_idx, group = divmod(linear // c, groups)
            k_in_group = (sk_cluster_tiles // groups + (group < big_groups)) * c * k
            per = k_in_group // units_per_group
            big = (k_in_group - per * units_per_group) // c
            start, count = per * cluster_idx + min(cluster_idx, big), per + (cluster_idx < big)
            at = start % k
            if at < 8:
                start, count = start - at, count + at
            elif at > k - 8:
                start, count = start + k - at, count - (k - at)
            end = (start + count) % k
            count += -end if end < 8 else k - end if end > k - 8 else 0
            while count > 0:  # from the unit's last tile back
                last = start + count - 1
                tile_start = last // k * k
                first = max(tile_start, start)
                works.append(Work((last // k * groups + group) * c + linear % c, first - tile_start, last + 1 - first))
                count -= last + 1 - first
        ctas.append(works)
    return ctas


def cutlass_split_k(tiles: int, k: int, splits: int, wave: int, c: int) -> list[list[Work]]:
    """set_params_basic and the split-K branch of the same functions, at the CTA level."""
    per, big = divmod(k, splits)
    units = tiles * splits
    ctas = []
    for cta in range(min(wave, units)):
        works = []
        for linear in range(cta, units, wave):
            split, cluster_idx = divmod(linear // c, tiles // c)
            works.append(Work(cluster_idx * c + linear % c, per * split + min(split, big), per + (split < big)))
        ctas.append(works)
    return ctas


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.integers(1, 120), st.integers(1, 300), st.integers(1, 80), st.integers(1, 20))
def test_stream_k_per_cluster_is_cutlass_per_cta(c, cluster_tiles, k, clusters, along):  # type: ignore[no-untyped-def]
    found = gemm_split.stream_k(cluster_tiles, k, clusters, along)
    expected = cutlass_stream_k(cluster_tiles * c, k, clusters * c, c, along)
    if found is None:
        assert expected is None
        return
    split = gemm_split.for_clusters(found, c)
    assert split.ctas == expected
    assert split.sk_units % c == 0 and split.sk_tiles % c == 0 and split.split_tiles == split.sk_tiles


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.integers(1, 60), st.integers(1, 100), st.integers(1, 80), st.data())
def test_split_k_per_cluster_is_cutlass_per_cta(c, cluster_tiles, k, clusters, data):  # type: ignore[no-untyped-def]
    splits = data.draw(st.integers(1, k))
    split = gemm_split.for_clusters(gemm_split.split_k(cluster_tiles, k, splits, clusters), c)
    assert split.ctas == cutlass_split_k(cluster_tiles * c, k, splits, clusters * c, c)
    grid = gemm_split.for_clusters(gemm_split.split_k(cluster_tiles, k, splits, None), c)
    assert grid.ctas == cutlass_split_k(cluster_tiles * c, k, splits, 10**9, c)  # one CTA per unit


def test_a_small_stream_k_grid_with_2x1_clusters_by_hand():
    """6 tiles (3 clusters of 2x1) of 36 k-tiles: min(66 clusters, 36 x 3 / 8) = 13 cluster units
    share 108 k-iterations, 8 each and the first 4 one more. Unit 7 ends 4 before tile 1's end and
    takes those 4; unit 8 then starts at 72 with 4 left, ends 4 into tile 2 and gives them away:
    it has nothing left, its cluster's CTAs exit at once (k_tile_count 0: an invalid work tile)."""
    scenario = load("gemm-h100", ["workload.m=256", "workload.n=768", "workload.k=2304", "workload.scheduler=stream-k",
                                  "pipeline.cluster=[2, 1]", "run.records=false"])
    plan, _ = gemm.plan(scenario.workload, scenario)  # type: ignore[arg-type]
    ranges = [(0, 0, 9), (0, 9, 9), (0, 18, 9), (0, 27, 9), (1, 0, 8), (1, 8, 8), (1, 16, 8), (1, 24, 12), None,
              (2, 0, 12), (2, 12, 8), (2, 20, 8), (2, 28, 8)]  # (cluster tile, first k-tile, k-tiles) per unit
    assert len(plan.programs) == 2 * len(ranges) and plan.cluster == 2 and plan.cluster_slots == 13
    for g, program in enumerate(plan.programs):
        unit = ranges[g // 2]
        if unit is None:
            assert not program.units
            continue
        (only,) = program.units
        fix = only.epilogue.fixup
        assert fix is not None and (fix.tile, fix.wait_for, fix.k_count) == (2 * unit[0] + g % 2, unit[1], unit[2])
        assert sum(seg.steps for seg in only.segments) == unit[2]
    info = plan.info
    assert [info[k] for k in ("stream_k_tiles", "stream_k_units", "stream_k_groups", "split_tiles")] == [6, 26, 1, 6]
    assert info["workspace_bytes"] == 6 * 128 * 256 * 4 + 128  # per CTA tile, and its 12 flags in one line


def run(name: str, *overrides: str) -> dict:  # type: ignore[type-arg]
    return simulate(load(name, ["run.records=false", *overrides])).stats


SHAPE = ("workload.m=512", "workload.n=1024", "workload.k=2048")


@pytest.mark.parametrize(("name", "cluster", "multicast"), [
    ("gemm-h100", "[2, 1]", "b"), ("gemm-h100", "[1, 2]", "a"), ("gemm-h100", "[2, 2]", "both"),
    ("gemm-b200-2sm", "[2, 1]", "none"), ("gemm-b200-2sm", "[4, 1]", "b"),
])
def test_split_k_with_clusters_reduces_every_cta_tile(name, cluster, multicast):  # type: ignore[no-untyped-def]
    """S - 1 partials written and read per CTA tile (a pair's follower reduces its own half):
    the loads are the plain run's, multicast as it sets them, plus the partials."""
    splits, tiles, (bm, bn, _) = 3, 4 * 4, load(name).workload.tile  # type: ignore[union-attr]
    plain = run(name, *SHAPE, f"pipeline.cluster={cluster}")
    stats = run(name, *SHAPE, f"pipeline.cluster={cluster}", f"workload.split_k={splits}")
    assert stats["multicast"] == plain["multicast"] == multicast and stats["decomposition"] == "split-K"
    assert stats["workspace_traffic_bytes"] == 2 * (splits - 1) * tiles * bm * bn * 4
    assert stats["l2_bytes"] == pytest.approx(plain["l2_bytes"] + stats["workspace_traffic_bytes"], rel=1e-3)
    assert stats["flops"] == plain["flops"] and stats["store_bytes"] == plain["store_bytes"]
    cx, cy = load(name, [f"pipeline.cluster={cluster}"]).pipeline.cluster
    assert stats["ctas"] == tiles * splits and stats["cluster_slots_used"] == tiles * splits // (cx * cy)
    assert stats["bound_ns"] * 1000 < stats["makespan_ps"] < plain["makespan_ps"]
    bound = lower_bound_ns(load(name, [*SHAPE, f"pipeline.cluster={cluster}", f"workload.split_k={splits}"]))
    assert stats["bound_ns"] <= bound <= stats["makespan_ns"]  # the run's, or the slot chain's (a search's)


def test_stream_k_with_2x1_clusters_uses_the_idle_sms():
    """32 tiles in 16 clusters of 2x1 on 66 resident clusters: data-parallel, 32 SMs work; stream-K
    gives 66 cluster units (the 128 k-tiles x 16 / 8 allow 256) the tiles' k-iterations."""
    shape = ("workload.m=256", "workload.n=4096", "workload.k=8192", "pipeline.cluster=[2, 1]")
    plain, split = run("gemm-h100", *shape), run("gemm-h100", *shape, "workload.scheduler=stream-k")
    assert plain["sms_used"] == 32 and split["sms_used"] == 132
    assert (split["stream_k_units"], split["stream_k_tiles"], split["cluster_slots_used"]) == (132, 32, 66)
    assert split["bound_ns"] * 1000 < split["makespan_ps"] < 0.6 * plain["makespan_ps"]
    assert split["aggregation"].startswith("off: split tiles' peers wait")


def test_a_stream_k_pair_runs_with_both_halves_reduced():
    stats = run("gemm-b200-2sm", *SHAPE, "workload.scheduler=stream-k")
    assert stats["decomposition"] == "stream-K" and stats["mma_cta_group"] == 2
    assert stats["stream_k_units"] % 2 == 0 and stats["stream_k_tiles"] == 16
    assert stats["flops"] == 2 * 512 * 1024 * 2048 and stats["store_bytes"] == 512 * 1024 * 2


def test_the_quick_bound_of_a_split_run_is_below_its_bound():
    """A split CTA takes part of a tile: the quick bound takes the busiest cluster's share, not the
    first data-parallel CTA's whole tiles."""
    for extra in (["workload.split_k=4"], ["workload.scheduler=stream-k"], ["workload.scheduler=stream-k",
                                                                               "pipeline.cluster=[1, 2]"]):
        scenario = load("gemm-b200-decode", ["workload.n=2048", *extra])
        assert quick_lower_bound_ns(scenario) <= lower_bound_ns(scenario) * (1 + 1e-12)


def test_summary_and_explain_count_the_clusters(capsys):  # type: ignore[no-untyped-def]
    from tmasim.cli import main

    args = ["gemm-h100", "--set", "workload.m=256", "--set", "workload.n=4096", "--set", "workload.k=8192",
            "--set", "workload.scheduler=stream-k", "--set", "pipeline.cluster=[2, 1]"]
    assert main(["run", *args]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("split tiles"))
    assert "spread over 132 CTAs (in 66 clusters of 2x1, one k-range per cluster; 1 group)" in row
    assert "148 work units, 132 CTAs on 132 SMs, persistent, up to 2 units per CTA" in out
    assert main(["explain", *args, "--no-what-if"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(the CTAs of each 2x1 cluster take the same k-range of their own tiles)" in out
