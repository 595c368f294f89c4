"""A Tensor Memory accumulator's epilogue stores C one sub-tile at a time, as the epilogue warps
drain it (CuTeDSL dense_gemm_persistent), not as one copy that holds the TMA unit."""

from __future__ import annotations

from tmasim import scenario as scenarios
from tmasim.simulation import simulate
from tmasim.workloads.gemm import plan
from tmasim.workloads.gemm_stages import blackwell_epilogue_tile

SETS = ["workload.m=512", "workload.n=512", "workload.k=512", "workload.dtype=fp16", "workload.out_dtype=fp16",
        "workload.tile=[128,256,64]", "pipeline.mma_cta_group=2", "pipeline.cluster=[2,1]", "pipeline.consumers=1",
        "pipeline.stages=auto"]


def test_a_tile_is_stored_in_its_sub_tiles_with_every_byte_once():
    scenario = scenarios.load("gemm-b200", SETS)
    config = scenario.workload
    built, _ = plan(config, scenario)
    epilogue = built.programs[0].units[0].epilogue
    tile_m, tile_n = blackwell_epilogue_tile(config, True)
    assert (tile_m, tile_n) == (128, 32)  # 128 x 256 fp16 C: eight 128 x 32 sub-tiles
    assert len(epilogue.store_parts) == 8
    assert sum(p.smem_bytes for p in epilogue.store_parts) == epilogue.store.smem_bytes == 128 * 256 * 2
    assert sum(p.memory_bytes for p in epilogue.store_parts) == epilogue.store.memory_bytes
    assert epilogue.store_interval == scenario.gpu.epilogue_subtile_time > 0


def test_the_sub_tiles_go_out_one_drain_apart():
    scenario = scenarios.load("gemm-b200", [*SETS, "run.records=true"])
    result = simulate(scenario)
    events = result.events
    first = events[(events["kind"] == "store") & (events["sm"] == 0)]
    first = first[first["cta"] == first["cta"].min()]
    first = first[first["tile"] == first["tile"].min()]
    times = sorted(int(t) for t in first["time_ps"])
    assert len(times) == 8
    gaps = {b - a for a, b in zip(times, times[1:], strict=False)}
    # each store is issued when its sub-tile is drained: one sub-tile's time apart, unless the TMA
    # unit was still taking an earlier request (then later, never sooner)
    assert min(gaps) >= scenario.gpu.epilogue_subtile_time


def test_without_a_drain_time_the_tile_goes_out_in_one_store():
    scenario = scenarios.load("gemm-b200", [*SETS, "gpu.epilogue_subtile_time=0 ns"])
    built, _ = plan(scenario.workload, scenario)
    epilogue = built.programs[0].units[0].epilogue
    assert epilogue.store_parts == () and epilogue.store is not None


def test_a_tiles_own_epilogue_cost_comes_before_its_first_sub_tile():
    scenario = scenarios.load("gemm-b200", [*SETS, "gpu.epilogue_tile_time=200 ns", "gpu.epilogue_subtile_time=100 ns"])
    built, _ = plan(scenario.workload, scenario)
    epilogue = built.programs[0].units[-1].epilogue
    assert epilogue.store_lead == 200_000 and epilogue.store_interval == 100_000
    # the CTA's last tile: all of its drain holds the CTA, its own cost and then the eight sub-tiles
    assert epilogue.duration >= 200_000 + 8 * 100_000


def test_a_tiles_own_epilogue_cost_delays_a_one_tile_kernel_by_itself():
    one_tile = ["workload.m=256", "workload.n=256", "gpu.epilogue_subtile_time=100 ns"]
    without = simulate(scenarios.load("gemm-b200", [*SETS, *one_tile, "gpu.epilogue_tile_time=0 ns"]))
    with_it = simulate(scenarios.load("gemm-b200", [*SETS, *one_tile, "gpu.epilogue_tile_time=250 ns"]))
    assert with_it.makespan_ps - without.makespan_ps == 250_000


def test_a_tiles_own_epilogue_cost_needs_a_drain_in_sub_tiles():
    scenario = scenarios.load("gemm-b200", [*SETS, "gpu.epilogue_subtile_time=0 ns", "gpu.epilogue_tile_time=300 ns"])
    plain = scenarios.load("gemm-b200", [*SETS, "gpu.epilogue_subtile_time=0 ns", "gpu.epilogue_tile_time=0 ns"])
    assert simulate(scenario).makespan_ps == simulate(plain).makespan_ps


def _summary_row(name: str, sets: list[str], row: str = "epilogue") -> str:
    from tmasim.output.summary import describe

    scenario = scenarios.load(name, sets)
    text = describe(simulate(scenario).stats, scenario)
    return next((line for line in text.splitlines() if line.strip().startswith(f"{row} ")), "")


def test_the_summary_says_what_a_tiles_drain_costs_and_whether_the_mmas_hide_it():
    costs = ["gpu.epilogue_tile_time=200 ns", "gpu.epilogue_subtile_time=100 ns"]
    long_k = _summary_row("gemm-b200", [*SETS, *costs, "workload.k=4096"])
    assert "8 C sub-tiles of 128x32 a tile" in long_k and "1 µs a tile" in long_k  # 200 + 8 x 100 ns
    assert "under the next tile's" in long_k and "binds" not in long_k
    short_k = _summary_row("gemm-b200", [*SETS, *costs, "workload.k=64"])  # one k-step: the drain is longer
    assert "more than the next tile's" in short_k and short_k.endswith("wait for the difference (consumer chain bound)")


def test_no_epilogue_row_without_a_tensor_memory_drain():
    assert _summary_row("gemm-h100", []) == ""
    assert _summary_row("gemm-b200", [*SETS, "gpu.epilogue_subtile_time=0 ns"]) == ""


def test_a_split_tiles_epilogue_row_makes_no_claim_on_its_k_loop():
    row = _summary_row("gemm-b200", [*SETS, "workload.k=4096", "workload.split_k=2"])
    assert row.endswith("after the last share of each tile's k-loop") and "MMAs" not in row
