"""Ceilings measured in the same session as the sweep: copy bandwidth and timer granularity.

A measured tile time means little without the device's own limits beside it:
the device-to-device copy rate (and a read-only kernel's rate, the ceiling of a
read-only tile stream), and how finely %globaltimer ticks, which bounds what the
per-tile timestamps can resolve.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from tmasim.gpu import kernels

READ_BLOCK = 256


def _event_ms(fn: Any) -> float:
    """Milliseconds `fn()` takes on the GPU, from CUDA events around it."""
    start = cuda.event(timing=True)  # type: ignore[call-arg, unused-ignore]
    end = cuda.event(timing=True)  # type: ignore[call-arg, unused-ignore]
    start.record()
    fn()
    end.record()
    end.synchronize()
    cuda.synchronize()
    return float(start.elapsed_time(end))


def copy_bandwidth(nbytes: int = 1 << 30, repeats: int = 5) -> dict[str, Any]:
    """Device-to-device copy; GB/s counts bytes read plus bytes written."""
    n = nbytes // 4
    src = cuda.to_device(np.ones(n, dtype=np.float32))
    dst = cuda.device_array(n, dtype=np.float32)
    dst.copy_to_device(src)  # warm-up
    times = [_event_ms(lambda: dst.copy_to_device(src)) for _ in range(repeats)]
    check = dst[n - 4:].copy_to_host()
    if not np.all(check == 1.0):
        raise RuntimeError(f"device-to-device copy check failed: tail {check}")
    gbps = [2 * nbytes / (t * 1e6) for t in times]
    return {"bytes": nbytes, "ms": times, "gbps_read_plus_write": gbps,
            "gbps_best": max(gbps), "gbps_median": float(np.median(gbps))}


def read_bandwidth(sm_count: int, nbytes: int = 1 << 30, repeats: int = 5) -> dict[str, Any]:
    """A grid-stride read-only kernel over `nbytes` (float32 loads)."""
    src = cuda.to_device(np.ones(nbytes // 4, dtype=np.float32))
    sink = cuda.to_device(np.zeros(1, dtype=np.float32))
    grid = 8 * sm_count

    def launch() -> None:
        kernels.read_stream[grid, READ_BLOCK](src, sink)

    launch()  # compile + warm-up
    times = [_event_ms(launch) for _ in range(repeats)]
    gbps = [nbytes / (t * 1e6) for t in times]
    return {"bytes": nbytes, "grid": grid, "block": READ_BLOCK, "ms": times, "gbps": gbps,
            "gbps_best": max(gbps), "gbps_median": float(np.median(gbps))}


def timer_resolution(samples: int = 1 << 16) -> dict[str, Any]:
    """Back-to-back %globaltimer reads by one thread: tick size and update period."""
    out = cuda.device_array(samples, dtype=np.uint64)
    kernels.timer_probe[1, 32](out)  # compile + warm-up
    event_ms = _event_ms(lambda: kernels.timer_probe[1, 32](out))
    t = out.copy_to_host().astype(np.int64)
    return summarize_timer(t, event_ms)


def sm_clock(spins: int = 1 << 22) -> dict[str, Any]:
    """SM cycles per globaltimer ns over a busy loop of about ten milliseconds."""
    out = cuda.to_device(np.zeros(5, dtype=np.uint64))
    kernels.clock_probe[1, 32](out, np.int64(1024))  # compile + warm-up
    kernels.clock_probe[1, 32](out, np.int64(spins))
    cuda.synchronize()
    t0, c0, t1, c1, _ = (int(v) for v in out.copy_to_host())
    ns, cycles = t1 - t0, c1 - c0
    return {"spins": spins, "ns": ns, "cycles": cycles,
            "sm_clock_ghz": round(cycles / ns, 4) if ns > 0 else None}


def summarize_timer(t: np.ndarray, event_ms: float) -> dict[str, Any]:
    """Granularity statistics of a series of timer reads (pure numpy, testable)."""
    d = np.diff(t)
    steps = d[d > 0]
    distinct = int(np.unique(t).size)
    span = int(t[-1] - t[0])
    return {
        "samples": int(t.size),
        "non_monotonic": int(np.count_nonzero(d < 0)),
        "distinct_values": distinct,
        "min_step_ns": int(steps.min()) if steps.size else None,
        "median_step_ns": float(np.median(steps)) if steps.size else None,
        "update_period_ns": span / (distinct - 1) if distinct > 1 else None,
        "span_ns": span,
        "kernel_event_ns": event_ms * 1e6,
    }
