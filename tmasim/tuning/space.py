"""A scenario's design space: every way to run its problem that ``tmasim tune`` searches.

The problem (shape, dtype, GPU) stays as the scenario has it; the design fields vary:

- GEMM: tiles BM x BN x BK with BM a multiple of the MMA's M (Hopper's wgmma: 64, 128, 192,
  256; Blackwell's tcgen05: 64 or 128 per SM, a 2-SM pair twice that), BN from 64 to 256 in steps
  of 64, and BK one 128-byte row of the 128-byte swizzle (64 bf16 or fp16 elements, 128 fp8,
  32 tf32; a narrower row costs the TMA unit as many requests for half the bytes); every stage
  count from 2 up to what the CTA's shared memory could hold of the stages alone; thread-block
  clusters of 1 or 2 CTAs along M and N (1x1, 2x1, 1x2, 2x2) with each multicast they allow
  (none, A, B, both), and on Blackwell each with 2-SM pairs where the cluster has two CTAs along
  M; the ``row``, ``column`` and ``grouped`` rasters. The launch, the scheduler and split-K,
  consumers, their mode and the rest stay as the scenario sets them.
- The wide GEMM space (``tmasim tune --wide``) adds clusters of every power-of-two shape up to
  the GPU's largest (``gpu.max_cluster_size_opt_in``: 16 CTAs on Hopper and Blackwell, past the
  portable 8 with the kernel's opt-in), and how tiles become work: a persistent launch with whole
  tiles (data-parallel) or CUTLASS's stream-K, a grid launch with whole tiles, and split-K into 2,
  4 or 8 where the problem's tiles times the splits stay within two per SM (more splits than
  that only add partials to reduce: the tiles already fill the chip, and stream-K evens out a
  partial wave). It is about fourteen times the size, and it costs more than that: many of its
  points share the best's bound (a compute bound is the same for every cluster shape that fills
  the same SMs), and each one within the knee's tolerance of the best must be simulated;
  stream-K's CTAs differ, so each of its runs simulates every SM. On the 8192^3 GEMM on an H100
  it finds a stream-K design that takes 3.7% less time than the narrow space's best, in about
  two minutes on two cores.
- Attention: tiles BM x BN with BM 64, 128 or 192 and BN 64, 128 or 192; 1, 2 or 3 consumer
  warpgroups, cooperative or ping-pong; the softmax overlapped or not; every stage count from 2
  up to what shared memory could hold of the K and V blocks alone.

A field given with ``--set`` is kept as given (``--set workload.launch=persistent`` tunes the
persistent launch only, ``--set 'pipeline.cluster=[2,1]'`` that cluster with each multicast),
and the others vary around it. A candidate that breaks a rule (a stage count that does not fit,
an accumulator over the registers, a cluster that does not fit a GPC, BM not shared by the
warpgroups) is left out of the space and counted, with its reason (:mod:`tmasim.tuning.run`).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tmasim.errors import TmasimError
from tmasim.inputs.scenario import Scenario
from tmasim.machine.descriptor import ELEMENT_BYTES
from tmasim.machine.hardware import GpuSpec
from tmasim.workloads.attention_config import AttentionConfig
from tmasim.workloads.gemm_config import GemmConfig

MIN_STAGES = 2  # one stage overlaps nothing: never a design a search should spend a simulation on
ROW_BYTES = 128  # a k-step's row of A and B: one 128-byte swizzle atom
GEMM_BN = (64, 128, 192, 256)
RASTERS = ("row", "column", "grouped")
LAUNCHES = ("persistent", "grid")
SCHEDULERS = ("data-parallel", "stream-k")
SPLITS = (2, 4, 8)
SPLIT_TILES_PER_SM = 2  # split-K only while the tiles times the splits stay within this many per SM
ATTENTION_BM = (64, 128, 192)
ATTENTION_BN = (64, 128, 192)
ATTENTION_CONSUMERS = (1, 2, 3)
MODES = ("cooperative", "pingpong")
GEMM_FIELDS = ("workload.tile", "pipeline.stages", "pipeline.cluster", "workload.multicast",
               "pipeline.mma_cta_group", "workload.raster", "workload.launch", "workload.scheduler",
               "workload.split_k")
ATTENTION_FIELDS = ("workload.tile", "pipeline.stages", "pipeline.consumers", "pipeline.consumer_mode",
                    "workload.softmax_overlap")


@dataclass(frozen=True)
class Space:
    """The candidate points: the fields they set, and each point's values, in that order."""

    kind: str
    fields: tuple[str, ...]
    points: tuple[tuple[Any, ...], ...]

    def __len__(self) -> int:
        return len(self.points)


def design_space(base: Scenario, kept: Collection[str] = (), *, wide: bool = False) -> Space:
    """Every candidate design of ``base``'s problem on its GPU (valid or not: see the module). The
    fields named in ``kept`` take ``base``'s value alone and are left out of the points. Without
    ``wide``, a GEMM's clusters go up to 2x2 and its launch, scheduler and split-K stay as ``base``
    has them (the wide space's other points rarely win, and cost many simulations: see the module)."""
    kind = base.workload.kind
    fields: tuple[str, ...]
    points: Iterable[tuple[Any, ...]]
    if kind == "gemm":
        narrow = () if wide else ("workload.launch", "workload.scheduler", "workload.split_k")
        kept = frozenset(kept) | frozenset(narrow)
        fields, points = GEMM_FIELDS, _gemm(base, kept, wide)
    elif kind == "attention":
        fields, points = ATTENTION_FIELDS, _attention(base, frozenset(kept))
    else:
        raise TmasimError(f"tune: workload.kind = {kind!r} has no design space to search; tune a gemm or attention "
                          "scenario (sweep the fields you want with `tmasim sweep --search`)")
    varied = [n for n, name in enumerate(fields) if name not in kept]
    return Space(kind, tuple(fields[n] for n in varied), tuple(tuple(p[n] for n in varied) for p in points))


