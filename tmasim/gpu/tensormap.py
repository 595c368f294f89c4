"""Tensor maps for the TENSOR_2D variant: encode on the host, hand to the kernel as words.

numba cannot pass a by-value `__grid_constant__ CUtensorMap`, so the 128-byte map
is copied into a global uint64[16] array whose address the producer gives to
`cp.async.bulk.tensor` (after `fence.proxy.tensormap::generic.acquire`). On a
GPU the map comes from the driver's `cuTensorMapEncodeTiled` via cuda-bindings;
under the simulator from sim_primitives.encode_fake_tensor_map, which the
simulated tensor copy understands.
"""

from __future__ import annotations

import ctypes
import importlib
from typing import Any

import numpy as np

from tmasim.gpu.params import ELEMENT_BYTES, MAX_BOX_DIM, TensorLayout

TENSOR_MAP_WORDS = 16  # sizeof(CUtensorMap) == 128 bytes


class CudaCallError(RuntimeError):
    """A CUDA driver call returned something other than CUDA_SUCCESS."""

    def __init__(self, call: str, result: Any, detail: str = "") -> None:
        self.call, self.result = call, result
        super().__init__(f"{call} failed: {result!r}{' (' + detail + ')' if detail else ''}")


def driver_module() -> Any:
    """cuda-bindings' driver module (new and old import paths)."""
    try:
        return importlib.import_module("cuda.bindings.driver")
    except ImportError:  # cuda-python < 12.6
        return importlib.import_module("cuda.cuda")


def check(result: Any, call: str, detail: str = "") -> None:
    """Raise CudaCallError unless `result` is CUDA_SUCCESS."""
    driver = driver_module()
    if result != driver.CUresult.CUDA_SUCCESS:
        raise CudaCallError(call, result, detail)


def validate_layout(global_addr: int, lay: TensorLayout) -> None:
    """The encode rules, as clear errors before the driver answers INVALID_VALUE."""
    rules = [
        (global_addr % 16 == 0, "global address", hex(global_addr), "must be 16-byte aligned"),
        (lay.row_stride_bytes % 16 == 0, "row stride", lay.row_stride_bytes,
         "must be a multiple of 16 bytes"),
        ((lay.box_w * ELEMENT_BYTES) % 16 == 0, "box width", lay.box_w,
         "times the element size must be a multiple of 16 bytes"),
        (1 <= lay.box_w <= MAX_BOX_DIM and 1 <= lay.box_h <= MAX_BOX_DIM, "box",
         (lay.box_w, lay.box_h), f"each dimension must be in 1..{MAX_BOX_DIM}"),
        (lay.width >= lay.box_w and lay.height >= lay.box_h, "tensor", (lay.width, lay.height),
         "must be at least one box in each dimension"),
    ]
    for ok, name, value, rule in rules:
        if not ok:
            raise ValueError(f"tensor map {name}={value!r}: {rule}")


def encode_tensor_map_2d(global_addr: int, lay: TensorLayout) -> np.ndarray:
    """cuTensorMapEncodeTiled for a row-major float32 [height, width] tensor -> uint64[16]."""
    validate_layout(global_addr, lay)
    d = driver_module()
    u64, u32 = d.cuuint64_t, d.cuuint32_t
    err, tmap = d.cuTensorMapEncodeTiled(
        d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        2,
        global_addr,
        [u64(lay.width), u64(lay.height)],
        [u64(lay.row_stride_bytes)],
        [u32(lay.box_w), u32(lay.box_h)],
        [u32(1), u32(1)],
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    check(err, "cuTensorMapEncodeTiled", f"layout {lay}, address {global_addr:#x}")
    return tensor_map_words(tmap)


def tensor_map_words(tmap: Any) -> np.ndarray:
    """The 128 opaque bytes of a CUtensorMap as uint64[16]."""
    get_ptr = getattr(tmap, "getPtr", None)
    if get_ptr is not None:
        raw = ctypes.string_at(int(get_ptr()), TENSOR_MAP_WORDS * 8)
        return np.frombuffer(raw, dtype=np.uint64).copy()
    words = np.array([int(w) for w in tmap.opaque], dtype=np.uint64)
    if words.size != TENSOR_MAP_WORDS:
        raise ValueError(f"CUtensorMap has {words.size} words, expected {TENSOR_MAP_WORDS}")
    return words


def build_tensor_map(global_addr: int, lay: TensorLayout, simulator: bool) -> np.ndarray:
    """The map words for this backend (driver-encoded on a GPU, fake in the simulator)."""
    if simulator:
        from tmasim.gpu.sim_primitives import encode_fake_tensor_map

        validate_layout(global_addr, lay)
        return encode_fake_tensor_map(global_addr, lay.width, lay.height,
                                      lay.row_stride_bytes, lay.box_w, lay.box_h)
    return encode_tensor_map_2d(global_addr, lay)
