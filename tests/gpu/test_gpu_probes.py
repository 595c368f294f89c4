"""Host-side arithmetic of the probes (the kernels themselves need a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from tmasim.gpu.probes import summarize_timer  # noqa: E402


def test_timer_summary_finds_step_and_update_period() -> None:
    t = np.array([1000, 1000, 1032, 1032, 1064, 1096, 1096], dtype=np.int64)
    s = summarize_timer(t, event_ms=0.001)
    assert s["min_step_ns"] == 32 and s["median_step_ns"] == 32.0
    assert s["distinct_values"] == 4 and s["update_period_ns"] == 32.0
    assert s["non_monotonic"] == 0 and s["span_ns"] == 96 and s["kernel_event_ns"] == 1000.0


def test_timer_summary_flags_a_clock_that_goes_back() -> None:
    s = summarize_timer(np.array([5, 7, 6, 9], dtype=np.int64), event_ms=0.0)
    assert s["non_monotonic"] == 1 and s["min_step_ns"] == 2


def test_timer_summary_of_a_frozen_timer() -> None:
    s = summarize_timer(np.full(10, 42, dtype=np.int64), event_ms=0.0)
    assert s["min_step_ns"] is None and s["update_period_ns"] is None
