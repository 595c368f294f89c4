"""The simulator's stand-ins for the PTX primitives model the hardware semantics.

These run on plain numpy buffers, without the CUDA simulator: the stand-ins work on
integer addresses exactly like the real helpers.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("numba")

from tmasim.gpu import sim_primitives as sp  # noqa: E402


def wait_phase(bar: int, parity: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not sp.mbar_try_wait(bar, parity):
        assert time.monotonic() < deadline, "phase never completed"


@pytest.fixture
def bars() -> np.ndarray:
    return np.zeros(4, dtype=np.uint64)


def test_fresh_barrier_counts_the_previous_phase_as_complete(bars: np.ndarray) -> None:
    bar = sp.addr_of(bars, 0)
    sp.mbar_init(bar, 1)
    assert sp.mbar_try_wait(bar, 1) == 1  # why the producer's empty-wait parity starts at 1
    assert sp.mbar_try_wait(bar, 0) == 0  # ... and the consumer's full-wait parity at 0


def test_phase_flips_after_the_last_arrival_and_rearms(bars: np.ndarray) -> None:
    bar = sp.addr_of(bars, 1)
    sp.mbar_init(bar, 2)
    sp.mbar_arrive(bar)
    assert sp.mbar_state(bar) == (1, 2, 0, 0)
    sp.mbar_arrive(bar)
    assert sp.mbar_state(bar) == (2, 2, 0, 1)  # phase 0 done: pending re-armed, parity 1
    assert sp.mbar_try_wait(bar, 0) == 1 and sp.mbar_try_wait(bar, 1) == 0
    sp.mbar_arrive(bar)
    sp.mbar_arrive(bar)
    assert sp.mbar_phase(bar) == 0 and sp.mbar_try_wait(bar, 1) == 1


def test_expect_tx_holds_the_phase_until_the_bytes_land(bars: np.ndarray) -> None:
    bar = sp.addr_of(bars, 0)
    sp.mbar_init(bar, 1)
    sp.mbar_arrive_expect_tx(bar, 48)
    assert sp.mbar_state(bar) == (0, 1, 48, 0)
    sp.complete_tx(bar, 16)
    assert sp.mbar_try_wait(bar, 0) == 0
    sp.complete_tx(bar, 32)
    assert sp.mbar_state(bar) == (1, 1, 0, 1)


def test_misuse_is_an_error(bars: np.ndarray) -> None:
    bar = sp.addr_of(bars, 2)
    with pytest.raises(sp.MbarrierError, match="before mbarrier.init"):
        sp.mbar_arrive(bar)
    sp.mbar_init(bar, 1)
    sp.mbar_arrive_expect_tx(bar, 16)
    with pytest.raises(sp.MbarrierError, match="more arrivals than expected"):
        sp.mbar_arrive(bar)
    with pytest.raises(sp.MbarrierError, match="tx-count out of range"):
        sp.complete_tx(bar, 32)


def test_bulk_copy_is_asynchronous_and_completes_on_the_barrier(
        bars: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sp, "COPY_DELAY_S", 0.3)  # long enough to look before it lands
    src = np.arange(64, dtype=np.float32) + 1
    dst = np.zeros(64, dtype=np.float32)
    bar = sp.addr_of(bars, 0)
    sp.mbar_init(bar, 1)
    sp.mbar_arrive_expect_tx(bar, 128)
    sp.bulk_g2s(sp.addr_of(dst, 32), sp.addr_of(src, 4), 128, bar)
    assert not dst.any()  # issuing does not make the destination ready
    wait_phase(bar, 0)
    np.testing.assert_array_equal(dst[32:], src[4:36])
    assert not dst[:32].any()


def test_bulk_copy_rules(bars: np.ndarray) -> None:
    buf = np.zeros(64, dtype=np.float32)
    bar = sp.addr_of(bars, 0)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        sp.bulk_g2s(sp.addr_of(buf, 1), sp.addr_of(buf, 0), 16, bar)
    with pytest.raises(ValueError, match="multiple of 16"):
        sp.bulk_g2s(sp.addr_of(buf, 0), sp.addr_of(buf, 8), 20, bar)
    with pytest.raises(IndexError, match="run past the end"):
        sp.bulk_g2s(sp.addr_of(buf, 60), sp.addr_of(buf, 0), 32, bar)


def test_addr_of_is_bounds_checked() -> None:
    a = np.zeros(8, dtype=np.float32)
    assert sp.addr_of(a, 3) == a.ctypes.data + 12
    with pytest.raises(IndexError):
        sp.addr_of(a, 8)
    with pytest.raises(TypeError, match="1-D"):
        sp.addr_of(np.zeros((2, 2)), 0)


def test_tensor_copy_gathers_a_strided_box_and_zero_fills_outside(bars: np.ndarray) -> None:
    g = (np.arange(8 * 16, dtype=np.float32) + 1).reshape(8, 16)  # height 8, width 16
    tmap = sp.encode_fake_tensor_map(g.ctypes.data, 16, 8, 64, 8, 4)  # box 8 wide, 4 tall
    smem = np.zeros(64, dtype=np.float32)
    dst = sp.addr_of(smem, (-smem.ctypes.data % 128) // 4)  # 128-byte aligned destination
    first = (dst - smem.ctypes.data) // 4
    bar = sp.addr_of(bars, 3)
    for (c0, c1), want in [((8, 2), g[2:6, 8:16]), ((12, 6), None)]:
        sp.mbar_init(bar, 1)
        sp.mbar_arrive_expect_tx(bar, 8 * 4 * 4)  # the full box, even when it leaves the tensor
        sp.tensor_2d_g2s(dst, sp.addr_of(tmap, 0), c0, c1, bar)
        wait_phase(bar, 0)
        box = smem[first:first + 32].reshape(4, 8)
        if want is None:
            want = np.zeros((4, 8), dtype=np.float32)
            want[:2, :4] = g[6:8, 12:16]
        np.testing.assert_array_equal(box, want)
