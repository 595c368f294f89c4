"""TMA cost per request (docs/design.md section 12): a box is fetched as one request per row
segment of its inner dimension (at most 128 B), and the SM's TMA unit passes requests at a
finite rate, so the box's shape, not only its bytes, sets a copy's time."""

from __future__ import annotations

from typing import Any

import pytest

from tmasim.descriptor import TensorDescriptor
from tmasim.hardware import load_gpu
from tmasim.scenario import from_dict
from tmasim.simulation import simulate

H100 = load_gpu("h100-sxm")


@pytest.mark.parametrize(("box", "requests"), [
    ((4, 4, 256), 1024),   # 16-byte rows (fp32): one request each
    ((16, 256), 256),      # 64-byte rows
    ((32, 128), 128),      # 128-byte rows: the widest request
    ((64, 64), 128),       # 256-byte rows: two requests each
    ((256, 16), 128),      # 1 KiB rows: eight
])
def test_a_16_kib_box_makes_one_request_per_row_segment(box: tuple[int, ...], requests: int) -> None:
    dims = tuple(4 * b for b in box)
    strides = [4 * dims[0]]
    for d in dims[1:-1]:
        strides.append(strides[-1] * d)
    descriptor = TensorDescriptor("fp32", dims, tuple(strides), box)
    assert descriptor.box_bytes == 16384 and descriptor.requests == requests


def _one_copy(box: list[int], gpu: Any = "h100-sxm") -> int:
    shape = [box[0] * 8, *box[1:]]
    raw = {"gpu": gpu, "workload": {"kind": "stream", "dtype": "fp32", "shape": shape, "box": box, "ctas": 1},
           "pipeline": {"stages": 1}, "run": {"records": False}}
    return simulate(from_dict(raw)).stats["makespan_ns"] * 1000 / 8  # 8 boxes, one after another


def test_16_byte_rows_are_slower_than_256_byte_rows_by_the_request_time() -> None:
    """Same 16 KiB, 1024 requests against 128: on an idle chip both copies are request-bound, so
    each copy of the narrow box takes 896 request times longer, to the picosecond."""
    narrow, wide = _one_copy([256, 4, 4]), _one_copy([64, 64])
    assert 16384 / (128 * H100.tma_request_time) < H100.sm_port_bandwidth  # even 128-B requests bind
    assert narrow - wide == pytest.approx(896 * H100.tma_request_time, abs=2)


def test_without_a_request_time_the_shape_does_not_matter() -> None:
    gpu = {"preset": "h100-sxm", "tma_request_time": "0 ns"}
    assert _one_copy([256, 4, 4], gpu) == pytest.approx(_one_copy([64, 64], gpu), abs=2)


def _k_step_ps(tile: list[int]) -> float:
    """Steady-state k-step interval of one CTA whose MMA is negligible (a 100 GHz clock), with
    the request time stated in ns so the clock leaves it alone: the TMA unit binds."""
    gpu = {"preset": "h100-sxm", "clock": "100 GHz", "tma_request_time": "2 ns"}
    raw = {"gpu": gpu, "workload": {"kind": "gemm", "m": tile[0], "n": tile[1], "k": tile[2] * 64, "tile": tile},
           "pipeline": {"stages": 6, "consumers": 1}, "run": {"records": False}}
    a = simulate(from_dict(raw)).stats["makespan_ns"] * 1000
    raw["workload"]["k"] = tile[2] * 128
    b = simulate(from_dict(raw)).stats["makespan_ns"] * 1000
    return (b - a) / 64


def test_a_gemm_k_step_costs_more_with_bm_plus_bn_at_fixed_bytes() -> None:
    """64x64x64 and 128x128x32 bf16 both load 16 KiB per k-step, in 128 rows of 128 B and 256
    rows of 64 B: with the TMA unit binding, the k-step takes 128 or 256 request times."""
    small, big = _k_step_ps([64, 64, 64]), _k_step_ps([128, 128, 32])
    assert small == pytest.approx(128 * 2000, rel=1e-6) and big == pytest.approx(256 * 2000, rel=1e-6)


