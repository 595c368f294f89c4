"""The ``gemm`` workload: C[M, N] = A[M, K] · B[K, N] with TMA-fed tensor-core k-loops.

Each output tile (BM x BN) is a work unit. Its k-loop has ceil(K / BK) steps; each step copies
an A box (BM x BK) and a B box (BN x BK, B stored K-major as in CUTLASS's TN layout) into one
ring slot, then the consumers run 2·BM·BN·BK FLOPs on the tensor cores (a full MMA, even over
a zero-filled edge box): BK / K MMA instructions of the shape the tile maps to (see
:func:`mma_step`), which hold the tensor cores count x II and release the slot when the last
completes (latency - II later). After the last step the epilogue stages the tile through shared
memory and TMA-stores it.

L2 reuse model (documented simplification, not an LRU). CTAs that run at the same time (a
*wave*: the next G output tiles in raster order, G = resident CTAs) march through their
k-loops nearly in step, so when several of them need the same A row-panel or B column-panel
box, the first request misses to HBM and the others hit in L2. Per wave and per operand the
HBM fraction of a box is therefore (distinct panels in the wave) / (tiles in the wave). If A
and B together fit in what L2 holds under repeated reads (the preset's ``l2_fit_size``, see
:mod:`tmasim.l2`), a panel is fetched from HBM only the first time any wave needs it.
Limits: it assumes the CTAs of a wave stay within L2's capacity of each other (true for
lockstep k-loops; false if they drift far apart), ignores reuse across waves when the operands
do not fit, and spreads a wave's misses evenly over its tiles (which keeps identical SMs
identical, so aggregation stays exact).

Clusters (``pipeline.cluster = [CX, CY]``): the raster walks CX x CY blocks of output tiles,
one per cluster (a grouped band still spans ``group`` tile rows); the CTA of rank x + y·CX
computes tile (x, y) of its block. With multicast (``workload.multicast``) the CY CTAs of a
cluster row each load 1/CY of the shared A box and deliver it to all of them (B likewise over
the CX CTAs of a column); a slice is read from L2 once, and carries the panel's HBM misses for
all its receivers, so multicast cuts L2 bytes and leaves HBM bytes as they were. With
``pipeline.mma_cta_group = 2`` CTAs 2i and 2i + 1 along M are a pair: each loads its A box and
half of B (shared with the same half of the cluster's other pairs along M when B is
multicast), and the leader's MMA computes both tiles (timed by the 2-SM rows of the preset's
MMA table, tmasim.mma).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tmasim import fields as read
from tmasim.cluster import MULTICAST, ClusterPlacement, check_multicast, default_multicast, place
from tmasim.descriptor import TensorDescriptor
from tmasim.engine.chip import Plan
from tmasim.engine.program import Copy, Epilogue, Segment, Unit, UnitProgram
from tmasim.errors import ResidencyError, ScenarioError
from tmasim.hardware import DTYPES, GpuSpec
from tmasim.mma import K_OF
from tmasim.residency import Accumulator, Residency, residency

if TYPE_CHECKING:
    from tmasim.scenario import Scenario

KIND = "gemm"
FIELDS = ("kind", "m", "n", "k", "dtype", "out_dtype", "tile", "raster", "group", "launch", "ctas_per_sm",
          "epilogue_smem", "l2_reuse", "multicast")
OUT_DTYPES = ("bf16", "fp16", "fp32")
RASTERS = ("row", "column", "grouped")
MAX_DIM = 2**32      # a tensor map's largest global dimension
MAX_UNITS = 10**7    # output tiles: each is a work unit the engine builds and simulates
_OUT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class GemmConfig:
    kind: ClassVar[str] = KIND
    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    tile: tuple[int, int, int]
    raster: str = "grouped"
    group: int = 8
    launch: str = "persistent"
    ctas_per_sm: int | None = None
    epilogue_smem: int | None = None
    l2_reuse: bool = True
    multicast: str | None = None  # None: what the cluster shape allows (tmasim.cluster.default_multicast)

    def __post_init__(self) -> None:
        """Checked on every construction, ``dataclasses.replace`` included."""
        for d in ("m", "n", "k"):
            read.integer(f"workload.{d}", getattr(self, d), minimum=1, maximum=MAX_DIM)
        read.choice("workload.dtype", self.dtype, DTYPES)
        read.choice("workload.out_dtype", self.out_dtype, OUT_DTYPES)
        if not isinstance(self.tile, tuple) or len(self.tile) != 3:
            raise ScenarioError("workload.tile", self.tile, "must be a list of three whole numbers [BM, BN, BK]")
        for i, v in enumerate(self.tile):
            read.integer(f"workload.tile[{i}]", v, minimum=1, maximum=MAX_DIM)
        if self.units > MAX_UNITS:
            raise ScenarioError("workload.tile", list(self.tile),
                                f"makes {self.units:,} output tiles of {self.m}x{self.n}, over the {MAX_UNITS:,} "
                                "the engine simulates (each is a work unit); use bigger tiles or a smaller GEMM")
        read.choice("workload.raster", self.raster, RASTERS)
        read.integer("workload.group", self.group, minimum=1, maximum=MAX_UNITS)
        read.choice("workload.launch", self.launch, ("persistent", "grid"))
        if self.ctas_per_sm is not None:
            read.integer("workload.ctas_per_sm", self.ctas_per_sm, minimum=1, maximum=1024)
        if self.epilogue_smem is not None:
            read.checked_size("workload.epilogue_smem", self.epilogue_smem, positive=False)
        read.boolean("workload.l2_reuse", self.l2_reuse)

    @property
    def tiles_m(self) -> int:
        return -(-self.m // self.tile[0])

    @property
    def tiles_n(self) -> int:
        return -(-self.n // self.tile[1])

    @property
    def k_steps(self) -> int:
        return -(-self.k // self.tile[2])

    @property
    def units(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def useful_flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


def parse(raw: Mapping[str, Any]) -> GemmConfig:
    read.reject_unknown("workload", raw, FIELDS)
    dims = {d: read.integer(f"workload.{d}", read.required("workload", raw, d, " for kind 'gemm'"), minimum=1,
                            maximum=MAX_DIM) for d in ("m", "n", "k")}
    dtype = read.choice("workload.dtype", raw.get("dtype", "bf16"), DTYPES)
    out_dtype = read.choice("workload.out_dtype", raw.get("out_dtype", "fp32" if dtype == "tf32" else "bf16"),
                            OUT_DTYPES)
    tile_raw = read.required("workload", raw, "tile", " for kind 'gemm' ([BM, BN, BK])")
    if not isinstance(tile_raw, list) or len(tile_raw) != 3:
        raise ScenarioError("workload.tile", tile_raw, "must be a list of three whole numbers [BM, BN, BK]")
    tile = tuple(read.integer(f"workload.tile[{i}]", v, minimum=1) for i, v in enumerate(tile_raw))
    optional: dict[str, Any] = {}
    if "ctas_per_sm" in raw:
        optional["ctas_per_sm"] = read.integer("workload.ctas_per_sm", raw["ctas_per_sm"], minimum=1)
    if "multicast" in raw:
        optional["multicast"] = read.choice("workload.multicast", raw["multicast"], MULTICAST)
    if "epilogue_smem" in raw:
        optional["epilogue_smem"] = read.size("workload.epilogue_smem", raw["epilogue_smem"], positive=False)
    return GemmConfig(
        **dims, dtype=dtype, out_dtype=out_dtype, tile=(tile[0], tile[1], tile[2]),
        raster=read.choice("workload.raster", raw.get("raster", "grouped"), RASTERS),
        group=read.integer("workload.group", raw.get("group", 8), minimum=1),
        launch=read.choice("workload.launch", raw.get("launch", "persistent"), ("persistent", "grid")),
        l2_reuse=read.boolean("workload.l2_reuse", raw.get("l2_reuse", True)),
        **optional,
    )


@dataclass(frozen=True)
class GemmLayout:
    """Descriptors of the three matrices, as the kernel's tensor maps would describe them."""

    a: TensorDescriptor
    b: TensorDescriptor
    c: TensorDescriptor

    @staticmethod
    def of(config: GemmConfig) -> GemmLayout:
        bm, bn, bk = config.tile
        return GemmLayout(
            a=_descriptor("A", config.m, config.k, config.dtype, bm, bk),
            b=_descriptor("B", config.n, config.k, config.dtype, bn, bk),
            c=_descriptor("C", config.m, config.n, config.out_dtype, bm, bn),
        )


