"""TMA descriptor rules, byte counts computed by hand, and conservation over random tensors."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.descriptor import TensorDescriptor
from tmasim.errors import DescriptorError, ScenarioError

# ---- hand-computed cases --------------------------------------------------------------------


@pytest.fixture
def bf16_1000() -> TensorDescriptor:
    """1000 × 1000 bf16, row-major, 128-row × 64-column boxes (a 2000-byte row stride)."""
    return TensorDescriptor.matrix(1000, 1000, "bf16", box_rows=128, box_cols=64)


def test_matrix_maps_to_innermost_first(bf16_1000: TensorDescriptor) -> None:
    assert bf16_1000.global_dims == (1000, 1000)
    assert bf16_1000.global_strides_bytes == (2000,)
    assert bf16_1000.box_dims == (64, 128)
    assert bf16_1000.rank == 2 and bf16_1000.element_bytes == 2


def test_full_box_bytes_and_counts(bf16_1000: TensorDescriptor) -> None:
    assert bf16_1000.box_bytes == 128 * 64 * 2 == 16384
    assert bf16_1000.box_count == (16, 8)  # ceil(1000 / 64), ceil(1000 / 128)
    assert len(list(bf16_1000.boxes())) == 128


def test_edge_boxes_read_only_in_bounds_bytes(bf16_1000: TensorDescriptor) -> None:
    # Columns: 15 boxes of 64, then 1000 - 960 = 40. Rows: 7 boxes of 128, then 1000 - 896 = 104.
    assert bf16_1000.bytes_from_memory((0, 0)) == 16384
    assert bf16_1000.bytes_from_memory((960, 0)) == 40 * 128 * 2 == 10240
    assert bf16_1000.bytes_from_memory((0, 896)) == 64 * 104 * 2 == 13312
    assert bf16_1000.bytes_from_memory((960, 896)) == 40 * 104 * 2 == 8320
    assert bf16_1000.box_bytes == 16384  # the barrier still counts the whole box at the edge


def test_total_bytes_from_memory_is_the_matrix(bf16_1000: TensorDescriptor) -> None:
    assert bf16_1000.total_bytes_from_memory == 1000 * 1000 * 2 == bf16_1000.tensor_bytes
    assert sum(bf16_1000.bytes_from_memory(c) for c in bf16_1000.boxes()) == 2_000_000


def test_boxes_walk_innermost_fastest() -> None:
    d = TensorDescriptor("fp32", (8, 6), (32,), (4, 4))
    assert list(d.boxes()) == [(0, 0), (4, 0), (0, 4), (4, 4)]


def test_box_partly_or_wholly_outside_reads_what_is_inside() -> None:
    d = TensorDescriptor("fp16", (100, 50), (208,), (16, 32))
    assert d.bytes_from_memory((-8, 0)) == 8 * 32 * 2  # TMA coordinates may be negative
    assert d.bytes_from_memory((96, 40)) == 4 * 10 * 2
    assert d.bytes_from_memory((100, 0)) == 0
    assert d.bytes_from_memory((-16, 0)) == 0


def test_padded_leading_dimension() -> None:
    # 100 fp16 columns are 200 bytes, not a multiple of 16: pad rows to 104 elements (208 B).
    d = TensorDescriptor.matrix(64, 100, "fp16", box_rows=64, box_cols=64, leading_dim=104)
    assert d.global_strides_bytes == (208,)
    assert d.total_bytes_from_memory == 64 * 100 * 2


def test_rank_5_box() -> None:
    d = TensorDescriptor(
        "fp8", (32, 3, 5, 7, 2), (32, 96, 480, 3360), (32, 2, 4, 4, 1), global_address=4096
    )
    assert d.box_bytes == 32 * 2 * 4 * 4 * 1
    assert d.box_count == (1, 2, 2, 2, 2)
    assert d.bytes_from_memory((0, 2, 4, 4, 1)) == 32 * 1 * 1 * 3 * 1
    assert d.total_bytes_from_memory == d.tensor_bytes == 32 * 3 * 5 * 7 * 2


def test_rank_1_bulk() -> None:
    d = TensorDescriptor("fp64", (1000,), (), (256,))
    assert (d.box_bytes, d.box_count) == (2048, (4,))
    assert d.bytes_from_memory((768,)) == 232 * 8


@pytest.mark.parametrize(
    ("dtype", "size"),
    [
        ("fp64", 8),
        ("fp32", 4),
        ("tf32", 4),
        ("bf16", 2),
        ("fp16", 2),
        ("fp8", 1),
        ("e4m3", 1),
        ("e5m2", 1),
        ("int8", 1),
    ],
)
def test_element_sizes(dtype: str, size: int) -> None:
    d = TensorDescriptor(dtype, (256,), (), (16 * 16 // size,))
    assert d.element_bytes == size and d.box_bytes == 256


def test_element_strides_take_every_kth_element() -> None:
    # Box of 64 × 8 fp32 with element strides (1, 3): 64 × ceil(8 / 3) = 64 × 3 elements land.
    d = TensorDescriptor("fp32", (64, 10), (256,), (64, 8), element_strides=(1, 3))
    assert d.box_bytes == 64 * 3 * 4
    assert d.bytes_from_memory((0, 0)) == 64 * 3 * 4  # rows 0, 3, 6
    assert d.bytes_from_memory((0, 8)) == 64 * 1 * 4  # rows 8 (and 11, outside)


def test_descriptor_is_frozen_and_takes_lists() -> None:
    d = TensorDescriptor("bf16", [64, 64], [128], [64, 64])  # type: ignore[arg-type]
    assert d.global_dims == (64, 64) and d.box_dims == (64, 64)
    with pytest.raises(AttributeError):
        d.dtype = "fp32"  # type: ignore[misc]


# ---- each rule, with its message ------------------------------------------------------------

GOOD: dict[str, Any] = {
    "dtype": "bf16",
    "global_dims": (128, 64),
    "global_strides_bytes": (256,),
    "box_dims": (64, 32),
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dtype": "fp4"}, "dtype: 'fp4' is not a TMA element type: use one of fp64, fp32"),
        (
            {"global_dims": (), "global_strides_bytes": (), "box_dims": ()},
            "global_dims: () must have 1 to 5 dims (rank)",
        ),
        (
            {"global_dims": (2,) * 6, "global_strides_bytes": (16,) * 5, "box_dims": (8,) * 6},
            "global_dims: (2, 2, 2, 2, 2, 2) must have 1 to 5 dims (rank)",
        ),
        (
            {"global_strides_bytes": ()},
            "global_strides_bytes: () must have 1 entries for a rank-2 tensor",
        ),
        ({"box_dims": (64,)}, "box_dims: (64,) must have 2 entries for a rank-2 tensor"),
        (
            {"element_strides": (1, 1, 1)},
            "element_strides: (1, 1, 1) must have 2 entries for a rank-2 tensor",
        ),
        ({"global_dims": (128, 0)}, "global_dims[1]: 0 must be between 1 and 4294967296 elements"),
        (
            {"global_dims": (2**32 + 1, 1), "box_dims": (64, 1)},
            "global_dims[0]: 4294967297 must be between 1 and",
        ),
        ({"global_address": 8}, "global_address: 8 must be a non-negative multiple of 16 bytes"),
        (
            {"global_address": -16},
            "global_address: -16 must be a non-negative multiple of 16 bytes",
        ),
        (
            {"global_strides_bytes": (264,)},
            "global_strides_bytes[0]: 264 must be a multiple of 16 bytes",
        ),
        (
            {"global_strides_bytes": (240,)},
            "global_strides_bytes[0]: 240 must be at least 256 bytes"
            ", the extent of dim 0, or rows overlap",
        ),
        (
            {"global_dims": (8, 4, 2), "global_strides_bytes": (16, 48), "box_dims": (8, 4, 2)},
            "global_strides_bytes[1]: 48 must be at least 64 bytes"
            ", the extent of dim 1, or rows overlap",
        ),
        (
            {"global_strides_bytes": (2**40,)},
            "global_strides_bytes[0]: 1099511627776 must be less than 2^40",
        ),
        ({"box_dims": (64, 0)}, "box_dims[1]: 0 must be between 1 and 256 elements"),
        ({"box_dims": (64, 257)}, "box_dims[1]: 257 must be between 1 and 256 elements"),
        (
            {"box_dims": (12, 32)},
            "box_dims[0]: 12 × 2 bytes (bf16) = 24 bytes must be a multiple of 16",
        ),
        ({"element_strides": (1, 9)}, "element_strides[1]: 9 must be between 1 and 8"),
        ({"element_strides": (0, 1)}, "element_strides[0]: 0 must be between 1 and 8"),
        ({"global_dims": (128, 64.0)}, "global_dims[1]: 64.0 must be an integer"),
        ({"global_strides_bytes": (256.0,)}, "global_strides_bytes[0]: 256.0 must be an integer"),
        ({"global_address": True}, "global_address: True must be an integer"),
    ],
)
def test_rule_is_enforced_with_a_message(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DescriptorError) as info:
        TensorDescriptor(**{**GOOD, **change})
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ScenarioError)  # the CLI reports it as bad input


def test_error_carries_field_value_rule() -> None:
    with pytest.raises(DescriptorError) as info:
        TensorDescriptor.matrix(10, 10, "fp32", 8, 10)  # 10 columns × 4 B = 40 B rows
    assert (info.value.field, info.value.value) == ("global_strides_bytes[0]", 40)
    assert "multiple of 16" in info.value.rule


def test_coordinate_of_wrong_rank_is_refused(bf16_1000: TensorDescriptor) -> None:
    with pytest.raises(DescriptorError, match=r"coord: \(0,\) must have 2 entries"):
        bf16_1000.bytes_from_memory((0,))


# ---- conservation ---------------------------------------------------------------------------


@st.composite
def descriptors(draw: st.DrawFn) -> TensorDescriptor:
    """Random legal tensors (small, so that every box can be enumerated), packed or padded."""
    dtype = draw(st.sampled_from(["fp64", "fp32", "bf16", "fp8"]))
    size = {"fp64": 8, "fp32": 4, "bf16": 2, "fp8": 1}[dtype]
    rank = draw(st.integers(1, 5))
    dims = [draw(st.integers(1, 40 if i == 0 else 6)) for i in range(rank)]
    unit = 16 // math.gcd(16, size)  # smallest element count that is a multiple of 16 bytes
    box = [unit * draw(st.integers(1, 4))] + [draw(st.integers(1, 4)) for _ in range(rank - 1)]
    strides: list[int] = []
    below = dims[0] * size
    for i in range(1, rank):
        stride = -(-below // 16) * 16 + 16 * draw(st.integers(0, 2))
        strides.append(stride)
        below = dims[i] * stride
    return TensorDescriptor(dtype, tuple(dims), tuple(strides), tuple(box))


@settings(max_examples=200, deadline=None)
@given(d=descriptors())
def test_boxes_read_the_tensor_exactly_once(d: TensorDescriptor) -> None:
    each = [d.bytes_from_memory(c) for c in d.boxes()]
    assert sum(each) == d.total_bytes_from_memory == d.tensor_bytes
    assert len(each) == math.prod(d.box_count)
    assert all(0 < b <= d.box_bytes for b in each)


@settings(max_examples=100, deadline=None)
@given(d=descriptors(), shift=st.lists(st.integers(-300, 300), min_size=5, max_size=5))
def test_shifted_box_reads_its_overlap_with_the_tensor(
    d: TensorDescriptor, shift: list[int]
) -> None:
    coord = tuple(shift[: d.rank])
    overlap = math.prod(
        max(0, min(c + b, n) - max(c, 0))
        for c, b, n in zip(coord, d.box_dims, d.global_dims, strict=True)
    )
    assert d.bytes_from_memory(coord) == overlap * d.element_bytes
