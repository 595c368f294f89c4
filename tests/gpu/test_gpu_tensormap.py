"""Tensor-map argument building and error checking, with a stand-in driver module."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from tmasim.gpu import tensormap  # noqa: E402
from tmasim.gpu.params import tensor_layout  # noqa: E402


class FakeDriver:
    """Records cuTensorMapEncodeTiled's arguments; answers with a chosen result."""

    def __init__(self, result: int = 0) -> None:
        self.result = result
        self.calls: list[tuple[Any, ...]] = []
        self.CUresult = SimpleNamespace(CUDA_SUCCESS=0)
        self.cuuint64_t = self.cuuint32_t = int
        self.CUtensorMapDataType = SimpleNamespace(CU_TENSOR_MAP_DATA_TYPE_FLOAT32="f32")
        self.CUtensorMapInterleave = SimpleNamespace(CU_TENSOR_MAP_INTERLEAVE_NONE="il0")
        self.CUtensorMapSwizzle = SimpleNamespace(CU_TENSOR_MAP_SWIZZLE_NONE="sw0")
        self.CUtensorMapL2promotion = SimpleNamespace(CU_TENSOR_MAP_L2_PROMOTION_L2_128B="l2")
        self.CUtensorMapFloatOOBfill = SimpleNamespace(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE="oob")

    def cuTensorMapEncodeTiled(self, *args: Any) -> tuple[int, Any]:  # noqa: N802
        self.calls.append(args)
        return self.result, SimpleNamespace(opaque=list(range(100, 116)))


def test_encode_passes_dims_innermost_first_and_returns_16_words(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDriver()
    monkeypatch.setattr(tensormap, "driver_module", lambda: fake)
    lay = tensor_layout(tile_bytes=8192, n_tiles=12)  # boxes 64 x 32, 3 row bands
    words = tensormap.encode_tensor_map_2d(0x7F00_0000_0100, lay)
    (args,) = fake.calls
    assert args[:4] == ("f32", 2, 0x7F00_0000_0100, [256, 96])
    assert args[4:7] == ([1024], [64, 32], [1, 1])
    assert args[7:] == ("il0", "sw0", "l2", "oob")
    assert words.dtype == np.uint64 and list(words) == list(range(100, 116))


def test_encode_failure_names_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensormap, "driver_module", lambda: FakeDriver(result=1))
    with pytest.raises(tensormap.CudaCallError, match="cuTensorMapEncodeTiled failed"):
        tensormap.encode_tensor_map_2d(0x1000, tensor_layout(4096, 4))


def test_layout_rules_fail_before_the_driver_is_asked() -> None:
    lay = tensor_layout(4096, 4)
    with pytest.raises(ValueError, match="global address='0x1008': must be 16-byte aligned"):
        tensormap.validate_layout(0x1008, lay)
    wide = tensor_layout(4096, 4).__class__(box_w=64, box_h=300, grid_cols=4, width=256,
                                            height=600)
    with pytest.raises(ValueError, match=r"box=\(64, 300\)"):
        tensormap.validate_layout(0x1000, wide)


def test_simulator_map_is_self_describing() -> None:
    lay = tensor_layout(1024, 8)
    words = tensormap.build_tensor_map(0x2000, lay, simulator=True)
    from tmasim.gpu.sim_primitives import FAKE_TMAP_MAGIC

    assert int(words[0]) == FAKE_TMAP_MAGIC
    assert [int(w) for w in words[1:7]] == [0x2000, 256, 8, 1024, 64, 4]
