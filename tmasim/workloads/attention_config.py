"""The ``attention`` workload's configuration: fields, checks, the FLOP convention and which
K/V blocks a causal query block computes (see :mod:`tmasim.workloads.attention`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tmasim.errors import ScenarioError
from tmasim.values import fields as read

KIND = "attention"
FIELDS = ("kind", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_kv", "head_dim", "head_dim_v", "dtype", "causal",
          "tile", "launch", "softmax_overlap", "softmax_scale", "correction_warpgroup", "exp_emulated")
# The fields that change the work; the others (tile, launch, softmax_overlap, softmax_scale,
# correction_warpgroup, exp_emulated) are design: how it is done (tmasim.field_roles).
PROBLEM_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_kv", "head_dim", "head_dim_v", "dtype", "causal")
HEAD_DIMS = (64, 96, 128, 192, 256)
DTYPES = ("bf16", "fp16", "fp8")
LAUNCHES = ("persistent", "grid")
MAX_SEQLEN = 2**24
MAX_UNITS = 10**6
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
FA4_EMULATED = 0.2  # FA4's share of exponentials emulated on the FMA pipe (its paper, §3.1: 10-25%): within it


@dataclass(frozen=True)
class AttentionConfig:
    kind: ClassVar[str] = KIND
    batch: int
    heads: int
    seqlen_q: int
    head_dim: int
    tile: tuple[int, int]
    kv_heads: int | None = None  # None: = heads
    seqlen_kv: int | None = None  # None: = seqlen_q
    head_dim_v: int | None = None  # None: = head_dim
    dtype: str = "bf16"
    causal: bool = False
    launch: str = "persistent"
    softmax_overlap: bool = True
    softmax_scale: float = 1.0  # what-if: x the softmax's vector-unit time (0: free)
    correction_warpgroup: bool = False  # FA4: a warpgroup of its own rescales O, off the softmax's path
    exp_emulated: float | None = None  # share of the exponentials on the FMA pipe (FA4); None: FA4 0.2, FA3 0

    def __post_init__(self) -> None:
        """Checked on every construction, ``dataclasses.replace`` included."""
        read.integer("workload.batch", self.batch, minimum=1, maximum=MAX_UNITS)
        read.integer("workload.heads", self.heads, minimum=1, maximum=MAX_UNITS)
        read.integer("workload.seqlen_q", self.seqlen_q, minimum=1, maximum=MAX_SEQLEN)
        if self.seqlen_kv is not None:
            read.integer("workload.seqlen_kv", self.seqlen_kv, minimum=1, maximum=MAX_SEQLEN)
        for name in ("head_dim", "head_dim_v"):
            value = getattr(self, name)
            if value is not None or name == "head_dim":  # a whole number first: 128.0 == 128 would pass the list
                read.integer(f"workload.{name}", value)
            if value is not None and value not in HEAD_DIMS:
                raise ScenarioError(f"workload.{name}", value, f"must be one of {', '.join(map(str, HEAD_DIMS))}")
        if self.kv_heads is not None:
            read.integer("workload.kv_heads", self.kv_heads, minimum=1, maximum=MAX_UNITS)
            if self.heads % self.kv_heads:
                raise ScenarioError("workload.kv_heads", self.kv_heads,
                                    f"must divide workload.heads = {self.heads} (each K/V head serves a group of "
                                    "query heads)")
        read.choice("workload.dtype", self.dtype, DTYPES)
        read.boolean("workload.causal", self.causal)
        read.choice("workload.launch", self.launch, LAUNCHES)
        read.boolean("workload.softmax_overlap", self.softmax_overlap)
        read.boolean("workload.correction_warpgroup", self.correction_warpgroup)
        if isinstance(self.softmax_scale, bool) or not isinstance(self.softmax_scale, (int, float)) \
                or not 0 <= self.softmax_scale <= 1000:
            raise ScenarioError("workload.softmax_scale", self.softmax_scale,
                                "must be a number from 0 (softmax free) to 1000")
        if self.exp_emulated is not None and (isinstance(self.exp_emulated, bool)
                                              or not isinstance(self.exp_emulated, (int, float))
                                              or not 0 <= self.exp_emulated <= 1):
            raise ScenarioError("workload.exp_emulated", self.exp_emulated,
                                "must be a share from 0 to 1 (of the exponentials computed by a polynomial on the "
                                "FMA pipe instead of the multi-function unit)")
        _check_tile(self.tile)
        if self.units > MAX_UNITS:
            raise ScenarioError("workload.tile", list(self.tile),
                                f"makes {self.units:,} work units (batch x heads x query blocks), over the "
                                f"{MAX_UNITS:,} the engine simulates; use a bigger BM or a smaller problem")

    def emulated_share(self, tensor_memory: bool) -> float:
        """The share of the score exponentials emulated on the FMA pipe: ``exp_emulated``, or by
        default FA4's on Blackwell (0.2, inside the 10-25% of FA4's paper, §3.1: its code's split
        depends on the head dim and the 2-SM pair and is not transcribed here) and none on Hopper
        (FA3 computes every exponential on the multi-function unit)."""
        if self.exp_emulated is not None:
            return float(self.exp_emulated)
        return FA4_EMULATED if tensor_memory else 0.0

    @property
    def kv_group(self) -> int:
        return self.heads // (self.kv_heads or self.heads)

    @property
    def n_kv(self) -> int:
        return self.seqlen_kv if self.seqlen_kv is not None else self.seqlen_q

    @property
    def d_v(self) -> int:
        return self.head_dim_v if self.head_dim_v is not None else self.head_dim

    @property
    def m_blocks(self) -> int:
        return -(-self.seqlen_q // self.tile[0])

    @property
    def n_blocks(self) -> int:
        return -(-self.n_kv // self.tile[1])

    @property
    def units(self) -> int:
        return self.batch * self.heads * self.m_blocks

    @property
    def useful_flops(self) -> float:
        """The convention: 2·(d + d_v) per (query, key) pair a row attends to, per head (S = Q·Kᵀ
        and O = P·V; 4·Sq·Skv·d when d_v = d and nothing is masked). Causal: the pairs under the
        bottom-right-aligned diagonal, counted exactly (query row i sees keys up to
        i + Skv − Sq, as FlashAttention aligns it), so padded query rows, masked pairs and rows
        that see no key count nothing."""
        return 2.0 * self.visible_pairs * (self.head_dim + self.d_v) * self.heads * self.batch

    @property
    def visible_pairs(self) -> int:
        """(query, key) pairs one head computes usefully: Σ over rows of :meth:`visible_keys`."""
        sq, skv = self.seqlen_q, self.n_kv
        if not self.causal:
            return sq * skv
        if sq <= skv:  # every row sees Skv − Sq + i + 1 keys
            return sq * (skv - sq) + sq * (sq + 1) // 2
        return skv * (skv + 1) // 2  # the first Sq − Skv rows see none, the rest 1 .. Skv

    def visible_keys(self, row: int) -> int:
        """How many keys query row ``row`` attends to (all, or up to the bottom-right diagonal)."""
        if not self.causal:
            return self.n_kv
        return max(0, min(self.n_kv, row + 1 + self.n_kv - self.seqlen_q))

    def blocks_of(self, m_block: int) -> tuple[int, int]:
        """(K/V blocks the query block computes, of which the first ``full`` are unmasked):
        returns (blocks, full)."""
        return self._blocks_per_query_block[m_block]

    @functools.cached_property
    def _blocks_per_query_block(self) -> tuple[tuple[int, int], ...]:
        """:meth:`blocks_of` for every query block, worked out once (a plan asks per unit)."""
        bm, bn = self.tile
        if not self.causal:
            return ((self.n_blocks, self.n_blocks),) * self.m_blocks
        table = []
        for m_block in range(self.m_blocks):
            first_row, last_row = m_block * bm, min(self.seqlen_q, (m_block + 1) * bm) - 1
            blocks = -(-self.visible_keys(last_row) // bn)
            table.append((blocks, min(blocks, self.visible_keys(first_row) // bn)))
        return tuple(table)


def _check_tile(tile: Any) -> None:
    if not isinstance(tile, tuple) or len(tile) != 2:
        raise ScenarioError("workload.tile", tile, "must be a list of two whole numbers [BM, BN] (query rows per "
                                                   "CTA, K/V rows per block)")
    for i, v in enumerate(tile):
        read.integer(f"workload.tile[{i}]", v, minimum=16, maximum=256)
        if v % 16:
            raise ScenarioError(f"workload.tile[{i}]", v, "must be a multiple of 16 (the K of one bf16 MMA)")


def fa3_tile(head_dim: int, head_dim_v: int | None = None, causal: bool = False,
             dtype: str = "bf16") -> tuple[int, int]:
    """FA3's forward tile on Hopper when the user sets none: ``tile_size_fwd_sm90`` in
    Dao-AILab/flash-attention ``hopper/tile_size.h`` (not local, not paged, no softcap, two or
    three consumer warpgroups). Where FA3 takes P through shared memory (its ``MmaPV_is_RS``
    false: head dim 64 non-causal at 192 x 192, head dim 96 at 192 x 144) the model keeps P in
    registers, so it takes the tile FA3 uses with P in registers (192 x 128, its causal head
    dim 64 tile) or, for head dim 96, the widest BN whose O, S and P fit the 160 registers of
    FA3's three-warpgroup split (192 x 96)."""
    dv = head_dim_v or head_dim
    if ELEMENT_BYTES.get(dtype, 2) == 2:
        if head_dim <= 64:
            return (128, 112) if dv == 256 else (192, 128)
        if head_dim <= 96:
            return 192, 96  # FA3: 192 x 144 with P through shared memory; in registers 96 keys fit 160
        if head_dim <= 128:
            return 128, 128 if causal else 176
        if head_dim <= 192:
            return 128, 128 if dv <= 128 else 112
        return 128, 80
    if head_dim <= 64:
        return 192, 160
    if head_dim <= 96:
        return 192, 128
    if head_dim <= 128:
        return 128, 224
    if head_dim <= 192:
        return 128, 160
    return 128, 128


