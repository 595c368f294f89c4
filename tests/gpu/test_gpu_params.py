"""Launch-parameter rules and derived layouts (pure Python)."""

from __future__ import annotations

import pytest

pytest.importorskip("numba")

from tmasim.gpu.params import (  # noqa: E402
    SMEM_LIMIT_BYTES,
    KernelParams,
    Variant,
    dynamic_smem_bytes,
    smem_bytes,
    source_elems,
    tensor_layout,
)


def make(**kw: object) -> KernelParams:
    base: dict[str, object] = dict(variant="tma_bulk_1d", stages=2, tile_bytes=4096,
                                   compute_iters=4, ctas=3, tiles_per_cta=5)
    base.update(kw)
    return KernelParams(**base)  # type: ignore[arg-type]


def test_derived_sizes() -> None:
    p = make(consumer_warps=4)
    assert p.variant is Variant.BULK_1D
    assert (p.tile_elems, p.consumer_threads, p.threads_per_cta) == (1024, 128, 160)
    assert p.n_tiles == 15 and p.bytes_moved == 15 * 4096
    assert p.dynamic_smem == 2 * 4096 + 128 == dynamic_smem_bytes(2, 4096)
    assert smem_bytes(2, 4096) == 2 * 4096 + 128 + 128


def test_shared_memory_rule_counts_barriers_and_alignment() -> None:
    make(stages=2, tile_bytes=16384)  # 32 KiB + 256 B fits
    make(stages=1, tile_bytes=SMEM_LIMIT_BYTES - 256)  # exactly at the limit
    with pytest.raises(ValueError) as err:
        make(stages=3, tile_bytes=16384)  # 48 KiB of stages alone leaves no room for barriers
    msg = str(err.value)
    assert "stages*tile_bytes='3*16384'" in msg and "49408" in msg and "48896" in msg


@pytest.mark.parametrize(("field", "value", "words"), [
    ("stages", 0, "1..8"),
    ("stages", 9, "1..8"),
    ("tile_bytes", 100, "multiple of 256"),
    ("tile_bytes", 0, "multiple of 256"),
    ("compute_iters", -1, "0..4096"),
    ("ctas", 0, "at least 1"),
    ("tiles_per_cta", 0, "at least 1"),
    ("consumer_warps", 32, "1..31"),
])
def test_bad_values_name_field_value_and_rule(field: str, value: int, words: str) -> None:
    with pytest.raises(ValueError) as err:
        make(**{field: value})
    assert str(err.value).startswith(f"{field}={value!r}: ") and words in str(err.value)


def test_unknown_variant_is_an_error() -> None:
    with pytest.raises(ValueError, match="tma_3d"):
        make(variant="tma_3d")


def test_tensor_layout_places_boxes_on_a_strided_grid() -> None:
    lay = tensor_layout(tile_bytes=1024, n_tiles=10)  # boxes of 64 x 4 float32
    assert (lay.box_w, lay.box_h, lay.grid_cols, lay.width) == (64, 4, 4, 256)
    assert lay.height == 3 * 4  # ceil(10 / 4) row bands
    assert lay.row_stride_bytes == 1024
    assert lay.coords(0) == (0, 0) and lay.coords(5) == (64, 4) and lay.coords(9) == (64, 8)
    assert source_elems(1024, 10) == 256 * 12 >= 10 * 256
