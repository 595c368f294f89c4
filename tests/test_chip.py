"""The chip: residency, aggregation, Little's law, GEMM conservation, direction of change."""

from __future__ import annotations

import math

import pytest

from tmasim.descriptor import TensorDescriptor
from tmasim.errors import DescriptorError, ResidencyError, ScenarioError
from tmasim.hardware import load_gpu
from tmasim.residency import residency
from tmasim.scenario import from_dict, load
from tmasim.simulation import simulate

H100 = load_gpu("h100-sxm")


def gemm(m=1024, n=1024, k=1024, tile=(128, 128, 64), stages=4, consumers=2, gpu="h100-sxm",
         aggregate=True, **workload):  # type: ignore[no-untyped-def]
    raw = {"gpu": gpu, "workload": {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": "bf16", "tile": list(tile),
                                    **workload},
           "pipeline": {"stages": stages, "consumers": consumers}, "run": {"records": False, "aggregate": aggregate}}
    return simulate(from_dict(raw))


def stream(stages=4, ctas=132, shape=(2048, 8192), box=(64, 64), gpu="h100-sxm", aggregate=True,
           **workload):  # type: ignore[no-untyped-def]
    raw = {"gpu": gpu, "workload": {"kind": "stream", "dtype": "bf16", "shape": list(shape), "box": list(box),
                                    "ctas": ctas, "ctas_per_sm": 1, **workload},
           "pipeline": {"stages": stages}, "run": {"records": False, "aggregate": aggregate}}
    return simulate(from_dict(raw))


# --- residency -------------------------------------------------------------------------------

def test_residency_of_the_128x256x64_gemm_tile_with_4_stages():
    r = residency(H100, stage_bytes=16384 + 32768, stages=4, other_smem=16384, consumers=2)
    assert r.smem_per_cta == 4 * 49152 + 16384 + 64 == 213056
    assert r.threads_per_cta == 384
    assert r.ctas_per_sm == 1 and r.limited_by == "shared memory"   # 233472 // (213056 + 1024)


def test_residency_of_small_boxes_is_limited_by_shared_memory_then_threads():
    r = residency(H100, stage_bytes=8192, stages=4, consumers=1)
    assert r.smem_per_cta == 32832
    assert r.ctas_per_sm == 233472 // (32832 + 1024) == 6
    r = residency(H100, stage_bytes=1024, stages=2, consumers=1)
    assert (r.ctas_per_sm, r.limited_by) == (8, "threads")         # 2048 threads / 256 per CTA


def test_more_stages_can_lower_occupancy():
    fits = [residency(H100, stage_bytes=32768, stages=s, consumers=1).ctas_per_sm for s in (1, 2, 3, 6)]
    assert fits == [6, 3, 2, 1]


def test_a_cta_that_fits_nowhere_is_an_error_naming_the_numbers():
    with pytest.raises(ResidencyError) as err:
        gemm(tile=(128, 256, 64), stages=5)
    message = str(err.value)
    assert message.startswith("pipeline.stages: 5 needs 256.1 KiB of shared memory per CTA")
    assert "5 stages x 48 KiB" in message and "over the 227 KiB a CTA may use on h100-sxm" in message


def test_asking_for_more_ctas_per_sm_than_fit_is_an_error():
    with pytest.raises(ResidencyError, match="workload.ctas_per_sm: 3 is more than fit on an SM of h100-sxm: 1"):
        gemm(tile=(128, 256, 64), stages=4, ctas_per_sm=3)


def test_summary_reports_residency_and_waves():
    s = gemm(m=2048, n=2048, tile=(128, 128, 64), stages=4, launch="grid").stats
    assert s["smem_per_cta_bytes"] == 4 * 32768 + 2 * 128 * 32 * 2 + 64
    assert s["ctas_per_sm"] == 1 and s["tiles"] == 256 and s["ctas"] == 256 and s["waves"] == 2