def default_tile(raw: Mapping[str, Any], hopper: bool) -> tuple[int, int]:
    """The tile a scenario without ``workload.tile`` gets: FA3's on Hopper (:func:`fa3_tile`),
    128 x 128 elsewhere (FA4's forward on Blackwell: two 128-row Q tiles, 128 keys a block)."""
    if not hopper:
        return 128, 128
    head_dim = raw.get("head_dim")
    if head_dim not in HEAD_DIMS:
        return 128, 128  # the config's own check names the field
    dv = raw.get("head_dim_v") if raw.get("head_dim_v") in HEAD_DIMS else None
    return fa3_tile(head_dim, dv, bool(raw.get("causal", False)), str(raw.get("dtype", "bf16")))


def parse(raw: Mapping[str, Any]) -> AttentionConfig:
    read.reject_unknown("workload", raw, FIELDS)
    need = " for kind 'attention'"
    if "tile" not in raw:
        raw = {**raw, "tile": list(default_tile(raw, True))}
    tile_raw = read.required("workload", raw, "tile", need + " ([BM, BN])")
    if not isinstance(tile_raw, list) or len(tile_raw) != 2:
        raise ScenarioError("workload.tile", tile_raw, "must be a list of two whole numbers [BM, BN]")
    values: dict[str, Any] = {key: read.required("workload", raw, key, need)
                              for key in ("batch", "heads", "seqlen_q", "head_dim")}
    values.update({key: raw[key] for key in FIELDS[1:] if key in raw and key not in values and key != "tile"})
    if "exp_emulated" in values and isinstance(values["exp_emulated"], int) \
            and not isinstance(values["exp_emulated"], bool):
        values["exp_emulated"] = float(values["exp_emulated"])
    if "softmax_scale" in values and isinstance(values["softmax_scale"], int) \
            and not isinstance(values["softmax_scale"], bool) and abs(values["softmax_scale"]) <= 1000:
        values["softmax_scale"] = float(values["softmax_scale"])  # a larger one is refused as it is
    return AttentionConfig(tile=(tile_raw[0], tile_raw[1]), **values)
