"""The ``attention`` workload: the forward pass of FlashAttention-3 (Shah et al., 2024) on TMA.

O = softmax(Q·Kᵀ / sqrt(d)) · V for ``batch`` x ``heads`` heads of ``seqlen_q`` query rows
against ``seqlen_kv`` keys. A work unit is one (batch, head, query block of BM rows): its CTA
loads the Q tile once, streams the head's K and V blocks (BN rows each) through two stage rings
(K and V, each slot with its own full and empty barriers), and per block computes S = Q·Kᵀ
(MMA, shared-memory operands), the online softmax (row max, exponentials, row sum, the rescale
of O) on the SM's FP32 and multi-function units, and O += P·V (MMA, P from registers); the
epilogue divides O by the row sums and stores it with TMA. The engine's side is
:mod:`tmasim.engine.attention.cta`; costs are derived here (:mod:`.attention_costs`).

FLOP convention: the useful work, 2 · (head_dim + head_dim_v) per (query, key) pair a query
row attends to, per head and batch: 4 · seqlen_q · seqlen_kv · head_dim · heads · batch without
a mask (FlashAttention's benchmarks). Causal: only the pairs on or under the bottom-right-aligned
diagonal, counted exactly (about half for a square mask; with seqlen_q ≠ seqlen_kv, what the mask
leaves). Padded query rows (seqlen_q not a multiple of the tile) and masked scores count nothing;
``achieved_flops_per_s`` is this count over the makespan.

Causal masking (query row r sees keys 0..r + seqlen_kv - seqlen_q, bottom-right aligned as
FlashAttention 2+): blocks wholly above the diagonal are skipped; blocks the diagonal crosses
are computed in full and masked (their softmax cost kept; their useful FLOPs are the unmasked
scores' share). CTAs then do unequal work.

Launch. ``persistent`` (default): one CTA per resident slot walks units in *longest-first*
order (most K/V blocks first; ties by batch, head, query block), each unit going to the CTA
with the least work so far (counted in blocks): what a dynamic scheduler taking the next unit
from a longest-first queue does when a unit's time is proportional to its blocks. ``grid``:
one CTA per unit, launched in the same order; the block scheduler places them as SMs free up.

L2 reuse: as for GEMM, the units that run at the same time (a *round*: the next P units in
launch order, P = resident CTAs) read the K/V blocks of their heads nearly in step, so a head's
blocks come from HBM once per round (the most any unit of that head reads) and the other reads
hit in L2; Q is read once, from HBM. Grouped-query heads (``kv_heads`` < heads) share K/V.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tmasim.errors import ScenarioError
from tmasim.values import format as fmt
from tmasim.workloads.attention_bounds import breakdown, explain, stats, summary_rows
from tmasim.workloads.attention_config import FIELDS, KIND, PROBLEM_FIELDS, AttentionConfig, default_tile, parse
from tmasim.workloads.attention_pair import plan_pair
from tmasim.workloads.attention_plan import plan as plan_single

if TYPE_CHECKING:
    from tmasim.engine.chip import Plan
    from tmasim.machine.residency import Residency
    from tmasim.settings.parts import ScenarioParts

__all__ = ["FIELDS", "KIND", "PROBLEM_FIELDS", "AttentionConfig", "check", "defaults", "describe", "explain", "parse",
           "lower_bound_ns", "plan",
           "plan_size", "stats", "summary_rows", "work_units"]


def defaults(workload: Mapping[str, Any], pipeline: Mapping[str, Any], hopper: bool) -> tuple[dict, dict]:
    """A scenario that sets no ``workload.tile`` runs what FA3 would (:func:`.attention_config.default_tile`),
    and, unless it sets ``pipeline.consumers``, with BM / 64 consumer warpgroups in ping-pong (FA3:
    one warpgroup of 64 rows each, taking turns on the tensor cores); with one consumer warpgroup
    set, FA3's one-warpgroup tiles (64 x 192 for head dim 64, 64 rows otherwise)."""
    workload, pipeline = dict(workload), dict(pipeline)
    if "tile" in workload:
        return workload, pipeline
    bm, bn = default_tile(workload, hopper)
    if hopper and pipeline.get("consumers") == 1:  # FA3's use_one_mma_wg: one warpgroup of 64 rows
        bm, bn = 64, 192 if workload.get("head_dim", 128) <= 64 else bn
    workload["tile"] = [bm, bn]
    if "consumers" not in pipeline and hopper:
        pipeline["consumers"] = bm // 64
        pipeline.setdefault("consumer_mode", "pingpong")
    return workload, pipeline