def _descriptor(name: str, rows: int, cols: int, dtype: str, box_rows: int, box_cols: int) -> TensorDescriptor:
    """Rows padded to 16 bytes (a leading dimension, as BLAS's lda) so TMA accepts any shape."""
    element = 4 if dtype in ("tf32", "fp32") else 1 if dtype == "fp8" else 2
    leading = -(-cols * element // 16) * 16 // element
    try:
        return TensorDescriptor.matrix(rows, cols, dtype, box_rows, box_cols, leading_dim=leading)
    except ScenarioError as err:
        raise ScenarioError("workload.tile", f"{box_rows} x {box_cols} box of {name}", err.rule) from None


def stage_bytes(config: GemmConfig) -> int:
    layout = GemmLayout.of(config)
    return layout.a.box_bytes + layout.b.box_bytes


def default_epilogue_smem(config: GemmConfig) -> int:
    """CUTLASS-style staging: two BM x 32 sub-tiles of C, not the whole tile."""
    return 2 * config.tile[0] * min(config.tile[1], 32) * _OUT_BYTES[config.out_dtype]


def tile_coords(config: GemmConfig, cluster: tuple[int, int] = (1, 1)) -> list[tuple[int, int]]:
    """(tile row, tile column) of each output tile, in launch (raster) order. With clusters the
    raster walks clusters (a band keeps ``group`` tile rows, rounded down to whole clusters), and
    each cluster's CTAs follow in rank order, rank = x + y·CX for the CTA x along M and y along N."""
    cx, cy = cluster
    clusters = _raster(config.tiles_m // cx, config.tiles_n // cy, config.raster, max(1, config.group // cx))
    return [(r * cx + rank % cx, c * cy + rank // cx) for r, c in clusters for rank in range(cx * cy)]


def _raster(tm: int, tn: int, raster: str, group: int) -> list[tuple[int, int]]:
    if raster == "row":
        return [(u // tn, u % tn) for u in range(tm * tn)]
    if raster == "column":
        return [(u % tm, u // tm) for u in range(tm * tn)]
    coords = []  # grouped: bands of `group` tile rows, column-major inside a band
    for band in range(0, tm, group):
        rows = min(group, tm - band)
        coords += [(band + local % rows, local // rows) for local in range(rows * tn)]
    return coords


def hbm_fractions(config: GemmConfig, coords: Sequence[tuple[int, int]], concurrent: int,
                  l2_size: int) -> list[tuple[float, float]]:
    """Per output tile, the share of its A and B box bytes that come from HBM (see module doc)."""
    if not config.l2_reuse:
        return [(1.0, 1.0)] * len(coords)
    layout = GemmLayout.of(config)
    fits = layout.a.tensor_bytes + layout.b.tensor_bytes <= l2_size
    seen_rows: set[int] = set()
    seen_cols: set[int] = set()
    result: list[tuple[float, float]] = []
    for start in range(0, len(coords), concurrent):
        wave = coords[start : start + concurrent]
        rows = {r for r, _ in wave}
        cols = {c for _, c in wave}
        new_rows = rows - seen_rows if fits else rows
        new_cols = cols - seen_cols if fits else cols
        if fits:
            seen_rows |= rows
            seen_cols |= cols
        result += [(len(new_rows) / len(wave), len(new_cols) / len(wave))] * len(wave)
    return result


@dataclass(frozen=True)
class MmaStep:
    """One k-step's MMA: ``count`` instructions of one shape; the tensor cores' occupancy and
    the completion delay after it, in ps (flat FLOP rate where the preset has no MMA table)."""

    instruction: str | None
    count: int
    occupancy: int
    tail: int


def mma_step(config: GemmConfig, gpu: GpuSpec, consumers: int, mode: str, pair: bool = False) -> MmaStep:
    """Map a k-step onto MMA instructions as CUTLASS does. Hopper: each consumer warpgroup
    issues wgmma m64nBNk16 over its rows (BM / consumers cooperative, all BM in ping-pong);
    Blackwell: one thread issues tcgen05.mma M = BM, N = BN (a CTA pair's leader: M = 2·BM on
    both SMs, cta_group::2, the table's 2-SM rows). Either way BK / K instructions deep. The
    SM's tensor cores take them one after another: occupancy = count x II."""
    bm, bn, bk = config.tile
    table = gpu.mma
    if table is None:  # a pair computes twice the rows on twice the tensor cores: the same time
        return MmaStep(None, 0, round(2 * bm * bn * bk / gpu.sm_flop_rate(config.dtype)), 0)
    k = K_OF[config.dtype]
    if bk % k:
        raise ScenarioError("workload.tile", f"BK = {bk}", f"is not a multiple of K = {k}, the depth of one "
                                                          f"{config.dtype} {table.instruction} instruction")
    n = bn
    if table.instruction == "wgmma":
        split = consumers if mode == "cooperative" else 1
        if bm % 64:
            raise ScenarioError("workload.tile", f"BM = {bm}", "is not a multiple of 64, the M of one wgmma")
        m, count = 64, bm // 64 * (bk // k)
        if (bm // 64) % split:
            # Too few 64-row blocks to share by rows: the warpgroups split N instead.
            if bn % split or (bn // split) % 8:
                raise ScenarioError("workload.tile", f"[{bm}, {bn}]",
                                    f"cannot be shared by {split} cooperative consumer warpgroups: neither BM / 64 "
                                    "nor BN / 8 divides evenly")
            n, count = bn // split, count * split
    else:
        m, count = bm, bk // k
    sms = 1
    if pair:
        if table.instruction != "tcgen05":
            raise ScenarioError("pipeline.mma_cta_group", 2, f"needs a 2-SM MMA; {table.instruction} runs on one SM")
        m, sms = 2 * bm, 2
    latency, ii = table.timing("workload.tile", config.dtype, m, n, sms)
    return MmaStep(table.name(config.dtype, m, n, sms), count, gpu.cycles_ps(count * ii),
                   gpu.cycles_ps(latency - ii))


PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232  # CUTLASS's setmaxnreg split for warp-specialized kernels
WARPGROUP = 128


def accumulator(config: GemmConfig, gpu: GpuSpec, consumers: int, mode: str,
                registers: tuple[int | None, int | None] = (None, None)) -> Accumulator | None:
    """Where the fp32 accumulator lives and whether it fits (one-line errors giving the numbers).

    Hopper: a consumer thread holds BM·BN / (128 · consumers) accumulator registers cooperative
    (BM·BN / 128 in ping-pong: each warpgroup owns a whole tile) plus the preset's overhead,
    within its setmaxnreg count (default 232; the producer keeps 40) and 255 per thread; the
    CTA's 128 x (producer + consumers x consumer) registers must fit the SM's file. If the
    default counts overflow the file, the consumer count defaults to what fits.
    Blackwell: BN fp32 columns of TMEM per accumulator (one per consumer in ping-pong),
    allocated in a power of two of at least 32 columns, within the SM's 512.
    """
    table = gpu.mma
    bm, bn, _ = config.tile
    if table is None:
        return None
    owners = consumers if mode == "pingpong" else 1  # accumulators per CTA
    if table.tmem_columns:
        columns = max(32, 1 << (bn * owners - 1).bit_length())
        if columns > table.tmem_columns:
            raise ResidencyError("workload.tile", list(config.tile),
                                 f"needs {columns} TMEM columns for {owners} fp32 accumulator(s) of {bm}x{bn}, over "
                                 f"the {table.tmem_columns} of an SM's Tensor Memory on {gpu.name}")
        return Accumulator(tmem_columns=columns)
    share = bm * bn // (WARPGROUP * (1 if mode == "pingpong" else consumers))
    needed = share + table.register_overhead
    producer = registers[0] if registers[0] is not None else PRODUCER_REGISTERS
    consumer = registers[1] if registers[1] is not None else _default_consumer(table.registers_per_sm, producer,
                                                                               consumers)
    allowed = min(consumer, table.registers_per_thread)
    how = f"{bm}x{bn} over {consumers} cooperative warpgroups" if mode != "pingpong" else f"{bm}x{bn} per warpgroup"
    if needed > allowed:
        raise ResidencyError("workload.tile", list(config.tile),
                             f"needs {needed} registers per consumer thread ({share} for the fp32 accumulator, {how}, "
                             f"+ {table.register_overhead} overhead), over the {allowed} allowed (pipeline.registers."
                             f"consumer = {consumer}; at most {table.registers_per_thread} per thread)")
    per_cta = WARPGROUP * (producer + consumers * consumer)
    if per_cta > table.registers_per_sm:
        raise ResidencyError("pipeline.registers", f"{{producer = {producer}, consumer = {consumer}}}",
                             f"gives a CTA 128 x ({producer} + {consumers} x {consumer}) = {per_cta} registers, over "
                             f"the {table.registers_per_sm} of an SM on {gpu.name}")
    return Accumulator(producer, consumer, needed, per_cta)


def _default_consumer(per_sm: int, producer: int, consumers: int) -> int:
    fits = (per_sm // WARPGROUP - producer) // consumers // 8 * 8
    return min(CONSUMER_REGISTERS, fits)


def check(config: GemmConfig, scenario: Scenario) -> None:
    """No rules between this workload and the rest of the scenario beyond what ``plan`` checks."""


@dataclass(frozen=True)
class ClusterSetup:
    """How the CTAs of a cluster share operands: ``share`` = (CTAs each A box is split among,
    CTAs each B box is split among); 1 means no multicast of that operand."""

    shape: tuple[int, int]
    multicast: str
    share: tuple[int, int]
    pair: bool = False  # 2-SM MMA: rank 0 (leader) and rank 1 split B and compute one 2·BM x BN tile

    @staticmethod
    def of(config: GemmConfig, shape: tuple[int, int], mma_cta_group: int = 1) -> ClusterSetup:
        pair = mma_cta_group == 2
        # A pair (two CTAs along M) acts as one CTA of a cluster of pairs: B is shared between pairs.
        among = (shape[0] // 2, shape[1]) if pair else shape
        multicast = config.multicast if config.multicast is not None else default_multicast(among)
        check_multicast(multicast, among, shape if pair else None)
        a = shape[1] if multicast in ("a", "both") else 1
        b = among[0] if multicast in ("b", "both") else 1
        return ClusterSetup(shape, multicast, (a, 2 * b if pair else b), pair)

    def masks(self, rank: int) -> tuple[int, int]:
        """The ranks (bit masks) that receive this CTA's A slice and its B slice. In a pair each
        CTA holds one half of B: that half is shared with the same half in the other pairs."""
        cx, cy = self.shape
        x, y = rank % cx, rank // cx
        a = sum(1 << (x + j * cx) for j in range(cy)) if self.share[0] > 1 else 0
        b_group = [i for i in range(cx) if i % 2 == x % 2] if self.pair else range(cx)
        b = sum(1 << (i + y * cx) for i in b_group) if self.share[1] > (2 if self.pair else 1) else 0
        return a, b

    def b_slice(self, rank: int) -> int:
        """Which of the ``share[1]`` slices of the B box this CTA loads."""
        x = rank % self.shape[0]
        if not self.pair:
            return x
        return (x % 2) * (self.share[1] // 2) + x // 2 if self.share[1] > 2 else x % 2


def plan(config: GemmConfig, scenario: Scenario) -> tuple[Plan, Residency]:
    gpu, p = scenario.gpu, scenario.pipeline
    stages, consumers, mode, registers = p.stages, p.consumers, p.consumer_mode, p.registers
    if config.dtype not in gpu.tensor_flops:
        raise ScenarioError("workload.dtype", config.dtype, f"has no tensor-core rate on {gpu.name} "
                            f"(gpu.tensor_flops gives {', '.join(gpu.tensor_flops) or 'none'})")
    cluster, mma_cta_group = p.cluster, p.mma_cta_group
    setup = ClusterSetup.of(config, cluster, mma_cta_group)
    layout = GemmLayout.of(config)
    step = mma_step(config, gpu, consumers, mode, setup.pair)
    acc = accumulator(config, gpu, consumers, mode, registers)
    epilogue_smem = config.epilogue_smem if config.epilogue_smem is not None else default_epilogue_smem(config)
    b_stage = layout.b.box_bytes // 2 if setup.pair else layout.b.box_bytes  # a pair's CTA holds half of B
    res = residency(gpu, stage_bytes=layout.a.box_bytes + b_stage, stages=stages,
                    other_smem=epilogue_smem, consumers=consumers, requested_ctas_per_sm=config.ctas_per_sm,
                    accumulator=acc)
    placement = place(gpu, cluster, res.ctas_per_sm, res.limited_by)
    _check_grid(config, cluster)
    size = placement.size
    coords = tile_coords(config, cluster)
    slots = min(len(coords) // size, placement.clusters)  # clusters resident at once
    concurrent = slots * size
    fractions = hbm_fractions(config, coords, concurrent, gpu.l2_fit_size)  # what L2 holds (tmasim.l2)
    cache: dict[tuple[int, int, float, float, int], Unit] = {}
    units = []
    for index, ((row, col), (fa, fb)) in enumerate(zip(coords, fractions, strict=True)):
        rank = index % size
        key = (_edge(row, config.tiles_m), _edge(col, config.tiles_n), fa, fb, rank)
        if key not in cache:
            cache[key] = _unit(config, layout, gpu, step, row, col, fa, fb, setup, rank)
        units.append(Unit(index, cache[key].segments, cache[key].epilogue))
    if config.launch == "persistent":
        programs = [UnitProgram(units[g::concurrent]) for g in range(concurrent)]
    else:
        programs = [UnitProgram([unit]) for unit in units]
    sms = min(gpu.sms - placement.idle_sms, len(programs))
    info = _cluster_info(setup, placement, slots, gpu) if size > 1 else {}
    if setup.pair:
        info["mma_cta_group"] = 2
    return Plan(programs, config.launch == "persistent", res.ctas_per_sm, sms, flow=True, units=len(units),
                cluster=size, cluster_slots=slots, info=info), res


def _check_grid(config: GemmConfig, cluster: tuple[int, int]) -> None:
    cx, cy = cluster
    if config.tiles_m % cx or config.tiles_n % cy:
        raise ScenarioError("pipeline.cluster", [cx, cy],
                            f"must divide the grid of output tiles ({config.tiles_m} x {config.tiles_n} tiles of "
                            f"{config.tile[0]} x {config.tile[1]}): a cluster is launched whole")


def _cluster_info(setup: ClusterSetup, placement: ClusterPlacement, slots: int, gpu: GpuSpec) -> dict[str, object]:
    return {
        "cluster": f"{setup.shape[0]}x{setup.shape[1]}",  # scalars only: summaries become table rows
        "multicast": setup.multicast,
        "clusters_resident": placement.clusters,
        "clusters_per_gpc": "+".join(map(str, placement.per_gpc)),
        "idle_sms": placement.idle_sms,
        "cluster_portable": placement.portable,
        "cluster_slots_used": slots,
        "remote_arrive_ns": gpu.cluster_arrive_latency / 1000,
    }


def work_units(config: GemmConfig, plan: Plan) -> int:
    return plan.units


def describe(config: GemmConfig) -> str:
    bm, bn, bk = config.tile
    return f"{config.m}x{config.n}x{config.k} {config.dtype} GEMM, tile {bm}x{bn}x{bk}"


def stats(config: GemmConfig, scenario: Scenario, plan: Plan, res: Residency, makespan: int) -> dict[str, Any]:
    """The bounds (see :func:`breakdown`) and how close the run comes to the one that binds."""
    extra: dict[str, Any] = breakdown(config, scenario.gpu, plan, scenario.pipeline.stages)
    step = mma_step(config, scenario.gpu, scenario.pipeline.consumers, scenario.pipeline.consumer_mode,
                    scenario.pipeline.mma_cta_group == 2)
    extra.update(mma_instruction=step.instruction, mma_per_k_step=step.count if step.instruction else None,
                 mma_k_step_ns=step.occupancy / 1000, mma_completion_ns=step.tail / 1000)
    extra["efficiency"] = extra["bound_ns"] * 1000 / makespan if makespan else None
    return extra


def _edge(index: int, count: int) -> bool:
    return index == count - 1


def _unit(config: GemmConfig, layout: GemmLayout, gpu: GpuSpec, step: MmaStep, row: int, col: int, fa: float,
          fb: float, setup: ClusterSetup, rank: int) -> Unit:
    bm, bn, bk = config.tile
    rows_in = min(bm, config.m - row * bm)
    cols_in = min(bn, config.n - col * bn)
    cx = setup.shape[0]
    (a_parts, b_parts), (a_mask, b_mask) = setup.share, setup.masks(rank)
    # A CTA issues its slice of each shared box: along N (index y) for A, along M (index x) for B.
    a_index, b_index = rank // cx, setup.b_slice(rank)
    expect = layout.a.box_bytes + layout.b.box_bytes if a_mask or b_mask else 0
    if setup.pair:  # each CTA holds its A box and half of B; the leader's full barrier counts both CTAs'
        expect = 2 * layout.a.box_bytes + layout.b.box_bytes if rank % 2 == 0 else 0
        rows_in += max(0, min(bm, config.m - (row + 1) * bm))  # the leader's MMA covers the pair's rows
    segments = []
    for first_k, count in _k_segments(config):
        k_in = min(bk, config.k - first_k)
        a = _copy(gpu, layout.a, (first_k, row * bm), fa, a_parts, a_index, a_mask)
        b = _copy(gpu, layout.b, (first_k, col * bn), fb, b_parts, b_index, b_mask)
        flops = 0.0 if setup.pair and rank % 2 else 2.0 * rows_in * cols_in * k_in
        segments.append(Segment(count, (a, b), step.occupancy, flops, step.tail, expect))
    c_bytes = layout.c.box_bytes
    staging = round(c_bytes / gpu.smem_bandwidth) if gpu.smem_bandwidth != float("inf") else 0
    store = Copy(c_bytes, layout.c.bytes_from_memory((col * bn, row * bm)), 1.0, 0)
    return Unit(-1, tuple(segments), Epilogue(staging, store))


def _k_segments(config: GemmConfig) -> list[tuple[int, int]]:
    """(first k of the segment, steps): all full k-steps, then a partial last one if K % BK."""
    bk, steps = config.tile[2], config.k_steps
    if config.k % bk == 0:
        return [(0, steps)]
    return [(0, steps - 1), ((steps - 1) * bk, 1)] if steps > 1 else [(0, 1)]


def _copy(gpu: GpuSpec, descriptor: TensorDescriptor, coord: tuple[int, int], hbm_fraction: float,
          parts: int = 1, index: int = 0, mask: int = 0) -> Copy:
    """One TMA load: the whole box, or (multicast) slice ``index`` of ``parts`` of it, delivered
    to the cluster ranks in ``mask``. The slice is read once from L2; the wave's HBM misses
    for the panel are spread over ``parts`` times fewer reads, so HBM bytes do not change."""
    smem = _part(descriptor.box_bytes, index, parts)
    memory = _part(descriptor.bytes_from_memory(coord), index, parts)
    fraction = min(1.0, hbm_fraction * parts)
    latency = gpu.copy_latency_for(smem) + round(fraction * gpu.hbm_latency)
    return Copy(smem, memory, fraction, latency, multicast=mask, requests=_part(descriptor.requests, index, parts))


def _part(nbytes: int, index: int, parts: int) -> int:
    """Slice ``index`` of ``parts`` near-equal whole-byte slices; the slices add up to ``nbytes``."""
    return nbytes * (index + 1) // parts - nbytes * index // parts


def breakdown(config: GemmConfig, gpu: GpuSpec, plan: Plan, stages: int) -> dict[str, object]:
    """The bounds a GEMM cannot beat, from the plan alone, and the one that binds.

    compute: the busiest SM's tensor-core time (wave quantization included); hbm and l2: all
    bytes over each link's bandwidth; port: the busiest SM's bytes over its ingest port (or its
    TMA requests at the unit's request rate, where those take longer);
    latency: the busiest slot of any CTA, whose uses follow one another, each at least one
    round trip (see :func:`slot_round_trip`). ``serial_ns`` is the no-overlap time of the
    busiest SM: every step's copy, then its compute, one after another.
    """
    sms = plan.sms
    compute, nbytes, serial = ([0.0] * sms for _ in range(3))
    latency = hbm = l2 = 0.0
    for g, program in enumerate(plan.programs):
        sm = g % sms
        assert isinstance(program, UnitProgram)
        latency = max(latency, _busiest_slot(program, gpu, stages))
        for unit in program.units:
            for seg in unit.segments:
                step_bytes = sum(c.memory_bytes for c in seg.copies)
                compute[sm] += seg.steps * seg.compute
                # A multicast slice crosses the port of every CTA it lands in (its peers' slices, ours).
                nbytes[sm] += seg.steps * sum(max(c.memory_bytes * max(1, c.multicast.bit_count()),
                                                  c.requests * gpu.tma_request_time * gpu.sm_port_bandwidth)
                                              for c in seg.copies)
                serial[sm] += seg.steps * slot_round_trip(gpu, seg)
                hbm += seg.steps * sum(c.memory_bytes * c.hbm_fraction for c in seg.copies)
                l2 += seg.steps * step_bytes
            if unit.epilogue is not None:
                serial[sm] += unit.epilogue.duration
                if unit.epilogue.store is not None:
                    hbm += unit.epilogue.store.memory_bytes
                    l2 += unit.epilogue.store.memory_bytes
    bounds = {
        "compute": max(compute),
        "hbm": hbm / gpu.hbm_bandwidth,
        "l2": l2 / gpu.l2_bandwidth,
        "port": max(nbytes) / gpu.sm_port_bandwidth,
        "latency": latency,
    }
    binding = max(bounds, key=lambda k: bounds[k])
    return {
        "serial_ns": max(serial) / 1000,
        "closed_form_ns": None,
        "flops": config.useful_flops,
        "binding": binding,
        **{f"{name}_bound_ns": value / 1000 for name, value in bounds.items()},
        "bound_ns": bounds[binding] / 1000,
        "bound_flops_per_s": config.useful_flops / bounds[binding] * 1e12 if bounds[binding] else None,
        "model_hbm_bytes": hbm,
    }


def slot_round_trip(gpu: GpuSpec, seg: Segment) -> float:
    """The least time one use of a slot takes: the issue, the copies' latency and transfer at
    the SM port's rate or the TMA unit's request rate, whichever is slower (one after another), the full barrier's wake-up, the compute, and the
    empty barrier's wake-up before the producer may refill the slot."""
    transfer = [max(c.memory_bytes / gpu.sm_port_bandwidth, c.requests * gpu.tma_request_time) for c in seg.copies]
    landing = max(min(c.latency for c in seg.copies) + sum(transfer),
                  max(c.latency + x for c, x in zip(seg.copies, transfer, strict=True)))
    remote = gpu.cluster_arrive_latency if any(c.multicast for c in seg.copies) else 0
    return gpu.tma_issue + landing + gpu.barrier_wake + seg.compute + seg.tail + remote + gpu.barrier_wake


def _busiest_slot(program: UnitProgram, gpu: GpuSpec, stages: int) -> float:
    """The longest chain of uses of one slot (steps i, i + S, i + 2S, ...) of a CTA; its
    first use waits on no empty barrier."""
    per_slot = [0.0] * stages
    first = 0
    for unit in program.units:
        for seg in unit.segments:
            trip = slot_round_trip(gpu, seg)
            last = first + seg.steps - 1
            for slot in range(stages):
                uses = (last - slot) // stages - (first - 1 - slot) // stages
                per_slot[slot] += uses * trip
            first += seg.steps
    return max(0.0, max(per_slot) - gpu.barrier_wake)


# ------------------------------------------------------------------------------ presentation

BOUND_NAMES = (("compute", "compute"), ("l2", "L2"), ("hbm", "HBM"), ("port", "SM port"), ("latency", "latency"))


def summary_rows(stats: Mapping[str, Any], scenario: Scenario) -> list[tuple[str, str]]:
    from tmasim import format as fmt
    from tmasim.summary import chip_rows, t

    config = scenario.workload
    assert isinstance(config, GemmConfig)
    peak = scenario.gpu.tensor_flops[config.dtype] * 1e12
    rate = stats["achieved_flops_per_s"]
    bounds = ", ".join(f"{name} {t(stats[f'{key}_bound_ns'], zero='none')}" for key, name in BOUND_NAMES)
    binding = dict(BOUND_NAMES).get(stats["binding"], stats["binding"])
    return [
        ("predicted time", f"{t(stats['makespan_ns'])}   ({fmt.flop_rate(rate)}, {fmt.percent(rate / peak)} of "
                           f"the {fmt.flop_rate(peak)} {config.dtype} peak)"),
        ("bound", f"{t(stats['bound_ns'])}, binding: {binding}   (the run reaches {fmt.percent(stats['efficiency'])} "
                  "of it)"),
        ("bounds", bounds),
        ("no-overlap time", f"{t(stats['serial_ns'])} on the busiest SM"),
        *_with_mma_rows(chip_rows(stats, scenario), stats, scenario),
        *(_cluster_rows(stats, scenario) if "cluster" in stats else []),
    ]


def _with_mma_rows(rows: list[tuple[str, str]], stats: Mapping[str, Any],
                   scenario: Scenario) -> list[tuple[str, str]]:
    """The MMA instructions of a k-step and where the accumulator lives (registers or TMEM:
    storage, shown beside SMEM right after the residency row, apart from the TMA traffic)."""
    from tmasim import format as fmt
    from tmasim.summary import t

    mma_rows = []
    if stats.get("mma_instruction"):
        mma_rows.append(("MMA", f"{stats['mma_per_k_step']} x {stats['mma_instruction']} per k-step: tensor cores "
                                f"busy {t(stats['mma_k_step_ns'])}, the last completes "
                                f"{t(stats['mma_completion_ns'])} later"))
    mma = scenario.gpu.mma
    if stats.get("registers_per_cta") and mma is not None:
        mma_rows.append(("registers", f"{stats['registers_per_consumer_thread']} per consumer thread (needs "
                                      f"{stats['registers_needed_per_thread']}), "
                                      f"{stats['registers_per_producer_thread']} per producer thread: "
                                      f"{stats['registers_per_cta']} of {mma.registers_per_sm} per SM"))
    if stats.get("tmem_columns_per_cta") and mma is not None:
        columns, lanes = stats["tmem_columns_per_cta"], mma.tmem_lanes
        mma_rows.append(("TMEM", f"{columns} columns ({fmt.size(columns * lanes * 4)}) per CTA for the accumulator, "
                                 f"of {mma.tmem_columns} ({fmt.size(mma.tmem_columns * lanes * 4)}) per SM"))
    at = [name for name, _ in rows].index("residency") + 1
    return rows[:at] + mma_rows + rows[at:]
def _cluster_rows(stats: Mapping[str, Any], scenario: Scenario) -> list[tuple[str, str]]:
    from tmasim.summary import cluster_rows

    cx, cy = scenario.pipeline.cluster
    config = scenario.workload
    assert isinstance(config, GemmConfig)
    chosen = "set" if config.multicast is not None else "default: what the shape allows"
    shares = {"none": "no operand shared", "a": f"A split over the {cy} CTAs of a cluster row",
              "b": f"B split over the {cx} CTAs of a cluster column", "both": "A over each row, B over each column"}
    if stats.get("mma_cta_group") == 2:
        chosen = "2-SM MMA"
        shares["none"] = "each CTA of the pair loads its A box and half of B; the leader's MMA reads both"
    return cluster_rows(stats, f"multicast {stats['multicast']} ({chosen}; {shares[stats['multicast']]})")


def explain(stats: Mapping[str, Any]) -> str:
    """The bound that binds, in one sentence a reviewer can repeat."""
    from tmasim.summary import t

    s = stats
    binding, compute = s["binding"], t(s["compute_bound_ns"])
    if binding == "compute":
        others = ", ".join(f"{name} {t(s[f'{key}_bound_ns'], zero='none')}" for key, name in BOUND_NAMES[1:])
        return (f"Compute binds: the busiest SM needs {compute} of tensor-core time, more than any memory path "
                f"needs ({others}).")
    if binding in ("l2", "hbm"):
        return _explain_link(s, binding)
    if binding == "port":
        return (f"The SMs' L2 ports bind: the busiest SM needs {t(s['port_bound_ns'])} just to take in its "
                f"operands through its one port and TMA unit (bytes, or row requests), more than its {compute} of tensor-core time; bigger tiles "
                "(more reuse per byte) would help.")
    return (f"Latency binds: with {s['stages']} stages x {s['ctas_per_sm']} CTA(s) per SM in flight, the busiest "
            f"SM's slot round trips add up to at least {t(s['latency_bound_ns'])}, more than its {compute} of "
            "compute; more stages, if shared memory allows, would hide it.")


def _explain_link(s: Mapping[str, Any], binding: str) -> str:
    from tmasim import format as fmt
    from tmasim.summary import t

    link = "HBM" if binding == "hbm" else "L2"
    nbytes = _link_bytes(s, binding)
    supply = nbytes / (float(s[f"{binding}_bound_ns"]) * 1e-9)
    demand = nbytes / (float(s["compute_bound_ns"]) * 1e-9)
    what = "box data" if binding == "l2" else "DRAM traffic"
    return (f"{link} bandwidth binds: to keep the tensor cores busy the SMs together would ask for "
            f"{fmt.rate(demand)} of {what}, and {link} supplies {fmt.rate(supply)}, so moving "
            f"{fmt.amount(nbytes)} takes at least {t(s[f'{binding}_bound_ns'])}.")


def _link_bytes(s: Mapping[str, Any], link: str) -> float:
    """What the bound moved over the link: carried bytes where recorded, else the model's count."""
    for key in ((f"{link}_carried_bytes", "memory_bytes") if link == "l2" else ("model_hbm_bytes", "hbm_bytes")):
        value = s.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return float(value)
    return 0.0
