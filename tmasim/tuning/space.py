"""A scenario's design space: every way to run its problem that ``tmasim tune`` searches.

The problem (shape, dtype, GPU) stays as the scenario has it; the design fields vary:

- GEMM: tiles BM x BN x BK with BM a multiple of the MMA's M (Hopper's wgmma: 64, 128, 192,
  256; Blackwell's tcgen05: 64 or 128 per SM, a 2-SM pair twice that), BN from 64 to 256 in steps
  of 64, and BK one 128-byte row of the 128-byte swizzle (64 bf16 or fp16 elements, 128 fp8,
  32 tf32; a narrower row costs the TMA unit as many requests for half the bytes); every stage
  count from 2 up to what the CTA's shared memory could hold of the stages alone; thread-block
  clusters of 1 or 2 CTAs along M and N (1x1, 2x1, 1x2, 2x2) with each multicast they allow
  (none, A, B, both), and on Blackwell each with 2-SM pairs where the cluster has two CTAs along
  M; the ``row``, ``column`` and ``grouped`` rasters. The launch, split-K and stream-K, consumers
  and the rest stay as the scenario sets them (``--set workload.launch=grid`` tunes a grid launch,
  ``--set workload.scheduler=stream-k`` the space with CUTLASS's stream-K scheduler).
- Attention: tiles BM x BN with BM 64, 128 or 192 and BN 64, 128 or 192; 1, 2 or 3 consumer
  warpgroups, cooperative or ping-pong; the softmax overlapped or not; every stage count from 2
  up to what shared memory could hold of the K and V blocks alone.

A candidate that breaks a rule (a stage count that does not fit, an accumulator over the
registers, a cluster that does not fit a GPC, BM not shared by the warpgroups) is left out of
the space and counted, with its reason (:mod:`tmasim.tuning.run`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tmasim.errors import TmasimError
from tmasim.inputs.scenario import Scenario
from tmasim.machine.descriptor import ELEMENT_BYTES
from tmasim.workloads.attention_config import AttentionConfig
from tmasim.workloads.gemm_config import GemmConfig

MIN_STAGES = 2  # one stage overlaps nothing: never a design a search should spend a simulation on
ROW_BYTES = 128  # a k-step's row of A and B: one 128-byte swizzle atom
GEMM_BN = (64, 128, 192, 256)
GEMM_CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))
RASTERS = ("row", "column", "grouped")
ATTENTION_BM = (64, 128, 192)
ATTENTION_BN = (64, 128, 192)
ATTENTION_CONSUMERS = (1, 2, 3)
MODES = ("cooperative", "pingpong")


@dataclass(frozen=True)
class Space:
    """The candidate points: the fields they set, and each point's values, in that order."""

    kind: str
    fields: tuple[str, ...]
    points: tuple[tuple[Any, ...], ...]

    def __len__(self) -> int:
        return len(self.points)


def design_space(base: Scenario) -> Space:
    """Every candidate design of ``base``'s problem on its GPU (valid or not: see the module)."""
    kind = base.workload.kind
    fields: tuple[str, ...]
    if kind == "gemm":
        fields = ("workload.tile", "pipeline.stages", "pipeline.cluster", "workload.multicast",
                  "pipeline.mma_cta_group", "workload.raster")
        return Space(kind, fields, tuple(_gemm(base)))
    if kind == "attention":
        fields = ("workload.tile", "pipeline.stages", "pipeline.consumers", "pipeline.consumer_mode",
                  "workload.softmax_overlap")
        return Space(kind, fields, tuple(_attention(base)))
    raise TmasimError(f"tune: workload.kind = {kind!r} has no design space to search; tune a gemm or attention "
                      "scenario (sweep the fields you want with `tmasim sweep --search`)")


def _gemm(base: Scenario) -> Iterator[tuple[Any, ...]]:
    gpu, w = base.gpu, base.workload
    assert isinstance(w, GemmConfig)
    element = ELEMENT_BYTES.get(w.dtype, 2)
    bk = ROW_BYTES // element
    instruction = gpu.mma.instruction if gpu.mma is not None else None
    bms = (64, 128) if instruction == "tcgen05" else (64, 128, 192, 256)
    groups = (1, 2) if instruction == "tcgen05" else (1,)
    for bm, bn, group in itertools.product(bms, GEMM_BN, groups):
        stage_bytes = (bm + bn // group) * bk * element  # a pair's CTA holds half of B
        for cluster in GEMM_CLUSTERS:
            if group == 2 and cluster[0] % 2:
                continue  # a 2-SM pair is two CTAs along M of one cluster
            for multicast in multicasts(cluster[0] // group, cluster[1]):
                for stages in range(MIN_STAGES, max(MIN_STAGES, gpu.smem_per_cta // stage_bytes) + 1):
                    for raster in RASTERS:
                        yield [bm, bn, bk], stages, list(cluster), multicast, group, raster


def multicasts(along_m: int, along_n: int) -> tuple[str, ...]:
    """The multicast options a cluster allows: A is shared along N, B along M (tmasim.cluster)."""
    options = ["none"]
    if along_n > 1:
        options.append("a")
    if along_m > 1:
        options.append("b")
    if along_m > 1 and along_n > 1:
        options.append("both")
    return tuple(options)


def _attention(base: Scenario) -> Iterator[tuple[Any, ...]]:
    gpu, w = base.gpu, base.workload
    assert isinstance(w, AttentionConfig)
    element = ELEMENT_BYTES.get(w.dtype, 2)
    for bm, bn in itertools.product(ATTENTION_BM, ATTENTION_BN):
        block_bytes = bn * (w.head_dim + w.d_v) * element  # one K and one V block
        for consumers, mode, overlap in itertools.product(ATTENTION_CONSUMERS, MODES, (True, False)):
            for stages in range(MIN_STAGES, max(MIN_STAGES, gpu.smem_per_cta // block_bytes) + 1):
                yield [bm, bn], stages, consumers, mode, overlap