def check(config: AttentionConfig, scenario: ScenarioParts) -> None:
    """Rules between attention and the rest of the scenario."""
    p, gpu = scenario.pipeline, scenario.gpu  # the fields it does not read: tmasim.inputs.field_use
    if p.consumers > 3:
        raise ScenarioError("pipeline.consumers", p.consumers, "must be 1, 2 or 3 for attention (FA3 runs up to three "
                                                               "consumer warpgroups, ping-pong or cooperative)")
    if not p.warp_specialized and config.softmax_overlap and p.stages < 2:
        raise ScenarioError("pipeline.stages", p.stages,
                            "must be at least 2 with workload.softmax_overlap and no producer warpgroup "
                            "(pipeline.warp_specialized = false): the consumer that issues the copies loads K_j "
                            "with V_j, whose only slot its own P·V_{j-1} holds until S_j, on K_j, is done")
    if config.tile[0] % (64 * p.consumers) and gpu.mma is not None and gpu.mma.instruction == "wgmma":
        raise ScenarioError("workload.tile", list(config.tile),
                            f"BM = {config.tile[0]} must be a multiple of 64 x "
                            f"{fmt.plural(p.consumers, 'consumer warpgroup')}: "
                            "each warpgroup's wgmma has M = 64")
    if config.softmax_scale and (not gpu.exp_per_clock or not gpu.fp32_per_clock):
        raise ScenarioError("gpu.exp_per_clock", gpu.exp_per_clock,
                            f"must be set (with gpu.fp32_per_clock) on {gpu.name} for attention's softmax, or "
                            "workload.softmax_scale = 0 (softmax free)")
    if config.dtype not in gpu.tensor_flops:
        raise ScenarioError("workload.dtype", config.dtype, f"has no tensor-core rate on {gpu.name}")


def plan(config: AttentionConfig, scenario: ScenarioParts) -> tuple[Plan, Residency]:
    """One CTA per work unit, or with the 2-SM MMA pairs of CTAs (:mod:`.attention_pair`)."""
    if scenario.pipeline.mma_cta_group == 2:
        return plan_pair(config, scenario)
    return plan_single(config, scenario)


def lower_bound_ns(config: AttentionConfig, scenario: ScenarioParts) -> float:
    """The run's ``bound_ns`` (:func:`.attention_bounds.breakdown`), from the plan without running it."""
    planned, _ = plan(config, scenario)
    return float(breakdown(config, scenario.gpu, planned, scenario.pipeline.stages)["bound_ns"])


def plan_size(config: AttentionConfig, scenario: ScenarioParts) -> tuple[int, int, int]:
    """(ring steps, work units, other bytes) of the plan, before it is built (tmasim.budget): a
    step is one K/V block of a unit, and every CTA's program lists its steps, so a long sequence
    is refused here rather than by a MemoryError while planning. Counted from the problem alone
    (its units' blocks, causal ones summed over the query blocks with numpy), never unit by unit."""
    bm, bn = config.tile
    heads = config.batch * config.heads
    if scenario.pipeline.mma_cta_group == 2:  # pairs of CTAs, each pair 2 x BM query rows
        pairs = heads * -(-config.seqlen_q // (2 * bm))
        return 2 * pairs * config.n_blocks, 2 * pairs, 0
    if not config.causal:
        return heads * config.m_blocks * config.n_blocks, heads * config.m_blocks, 0
    last_rows = np.minimum(config.seqlen_q, (np.arange(config.m_blocks, dtype=np.int64) + 1) * bm) - 1
    visible = np.clip(last_rows + 1 + config.n_kv - config.seqlen_q, 0, config.n_kv)
    return heads * int((-(-visible // bn)).sum()), heads * config.m_blocks, 0


def work_units(config: AttentionConfig, plan: Plan) -> int:
    return plan.units


def describe(config: AttentionConfig) -> str:
    bm, bn = config.tile
    mask = "causal " if config.causal else ""
    gqa = f" ({config.kv_heads} K/V heads)" if config.kv_heads not in (None, config.heads) else ""
    return (f"{mask}{config.dtype} attention forward, batch {config.batch} x {config.heads} heads{gqa}, seqlen "
            f"{config.seqlen_q}" + (f"/{config.n_kv}" if config.n_kv != config.seqlen_q else "")
            + f", head dim {config.head_dim}, tile {bm}x{bn}")