def test_the_gemm_port_and_request_bounds_count_bytes_and_requests() -> None:
    """One CTA, ten k-steps of 128x256x64 bf16: A is 128 rows of 128 B, B 256 rows; the SM port
    bound counts their 48 KiB through the port, the TMA requests bound their 384 requests."""
    raw = {"gpu": "h100-sxm", "workload": {"kind": "gemm", "m": 128, "n": 256, "k": 640, "tile": [128, 256, 64]},
           "pipeline": {"stages": 4, "consumers": 2}, "run": {"records": False}}
    stats = simulate(from_dict(raw)).stats
    t, port = H100.tma_request_time, H100.sm_port_bandwidth
    assert stats["port_bound_ns"] * 1000 == pytest.approx(10 * (16384 + 32768) / port, rel=1e-9)
    assert stats["tma_bound_ns"] * 1000 == pytest.approx(10 * 384 * t, rel=1e-9)
    assert stats["binding"] == "TMA requests"


def _hbm_bound_stream(box: list[int], overhead: str) -> float:
    gpu = {"preset": "h100-sxm", "tma_request_time": "0 ns", "hbm_request_overhead": overhead}
    shape = [box[0] * 132 * 8 * 4, *box[1:]]
    raw = {"gpu": gpu, "workload": {"kind": "stream", "dtype": "fp32", "shape": shape, "box": box},
           "pipeline": {"stages": 4}, "run": {"records": False}}
    return simulate(from_dict(raw)).stats["achieved_bytes_per_s"]


def test_narrow_rows_cost_hbm_more_per_byte_by_the_request_overhead() -> None:
    """With a 64-byte overhead per request, 16-byte rows use HBM (1 + 64/16) / (1 + 64/128) = 10/3
    times per byte what 128-byte rows do; 128-byte rows are the reference (no change)."""
    wide, narrow = _hbm_bound_stream([64, 32], "64 B"), _hbm_bound_stream([256, 4, 4], "64 B")
    hbm = H100.hbm_bandwidth * 1e12
    assert 0.95 * hbm < wide < hbm  # HBM-bound (less the start and the drain)
    assert _hbm_bound_stream([64, 32], "0 B") == pytest.approx(wide, rel=1e-9)
    assert 0.97 * hbm * 3 / 10 < narrow <= hbm * 3 / 10


def test_an_edge_box_requests_only_its_in_bounds_row_segments() -> None:
    """A 128 x 64 bf16 box (128-byte rows) over a 200 x 96 tensor: inside, 128 requests; at row
    128 only 72 rows are in bounds (72 requests); at column 64 each row keeps 32 elements, one
    64-byte segment (still one request a row); past the end, none. The box's bytes for the
    barrier do not change."""
    d = TensorDescriptor.matrix(200, 96, "bf16", 128, 64)
    assert [d.requests_from_memory(c) for c in ((0, 0), (0, 128), (64, 0), (64, 128), (0, 256))] == [
        128, 72, 128, 72, 0]
    assert d.requests == 128 and d.box_bytes == 128 * 64 * 2


def test_a_ragged_gemm_edge_tile_pays_for_its_in_bounds_rows_only() -> None:
    """m = 32 with 128 x 128 x 64 bf16 tiles: the one tile's A box has 32 rows in bounds, so each
    k-step issues 32 + 128 requests, not 128 + 128 (the TMA requests bound counts them)."""
    raw = {"gpu": "h100-sxm", "workload": {"kind": "gemm", "m": 32, "n": 128, "k": 640, "tile": [128, 128, 64]},
           "pipeline": {"stages": 4, "consumers": 1}, "run": {"records": False}}
    stats = simulate(from_dict(raw)).stats
    t, port = H100.tma_request_time, H100.sm_port_bandwidth
    assert stats["tma_bound_ns"] * 1000 == pytest.approx(10 * (32 + 128) * t, rel=1e-9)
    assert stats["port_bound_ns"] * 1000 == pytest.approx(10 * (32 * 128 + 16384) / port, rel=1e-9)