def _choices(kept: frozenset[str], field: str, options: Iterable[Any], value: Any) -> Iterable[Any]:
    return (value,) if field in kept else options


def _gemm(base: Scenario, kept: frozenset[str], wide: bool) -> Iterator[tuple[Any, ...]]:
    gpu, w, p = base.gpu, base.workload, base.pipeline
    assert isinstance(w, GemmConfig)
    element = ELEMENT_BYTES.get(w.dtype, 2)
    bk = ROW_BYTES // element
    instruction = gpu.mma.instruction if gpu.mma is not None else None
    bms = (64, 128) if instruction == "tcgen05" else (64, 128, 192, 256)
    groups = (1, 2) if instruction == "tcgen05" else (1,)
    tiles = _choices(kept, "workload.tile", [[bm, bn, bk] for bm, bn in itertools.product(bms, GEMM_BN)],
                     list(w.tile))
    for tile in tiles:
        bm, bn, tile_bk = tile
        ways = _decompositions(base, tile, kept)
        for group in _choices(kept, "pipeline.mma_cta_group", groups, p.mma_cta_group):
            stage_bytes = (bm + bn // group) * tile_bk * element  # a pair's CTA holds half of B
            most = max(MIN_STAGES, gpu.smem_per_cta // stage_bytes)
            for cluster in _choices(kept, "pipeline.cluster", cluster_shapes(gpu, 16 if wide else 2), list(p.cluster)):
                if group == 2 and cluster[0] % 2:
                    continue  # a 2-SM pair is two CTAs along M of one cluster
                for multicast in _choices(kept, "workload.multicast", multicasts(cluster[0] // group, cluster[1]),
                                          w.multicast):
                    for launch, scheduler, split in ways:
                        for stages in _choices(kept, "pipeline.stages", range(MIN_STAGES, most + 1), p.stages):
                            for raster in _choices(kept, "workload.raster", RASTERS, w.raster):
                                yield tile, stages, list(cluster), multicast, group, raster, launch, scheduler, split


def cluster_shapes(gpu: GpuSpec, side: int = 16) -> list[tuple[int, int]]:
    """Every power-of-two cluster shape the GPU allows with at most ``side`` CTAs along M and along
    N, smallest first (1x1, 2x1, 1x2, 2x2, ...)."""
    most = gpu.max_cluster_size_opt_in
    sizes = [1 << n for n in range(most.bit_length()) if 1 << n <= min(most, side)]
    shapes = [(cx, cy) for cx in sizes for cy in sizes if cx * cy <= most]
    return sorted(shapes, key=lambda shape: (shape[0] * shape[1], -shape[0]))


def _decompositions(base: Scenario, tile: list[int], kept: frozenset[str]) -> list[tuple[str, str, int]]:
    """(launch, scheduler, split_k) of each way the tiles become work: persistent data-parallel
    and stream-K, grid data-parallel, and split-K (both launches) where the splits leave at most
    two tiles' parts per SM; a kept field takes the scenario's value."""
    gpu, w = base.gpu, base.workload
    assert isinstance(w, GemmConfig)
    bm, bn, bk = tile
    tiles, k_steps = -(-w.m // bm) * -(-w.n // bn), -(-w.k // bk)
    splits = [1] + [s for s in SPLITS if s <= k_steps and tiles * s <= SPLIT_TILES_PER_SM * gpu.sms]
    ways = [(launch, scheduler, split)
            for launch in _choices(kept, "workload.launch", LAUNCHES, w.launch)
            for scheduler in _choices(kept, "workload.scheduler", SCHEDULERS, w.scheduler)
            for split in _choices(kept, "workload.split_k", splits, w.split_k)]
    # stream-K runs on a persistent launch and splits the k-loops itself (tmasim.workloads.gemm_config)
    valid = [(launch, scheduler, split) for launch, scheduler, split in ways
             if scheduler != "stream-k" or (launch == "persistent" and split == 1)]
    return valid or ways  # kept fields that break the rule: left out by it, with its reason


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


def _attention(base: Scenario, kept: frozenset[str]) -> Iterator[tuple[Any, ...]]:
    gpu, w, p = base.gpu, base.workload, base.pipeline
    assert isinstance(w, AttentionConfig)
    element = ELEMENT_BYTES.get(w.dtype, 2)
    tiles = _choices(kept, "workload.tile", [[bm, bn] for bm, bn in itertools.product(ATTENTION_BM, ATTENTION_BN)],
                     list(w.tile))
    for tile in tiles:
        block_bytes = tile[1] * (w.head_dim + w.d_v) * element  # one K and one V block
        most = max(MIN_STAGES, gpu.smem_per_cta // block_bytes)
        for consumers, mode, overlap in itertools.product(
                _choices(kept, "pipeline.consumers", ATTENTION_CONSUMERS, p.consumers),
                _choices(kept, "pipeline.consumer_mode", MODES, p.consumer_mode),
                _choices(kept, "workload.softmax_overlap", (True, False), w.softmax_overlap)):
            for stages in _choices(kept, "pipeline.stages", range(MIN_STAGES, most + 1), p.stages):
                yield tile, stages, consumers, mode, overlap