# --- aggregation -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    {"m": 2048, "n": 2048, "k": 512, "tile": (128, 128, 64)},                      # 256 tiles: 2 classes
    {"m": 2048, "n": 1536, "k": 256, "tile": (128, 128, 64), "launch": "grid"},     # waves, grid launch
    {"m": 1000, "n": 1000, "k": 1000, "tile": (128, 128, 64)},                      # edge tiles
    {"m": 1024, "n": 1024, "k": 96, "tile": (128, 64, 32), "launch": "grid"},       # 2 waves, 1 SM class
])
def test_aggregated_gemm_agrees_with_simulating_every_sm(case):
    full = gemm(aggregate=False, **case).stats
    agg = gemm(aggregate=True, **case).stats
    assert agg["sm_classes"] < full["sm_classes"] == full["sms_used"]
    assert agg["makespan_ps"] == pytest.approx(full["makespan_ps"], rel=1e-9, abs=2)
    for key in ("memory_bytes", "hbm_bytes", "bytes", "achieved_flops_per_s"):
        assert agg[key] == pytest.approx(full[key], rel=1e-9)


def test_a_grid_whose_early_waves_differ_is_not_aggregated():
    """Edge tiles before the last wave finish earlier, and the block scheduler hands their SMs
    the next CTA first: round robin no longer holds, so every SM is simulated."""
    case = {"m": 1203, "n": 1379, "k": 83, "tile": (128, 64, 32), "launch": "grid", "ctas_per_sm": 1, "raster": "row"}
    agg = gemm(aggregate=True, **case).stats
    full = gemm(aggregate=False, **case).stats
    assert agg["sm_classes"] == agg["sms_used"] == 132
    assert agg["makespan_ps"] == full["makespan_ps"]


def test_aggregated_stream_agrees_with_simulating_every_sm():
    full = stream(stages=3, shape=(1000, 4096), aggregate=False).stats
    agg = stream(stages=3, shape=(1000, 4096), aggregate=True).stats
    assert agg["sm_classes"] < full["sm_classes"]
    assert agg["makespan_ps"] == pytest.approx(full["makespan_ps"], abs=2)
    assert agg["memory_bytes"] == full["memory_bytes"] == 1000 * 4096 * 2


# --- Little's law on stream ---------------------------------------------------------------------

