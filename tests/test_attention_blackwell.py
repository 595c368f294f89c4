"""Attention's Blackwell form (FlashAttention-4): the correction warpgroup on vector units
shared by processor sharing, and the 2-SM MMA pair (TMEM per CTA, bytes and FLOPs conserved,
the GEMM pair's pipeline to the picosecond without softmax)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import simpy

from tmasim import scenario as scenarios
from tmasim.engine.chip import Chip, Plan, launch_cost
from tmasim.engine.program import Segment, Unit, UnitProgram
from tmasim.errors import ScenarioError
from tmasim.simulation import _sync, plan_scenario, simulate

SMALL = ["workload.batch=1", "workload.heads=2", "workload.seqlen_q=2048"]


def _b200(*changes: str):
    return scenarios.load("attention-b200", [*SMALL, *changes])


@pytest.mark.parametrize("overlap", [True, False])
def test_the_correction_warpgroup_changes_nothing_when_the_exponentials_end_each_softmax(overlap):
    """The rescale's FP32 multiplies share the FP32 pipe beside the softmax's exponentials,
    which take longer (1,032 cycles against 576 of FP32 work with the rescale), so whether the
    softmax warpgroup rescales O itself or a correction warpgroup does, each softmax ends when
    its exponentials do: the same run, to the picosecond."""
    block = plan_scenario(_b200(f"workload.softmax_overlap={str(overlap).lower()}"))[0].programs[0].block(0)
    work = block.softmax + block.correction
    assert block.softmax.xu > max(work.fma, work.alu, work.issue)
    off = simulate(_b200(f"workload.softmax_overlap={str(overlap).lower()}")).stats
    on = simulate(_b200(f"workload.softmax_overlap={str(overlap).lower()}", "workload.correction_warpgroup=true")).stats
    assert on["makespan_ps"] == off["makespan_ps"]



# ---- the 2-SM MMA (pipeline.mma_cta_group = 2) -------------------------------------------------

def _pair(*changes: str):
    return scenarios.load("attention-b200-2sm", [*SMALL, *changes])


def test_a_pair_keeps_s_and_o_of_its_own_rows_in_its_own_tensor_memory():
    """TMEM is checked per CTA: each holds its two tiles' S and O (512 columns), as without the
    pair; one over is the same one-line error."""
    plan, res = plan_scenario(_pair())
    assert res.accumulator is not None and res.accumulator.tmem_columns == 2 * (128 + 128)
    assert plan.cluster == 2 and all(program.schedule.pair for program in plan.programs)
    with pytest.raises(ScenarioError, match=r"needs 768 TMEM columns \(2 Q tiles x \(S 128 \+ O 256\), fp32\)"):
        plan_scenario(_pair("workload.head_dim=256"))


def test_the_pair_mma_is_one_2sm_instruction_per_16_deep_slice():
    s = _pair()
    block = plan_scenario(s)[0].programs[0].block(0)
    latency, ii = s.gpu.mma.timing("t", "bf16", 256, 128, 2)  # m256n128k16 on two SMs
    assert block.qk.occupancy == block.pv.occupancy == s.gpu.cycles_ps(128 // 16 * ii)
    # S reads its A (Q) from shared memory, where the table's rows took it from Tensor Memory: each SM's
    # half of A, 128 rows x 32 B at 124.3 B a cycle, arrives before the instruction's latency runs
    a_arrival = 128 * 32 / (s.gpu.smem_bandwidth * s.gpu.cycles_ps(1e6) / 1e6)
    assert block.qk.tail == s.gpu.cycles_ps(latency + a_arrival - ii)
    assert block.pv.tail == s.gpu.cycles_ps(latency - ii)  # P·V: P in Tensor Memory, as the table measured


@pytest.mark.parametrize("seqlen_q", [2048, 1280])  # 1280: the last pair's follower holds no rows
def test_a_pair_reads_each_kv_block_once_half_per_cta_and_conserves_flops(seqlen_q):
    s = _pair(f"workload.seqlen_q={seqlen_q}")
    config = s.workload
    plan, _ = plan_scenario(s)
    leader, follower = plan.programs[0], plan.programs[1]
    k, v = leader.block(0).k, leader.block(0).v
    assert (k.smem_bytes, v.smem_bytes) == (64 * 128 * 2, 128 * 64 * 2)  # 64 keys of K, 64 columns of V
    assert follower.block(0).k == k and follower.block(0).v == v
    stats = simulate(s).stats
    pairs = -(-seqlen_q // 512) * config.batch * config.heads
    kv = config.n_blocks * 128 * (128 + 128) * 2  # every K and V block of a head, once per pair
    assert stats["memory_bytes"] == pairs * kv + config.batch * config.heads * seqlen_q * 128 * 2  # + Q once
    executed = stats["achieved_flops_per_s"] * stats["makespan_ps"] / 1e12
    assert executed == pytest.approx(config.useful_flops, rel=1e-12)
    assert stats["makespan_ns"] >= stats["bound_ns"]


def _gemm_pair_like(leader, follower) -> list[UnitProgram]:
    """The pair's programs as a GEMM 2-SM pair's rings (as tests/test_attention.py's one-SM
    form): step 2j copies K_j's half (and the Q tile with K_0) and runs S, step 2j + 1 copies
    V_j's half and runs P·V; the leader's full barriers expect both halves. A GEMM slot is
    released when its MMA completes, so each MMA's completion delay is part of its step here."""
    programs = []
    for program, peer in ((leader, follower), (follower, None)):
        units = []
        for u, unit in enumerate(program.units):
            segments = []
            for j, kv in enumerate(unit.expanded()):
                other = peer.units[u].expanded()[j] if peer is not None else None
                k_copies = (unit.q, kv.k) if j == 0 else (kv.k,)
                expect = 0 if other is None else sum(c.smem_bytes for c in k_copies) + other.k.smem_bytes + (
                    peer.units[u].q.smem_bytes if j == 0 else 0)
                segments.append(Segment(1, k_copies, kv.qk.occupancy + kv.qk.tail, kv.qk.flops, expect=expect))
                segments.append(Segment(1, (kv.v,), kv.pv.occupancy + kv.pv.tail, kv.pv.flops,
                                        expect=0 if other is None else kv.v.smem_bytes + other.v.smem_bytes))
            units.append(Unit(u, tuple(segments), unit.epilogue))
        programs.append(UnitProgram(units))
    return programs


