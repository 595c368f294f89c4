"""TMA tensor descriptors and boxes: what a copy moves, and how much of it comes from memory.

A descriptor mirrors the arguments of ``cuTensorMapEncodeTiled``: dims innermost first, byte
strides for every dim but the innermost (which is contiguous), and a box (the tile) of at most
256 elements per dim. The hardware's rules are checked when the descriptor is built, so a bad
scenario fails with a message that names the field, not deep inside a simulation.

Two byte counts matter to the model, and they differ at a tensor's edge:

- :attr:`TensorDescriptor.box_bytes`, the full box, is what lands in shared memory (the part
  outside the tensor is zero-filled) and what ``arrive.expect_tx`` must announce;
- :meth:`TensorDescriptor.bytes_from_memory` counts only in-bounds elements, which is what
  loads the memory system (useful bytes; the hardware's 32-byte sector granularity is not
  modelled).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from tmasim.errors import DescriptorError

ELEMENT_BYTES: MappingProxyType[str, int] = MappingProxyType(
    {
        "fp64": 8,
        "fp32": 4,
        "tf32": 4,
        "bf16": 2,
        "fp16": 2,
        "fp8": 1,
        "e4m3": 1,
        "e5m2": 1,
        "int8": 1,
    }
)

MAX_RANK = 5
MAX_GLOBAL_DIM = 2**32
MAX_STRIDE_BYTES = 2**40
MAX_BOX_DIM = 256
MAX_ELEMENT_STRIDE = 8
ALIGN_BYTES = 16
# The widest request of a tensor copy: one 128-byte L2 line, the 128-byte swizzle span (docs/design.md, 12).
REQUEST_BYTES = 128


def row_requests(rows: int, row_bytes: int) -> int:
    """TMA requests for ``rows`` rows of ``row_bytes`` each: one per row segment of at most
    ``REQUEST_BYTES`` (docs/design.md section 12)."""
    return rows * -(-row_bytes // REQUEST_BYTES)


Coord = tuple[int, ...]


@dataclass(frozen=True)
class TensorDescriptor:
    """A tiled TMA tensor map: a strided tensor in global memory and the box each copy moves.

    All per-dim sequences are innermost first. ``element_strides`` (default all ones) makes a
    copy take every k-th element along a dim, so a box of ``b`` elements lands as
    ``ceil(b / k)`` of them in shared memory.
    """

    dtype: str
    global_dims: tuple[int, ...]
    global_strides_bytes: tuple[int, ...]
    box_dims: tuple[int, ...]
    global_address: int = 0
    element_strides: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("global_dims", "global_strides_bytes", "box_dims", "element_strides"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))
        self._check_dtype()
        self._check_shapes()
        self._check_integers()
        self._check_dims()
        self._check_address()
        self._check_strides()
        self._check_box()

    @classmethod
    def matrix(
        cls,
        rows: int,
        cols: int,
        dtype: str,
        box_rows: int,
        box_cols: int,
        *,
        leading_dim: int | None = None,
        global_address: int = 0,
    ) -> TensorDescriptor:
        """A row-major matrix, rows of ``leading_dim`` elements apart (BLAS's ``lda``).

        A leading dimension larger than ``cols`` pads each row, which is how a row whose bytes
        are not a multiple of 16 is made legal for TMA.
        """
        ld = cols if leading_dim is None else leading_dim
        row_stride = ld * _element_bytes(dtype)
        return cls(dtype, (cols, rows), (row_stride,), (box_cols, box_rows), global_address)

    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def tensor_bytes(self) -> int:
        """The bytes of the tensor's elements (not of its padded footprint)."""
        return self.element_bytes * math.prod(self.global_dims)

    @property
    def box_bytes(self) -> int:
        """Bytes one copy writes to shared memory and announces to its barrier, edge or not."""
        per_dim = (-(-b // k) for b, k in zip(self.box_dims, self._element_strides(), strict=True))
        return self.element_bytes * math.prod(per_dim)

    @property
    def requests(self) -> int:
        """Requests the TMA unit makes for one box: one per row segment of the inner dimension,
        each at most ``REQUEST_BYTES`` (docs/design.md section 12). A box of narrow rows moves the
        same bytes in more requests."""
        per_dim = [-(-b // k) for b, k in zip(self.box_dims, self._element_strides(), strict=True)]
        return row_requests(math.prod(per_dim[1:]), per_dim[0] * self.element_bytes)

    def requests_from_memory(self, coord: Sequence[int]) -> int:
        """Requests for the box at ``coord``: one per in-bounds row segment. The TMA unit zero-fills
        what lies past the tensor's edge itself (PTX ISA, cp.async.bulk.tensor: out-of-bound
        elements are filled, not loaded); that it sends no request for them is an assumption (no
        public table separates it). Equals :attr:`requests` for a box inside the tensor."""
        if len(coord) != self.rank:
            raise DescriptorError("coord", tuple(coord), f"must have {self.rank} entries, one per dim")
        per_dim = [self._in_bounds(i, c) for i, c in enumerate(coord)]
        return row_requests(math.prod(per_dim[1:]), per_dim[0] * self.element_bytes)

    @property
    def box_count(self) -> tuple[int, ...]:
        """Boxes needed along each dim to cover the tensor (the last one may hang over)."""
        return tuple(-(-d // b) for d, b in zip(self.global_dims, self.box_dims, strict=True))

    def boxes(self) -> Iterator[Coord]:
        """Coordinates (elements, innermost first) of the boxes that tile the tensor.

        The innermost coordinate varies fastest, the order in which a row-major walk would
        issue them.
        """
        ranges = [range(0, d, b) for d, b in zip(self.global_dims, self.box_dims, strict=True)]
        for outer_first in itertools.product(*reversed(ranges)):
            yield tuple(reversed(outer_first))

    def bytes_from_memory(self, coord: Sequence[int]) -> int:
        """Bytes a box at ``coord`` reads from global memory: its in-bounds elements only."""
        if len(coord) != self.rank:
            raise DescriptorError(
                "coord", tuple(coord), f"must have {self.rank} entries, one per dim"
            )
        per_dim = (self._in_bounds(i, c) for i, c in enumerate(coord))
        return self.element_bytes * math.prod(per_dim)

    @property
    def total_bytes_from_memory(self) -> int:
        """Bytes read by all of :meth:`boxes`; the tensor's size when element strides are 1.

        In-bounds counts are independent per dim, so the sum over the grid of boxes factors
        into a product of per-dim sums: O(Σ box_count) rather than O(Π box_count).
        """
        per_dim = (
            sum(self._in_bounds(i, c) for c in range(0, d, b))
            for i, (d, b) in enumerate(zip(self.global_dims, self.box_dims, strict=True))
        )
        return self.element_bytes * math.prod(per_dim)

    def _element_strides(self) -> tuple[int, ...]:
        return self.element_strides if self.element_strides is not None else (1,) * self.rank

    def _in_bounds(self, dim: int, start: int) -> int:
        """Elements a box starting at ``start`` takes along ``dim`` that lie inside the tensor."""
        k = self._element_strides()[dim]
        taken = -(-self.box_dims[dim] // k)
        first = max(0, -(start // k))  # first step at or past coordinate 0
        past_end = min(taken, -(-(self.global_dims[dim] - start) // k))
        return max(0, past_end - first)

    def _check_dtype(self) -> None:
        _element_bytes(self.dtype)

    def _check_shapes(self) -> None:
        rank = self.rank
        if not 1 <= rank <= MAX_RANK:
            raise DescriptorError(
                "global_dims", self.global_dims, f"must have 1 to {MAX_RANK} dims (rank)"
            )
        expected = {
            "global_strides_bytes": (self.global_strides_bytes, rank - 1),
            "box_dims": (self.box_dims, rank),
            "element_strides": (self._element_strides(), rank),
        }
        for name, (value, length) in expected.items():
            if len(value) != length:
                raise DescriptorError(
                    name, value, f"must have {length} entries for a rank-{rank} tensor"
                )

    def _check_integers(self) -> None:
        """Sizes from a scenario file may arrive as floats (``1000.0``): refuse them early."""
        fields = {
            "global_dims": self.global_dims,
            "global_strides_bytes": self.global_strides_bytes,
            "box_dims": self.box_dims,
            "element_strides": self._element_strides(),
        }
        for name, values in fields.items():
            for i, v in enumerate(values):
                _require_int(f"{name}[{i}]", v)
        _require_int("global_address", self.global_address)

    def _check_dims(self) -> None:
        for i, d in enumerate(self.global_dims):
            _check_range(f"global_dims[{i}]", d, 1, MAX_GLOBAL_DIM, "elements")

    def _check_address(self) -> None:
        if self.global_address < 0 or self.global_address % ALIGN_BYTES:
            raise DescriptorError(
                "global_address",
                self.global_address,
                f"must be a non-negative multiple of {ALIGN_BYTES} bytes",
            )

    def _check_strides(self) -> None:
        below = self.global_dims[0] * self.element_bytes  # bytes spanned by the dims below
        for i, s in enumerate(self.global_strides_bytes):
            field = f"global_strides_bytes[{i}]"
            if s % ALIGN_BYTES:
                raise DescriptorError(field, s, f"must be a multiple of {ALIGN_BYTES} bytes")
            if s < below:
                raise DescriptorError(
                    field,
                    s,
                    f"must be at least {below} bytes, the extent of dim {i}, or rows overlap",
                )
            if s >= MAX_STRIDE_BYTES:
                raise DescriptorError(
                    field, s, f"must be less than 2^40 = {MAX_STRIDE_BYTES} bytes"
                )
            below = self.global_dims[i + 1] * s

    def _check_box(self) -> None:
        for i, b in enumerate(self.box_dims):
            _check_range(f"box_dims[{i}]", b, 1, MAX_BOX_DIM, "elements")
        inner = self.box_dims[0] * self.element_bytes
        if inner % ALIGN_BYTES:
            extent = f"× {self.element_bytes} bytes ({self.dtype}) = {inner} bytes"
            rule = f"{extent} must be a multiple of {ALIGN_BYTES}"
            raise DescriptorError("box_dims[0]", self.box_dims[0], rule)
        for i, k in enumerate(self._element_strides()):
            _check_range(f"element_strides[{i}]", k, 1, MAX_ELEMENT_STRIDE, "")


def _element_bytes(dtype: str) -> int:
    if dtype not in ELEMENT_BYTES:
        raise DescriptorError(
            "dtype", dtype, f"is not a TMA element type: use one of {', '.join(ELEMENT_BYTES)}"
        )
    return ELEMENT_BYTES[dtype]


def _require_int(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise DescriptorError(field, value, "must be an integer")


def _check_range(field: str, value: int, low: int, high: int, unit: str) -> None:
    if not low <= value <= high:
        what = f"{low} and {high} {unit}".rstrip()
        raise DescriptorError(field, value, f"must be between {what}")
