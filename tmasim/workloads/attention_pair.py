"""Attention with the 2-SM MMA (``pipeline.mma_cta_group = 2``): FlashAttention-4's
``cta_group::2`` form on Blackwell (``flash_attn/cute/flash_fwd_sm100.py``, ``use_2cta_instrs``).

A *pair unit* is 2 x BM query rows of one head: cluster rank 0 (the leader) holds the first
BM, rank 1 the next BM, each its own Q tile(s), S and O in its own Tensor Memory. One
tcgen05.mma of M = 2 x (rows per consumer) on both SMs (the B200 table's 2-SM rows) computes
each GEMM for both; its B operand is split along N, so each CTA loads half of every K block
(its BN / 2 keys) and half of every V block (d_v / 2 columns): the pair reads each block once,
each SM holds and receives half (FA4: ``smem_size_kv_per_stage // cta_group_size``). FLOPs are
counted on the leader. Each CTA's softmax warpgroups run on its own SM (the engine's side is
:mod:`tmasim.engine.attention.pair`). FA4 uses the pair for non-causal attention only; so does
this model (a one-line error otherwise), and it needs a producer warpgroup.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tmasim.engine.attention.program import AttentionProgram, AttentionSchedule, AttentionUnit, KvBlock, Mma
from tmasim.engine.chip import Plan
from tmasim.engine.program import Copy, Epilogue
from tmasim.errors import ScenarioError
from tmasim.machine.cluster import place
from tmasim.machine.hardware import GpuSpec
from tmasim.machine.mma import K_OF
from tmasim.machine.operands import operand_timing
from tmasim.machine.residency import Residency, residency
from tmasim.workloads.attention_config import ELEMENT_BYTES, AttentionConfig
from tmasim.workloads.attention_plan import (
    OUT_BYTES,
    Shape,
    assign,
    block,
    epilogue_ps,
    round_fractions,
    shape_of,
    smem_parts,
    tensor_memory,
    tma_copy,
    unit_order,
)

if TYPE_CHECKING:
    from tmasim.settings.parts import ScenarioParts


def check_pair(config: AttentionConfig, scenario: ScenarioParts) -> None:
    """What the pair needs beyond the scenario's rules (which give attention a cluster of
    [2, 1] only with the pair: larger clusters would multicast K/V, not modelled)."""
    gpu, p = scenario.gpu, scenario.pipeline
    if gpu.mma is None or gpu.mma.instruction != "tcgen05":
        raise ScenarioError("pipeline.mma_cta_group", 2, f"needs a 2-SM MMA (tcgen05.mma cta_group::2); {gpu.name} "
                                                         "has none")
    if config.causal:
        raise ScenarioError("workload.causal", True, "is not modelled with pipeline.mma_cta_group = 2 (FA4 uses "
                                                     "the 2-SM MMA for non-causal attention only)")
    if not p.warp_specialized:
        raise ScenarioError("pipeline.warp_specialized", False, "is not modelled with pipeline.mma_cta_group = 2 "
                                                                "(each CTA of the pair needs its producer)")
    if config.d_v % 32 or config.tile[1] % 32:
        raise ScenarioError("workload.tile", list(config.tile), "splits K (BN keys) and V (head_dim_v columns) in "
                                                                "halves of multiples of 16: both must be multiples "
                                                                "of 32")


def pair_mma(gpu: GpuSpec, dtype: str, rows: int, n: int, k: int, flops: float, source: str = "SS") -> Mma:
    """``2·rows`` x ``n`` x ``k`` as one tcgen05.mma cta_group::2 per K of 16 (bf16): the 2-SM
    rows of the preset's table, issued no faster than each SM's shared memory serves its half of
    the operands (``source`` as :func:`tmasim.workloads.attention_plan.mma_phase`)."""
    table = gpu.mma
    assert table is not None
    count = k // K_OF[dtype]
    latency, ii = table.timing("workload.tile", dtype, 2 * rows, n, 2)
    per_cycle = gpu.smem_bytes_per_cycle()
    op = operand_timing(latency, ii, 2 * rows, n, 2, source, per_cycle, table.operands)
    return Mma(gpu.cycles_ps(count * op.ii), gpu.cycles_ps(op.latency - op.ii), flops)


def plan_pair(config: AttentionConfig, scenario: ScenarioParts) -> tuple[Plan, Residency]:
    check_pair(config, scenario)
    gpu, p = scenario.gpu, scenario.pipeline
    shape = shape_of(config, p)
    stage, q_bytes, o_bytes, o_over = smem_parts(config, gpu, p.stages, halves=2)
    res = residency(gpu, stage_bytes=stage, stages=p.stages, other_smem=q_bytes + o_bytes + 16,
                    consumers=shape.warpgroups, accumulator=tensor_memory(config, gpu, shape))
    placement = place(gpu, (2, 1), res.ctas_per_sm, res.limited_by)
    bm = config.tile[0]
    pair_blocks = -(-config.seqlen_q // (2 * bm))
    order = [(b, h, m) for b, h, m in unit_order(config) if m < pair_blocks]  # non-causal: m, then b and h
    counts = [config.n_blocks] * len(order)
    concurrent = min(placement.clusters, len(order))  # pairs resident at once
    fractions = round_fractions(config, order, concurrent, gpu.l2_size)
    schedule = AttentionSchedule(shape.processes, shape.pingpong, config.softmax_overlap, True, o_over,
                                 gpu.tma_issue, config.correction_warpgroup, pair=True, pv_first=True)
    leaders, followers = (_units(config, gpu, shape, order, fractions, rank) for rank in (0, 1))
    persistent = config.launch == "persistent"
    groups = assign(counts, concurrent) if persistent else [[i] for i in range(len(order))]
    programs = [AttentionProgram([units[i] for i in group], schedule)
                for group in groups for units in (leaders, followers)]
    sms = min(gpu.sms - placement.idle_sms, len(programs))
    info = {"o_over": o_over, "max_blocks": max(counts), "mean_blocks": float(config.n_blocks),
            "processes": shape.processes, "warpgroups": shape.warpgroups, "mma_cta_group": 2, "cluster": "2x1",
            "clusters_resident": placement.clusters, "clusters_per_gpc": "+".join(map(str, placement.per_gpc)),
            "idle_sms": placement.idle_sms, "cluster_portable": placement.portable, "cluster_slots_used": concurrent,
            "remote_arrive_ns": gpu.cluster_arrive_latency / 1000}
    return Plan(programs, persistent, res.ctas_per_sm, sms, flow=True, units=2 * len(order), cluster=2,
                cluster_slots=concurrent, info=info), res


def _units(config: AttentionConfig, gpu: GpuSpec, shape: Shape, order: list[tuple[int, int, int]],
           fractions: list[float], rank: int) -> list[AttentionUnit]:
    """One CTA's side of each pair unit: its Q rows, its halves of K and V, the pair's MMAs
    (FLOPs on the leader only), its own softmax and epilogue."""
    e = ELEMENT_BYTES[config.dtype]
    bm, bn = config.tile
    d, dv = config.head_dim, config.d_v
    last, tail = config.n_blocks - 1, config.n_kv - (config.n_blocks - 1) * bn
    blocks: dict[tuple[float, int, float], KvBlock] = {}

    def kv(fraction: float, keys: int, share: float) -> KvBlock:
        if (fraction, keys, share) not in blocks:
            mine = min(bn // 2, max(0, keys - rank * bn // 2))  # rank 0: the first BN / 2 keys of K
            k = tma_copy(gpu, bn // 2 * d * e, mine, d * e, fraction)
            v = tma_copy(gpu, bn * dv // 2 * e, keys, dv // 2 * e, fraction)  # every key, d_v / 2 columns
            own = block(config, gpu, shape.rows, k, v, False, keys)  # this CTA's softmax and rescale
            qk = pair_mma(gpu, config.dtype, shape.rows, bn, d, share * own.qk.flops)
            pv = pair_mma(gpu, config.dtype, shape.rows, dv, bn, share * own.pv.flops, "TS")  # P in Tensor Memory
            blocks[(fraction, keys, share)] = replace(own, qk=qk, pv=pv)
        return blocks[(fraction, keys, share)]

    epilogue = epilogue_ps(config, gpu, shape.rows)
    units = []
    for index, ((_, _, m), fraction) in enumerate(zip(order, fractions, strict=True)):
        rows = [min(bm, max(0, config.seqlen_q - (2 * m + r) * bm)) for r in (0, 1)]  # a last follower may have none
        rows_in = rows[rank]
        # The MMAs compute both CTAs' rows (the useful ones count), their FLOPs on the leader.
        share = 0.0 if rank else sum(rows) / bm
        runs = [(kv(fraction, bn, share), last), (kv(fraction, tail, share), 1)] if tail < bn \
            else [(kv(fraction, bn, share), last + 1)]
        q = tma_copy(gpu, bm * d * e, rows_in, d * e, 1.0)
        store = Copy(bm * dv * OUT_BYTES, rows_in * dv * OUT_BYTES, 1.0, 0)
        units.append(AttentionUnit(index, q, tuple(runs), Epilogue(epilogue, store)))
    return units