@pytest.mark.parametrize("stages", [1, 2])  # with one stage the follower's remote release is on the path
def test_without_softmax_one_pair_is_the_gemm_pair_pipeline_to_the_picosecond(stages):
    """Softmax free, one consumer, no overlap: the pair's run equals a GEMM 2-SM pair (the same
    copies, the same 2-SM MMAs, the same remote releases) to the picosecond."""
    s = _pair("workload.softmax_scale=0", "workload.softmax_overlap=false", "pipeline.consumers=1",
              "pipeline.consumer_mode=cooperative", "workload.tile=[128,128]", "workload.seqlen_q=256",
              "workload.heads=1", "workload.seqlen_kv=1024", "workload.launch=grid", f"pipeline.stages={stages}")
    plan, _ = plan_scenario(s)
    assert len(plan.programs) == 2 and plan.programs[0].units[0].blocks == 8
    attention = simulate(s).stats["makespan_ps"]
    gemm_plan = Plan(_gemm_pair_like(*plan.programs), False, 1, 2, flow=True, cluster=2, cluster_slots=1)
    env = simpy.Environment()
    sync = _sync(s)
    chip = Chip(env, s.gpu, gemm_plan, replace(sync, stages=2 * sync.stages), None, aggregate=True)
    env.run()
    assert attention == max(cta.finished_at for cta in chip.ctas) + launch_cost(s.gpu, plan)  # the launch: no CTA's
    block = plan.programs[0].block(0)
    assert attention > 8 * (block.qk.occupancy + block.pv.occupancy)  # copies, barriers and remote arrivals cost


@pytest.mark.parametrize("changes, message", [
    (["workload.causal=true"], "workload.causal: True is not modelled with pipeline.mma_cta_group = 2"),
    (["pipeline.warp_specialized=false"], "pipeline.warp_specialized: False is not modelled with"),
    (["pipeline.cluster=[4,1]"], r"pipeline.cluster: \[4, 1\] is modelled for the gemm workload only"),
    (["pipeline.mma_cta_group=1"], r"pipeline.cluster: \[2, 1\] is modelled for the gemm workload only \(this one is "
                                   r"'attention'; attention takes \[2, 1\] with pipeline.mma_cta_group = 2\)"),
    (["gpu=h100-sxm"], "pipeline.mma_cta_group: 2 is not available on h100-sxm"),
])
def test_what_the_pair_does_not_model_is_a_one_line_error(changes, message):
    with pytest.raises(ScenarioError, match=message):
        plan_scenario(_pair(*changes))


def test_pair_aggregation_is_exact():
    s = _pair("workload.heads=3", "workload.seqlen_q=1280")
    on = simulate(s).stats
    off = simulate(scenarios.load("attention-b200-2sm", [*SMALL, "workload.heads=3", "workload.seqlen_q=1280",
                                                         "run.aggregate=false"])).stats
    assert on["cluster_classes"] < off["cluster_classes"]
    for key in ("makespan_ps", "memory_bytes", "achieved_flops_per_s"):
        assert on[key] == off[key], key


@pytest.mark.parametrize("name", ["attention-b200", "attention-b200-2sm"])
def test_blackwell_issues_pv_before_the_next_s_because_p_overwrites_s_in_tmem(name):
    """FA4's order with the softmax overlapped: each tile's P·V of block j - 1, then its S of
    block j (S_j lands in the TMEM columns where P_{j-1} lives); the tensor cores of the
    CTA's SM (both SMs of a pair) run warpgroup 0's GEMMs as S_0, P·V_0, S_1, P·V_1, ..."""
    s = scenarios.load(name, ["workload.batch=1", "workload.heads=1", "workload.seqlen_q=512",
                              "workload.seqlen_kv=512", "run.records=true"])
    spans = simulate(s).spans
    sms = sorted(set(spans["sm"]))[: (2 if s.pipeline.mma_cta_group == 2 else 1)]
    for sm in sms:
        tensor = spans[(spans["lane"] == "tensor") & (spans["sm"] == sm) & (spans["stage"] == 0)]
        order = [(kind, step) for kind, step in tensor.sort_values("start_ps")[["kind", "tile"]].itertuples(
            index=False)]
        assert order == [("qk", 0), ("pv", 0), ("qk", 1), ("pv", 1), ("qk", 2), ("pv", 2), ("qk", 3), ("pv", 3)]
