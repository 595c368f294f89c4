"""On a real GPU (sm_90+): the kernels run, verify, and the probes give sane numbers.

Marked `gpu`; skipped without a real device (the simulator does not count).
"""

from __future__ import annotations

import pytest

pytest.importorskip("numba")

from tmasim.gpu.backend import real_gpu_available  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not real_gpu_available(), reason="needs a real CUDA GPU"),
]


def _cc() -> tuple[int, int]:
    from numba import cuda

    return tuple(cuda.get_current_device().compute_capability)  # type: ignore[return-value]


def test_small_sweep_verifies_on_the_device() -> None:
    if _cc() < (9, 0):
        pytest.skip("TMA and mbarrier transaction counts need sm_90")
    from tmasim.gpu.driver import SweepSpec, run_sweep

    spec = SweepSpec(stages=(1, 2), tile_bytes=(4096,), compute_iters=(4,), ctas=(1, "sms"),
                     tiles_per_cta=16, warmup=1, repeats=1)
    res = run_sweep(spec)
    assert (res.runs.status == "ok").all(), res.runs.status.tolist()
    assert (res.runs.order_violations == 0).all()
    assert (res.runs.timing == "cuda_event").all() and (res.runs.gbps > 0).all()
    many = res.runs[res.runs.ctas > 1]
    assert (many.distinct_sms > 1).all()


def test_timer_and_bandwidth_probes() -> None:
    from tmasim.gpu import probes

    t = probes.timer_resolution(samples=4096)
    assert t["non_monotonic"] == 0 and t["min_step_ns"] and t["min_step_ns"] > 0
    bw = probes.copy_bandwidth(nbytes=256 << 20, repeats=2)
    assert bw["gbps_best"] > 50
    clock = probes.sm_clock(spins=1 << 18)
    assert 0.3 < clock["sm_clock_ghz"] < 4.0
