"""The kernels' logic under numba's CUDA simulator: ring bookkeeping, ordering, checksums.

Tiny sizes (1-2 CTAs, one consumer warp, 512-byte tiles): the simulator runs every
thread as a Python thread. Each launch goes through Launcher.launch, which already
rejects wrong partial sums, unwritten outputs and timed-out waits; the tests add
independent checks on top and show that broken protocols are caught.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from tmasim.gpu.backend import simulator_enabled  # noqa: E402

if not simulator_enabled():
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported",
                allow_module_level=True)

from tmasim.gpu import kernels, reference, sim_primitives  # noqa: E402
from tmasim.gpu.launch import (  # noqa: E402
    POISON_U64,
    KernelTimeoutError,
    Launcher,
    ResultCheckError,
)
from tmasim.gpu.params import (  # noqa: E402
    EV_COMPUTE_END,
    EV_COMPUTE_START,
    EV_FULL_WAIT,
    EV_ISSUE,
    EV_READY,
    KernelParams,
    Variant,
    source_elems,
)
from tmasim.gpu.sim_primitives import MbarrierError  # noqa: E402

TILE = 512  # 128 float32, boxes of 64 x 2 in the 2-D variant
TILES = 7  # not a multiple of 2 or 3: the ring wraps mid-phase
TIMEOUT_NS = 30 * 10**9  # generous: simulator threads are slow, a hang still ends


def params(variant: Variant, stages: int, **kw: Any) -> KernelParams:
    base: dict[str, Any] = dict(variant=variant, stages=stages, tile_bytes=TILE,
                                compute_iters=3, ctas=2, tiles_per_cta=TILES,
                                consumer_warps=1)
    base.update(kw)
    return KernelParams(**base)


@pytest.fixture(scope="module")
def launcher() -> Launcher:
    return Launcher(source_elems(16384, 64), seed=7, simulator=True, flush_bytes=0)


def brute_force_partials(launcher: Launcher, p: KernelParams) -> np.ndarray:
    """Independent of reference.py: explicit loops over the tiles as the kernel sees them."""
    lay = p.layout
    g2d = launcher.src_host[: lay.width * lay.height].reshape(lay.height, lay.width)
    want = np.zeros((p.ctas, p.tiles_per_cta, p.consumer_threads))
    for cta in range(p.ctas):
        for k in range(p.tiles_per_cta):
            g = cta * p.tiles_per_cta + k
            if p.variant is Variant.TENSOR_2D:
                c0, c1 = lay.coords(g)
                tile = g2d[c1:c1 + lay.box_h, c0:c0 + lay.box_w].ravel()
            else:
                tile = launcher.src_host[g * p.tile_elems:(g + 1) * p.tile_elems]
            for t in range(p.consumer_threads):
                for x in tile[t::p.consumer_threads].astype(np.float64):
                    for _ in range(p.compute_iters):
                        x = x * reference.FMA_A + reference.FMA_B
                    want[cta, k, t] += x
    return want


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("variant", list(Variant))
def test_pipeline_is_correct_and_ordered(launcher: Launcher, variant: Variant,
                                         stages: int) -> None:
    p = params(variant, stages)
    res = launcher.launch(p, launcher.buffers(p), TIMEOUT_NS, sm_count=1)
    np.testing.assert_allclose(res.partials, brute_force_partials(launcher, p), rtol=1e-5)
    assert list(res.sms) == [0, 1]  # the simulator's %smid stand-in is the block index
    s = res.stamps.astype(np.int64)
    assert np.all(s[..., EV_ISSUE] <= s[..., EV_READY])
    assert np.all(s[..., EV_FULL_WAIT] <= s[..., EV_READY])
    assert np.all(s[..., EV_READY] <= s[..., EV_COMPUTE_START])
    assert np.all(s[..., EV_COMPUTE_START] <= s[..., EV_COMPUTE_END])
    # slot k mod S is reissued only after its previous tile's compute ended
    assert np.all(s[:, stages:, EV_ISSUE] >= s[:, :-stages, EV_COMPUTE_END])
    # the consumer takes tiles in order, one at a time
    assert np.all(s[:, 1:, EV_COMPUTE_START] >= s[:, :-1, EV_COMPUTE_END])
    assert set(reference.order_violations(res.stamps, stages).values()) == {0}


def test_timer_and_clock_probes_record_in_order() -> None:
    from numba import cuda

    t = cuda.to_device(np.zeros(64, dtype=np.uint64))
    kernels.timer_probe[1, 32](t)
    stamps = t.copy_to_host().astype(np.int64)
    assert np.all(np.diff(stamps) >= 0) and stamps[0] > 0
    out = cuda.to_device(np.zeros(5, dtype=np.uint64))
    kernels.clock_probe[1, 32](out, np.int64(100))
    t0, c0, t1, c1, bits = (int(v) for v in out.copy_to_host())
    assert t1 >= t0 and c1 >= c0  # the simulator's clock64 counts nanoseconds
    want = reference.fma_chain(np.array([1.5], dtype=np.float32), 100)[0]
    assert abs(bits - want * 1e6) <= 2


def test_uninstrumented_run_leaves_timestamps_untouched(launcher: Launcher) -> None:
    p = params(Variant.BULK_1D, 2, instrumented=False)
    res = launcher.launch(p, launcher.buffers(p), TIMEOUT_NS, sm_count=1)
    assert np.all(res.stamps == POISON_U64)
    np.testing.assert_allclose(res.partials, brute_force_partials(launcher, p), rtol=1e-5)


def test_more_consumer_warps_split_the_tile(launcher: Launcher) -> None:
    p = params(Variant.TENSOR_2D, 2, consumer_warps=2, ctas=1, tiles_per_cta=3,
               tile_bytes=1024, compute_iters=1)
    res = launcher.launch(p, launcher.buffers(p), TIMEOUT_NS, sm_count=1)
    assert res.partials.shape == (1, 3, 64)
    np.testing.assert_allclose(res.partials, brute_force_partials(launcher, p), rtol=1e-5)


def test_a_wait_that_expires_is_reported_not_hung(launcher: Launcher,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_primitives, "COPY_DELAY_S", 1.0)  # the first copy surely late
    p = params(Variant.BULK_1D, 2, ctas=1, tiles_per_cta=4)
    with pytest.raises(KernelTimeoutError) as err:
        launcher.launch(p, launcher.buffers(p), timeout_ns=1, sm_count=1)
    assert "CTA 0 consumer waiting for tile 0" in str(err.value)


@pytest.fixture
def patched_wait(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Replace the kernels' barrier wait (the simulator looks globals up at call time)."""
    original = kernels._wait

    def install(fn: Any) -> None:
        monkeypatch.setattr(kernels, "_wait", lambda bar, parity, t: fn(original, bar,
                                                                       parity, t))

    yield install


def test_skipping_the_waits_is_caught(launcher: Launcher, patched_wait: Any,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_primitives, "COPY_DELAY_S", 0.05)  # copies surely still in flight
    patched_wait(lambda original, bar, parity, t: True)
    p = params(Variant.BULK_1D, 2, ctas=1, tiles_per_cta=4)
    with pytest.raises((ResultCheckError, MbarrierError)):
        launcher.launch(p, launcher.buffers(p), TIMEOUT_NS, sm_count=1)


def test_inverted_phase_parity_is_caught(launcher: Launcher, patched_wait: Any) -> None:
    patched_wait(lambda original, bar, parity, t: original(bar, parity ^ 1, t))
    p = params(Variant.SYNC, 2, ctas=1, tiles_per_cta=4)
    with pytest.raises((ResultCheckError, MbarrierError, KernelTimeoutError)):
        launcher.launch(p, launcher.buffers(p), 2 * 10**9, sm_count=1)
