"""Launch parameters of the validation kernels, their rules and derived layouts.

Pure Python (no numba): the rules are checked before anything touches a GPU, so a
bad sweep fails in the first second with a message that names the parameter, the
value and the rule, instead of as a ptxas or launch error minutes later.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Variant(StrEnum):
    """How the producer moves a tile from global to shared memory."""

    BULK_1D = "tma_bulk_1d"  # cp.async.bulk, one contiguous chunk per tile
    TENSOR_2D = "tma_tensor_2d"  # cp.async.bulk.tensor.2d through a tensor map
    SYNC = "sync_ld_st"  # one producer warp, ordinary loads and stores (no TMA)

    @property
    def code(self) -> int:
        """The integer the kernel switches on."""
        return _VARIANT_CODES[self]


_VARIANT_CODES = {Variant.BULK_1D: 0, Variant.TENSOR_2D: 1, Variant.SYNC: 2}

ELEMENT_BYTES = 4  # tiles hold float32
WARP = 32
PRODUCER_THREADS = WARP  # warp 0 produces; warps 1.. consume
MAX_STAGES = 8  # size of the static barrier array (full + empty per stage)
SMEM_ALIGN = 128  # stage buffers are aligned by hand inside the dynamic buffer
STATIC_SMEM_BYTES = 2 * MAX_STAGES * 8  # the mbarrier words (full + empty per stage)
SMEM_LIMIT_BYTES = 48 * 1024  # static + dynamic per block without the opt-in attribute
TILE_BYTES_QUANTUM = 256  # 2-D boxes are rows of 64 float32 (256 B)
BOX_W_ELEMS = 64  # inner box extent of the 2-D variant (256 B rows)
MAX_BOX_DIM = 256  # TMA limit on every box dimension
TENSOR_GRID_COLS = 4  # tiles side by side in the 2-D tensor, so rows are strided
MAX_COMPUTE_ITERS = 4096  # beyond this the checksum can no longer tell inputs apart
N_BARRIERS = 2 * MAX_STAGES  # full[0:MAX_STAGES], then empty[0:MAX_STAGES]

# The kernels' timestamp array is stamps[cta, tile, event] (uint64 %globaltimer ns).
EV_ISSUE = 0  # producer: empty[s] passed, copy about to be issued
EV_READY = 1  # consumer leader: full[s] passed (data in the slot)
EV_COMPUTE_START = 2  # consumer leader: starts computing on the slot
EV_COMPUTE_END = 3  # consumer leader: done, about to arrive on empty[s]
EV_FULL_WAIT = 4  # consumer leader: starts waiting on full[s]
EV_EMPTY_WAIT = 5  # producer: starts waiting on empty[s]
N_EVENTS = 6
EVENT_NAMES = ("issue", "ready", "compute_start", "compute_end", "full_wait", "empty_wait")

# errs[cta, role]: 0 = fine, else 1 + the tile whose barrier wait timed out.
ROLE_PRODUCER = 0
ROLE_CONSUMER = 1
ROLE_NAMES = ("producer", "consumer")


def smem_bytes(stages: int, tile_bytes: int) -> int:
    """Shared memory one CTA uses: stage buffers, alignment slack and barriers."""
    return stages * tile_bytes + SMEM_ALIGN + STATIC_SMEM_BYTES


def dynamic_smem_bytes(stages: int, tile_bytes: int) -> int:
    """Dynamic shared memory to request at launch (stage buffers + alignment slack)."""
    return stages * tile_bytes + SMEM_ALIGN


@dataclass(frozen=True)
class TensorLayout:
    """How tiles sit in the 2-D global tensor of the TENSOR_2D variant.

    Tile g is the box at column band g % grid_cols and row band g // grid_cols, so
    a box gathers box_h rows that are `width` elements apart: a real strided 2-D copy.
    """

    box_w: int
    box_h: int
    grid_cols: int
    width: int
    height: int

    @property
    def row_stride_bytes(self) -> int:
        return self.width * ELEMENT_BYTES

    def coords(self, g: int) -> tuple[int, int]:
        """Element coordinates (innermost first) of tile g's box."""
        return (g % self.grid_cols) * self.box_w, (g // self.grid_cols) * self.box_h


def tensor_layout(tile_bytes: int, n_tiles: int) -> TensorLayout:
    """Layout of `n_tiles` boxes of `tile_bytes` each (rows of BOX_W_ELEMS float32)."""
    box_h = tile_bytes // (BOX_W_ELEMS * ELEMENT_BYTES)
    bands = -(-n_tiles // TENSOR_GRID_COLS)
    width = BOX_W_ELEMS * TENSOR_GRID_COLS
    return TensorLayout(BOX_W_ELEMS, box_h, TENSOR_GRID_COLS, width, bands * box_h)


def source_elems(tile_bytes: int, n_tiles: int) -> int:
    """float32 elements the source buffer needs so that every variant stays in bounds."""
    lay = tensor_layout(tile_bytes, n_tiles)
    return max(n_tiles * tile_bytes // ELEMENT_BYTES, lay.width * lay.height)


def _require(ok: bool, name: str, value: object, rule: str) -> None:
    if not ok:
        raise ValueError(f"{name}={value!r}: {rule}")


@dataclass(frozen=True)
class KernelParams:
    """One kernel launch: what each CTA streams and how hard it computes."""

    variant: Variant
    stages: int
    tile_bytes: int
    compute_iters: int
    ctas: int
    tiles_per_cta: int
    consumer_warps: int = 4
    instrumented: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "variant", Variant(self.variant))
        self._check_ranges()
        self._check_smem()

    def _check_ranges(self) -> None:
        _require(1 <= self.stages <= MAX_STAGES, "stages", self.stages,
                 f"must be in 1..{MAX_STAGES} (size of the static barrier array)")
        _require(self.tile_bytes >= TILE_BYTES_QUANTUM
                 and self.tile_bytes % TILE_BYTES_QUANTUM == 0, "tile_bytes", self.tile_bytes,
                 f"must be a positive multiple of {TILE_BYTES_QUANTUM} (2-D boxes are rows of "
                 f"{BOX_W_ELEMS} float32; bulk copies need multiples of 16 B)")
        _require(self.tile_bytes // (BOX_W_ELEMS * ELEMENT_BYTES) <= MAX_BOX_DIM, "tile_bytes",
                 self.tile_bytes, f"must be at most {MAX_BOX_DIM * BOX_W_ELEMS * ELEMENT_BYTES} "
                 f"(a TMA box has at most {MAX_BOX_DIM} rows)")
        _require(0 <= self.compute_iters <= MAX_COMPUTE_ITERS, "compute_iters",
                 self.compute_iters, f"must be in 0..{MAX_COMPUTE_ITERS}")
        _require(self.ctas >= 1, "ctas", self.ctas, "must be at least 1")
        _require(self.tiles_per_cta >= 1, "tiles_per_cta", self.tiles_per_cta,
                 "must be at least 1")
        _require(1 <= self.consumer_warps <= 31, "consumer_warps", self.consumer_warps,
                 "must be in 1..31 (a block has at most 1024 threads, one warp produces)")

    def _check_smem(self) -> None:
        need = smem_bytes(self.stages, self.tile_bytes)
        _require(need <= SMEM_LIMIT_BYTES, "stages*tile_bytes",
                 f"{self.stages}*{self.tile_bytes}",
                 f"needs {need} B of shared memory per CTA (stage buffers + {SMEM_ALIGN} B "
                 f"alignment + {STATIC_SMEM_BYTES} B barriers); the limit without the opt-in "
                 f"attribute is {SMEM_LIMIT_BYTES} B, so stages*tile_bytes must be at most "
                 f"{SMEM_LIMIT_BYTES - SMEM_ALIGN - STATIC_SMEM_BYTES}")

    @property
    def tile_elems(self) -> int:
        return self.tile_bytes // ELEMENT_BYTES

    @property
    def consumer_threads(self) -> int:
        return self.consumer_warps * WARP

    @property
    def threads_per_cta(self) -> int:
        return PRODUCER_THREADS + self.consumer_threads

    @property
    def n_tiles(self) -> int:
        return self.ctas * self.tiles_per_cta

    @property
    def bytes_moved(self) -> int:
        """Bytes the kernel reads from global memory (every tile once)."""
        return self.n_tiles * self.tile_bytes

    @property
    def dynamic_smem(self) -> int:
        return dynamic_smem_bytes(self.stages, self.tile_bytes)

    @property
    def layout(self) -> TensorLayout:
        return tensor_layout(self.tile_bytes, self.n_tiles)

    def label(self) -> str:
        """Short human-readable tag for logs."""
        return (f"{self.variant.value} S={self.stages} tile={self.tile_bytes} "
                f"iters={self.compute_iters} ctas={self.ctas} tiles={self.tiles_per_cta}")
