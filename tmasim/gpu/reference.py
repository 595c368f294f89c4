"""Host-side ground truth for the kernels: inputs, expected checksums, timestamp rules.

numpy only. The expected per-thread partial sums use the closed form of the
kernel's FMA recurrence in float64, so they cost one pass over the data whatever
`compute_iters` is; the kernels' float32 rounding stays far inside the tolerance,
while a wrong, stale or reordered tile moves a partial by about a percent.
"""

from __future__ import annotations

import numpy as np

from tmasim.gpu.params import (
    EV_COMPUTE_END,
    EV_COMPUTE_START,
    EV_EMPTY_WAIT,
    EV_FULL_WAIT,
    EV_ISSUE,
    EV_READY,
    TensorLayout,
    Variant,
)

FMA_A = 1.0 - 2.0**-10  # must match kernels.FMA_A / FMA_B
FMA_B = 2.0**-10
RTOL = 1e-4
INPUT_LOW, INPUT_HIGH = 0.5, 1.5  # never zero, so a skipped copy cannot pass for data


def make_source(n_elems: int, seed: int) -> np.ndarray:
    """Random float32 in [0.5, 1.5): non-zero, distinct per tile, safe for the FMA chain."""
    rng = np.random.default_rng(seed)
    data = rng.random(n_elems, dtype=np.float32)
    return data + np.float32(INPUT_LOW)


def tiles_of(src: np.ndarray, variant: Variant, n_tiles: int, tile_elems: int,
             layout: TensorLayout) -> np.ndarray:
    """Each tile's elements in the order the kernel sees them in shared memory."""
    if variant is not Variant.TENSOR_2D:
        return src[: n_tiles * tile_elems].reshape(n_tiles, tile_elems)
    g = src[: layout.width * layout.height].reshape(layout.height, layout.width)
    boxes = g.reshape(layout.height // layout.box_h, layout.box_h, layout.grid_cols,
                      layout.box_w).transpose(0, 2, 1, 3)
    return boxes.reshape(-1, tile_elems)[:n_tiles]


def fma_chain(x: np.ndarray, iters: int) -> np.ndarray:
    """x after `iters` steps of x <- A*x + B, in closed form.

    Evaluated in float32 (a few ulp from exact, far inside RTOL) so that references
    for hundreds of MB of tiles stay cheap in time and memory.
    """
    scale = np.float32(FMA_A**iters)
    return np.float32(1.0) + scale * (x - np.float32(1.0))


def expected_partials(tiles: np.ndarray, iters: int, consumer_threads: int) -> np.ndarray:
    """[tile, thread] sums (float64): thread t owns elements t, t + T, t + 2T, ... of a tile."""
    n_tiles, tile_elems = tiles.shape
    per_thread = -(-tile_elems // consumer_threads)
    vals = np.zeros((n_tiles, per_thread * consumer_threads), dtype=np.float32)
    vals[:, :tile_elems] = fma_chain(tiles, iters)
    return vals.reshape(n_tiles, per_thread, consumer_threads).sum(axis=1, dtype=np.float64)


def checksum_errors(got: np.ndarray, want: np.ndarray) -> list[str]:
    """Human-readable mismatches between kernel partials and the reference (empty if fine)."""
    got64 = got.astype(np.float64)
    unwritten = np.isnan(got64)
    bad = ~np.isclose(got64, want, rtol=RTOL, atol=1e-6) | unwritten
    if not bad.any():
        return []
    idx = np.argwhere(bad)
    first = tuple(int(i) for i in idx[0])
    return [f"{int(bad.sum())} of {bad.size} partial sums wrong "
            f"({int(unwritten.sum())} never written); first at [cta, tile, thread]={first}: "
            f"got {float(got64[first])!r}, want {float(want[first])!r}"]


def order_violations(stamps: np.ndarray, stages: int) -> dict[str, int]:
    """Counts of broken happens-before rules in stamps[cta, tile, event].

    Each rule is a causal chain in the kernel (a timer read, then a barrier
    release that the other side acquires before its own timer read), so any
    count above zero is a protocol bug or a timer that is not monotonic.
    """
    s = stamps.astype(np.int64)
    n = s.shape[1]
    rules = {
        "empty_wait>issue": s[..., EV_EMPTY_WAIT] > s[..., EV_ISSUE],
        "issue>ready": s[..., EV_ISSUE] > s[..., EV_READY],
        "full_wait>ready": s[..., EV_FULL_WAIT] > s[..., EV_READY],
        "ready>compute_start": s[..., EV_READY] > s[..., EV_COMPUTE_START],
        "compute_start>compute_end": s[..., EV_COMPUTE_START] > s[..., EV_COMPUTE_END],
        "slot_reissued_before_compute_end":
            s[:, stages:, EV_ISSUE] < s[:, : max(n - stages, 0), EV_COMPUTE_END],
        "compute_overlaps_previous":
            s[:, 1:, EV_COMPUTE_START] < s[:, :-1, EV_COMPUTE_END],
    }
    return {name: int(np.count_nonzero(bad)) for name, bad in rules.items()}
