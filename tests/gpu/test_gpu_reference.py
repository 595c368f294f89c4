"""The host-side ground truth the kernels are checked against."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from tmasim.gpu import reference  # noqa: E402
from tmasim.gpu.params import (  # noqa: E402
    EV_COMPUTE_END,
    EV_COMPUTE_START,
    EV_EMPTY_WAIT,
    EV_FULL_WAIT,
    EV_ISSUE,
    EV_READY,
    N_EVENTS,
    Variant,
    tensor_layout,
)


def test_source_is_nonzero_bounded_and_seeded() -> None:
    a = reference.make_source(10_000, seed=3)
    assert a.dtype == np.float32 and a.min() >= 0.5 and a.max() < 1.5
    assert np.array_equal(a, reference.make_source(10_000, seed=3))
    assert not np.array_equal(a, reference.make_source(10_000, seed=4))


@pytest.mark.parametrize("iters", [0, 1, 7, 64, 1000])
def test_closed_form_matches_the_float32_recurrence(iters: int) -> None:
    x = reference.make_source(257, seed=1)
    y = x.copy()
    a, b = np.float32(reference.FMA_A), np.float32(reference.FMA_B)
    for _ in range(iters):
        y = y * a + b
    # float32 rounding of the chain stays an order of magnitude inside the check tolerance
    np.testing.assert_allclose(reference.fma_chain(x, iters), y, rtol=reference.RTOL / 10)


def test_expected_partials_brute_force_with_uneven_split() -> None:
    tiles = reference.make_source(3 * 10, seed=2).reshape(3, 10)  # 10 elements, 4 threads
    got = reference.expected_partials(tiles, iters=5, consumer_threads=4)
    want = np.zeros((3, 4))
    for k in range(3):
        for t in range(4):
            for e in range(t, 10, 4):
                x = float(tiles[k, e])
                for _ in range(5):
                    x = x * reference.FMA_A + reference.FMA_B
                want[k, t] += x
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tensor_tiles_are_the_boxes_at_their_coordinates() -> None:
    lay = tensor_layout(tile_bytes=512, n_tiles=9)  # boxes 64 x 2
    src = np.arange(lay.width * lay.height, dtype=np.float32)
    tiles = reference.tiles_of(src, Variant.TENSOR_2D, 9, 128, lay)
    g2d = src.reshape(lay.height, lay.width)
    for g in range(9):
        c0, c1 = lay.coords(g)
        np.testing.assert_array_equal(tiles[g], g2d[c1:c1 + 2, c0:c0 + 64].ravel())
    flat = reference.tiles_of(src, Variant.BULK_1D, 9, 128, lay)
    np.testing.assert_array_equal(flat[4], src[4 * 128:5 * 128])


def test_checksum_errors_flag_wrong_and_unwritten_values() -> None:
    want = np.full((2, 3, 4), 8.0)
    assert reference.checksum_errors(want.astype(np.float32), want) == []
    got = want.astype(np.float32)
    got[1, 2, 3] *= 1.01
    got[0, 0, 0] = np.nan
    (msg,) = reference.checksum_errors(got, want)
    assert msg.startswith("2 of 24 partial sums wrong (1 never written)")
    assert "[cta, tile, thread]=(0, 0, 0)" in msg


def _good_stamps(tiles: int, stages: int) -> np.ndarray:
    """A serial schedule that satisfies every rule (each tile after the previous)."""
    s = np.zeros((1, tiles, N_EVENTS), dtype=np.uint64)
    for k in range(tiles):
        t = 100 * k
        s[0, k, [EV_EMPTY_WAIT, EV_ISSUE, EV_FULL_WAIT, EV_READY, EV_COMPUTE_START,
                 EV_COMPUTE_END]] = [t, t + 1, t, t + 50, t + 51, t + 90]
    return s


def test_order_rules_accept_a_valid_schedule_and_catch_slot_reuse() -> None:
    stamps = _good_stamps(tiles=6, stages=2)
    assert set(reference.order_violations(stamps, 2).values()) == {0}
    stamps[0, 4, EV_ISSUE] = stamps[0, 2, EV_COMPUTE_END] - 1  # tile 4 reuses tile 2's slot early
    stamps[0, 4, EV_EMPTY_WAIT] = stamps[0, 4, EV_ISSUE]
    bad = reference.order_violations(stamps, 2)
    assert bad["slot_reissued_before_compute_end"] == 1
    assert sum(bad.values()) == 1


def test_order_rules_with_more_stages_than_tiles() -> None:
    assert sum(reference.order_violations(_good_stamps(2, 4), 4).values()) == 0
