"""A cluster that does not divide the grid of output tiles: the cluster grid is rounded up, as
CUTLASS's tile schedulers do, and the CTAs past the problem's edge run on zero-filled boxes.
Values by hand from the tile sizes."""

from __future__ import annotations

from typing import Any

import pytest

from tmasim.engine.program import Unit, UnitProgram
from tmasim.scenario import Scenario, from_dict, load
from tmasim.simulation import plan_scenario, simulate


def gemm(m: int, n: int = 512, k: int = 256, cluster: tuple[int, int] = (2, 1), gpu: str = "b200",
         tile: tuple[int, int, int] = (64, 64, 64), pair: bool = True, **workload: Any) -> Scenario:
    raw = {"gpu": gpu,
           "workload": {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": "bf16", "tile": list(tile), **workload},
           "pipeline": {"stages": 4, "consumers": 2, "cluster": list(cluster), "mma_cta_group": 2 if pair else 1},
           "run": {"records": False}}
    return from_dict(raw)


def units(scenario: Scenario) -> list[Unit]:
    """Every CTA's units, in launch order (a persistent CTA walks several)."""
    plan, _ = plan_scenario(scenario)
    found = [u for p in plan.programs for u in p.units if isinstance(p, UnitProgram)]
    return sorted(found, key=lambda u: u.index)


def test_the_cluster_grid_is_rounded_up_and_the_ctas_past_the_edge_run():
    # m = 192 in 64-row tiles: 3 tile rows; a 2x1 cluster launches 2 cluster rows, 4 tile rows.
    plan, _ = plan_scenario(gemm(192))
    assert plan.units == 4 * 8  # 8 tile columns of 64 in n = 512


def test_a_ctas_boxes_past_the_edge_are_zero_filled_and_its_barrier_counts_them_whole():
    found = units(gemm(192, n=64))  # one tile column: units 0-3 are tile rows 0-3 (row 3 past the edge)
    a_box, b_half = 64 * 64 * 2, 64 * 64 * 2 // 2  # A 64x64 bf16; each CTA of the pair loads half of B
    leader, follower = found[2].segments[0], found[3].segments[0]  # the pair of rows 2 (inside) and 3 (past)
    assert [c.smem_bytes for c in follower.copies] == [a_box, b_half]
    assert [c.memory_bytes for c in follower.copies] == [0, b_half]  # its A rows lie past M: zero-filled
    assert leader.expect == 2 * a_box + 2 * b_half  # the leader's full barrier counts both CTAs' whole boxes
    # The leader's MMA covers the pair's rows inside M only: 64 of its own, none of its partner's.
    assert leader.flops == 2.0 * 64 * 64 * 64 and follower.flops == 0.0
    assert found[3].epilogue is not None and found[3].epilogue.store is not None
    assert found[3].epilogue.store.memory_bytes == 0  # its store writes nothing
    assert found[2].epilogue is not None and found[2].epilogue.store is not None
    assert found[2].epilogue.store.memory_bytes == 64 * 64 * 2


def test_a_half_out_pair_computes_the_partners_rows_inside_the_problem():
    # m = 160: tile rows of 64, 64, 32; the pair of rows 2 and 3 has 32 rows inside, all the leader's.
    found = units(gemm(160, n=64))
    assert found[0].segments[0].flops == 2.0 * (64 + 64) * 64 * 64  # rows 0 and 1: whole
    assert found[2].segments[0].flops == 2.0 * 32 * 64 * 64
    # m = 224: rows 64, 64, 64, 32: the leader of rows 2 and 3 covers 64 + 32 rows.
    assert units(gemm(224, n=64))[2].segments[0].flops == 2.0 * (64 + 32) * 64 * 64


def test_the_documented_case_runs_and_its_flop_rate_counts_the_real_m():
    result = simulate(load("gemm-b200-2sm", ["workload.m=192", "workload.tile=[64,64,64]"]))
    seconds = result.makespan_ps * 1e-12
    assert result.stats["tiles"] == 3 * 128  # the problem's tiles; the CTAs ran 2 cluster rows of 2 x 128
    assert result.stats["tiles_past_edge"] == 128 and result.stats["launched_tile_grid"] == "4x128"
    assert result.stats["achieved_flops_per_s"] == pytest.approx(2.0 * 192 * 8192 * 8192 / seconds, rel=1e-12)


def test_a_rounded_up_grid_takes_no_less_than_the_smaller_problem_and_no_more_than_the_padded_one():
    times = {m: simulate(load("gemm-b200-2sm", [f"workload.m={m}", "workload.tile=[64,64,64]",
                                                "workload.k=2048"])).makespan_ps for m in (128, 192, 256)}
    assert times[128] < times[192] <= times[256]


@pytest.mark.parametrize(("cluster", "multicast", "ctas"), [((1, 2), "a", 3 * 4), ((2, 2), "both", 4 * 4),
                                                      ((2, 1), "b", 4 * 3)])
def test_multicast_clusters_past_the_edge_feed_their_peers_and_finish(cluster, multicast, ctas):
    # 3 x 3 tiles of 128 on H100: a 2-wide cluster rounds 3 tiles up to 4, and the CTA past the
    # edge still loads its multicast slice of the shared operand, which its peers wait for.
    scenario = gemm(384, n=384, k=512, cluster=cluster, gpu="h100-sxm", tile=(128, 128, 64), pair=False,
                    multicast=multicast)
    result = simulate(scenario)
    assert (result.stats["tiles"], result.stats["tiles_past_edge"]) == (9, ctas - 9)
    assert result.stats["achieved_flops_per_s"] == pytest.approx(
        2.0 * 384 * 384 * 512 / (result.makespan_ps * 1e-12), rel=1e-12)
