"""The ``gemm`` workload's config: the ``[workload]`` table of kind ``gemm``, read and checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tmasim.errors import ScenarioError
from tmasim.machine.cluster import MULTICAST
from tmasim.machine.hardware import DTYPES
from tmasim.machine.operands import DEFAULT_SOURCE, SOURCE_NAMES
from tmasim.values import fields as read

KIND = "gemm"
FIELDS = ("kind", "m", "n", "k", "dtype", "out_dtype", "tile", "raster", "group", "launch", "ctas_per_sm",
          "epilogue_smem", "l2_reuse", "multicast", "operands", "swizzle", "warm_l2", "split_k", "scheduler")
# The work (tmasim.field_roles): the GEMM's shape and types; the tile, raster, launch, cluster
# sharing and the rest are how it is done.
PROBLEM_FIELDS = ("m", "n", "k", "dtype", "out_dtype")
OUT_DTYPES = ("bf16", "fp16", "fp32", "fp8")  # fp8: e4m3, as CUTLASS's fp8 epilogues store
RASTERS = ("row", "column", "grouped")
# How output tiles become CTAs' work (tmasim.workloads.gemm_split): one CTA per tile's whole k-loop,
# or CUTLASS's stream-K decomposition of the k-iterations over the persistent CTAs.
SCHEDULERS = ("data-parallel", "stream-k")
MAX_DIM = 2**32      # a tensor map's largest global dimension
MAX_UNITS = 10**7    # output tiles: each is a work unit the engine builds and simulates
OUT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
# The operand tensor maps' swizzle: the widest box inner extent in bytes (``none``: 16 bytes, the
# narrowest a TMA box row may be), so a wider k-step is several boxes (tmasim.workloads.gemm_layout).
SWIZZLE_BYTES = {"128B": 128, "64B": 64, "32B": 32, "none": 16}


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
    operands: str = DEFAULT_SOURCE  # where the MMA reads A from (tmasim.operands); B is always in SMEM
    swizzle: str = "128B"  # the A and B tensor maps' swizzle: how wide one TMA box may be
    warm_l2: bool = False  # A and B already in L2 (a benchmark's warm-up ran first), where they fit
    split_k: int = 1  # CTAs that share each output tile's k-loop (at most its k-tiles), adding through a workspace
    scheduler: str = "data-parallel"  # whole tiles per CTA, or CUTLASS's stream-K (tmasim.workloads.gemm_split)

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
        read.choice("workload.operands", self.operands, SOURCE_NAMES)
        read.choice("workload.swizzle", self.swizzle, tuple(SWIZZLE_BYTES))
        read.boolean("workload.warm_l2", self.warm_l2)
        if self.multicast is not None:
            read.choice("workload.multicast", self.multicast, MULTICAST)
        read.integer("workload.split_k", self.split_k, minimum=1, maximum=MAX_UNITS)
        read.choice("workload.scheduler", self.scheduler, SCHEDULERS)
        if self.split_k > self.k_steps:
            raise ScenarioError("workload.split_k", self.split_k, f"must be at most the {self.k_steps} k-tiles of "
                                f"each output tile (K = {self.k} over BK = {self.tile[2]}): each split needs one")
        if self.split_k > 1 and self.scheduler == "stream-k":
            raise ScenarioError("workload.split_k", self.split_k, "must be 1 with workload.scheduler = \"stream-k\": "
                                "stream-K splits the k-iterations itself (CUTLASS runs splits > 1 as split-K)")
        if self.scheduler == "stream-k" and self.launch != "persistent":
            raise ScenarioError("workload.scheduler", self.scheduler, "needs workload.launch = \"persistent\": "
                                "stream-K spreads the k-iterations over the persistent CTAs")
        if self.units * self.split_k > MAX_UNITS:
            raise ScenarioError("workload.split_k", self.split_k, f"makes {self.units * self.split_k:,} work units "
                                f"({self.units:,} tiles x {self.split_k}), over the {MAX_UNITS:,} the engine simulates")

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
        m=dims["m"], n=dims["n"], k=dims["k"], dtype=dtype, out_dtype=out_dtype, tile=(tile[0], tile[1], tile[2]),
        raster=read.choice("workload.raster", raw.get("raster", "grouped"), RASTERS),
        group=read.integer("workload.group", raw.get("group", 8), minimum=1),
        launch=read.choice("workload.launch", raw.get("launch", "persistent"), ("persistent", "grid")),
        l2_reuse=read.boolean("workload.l2_reuse", raw.get("l2_reuse", True)),
        operands=read.choice("workload.operands", raw.get("operands", DEFAULT_SOURCE), SOURCE_NAMES),
        swizzle=read.choice("workload.swizzle", raw.get("swizzle", "128B"), tuple(SWIZZLE_BYTES)),
        warm_l2=read.boolean("workload.warm_l2", raw.get("warm_l2", False)),
        split_k=read.integer("workload.split_k", raw.get("split_k", 1), minimum=1, maximum=MAX_UNITS),
        scheduler=read.choice("workload.scheduler", raw.get("scheduler", "data-parallel"), SCHEDULERS),
        **optional,
    )