@pytest.mark.parametrize("stages", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("ctas", [4, 132])
def test_littles_law(stages, ctas):
    """bandwidth = min(capacity, SMs x bytes in flight / round trip), round trip as measured.
    Long enough runs (about 250 boxes per CTA) that filling and draining the pipe do not count."""
    s = stream(stages=stages, ctas=ctas, shape=(2048 if ctas < 10 else 16384, 8192)).stats
    in_flight = ctas * s["bytes_in_flight_per_sm"]
    law = min(H100.hbm_bandwidth * 1e12, in_flight / (s["slot_round_trip_ns"] * 1e-9))
    assert s["achieved_bytes_per_s"] == pytest.approx(law, rel=0.02)
    assert s["achieved_bytes_per_s"] <= s["littles_law_bytes_per_s"] * 1.0001   # the unloaded bound


def test_one_stage_on_a_few_sms_meets_the_unloaded_round_trip_exactly():
    s = stream(stages=1, ctas=4).stats
    assert s["achieved_bytes_per_s"] == pytest.approx(s["littles_law_bytes_per_s"], rel=0.005)


def test_enough_bytes_in_flight_saturate_hbm():
    s = stream(stages=16, ctas=132, shape=(16384, 8192)).stats
    assert s["achieved_bytes_per_s"] == pytest.approx(3.35e12, rel=0.02)
    assert s["hbm_utilization"] == pytest.approx(s["achieved_bytes_per_s"] / 3.35e12)


def test_an_in_flight_cap_lowers_bandwidth():
    free = stream(stages=8, ctas=8).stats["achieved_bytes_per_s"]
    capped = stream(stages=8, ctas=8, gpu={"preset": "h100-sxm", "tma_max_in_flight": 2}).stats
    by_bytes = stream(stages=8, ctas=8, gpu={"preset": "h100-sxm", "tma_max_bytes_in_flight": "16 KiB"}).stats
    assert capped["achieved_bytes_per_s"] < 0.5 * free
    assert by_bytes["achieved_bytes_per_s"] == pytest.approx(capped["achieved_bytes_per_s"], rel=1e-6)


# --- GEMM conservation --------------------------------------------------------------------------

@pytest.mark.parametrize(("m", "n", "k", "tile"), [(1024, 768, 512, (128, 128, 64)), (1000, 1000, 1000, (128, 128, 64)),
                                                  (640, 520, 200, (64, 128, 64))])
def test_gemm_conserves_flops_and_bytes(m, n, k, tile):
    result = gemm(m=m, n=n, k=k, tile=tile)
    s = result.stats
    a = TensorDescriptor.matrix(m, k, "bf16", tile[0], tile[2], leading_dim=-(-k // 8) * 8)
    b = TensorDescriptor.matrix(n, k, "bf16", tile[1], tile[2], leading_dim=-(-k // 8) * 8)
    tiles_m, tiles_n = -(-m // tile[0]), -(-n // tile[1])
    assert s["flops"] == 2 * m * n * k
    assert s["achieved_flops_per_s"] * s["makespan_ps"] / 1e12 == pytest.approx(2 * m * n * k, rel=1e-12)
    assert s["memory_bytes"] == tiles_n * a.total_bytes_from_memory + tiles_m * b.total_bytes_from_memory
    assert s["bytes"] == tiles_m * tiles_n * -(-k // tile[2]) * (a.box_bytes + b.box_bytes)   # full boxes land
    assert s["l2_bytes"] == s["memory_bytes"] + s["store_bytes"]
    assert s["hbm_bytes"] == pytest.approx(s["hbm_bound_ns"] * 1000 * result.scenario.gpu.hbm_bandwidth,
                                           rel=1e-9)   # the bound counts the bytes the run moved


def test_l2_reuse_cuts_hbm_traffic_and_row_raster_reuses_less_than_grouped():
    """A and B (192 MiB) do not fit in L2, nor does B (128 MiB): a row raster re-reads all of B
    wave after wave, past L2's capacity; grouped bands re-read it once a band."""
    grouped = gemm(m=8192, n=8192, k=4096, tile=(128, 128, 64), raster="grouped").stats
    row = gemm(m=8192, n=8192, k=4096, tile=(128, 128, 64), raster="row").stats
    none = gemm(m=8192, n=8192, k=4096, tile=(128, 128, 64), l2_reuse=False).stats
    assert none["hbm_bytes"] == none["memory_bytes"] + 8192 * 8192 * 2
    assert grouped["hbm_bytes"] < row["hbm_bytes"] < none["hbm_bytes"]


def test_a_panel_read_again_within_l2s_capacity_is_a_hit_across_waves():
    """A and B (64 MiB) do not fit in L2 together, but a row raster re-reads B (32 MiB) after one
    row of tiles: within L2, so B crosses HBM about once (the old wave-only model read it 8 times)."""
    row = gemm(m=4096, n=4096, k=4096, tile=(128, 128, 64), raster="row").stats
    once = 2 * 4096 * 4096 * 2 + 4096 * 4096 * 2  # A, B and C once
    assert once <= row["hbm_bytes"] < 1.25 * once


def test_operands_that_fit_in_l2_are_read_from_hbm_once():
    s = gemm(m=1024, n=1024, k=1024, tile=(128, 128, 64)).stats   # A + B = 4 MiB, L2 50 MiB
    assert s["hbm_bytes"] == 2 * 1024 * 1024 * 2 + 1024 * 1024 * 2   # A and B once, C once


# --- direction of change ------------------------------------------------------------------------

def test_more_stages_never_slower_while_residency_is_unchanged():
    times = [gemm(m=2048, n=2048, k=1024, tile=(128, 128, 64), stages=s, ctas_per_sm=1).makespan_ps
             for s in (2, 3, 4, 5, 6)]
    assert times == sorted(times, reverse=True)
    times = [stream(stages=s, ctas=132).makespan_ps for s in (1, 2, 3, 4, 6, 8)]
    assert times == sorted(times, reverse=True)


def test_more_bandwidth_never_slower():
    slow = gemm(m=2048, n=2048, k=1024, tile=(128, 256, 64), stages=4,
                gpu={"preset": "h100-sxm", "l2_bandwidth": "4 TB/s"}).makespan_ps  # L2 binds
    fast = gemm(m=2048, n=2048, k=1024, tile=(128, 256, 64), stages=4).makespan_ps
    assert fast < slow
    faster = gemm(m=2048, n=2048, k=1024, tile=(128, 256, 64), stages=4,  # the TMA unit's requests bind
                  gpu={"preset": "h100-sxm", "tma_request_time": "2 cycles"}).makespan_ps
    assert faster < fast


def test_the_ideal_machine_runs_a_gemm_at_the_compute_roofline():
    s = gemm(m=2048, n=2048, k=2048, tile=(128, 256, 64), gpu="ideal").stats
    assert s["binding"] == "compute"
    assert s["makespan_ps"] == pytest.approx(s["compute_bound_ns"] * 1000, rel=0.01)


def test_pingpong_consumers_run_and_respect_the_bounds():
    raw = {"gpu": "h100-sxm", "workload": {"kind": "gemm", "m": 2048, "n": 2048, "k": 1024, "tile": [128, 128, 64]},
           "pipeline": {"stages": 4, "consumers": 2, "consumer_mode": "pingpong"}, "run": {"records": False}}
    s = simulate(from_dict(raw)).stats
    assert s["makespan_ns"] >= s["bound_ns"]
    raw["pipeline"]["consumer_mode"] = "cooperative"
    cooperative = simulate(from_dict(raw)).stats
    assert s["makespan_ps"] != cooperative["makespan_ps"]
    assert s["flops"] == cooperative["flops"] and s["bytes"] == cooperative["bytes"]


# --- descriptor rules through scenarios ---------------------------------------------------------

def test_a_box_row_that_is_not_a_multiple_of_16_bytes_is_refused():
    with pytest.raises(DescriptorError, match="16"):
        stream(box=(64, 7))


def test_a_gemm_box_over_256_elements_is_refused():
    with pytest.raises(ScenarioError, match="workload.tile"):
        gemm(tile=(128, 512, 64))


def test_the_canonical_gemm_scenario_loads_with_its_residency():
    s = load("gemm-h100")
    assert (s.workload.m, s.workload.tile, s.pipeline.stages, s.gpu.name) == (8192, (128, 256, 64), 4, "h100-sxm")


# --- properties over random small GEMMs --------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

small_gemms = st.fixed_dictionaries({
    "m": st.integers(64, 1536), "n": st.integers(64, 1536), "k": st.integers(32, 512),
    "tile": st.sampled_from([(64, 64, 64), (128, 64, 32), (64, 128, 64), (128, 128, 64)]),
    "stages": st.integers(2, 4),
    "launch": st.sampled_from(["persistent", "grid"]),
    "raster": st.sampled_from(["row", "column", "grouped"]),
})


@settings(max_examples=12, deadline=None)
@given(small_gemms)
def test_random_gemms_aggregate_exactly_conserve_flops_and_respect_bounds(case):
    full = gemm(aggregate=False, ctas_per_sm=1, **case).stats
    agg = gemm(aggregate=True, ctas_per_sm=1, **case).stats
    assert agg["makespan_ps"] == pytest.approx(full["makespan_ps"], abs=2)
    assert agg["memory_bytes"] == full["memory_bytes"]
    m, n, k = case["m"], case["n"], case["k"]
    assert full["achieved_flops_per_s"] * full["makespan_ps"] / 1e12 == pytest.approx(2 * m * n * k, rel=1e-9)
    assert full["makespan_ns"] >= full["bound_ns"] * (1 - 1e-9)


# --- the L2 capacity model (tmasim.l2) and the stream's data_set ----------------------------------

def test_l2_miss_fraction_is_zero_up_to_the_fit_size_then_rises_as_stated():
    from tmasim import l2

    gpu = load_gpu({"preset": "h200", "l2_fit_size": "40 MiB", "l2_miss_scale": "10 MiB"})
    assert l2.miss_fraction(gpu, 40 * 2**20) == 0.0
    assert l2.miss_fraction(gpu, 50 * 2**20) == pytest.approx(1 - math.exp(-1))
    assert l2.miss_fraction(gpu, 10**12) == pytest.approx(1.0)


def test_l2_far_part_serves_hits_past_the_near_size_without_hbm():
    """B200's two halves: past l2_fit_size a re-read data set hits in the far part (its latency,
    no HBM bytes) up to l2_far_fit_size; the miss share counts from there. No far part: as before."""
    from tmasim import l2

    gpu = load_gpu({"preset": "b200", "l2_fit_size": "50 MiB", "l2_far_fit_size": "100 MiB",
                    "l2_far_latency": "300 ns", "l2_miss_scale": "10 MiB"})
    assert l2.holds(gpu) == 100 * 2**20
    assert l2.far_latency(gpu, 50 * 2**20) == 0                      # near
    assert l2.far_latency(gpu, 80 * 2**20) == 300_000                # far
    assert l2.miss_fraction(gpu, 100 * 2**20) == 0.0
    assert l2.miss_fraction(gpu, 110 * 2**20) == pytest.approx(1 - math.exp(-1))
    h200 = load_gpu("h200")  # no far part: nothing changes
    assert l2.holds(h200) == h200.l2_fit_size and l2.far_latency(h200, 10**12) == 0


def test_gemm_copies_pay_the_far_latency_where_a_and_b_fit_only_with_the_far_part():
    from tmasim.simulation import plan_scenario

    def first_copy_latency(k: int, far: str) -> int:
        scenario = load("gemm-b200", ["workload.m=64", "workload.n=256", f"workload.k={k}", "workload.tile=[64,256,64]",
                                      "workload.warm_l2=true", f"gpu.l2_far_latency={far}"])
        plan, _ = plan_scenario(scenario)
        return plan.programs[0].units[0].segments[0].copies[0].latency

    # A + B: 320 rows x K bf16. K = 65536: 40 MiB (near); K = 131072: 80 MiB (far); 262144: 160 MiB (HBM)
    assert first_copy_latency(65536, "350 ns") == first_copy_latency(65536, "0 ns")
    assert first_copy_latency(131072, "350 ns") - first_copy_latency(131072, "0 ns") == 350_000
    assert first_copy_latency(262144, "350 ns") == first_copy_latency(262144, "0 ns")  # a wave's own re-reads


def test_the_summary_says_when_a_gemm_reads_from_l2s_far_part():
    sets = ["workload.m=64", "workload.n=256", "workload.tile=[64,256,64]", "workload.warm_l2=true",
            "pipeline.stages=2", "pipeline.consumers=1"]
    far = simulate(load("gemm-b200", [*sets, "workload.k=131072"])).stats
    near = simulate(load("gemm-b200", [*sets, "workload.k=65536"])).stats
    assert far["l2_far_latency_ns"] == 350.0 and far["l2_operand_bytes"] == 80 * 2**20
    assert near["l2_far_latency_ns"] is None
    from tmasim.summary_rows import traffic
    assert "A and B (80 MiB) stay in L2's far part, not near the SMs: 350 ns more a copy" in traffic(far)
    assert "far part" not in traffic(near)


def test_stream_data_set_in_the_far_part_pays_its_latency_not_hbm():
    gpu = {"preset": "b200", "l2_fit_size": "50 MiB", "l2_far_fit_size": "100 MiB", "l2_far_latency": "300 ns"}
    near = stream(stages=1, shape=(1024, 64), box=(16, 64), gpu=gpu, data_set="40 MiB").stats
    far = stream(stages=1, shape=(1024, 64), box=(16, 64), gpu=gpu, data_set="80 MiB").stats
    assert near["hbm_bytes"] == far["hbm_bytes"] == 0
    assert far["makespan_ps"] > near["makespan_ps"]


def test_stream_data_set_in_l2_is_bound_by_l2_and_past_it_by_hbm():
    gpu = {"preset": "h200", "l2_bandwidth": "10 TB/s", "hbm_bandwidth": "4 TB/s", "l2_fit_size": "40 MiB",
           "l2_miss_scale": "10 MiB", "tma_request_time": "0 ns"}  # the L2 model alone
    fits = stream(stages=8, shape=(16384, 8192), box=(128, 64), gpu=gpu, data_set="8 MiB").stats
    spills = stream(stages=8, shape=(16384, 8192), box=(128, 64), gpu=gpu, data_set="50 MiB").stats
    once = stream(stages=8, shape=(16384, 8192), box=(128, 64), gpu=gpu).stats
    assert fits["hbm_bytes"] == 0 and fits["binding"] == "L2"
    miss = 1 - math.exp(-1)
    assert spills["hbm_bytes"] == pytest.approx(miss * spills["memory_bytes"])
    assert spills["littles_law_bytes_per_s"] == pytest.approx(4e12 / miss)   # HBM / miss share
    assert once["hbm_bytes"] == once["memory_bytes"]                         # read once: all from HBM
    assert once["achieved_bytes_per_s"] < spills["achieved_bytes_per_s"] < fits["achieved_bytes_per_s"] <= 10e12


def test_stream_data_set_must_be_a_positive_size():
    with pytest.raises(ScenarioError, match="workload.data_set"):
        stream(data_set="0 B")
    with pytest.raises(ScenarioError, match="workload.data_set"):
        stream(data_set="3 us")
