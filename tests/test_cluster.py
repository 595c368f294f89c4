"""Thread-block clusters and TMA multicast: placement, traffic, timing and deadlock reports,
with values that follow from the model by hand."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmasim.cluster import default_multicast, place
from tmasim.engine.chip import Chip
from tmasim.engine.program import Unit, UnitProgram
from tmasim.errors import DeadlockError, ResidencyError, ScenarioError
from tmasim.hardware import load_gpu
from tmasim.scenario import Scenario, from_dict
from tmasim.simulation import _sync, plan_scenario, simulate

H100 = load_gpu("h100-sxm")
KIB = 1024


def gemm(cluster: tuple[int, int] = (1, 1), gpu: Any = "h100-sxm", m: int = 1024, n: int = 1024, k: int = 512,
         tile: tuple[int, int, int] = (128, 128, 64), stages: int = 4, consumers: int = 2, aggregate: bool = True,
         registers: dict[str, int] | None = None, **workload: Any) -> Scenario:
    raw = {"gpu": gpu,
           "workload": {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": "bf16", "tile": list(tile), **workload},
           "pipeline": {"stages": stages, "consumers": consumers, "cluster": list(cluster),
                        **({"registers": registers} if registers else {})},
           "run": {"records": False, "aggregate": aggregate}}
    return from_dict(raw)


def ideal(arrive: str = "100 ns") -> dict[str, Any]:
    """No bandwidth limit and no latency: only compute and the remote arrival cost time."""
    return {"preset": "ideal", "cluster_arrive_latency": arrive}


# --- placement -------------------------------------------------------------------------------

def test_h100_gpcs_add_up_to_its_sms_and_pairs_leave_no_sm_idle():
    assert sum(H100.gpcs) == H100.sms == 132 and len(H100.gpcs) == 8
    pairs = place(H100, (2, 1), ctas_per_sm=1)
    assert (pairs.clusters, pairs.idle_sms, pairs.portable) == (66, 0, True)


def test_unequal_gpcs_leave_sms_idle_for_larger_clusters():
    four = place(H100, (4, 1), ctas_per_sm=1)  # GPCs of 18 SMs hold 4 clusters and 2 idle SMs each
    assert four.per_gpc == (4, 4, 4, 4, 4, 4, 4, 4) and four.idle_sms == 4
    sixteen = place(H100, (4, 4), ctas_per_sm=1)
    assert (sixteen.clusters, sixteen.idle_sms, sixteen.portable) == (8, 4, False)
    two_per_sm = place(H100, (4, 4), ctas_per_sm=2)  # 36 or 32 CTA slots per GPC: 2 clusters on 16 SMs
    assert two_per_sm.clusters == 16 and two_per_sm.idle_sms == 4


def test_the_drivers_count_caps_what_b200s_gpcs_would_place():
    b200 = load_gpu("b200")
    assert b200.max_active_clusters == {4: 33}
    assert sum(g // 4 for g in b200.gpcs) == 34  # what the layout alone places
    four = place(b200, (2, 2), ctas_per_sm=1)  # the driver's 33: one GPC of 20 SMs holds 4
    assert (four.clusters, four.idle_sms) == (33, 16) and four.per_gpc == (4, 5, 4, 4, 4, 4, 4, 4)
    assert place(b200, (2, 1), ctas_per_sm=1).clusters == 74  # pairs: no count stated, every SM
    assert place(b200, (2, 4), ctas_per_sm=1).clusters == 16  # clusters of 8: the layout's
    assert place(b200, (2, 2), ctas_per_sm=2).clusters == 74  # the count is at one CTA an SM only
    assert place(load_gpu({"preset": "b200", "max_active_clusters": {}}), (2, 2), ctas_per_sm=1).clusters == 34


@pytest.mark.parametrize("counts, message", [
    ({"four": 33}, r"gpu.max_active_clusters.four: 'four' must be a cluster size: a whole number of CTAs, from 2"),
    ({"1": 33}, r"gpu.max_active_clusters.1: '1' must be a cluster size"),
    ({"4": 0}, r"gpu.max_active_clusters.4: 0 must be"),
])
def test_a_bad_driver_count_is_an_error_naming_it(counts, message):
    with pytest.raises(ScenarioError, match=message):
        load_gpu({"preset": "b200", "max_active_clusters": counts})


def test_a_cluster_over_the_opt_in_limit_is_an_error_naming_it():
    with pytest.raises(ScenarioError, match=r"pipeline.cluster: \[32, 1\] has 32 CTAs, over the 16 a cluster may "
                                            r"hold on h100-sxm \(8 portable, 16 with the non-portable opt-in\)"):
        place(H100, (32, 1), ctas_per_sm=1)


def test_a_cluster_larger_than_any_gpc_is_an_error():
    small = load_gpu({"preset": "h100-sxm", "sms": 12, "gpc_sms": [6, 6]})
    with pytest.raises(ResidencyError, match="needs 8 CTAs in one GPC, but the largest GPC of h100-sxm holds 6"):
        place(small, (8, 1), ctas_per_sm=1)


def test_fewer_sms_regroup_into_gpcs_of_the_presets_largest_size():
    assert load_gpu({"preset": "h100-sxm", "sms": 40}).gpcs == (18, 18, 4)


def test_multicast_must_fit_the_shape():
    with pytest.raises(ScenarioError, match=r"workload.multicast: 'a' shares A along N, but pipeline.cluster = "
                                            r"\[2, 1\] has one along N"):
        simulate(gemm((2, 1), multicast="a"))
    assert [default_multicast(s) for s in ((1, 1), (2, 1), (1, 2), (2, 2))] == ["none", "b", "a", "both"]


def test_clusters_are_for_the_gemm_workload_only():
    raw = {"workload": {"kind": "tiles", "tiles": 4, "load": "1 us", "compute": "1 us"},
           "pipeline": {"cluster": [2, 1]}}
    with pytest.raises(ScenarioError, match=r"pipeline.cluster: \[2, 1\] would be ignored: the tiles workload does "
                                            r"not read it \(clusters are modelled for the gemm workload only"):
        from_dict(raw)


# --- traffic ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("cluster", "multicast", "a_share", "b_share"), [
    ((2, 1), "b", 1, 2), ((1, 2), "a", 2, 1), ((2, 2), "both", 2, 2), ((2, 1), "none", 1, 1)])
def test_multicast_divides_the_l2_bytes_of_the_shared_operand_exactly(cluster, multicast, a_share, b_share):
    base = simulate(gemm()).stats
    stats = simulate(gemm(cluster, multicast=multicast)).stats
    steps = 64 * 8  # 8 x 8 output tiles, 512 / 64 k-steps each
    a_box, b_box = 128 * 64 * 2, 128 * 64 * 2
    assert base["memory_bytes"] == steps * (a_box + b_box)
    assert stats["memory_bytes"] == steps * (a_box // a_share + b_box // b_share)
    assert stats["bytes"] == base["bytes"]  # every CTA still receives whole boxes in its SMEM
    assert stats["multicast"] == multicast and stats["cluster"] == f"{cluster[0]}x{cluster[1]}"


def test_multicast_leaves_hbm_bytes_alone_when_every_read_misses():
    base = simulate(gemm(l2_reuse=False)).stats
    stats = simulate(gemm((2, 1), l2_reuse=False)).stats
    # without L2 reuse every read goes to HBM: one read per multicast slice, so HBM halves for B too
    assert stats["hbm_bytes"] - base["hbm_bytes"] == -(64 * 8 * 128 * 64 * 2) // 2


# --- timing ----------------------------------------------------------------------------------

def two_tiles(stages: int, cluster: tuple[int, int], arrive: str = "100 ns", k: int = 512) -> dict[str, Any]:
    return simulate(gemm(cluster, gpu=ideal(arrive), m=256, n=128, k=k, stages=stages, consumers=1)).stats


def test_one_stage_cluster_pays_the_remote_arrival_once_per_slot_reuse():
    single = two_tiles(1, (1, 1))["makespan_ps"]
    cluster = two_tiles(1, (2, 1))["makespan_ps"]
    # S = 1, no bandwidth limit: each of the 7 refills of the slot waits for the peer's arrival
    assert cluster == single + 7 * 100_000


def test_with_two_stages_the_remote_arrival_hides_behind_compute():
    single = two_tiles(2, (1, 1))
    cluster = two_tiles(2, (2, 1))
    step = 2 * 128 * 128 * 64 / (load_gpu("ideal").sm_flop_rate("bf16"))
    assert step > 100_000  # the arrival (100 ns) is shorter than a k-step's MMA
    assert cluster["makespan_ps"] == single["makespan_ps"]
    slow = two_tiles(2, (2, 1), arrive=f"{round(step) + 50_000} ps")  # longer than a k-step: exposed
    assert slow["makespan_ps"] > single["makespan_ps"]


def run_plan(scenario: Scenario, slow_rank: int | None = None, truncate_rank: int | None = None) -> Chip:
    """Run a scenario's plan with one CTA's compute doubled, or its k-loop cut short."""
    plan, _ = plan_scenario(scenario)
    programs = list(plan.programs)
    for rank, change in ((slow_rank, "slow"), (truncate_rank, "cut")):
        if rank is None:
            continue
        program = programs[rank]
        assert isinstance(program, UnitProgram)
        units = []
        for unit in program.units:
            seg = unit.segments[0]
            seg = (dataclasses.replace(seg, compute=2 * seg.compute) if change == "slow"
                   else dataclasses.replace(seg, steps=seg.steps - 3))
            units.append(Unit(unit.index, (seg,), unit.epilogue))
        programs[rank] = UnitProgram(units)
    plan = dataclasses.replace(plan, programs=programs)
    env = simpy.Environment()
    chip = Chip(env, scenario.gpu, plan, _sync(scenario), None, aggregate=False)
    env.run()
    return chip


def test_a_slow_peer_holds_back_its_peers_producer_through_the_empty_barrier():
    scenario = gemm((2, 1), gpu=ideal("0 ns"), m=256, n=128, k=1024, stages=2, consumers=1)
    alone = run_plan(gemm((1, 1), gpu=ideal("0 ns"), m=256, n=128, k=1024, stages=2, consumers=1), slow_rank=1)
    paired = run_plan(scenario, slow_rank=1)
    t_c = 2 * 128 * 128 * 64 / load_gpu("ideal").sm_flop_rate("bf16")
    k, s = 16, 2
    fast_alone, fast_paired = alone.ctas[0], paired.ctas[0]
    assert fast_alone.finished_at == pytest.approx(k * t_c, abs=2)
    # CTA 0's step i needs CTA 1's slice of step i, issued once CTA 1 released step i - S
    assert fast_paired.finished_at >= 2 * (k - s) * t_c + t_c
    assert fast_paired.wait_empty_ps > fast_alone.wait_empty_ps


def test_deadlock_report_names_the_cluster_and_the_peer_waited_for():
    scenario = gemm((2, 1), gpu=ideal(), m=256, n=128, k=1024, stages=2, consumers=1)
    with pytest.raises(DeadlockError) as err:
        chip = run_plan(scenario, truncate_rank=1)
        from tmasim.simulation import _check_finished
        _check_finished(chip.ctas, chip.env.now)
    message = str(err.value)
    assert "CTA 0 of cluster 0 (sm0.cta0)" in message
    assert "consumer0 waits on full[1] of CTA 0 for the multicast slice of CTA 1 (sm1.cta1)" in message
    assert "producer waits on empty[1] of CTA 0 for the consumers' release by CTA 0, CTA 1 (sm1.cta1)" in message


# --- aggregation -----------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    {"cluster": (2, 1), "m": 2048, "n": 1024, "k": 256},
    {"cluster": (2, 2), "m": 2048, "n": 1024, "k": 256, "launch": "grid", "l2_reuse": False},
    {"cluster": (1, 2), "m": 1000, "n": 1024, "k": 200},  # edge tiles along M and K
])
def test_aggregation_by_cluster_is_exact(case):
    gpu = {"preset": "h100-sxm", "sms": 16}
    full = simulate(gemm(gpu=gpu, aggregate=False, **case)).stats
    agg = simulate(gemm(gpu=gpu, **case)).stats
    assert agg["makespan_ps"] == full["makespan_ps"]
    assert agg["memory_bytes"] == full["memory_bytes"]
    assert agg["cluster_classes"] < full["cluster_classes"]
    assert agg["aggregation"].startswith("on (exact") and full["aggregation"].startswith("off")


SHARED = {"gpu": {"preset": "h100-sxm", "sms": 8}, "tile": (64, 64, 64), "stages": 2, "consumers": 1,
          "registers": {"producer": 40, "consumer": 96}}


@pytest.mark.parametrize("case", [
    {"k": 128, "m": 1024, "n": 1024},
    {"k": 320, "m": 1000, "n": 1000, "raster": "row"},  # edge tiles: classes of blocks
    {"k": 256, "m": 2048, "n": 512, "raster": "grouped", "group": 2},
])
def test_aggregation_by_block_is_exact_when_clusters_share_sms(case):
    """Several CTAs per SM (setmaxnreg counts small enough for several CTAs' register files on one
    SM; the default 40 + 232 per thread leaves room for one): in a persistent launch slot q's CTAs
    sit on block q mod #SMs/C, so the slots of a block share exactly its SMs, and one block stands
    for each class of identical blocks."""
    full = simulate(gemm((2, 1), aggregate=False, **SHARED, **case)).stats
    agg = simulate(gemm((2, 1), **SHARED, **case)).stats
    assert agg["ctas_per_sm"] > 1
    assert agg["aggregation"] == "on (exact: one representative per class of identical clusters)"
    assert agg["cluster_classes"] < full["cluster_classes"] and agg["sm_classes"] < full["sm_classes"]
    for key in ("makespan_ps", "memory_bytes", "hbm_bytes", "wait_full_ps", "wait_empty_ps"):
        assert agg.get(key) == full.get(key), key


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from([(2, 1), (1, 2), (2, 2)]), m=st.integers(1, 8), n=st.integers(1, 8),
       edge_m=st.sampled_from([0, 8, 40]), edge_n=st.sampled_from([0, 24]), k=st.integers(1, 6),
       raster=st.sampled_from(["row", "grouped"]), sms=st.sampled_from([8, 12]))
def test_random_shared_sm_clusters_aggregate_exactly(cluster, m, n, edge_m, edge_n, k, raster, sms):
    """Random sizes (edge tiles of any width: classes of blocks; the tile grid stays a multiple
    of the cluster), cluster shapes and rasters."""
    shared = {**SHARED, "gpu": {"preset": "h100-sxm", "sms": sms}}
    case = {"m": m * 128 - edge_m, "n": n * 128 - edge_n, "k": k * 64, "raster": raster, "group": 2}
    full = simulate(gemm(cluster, aggregate=False, **shared, **case)).stats
    agg = simulate(gemm(cluster, **shared, **case)).stats
    for key in ("makespan_ps", "memory_bytes", "hbm_bytes", "flops", "tiles"):
        assert agg.get(key) == full.get(key), key


def test_aggregation_turns_off_when_clusters_share_sms_in_a_grid():
    stats = simulate(gemm((2, 1), **SHARED, k=128, launch="grid")).stats
    assert stats["ctas_per_sm"] > 1
    assert stats["aggregation"] == "off: several CTAs per SM share SMs across clusters"


# --- the command line ------------------------------------------------------------------------

def tmasim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tmasim.cli", *args], capture_output=True, text=True, check=False)


def test_cli_cluster_multicast_reports_the_l2_saving_and_the_placement():
    small = ["--set", "gpu.sms=16", "--set", "workload.m=1024", "--set", "workload.n=1024", "--set", "workload.k=512"]
    base = json.loads(tmasim("run", "gemm-h100", *small, "--json").stdout)
    done = tmasim("run", "gemm-h100", *small, "--set", "pipeline.cluster=[2,1]", "--set", "workload.multicast=b",
                  "--json")
    stats = json.loads(done.stdout)
    a_box, b_box = 128 * 64 * 2, 256 * 64 * 2
    assert base["memory_bytes"] - stats["memory_bytes"] == base["memory_bytes"] * (b_box // 2) // (a_box + b_box)
    assert stats["hbm_bytes"] == base["hbm_bytes"]  # the raster walks the same tiles per wave; L2 dedups HBM
    assert stats["clusters_resident"] == 8 and stats["idle_sms"] == 0
    text = tmasim("run", "gemm-h100", *small, "--set", "pipeline.cluster=[2,1]").stdout
    assert "8 clusters resident at once (8 per GPC), 0 SMs idle" in text
    assert "multicast b (default: what the shape allows" in text


def test_cli_says_when_the_drivers_count_set_the_placement():
    small = ["--set", "workload.m=8192", "--set", "workload.n=4096", "--set", "workload.k=128"]
    text = tmasim("run", "gemm-b200", *small, "--set", "pipeline.cluster=[2,2]").stdout
    assert ("33 clusters resident at once (4+5+4+4+4+4+4+4 per GPC), 16 SMs idle: the driver's count for clusters "
            "of 4 (gpu.max_active_clusters), where the GPCs would hold 34") in text
    assert "74 clusters resident at once (10+10+9+9+9+9+9+9 per GPC), 0 SMs idle\n" in \
        tmasim("run", "gemm-b200", *small, "--set", "pipeline.cluster=[2,1]").stdout


@pytest.mark.parametrize(("setting", "expected"), [
    ("pipeline.cluster=[32,1]", "tmasim: error: pipeline.cluster: [32, 1] has 32 CTAs, over the 16"),
    ("pipeline.mma_cta_group=2", "tmasim: error: pipeline.mma_cta_group: 2 is not available on h100-sxm"),
])
def test_cli_refuses_impossible_clusters_in_one_line(setting, expected):
    done = tmasim("run", "gemm-h100", "--set", setting)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(expected) and done.stderr.count("\n") == 1


# --- Blackwell's 2-SM MMA ----------------------------------------------------------------------

def pair_gemm(group: int, aggregate: bool = True, **workload: Any) -> dict[str, Any]:
    raw = {"gpu": {"preset": "b200", "sms": 16},
           "workload": {"kind": "gemm", "m": 2048, "n": 1024, "k": 512, "dtype": "bf16", "tile": [128, 256, 64],
                        **workload},
           "pipeline": {"stages": 4, "consumers": 2, "cluster": [2, 1] if group == 2 else [1, 1],
                        "mma_cta_group": group},
           "run": {"records": False, "aggregate": aggregate}}
    return simulate(from_dict(raw)).stats


def test_pair_mma_halves_each_ctas_b_traffic_and_its_shared_memory():
    one, two = pair_gemm(1), pair_gemm(2)
    a_box, b_box = 128 * 64 * 2, 256 * 64 * 2
    assert one["memory_bytes"] == 16 * 4 * 8 * (a_box + b_box)  # 16 x 4 tiles of 128 x 256, 8 k-steps each
    assert two["memory_bytes"] == 16 * 4 * 8 * (a_box + b_box // 2)
    assert one["smem_per_cta_bytes"] - two["smem_per_cta_bytes"] == 4 * b_box // 2
    assert two["mma_cta_group"] == 2 and two["achieved_flops_per_s"] * two["makespan_ps"] / 1e12 == pytest.approx(
        2 * 2048 * 1024 * 512)


def test_pair_mma_time_comes_from_the_cta_group_2_table():
    from tmasim.workloads.gemm_config import GemmConfig
    from tmasim.workloads.gemm_mma import mma_step

    b200 = load_gpu("b200")
    config = GemmConfig(m=2048, n=1024, k=512, dtype="bf16", out_dtype="bf16", tile=(128, 256, 64))
    step = mma_step(config, b200, 2, "cooperative", pair=True)
    cycle = 1e12 / b200.clock_hz
    assert step.instruction == "tcgen05 bf16 m256n256k16, cta_group::2" and step.count == 4
    # The TS row (266 cycles, II 128.02); SS: each SM reads its 128 rows of A, 128 x 32 B, before the
    # result (latency + 4 KiB at the shared-memory bandwidth); 16 KiB per instruction per SM keeps the II.
    a_arrival = 4096 / (b200.smem_bandwidth * cycle)
    assert step.occupancy == round(4 * 128.02 * cycle) and step.tail == round((266 + a_arrival - 128.02) * cycle)
    assert step.smem_reads == 4 * (256 + 256) * 32 / 2 and not step.smem_bound
    assert b200.mma is not None
    assert b200.mma.timing("t", "bf16", 256, 192, sms=2) == pytest.approx((234, 96.02))  # halfway from 128 to 256


def test_pair_mma_aggregation_is_exact():
    assert pair_gemm(2)["makespan_ps"] == pair_gemm(2, aggregate=False)["makespan_ps"]


@pytest.mark.parametrize(("cluster", "multicast", "a_share", "b_share", "writers"), [
    ((2, 1), None, 1, 2, 1), ((4, 1), "b", 1, 4, 2), ((2, 2), "a", 2, 2, 2), ((4, 2), "both", 2, 4, 3)])
def test_pairs_in_larger_clusters_share_operands_between_pairs(cluster, multicast, a_share, b_share, writers):
    """Pairs along M share B's halves (each half multicast to the same half of the other pairs),
    pairs along N share A; a CTA's empty barrier waits for the MMA of every pair it writes into."""
    raw = {"gpu": {"preset": "b200", "sms": 16},
           "workload": {"kind": "gemm", "m": 2048, "n": 1024, "k": 512, "tile": [128, 256, 64],
                        **({"multicast": multicast} if multicast else {})},
           "pipeline": {"stages": 4, "consumers": 2, "cluster": list(cluster), "mma_cta_group": 2},
           "run": {"records": False, "aggregate": False}}
    scenario = from_dict(raw)
    stats = simulate(scenario).stats
    a_box, b_box = 128 * 64 * 2, 256 * 64 * 2
    assert stats["memory_bytes"] == 16 * 4 * 8 * (a_box // a_share + b_box // b_share)
    assert stats["makespan_ps"] == simulate(from_dict({**raw, "run": {"records": False}})).stats["makespan_ps"]
    plan, _ = plan_scenario(scenario)
    chip = Chip(simpy.Environment(), scenario.gpu, plan, _sync(scenario), None, aggregate=False)
    chip.env.run()
    assert {cta.ring.empty[0].arrivals for cta in chip.ctas} == {2 * writers}


def test_pair_mma_needs_a_pair_along_m():
    raw = {"gpu": "b200", "workload": {"kind": "gemm", "m": 1024, "n": 1024, "k": 128, "tile": [128, 128, 64]},
           "pipeline": {"cluster": [1, 2], "mma_cta_group": 2}}
    with pytest.raises(ScenarioError, match=r"pipeline.mma_cta_group: 2 pairs CTAs along M, so pipeline.cluster\[0\]"):
        from_dict(raw)


# --- records: the trace and the Gantt chart show the cluster ---------------------------------

def test_trace_draws_each_multicast_once_with_flows_into_every_receiver():
    from tmasim.review import trace_check
    from tmasim.review.trace import chrome_trace

    raw = {"gpu": {"preset": "h100-sxm", "sms": 2}, "workload": {"kind": "gemm", "m": 256, "n": 128, "k": 256,
                                                                  "tile": [128, 128, 64]},
           "pipeline": {"stages": 2, "consumers": 1, "cluster": [2, 1]}, "run": {"records": True}}
    result = simulate(from_dict(raw))
    trace = chrome_trace(result.spans, result.events)
    assert trace_check.validate(trace) == []
    events = trace["traceEvents"]
    pid_of = {e["pid"] for e in events if e.get("flow_in")}
    assert len(pid_of) == 2  # the computes of both CTAs (on two SMs) receive flows
    sources = [e for e in events if e.get("flow_out")]
    # 4 k-steps, each CTA issues A (lands only in itself) and half of B (lands in both): every
    # step's last landing is one transfer, which releases the computes of both CTAs
    targets = {e["bind_id"]: [f["pid"] for f in events if f.get("flow_in") and f["bind_id"] == e["bind_id"]]
               for e in sources}
    assert any(len(set(pids)) == 2 for pids in targets.values())
    kinds = set(result.events["kind"])
    assert {"cluster", "multicast", "remote_arrive"} <= kinds
    assert any(e.get("name") == "cluster 0, rank 1" for e in events)


def test_gantt_rows_name_the_cluster_and_rank():
    from tmasim.review.plot_gantt import _row_labels

    raw = {"gpu": {"preset": "h100-sxm", "sms": 4}, "workload": {"kind": "gemm", "m": 256, "n": 256, "k": 128,
                                                                  "tile": [128, 128, 64]},
           "pipeline": {"stages": 2, "consumers": 1, "cluster": [2, 2]}, "run": {"records": True}}
    result = simulate(from_dict(raw))
    labels = _row_labels(result.events, [(0, 0), (3, 3)])
    assert labels == ["SM 0 · CTA 0\ncluster 0, rank 0", "SM 3 · CTA 3\ncluster 0, rank 3"]


# --- against the B200 multicast counters -------------------------------------------------------

MEASURED = Path(__file__).parent / "data" / "b200_tma_multicast.csv"


@pytest.mark.parametrize("size", [2, 4])
def test_multicast_byte_accounting_matches_the_b200_counters(size):
    """Measured (Nsight counters): with explicit multicast to a cluster of c CTAs, L2 serves each
    tile once (sectors x 32 B) and DRAM reads it once, while c copies land in shared memory.
    The model's B operand, multicast over a [c, 1] cluster, must show the same two ratios."""
    import pandas as pd

    table = pd.read_csv(MEASURED, comment="#")
    rows = table[(table["mode_name"] == "explicit_mcast") & (table["cluster_size"] == size)]
    l2_ratio = (rows["lts_sectors_tex_read"] * 32 / rows["tma_ld_bytes"]).to_numpy()
    dram_ratio = (rows["dram_bytes_read"] / rows["tma_ld_bytes"]).to_numpy()
    assert l2_ratio == pytest.approx(1 / size, rel=0.02) and dram_ratio == pytest.approx(1 / size, rel=0.02)
    scenario = gemm((size, 1), gpu={"preset": "b200", "sms": 16}, m=2048, n=1024, tile=(128, 128, 64),
                    multicast="b", l2_reuse=False)
    stats = simulate(scenario).stats
    a_bytes = 16 * 8 * 8 * 128 * 64 * 2  # 16 x 8 tiles, 8 k-steps: A is not shared
    b_l2, b_smem = stats["memory_bytes"] - a_bytes, stats["bytes"] - a_bytes
    b_hbm = stats["hbm_bytes"] - a_bytes - 2048 * 1024 * 2  # less A and the C store
    assert b_l2 / b_smem == pytest.approx(1 / size) and b_hbm / b_smem == pytest.approx(1 / size)


@pytest.mark.parametrize(("cluster", "multicast", "writers"), [
    ((2, 2), "both", 3), ((4, 1), "b", 4), ((1, 4), "a", 4), ((2, 2), "a", 2), ((2, 2), "none", 1)])
def test_empty_barrier_expects_the_consumers_of_every_cta_writing_into_the_slot(cluster, multicast, writers):
    scenario = gemm(cluster, gpu=ideal(), m=512, n=512, k=128, stages=2, consumers=2, multicast=multicast)
    plan, _ = plan_scenario(scenario)
    chip = Chip(simpy.Environment(), scenario.gpu, plan, _sync(scenario), None, aggregate=False)
    chip.env.run()
    # CUTLASS: (CX + CY - 1) x consumers with both operands multicast
    assert {cta.ring.empty[0].arrivals for cta in chip.ctas} == {writers * 2}
    assert {cta.ring.full[0].arrivals for cta in chip.ctas} == {1}


def test_a_pair_mma_waits_for_both_sms_tensor_cores():
    """One stage: four CTAs per SM, leaders and followers of different pairs sharing each SM.
    Every pair MMA holds two SMs' tensor cores, so no SM is busier than the run is long.
    (BN = 128: four 128-column accumulators fill the SM's 512 TMEM columns.)"""
    stats = simulate(from_dict({
        "gpu": {"preset": "b200", "sms": 16},
        "workload": {"kind": "gemm", "m": 2048, "n": 1024, "k": 512, "tile": [128, 128, 64]},
        "pipeline": {"stages": 1, "consumers": 2, "cluster": [2, 1], "mma_cta_group": 2},
        "run": {"records": False}})).stats
    assert stats["ctas_per_sm"] == 4
    assert stats["compute_utilization"] <= 1.0
    assert stats["makespan_ps"] >= stats["compute_bound_ns"] * 1000



@settings(max_examples=8, deadline=None)
@given(shape=st.sampled_from([(1, 2), (2, 1), (2, 2), (4, 1)]), multicast=st.sampled_from(["none", None]),
       stages=st.integers(1, 3), launch=st.sampled_from(["persistent", "grid"]), k=st.sampled_from([128, 192]))
def test_property_cluster_runs_aggregate_exactly_and_multicast_never_adds_l2_bytes(shape, multicast, stages, launch,
                                                                                 k):
    gpu = {"preset": "h100-sxm", "sms": 8}
    kwargs = {"m": 1024, "n": 512, "k": k, "stages": stages, "consumers": 1, "launch": launch}
    if multicast is not None:
        kwargs["multicast"] = multicast
    full = simulate(gemm(shape, gpu=gpu, aggregate=False, **kwargs)).stats
    agg = simulate(gemm(shape, gpu=gpu, **kwargs)).stats
    assert agg["makespan_ps"] == full["makespan_ps"]
    plain = simulate(gemm((1, 1), gpu=gpu, **kwargs)).stats
    assert agg["memory_bytes"] <= plain["memory_bytes"]
    assert agg["bytes"] == plain["bytes"]
