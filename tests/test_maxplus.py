"""Layer 1: random per-tile times against the max-plus recurrence, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from tmasim_helpers import compute_ends, costly_gpu, ps, run

from tmasim import analytic


def _random_times(rng: np.random.Generator, n: int, low: int, high: int) -> list[int]:
    return rng.integers(low, high, n).tolist()


@pytest.mark.parametrize("seed", range(12))
def test_random_per_tile_times_match_the_recurrence_exactly(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    stages = int(rng.integers(1, 6))
    load = _random_times(rng, n, 1, 9_000_000)
    compute = _random_times(rng, n, 1, 9_000_000)
    latency = _random_times(rng, n, 0, 20_000_000) if seed % 2 else [0] * n
    issue, wake = (int(rng.integers(0, 50_000)), int(rng.integers(0, 80_000))) if seed % 3 else (0, 0)
    result = run(tiles=n, stages=stages, load=[ps(v) for v in load], compute=[ps(v) for v in compute],
                 latency=[ps(v) for v in latency], gpu=costly_gpu(issue, wake))
    expected = analytic.maxplus(load, compute, stages, latency, issue, wake)
    assert compute_ends(result) == expected.compute_end
    assert result.makespan_ps == expected.makespan
    assert result.stats["maxplus_ns"] * 1000 == pytest.approx(expected.makespan, abs=0.5)


def test_recurrence_landing_times_match_the_recorded_transfers():
    load, compute, latency = [3, 1, 4, 1, 5], [9, 2, 6, 5, 3], [2, 7, 1, 8, 2]
    scale = 1_000_000
    result = run(tiles=5, stages=2, load=[ps(v * scale) for v in load], compute=[ps(v * scale) for v in compute],
                 latency=[ps(v * scale) for v in latency])
    expected = analytic.maxplus([v * scale for v in load], [v * scale for v in compute], 2,
                                [v * scale for v in latency])
    transfers = result.spans[result.spans["kind"] == "transfer"].sort_values("tile")
    assert transfers["end_ps"].tolist() == expected.landed


def test_one_stage_equals_the_serial_reference_with_costs():
    load, compute = [2_000_000, 3_000_000, 1_000_000], [4_000_000, 1_000_000, 2_000_000]
    latency = [500_000, 0, 250_000]
    result = run(tiles=3, stages=1, load=[ps(v) for v in load], compute=[ps(v) for v in compute],
                 latency=[ps(v) for v in latency], gpu=costly_gpu(11_000, 37_000))
    assert result.makespan_ps == analytic.serial_time(load, compute, latency, 11_000, 37_000)
    assert result.stats["serial_ns"] * 1000 == pytest.approx(result.makespan_ps)


def test_equal_tiles_skip_the_periodic_steady_state_exactly():
    """Equal tiles (Repeat) take the periodic shortcut; it must give the step-by-step value."""
    from tmasim.engine.program import Repeat

    rng = np.random.default_rng(7)
    for _ in range(400):
        n, stages = int(rng.integers(1, 50)), int(rng.integers(1, 6))
        load, compute, latency = (int(rng.choice([0, rng.integers(0, 200)])) for _ in range(3))
        issue, wake = int(rng.integers(0, 20)), int(rng.choice([0, rng.integers(0, 40)]))
        listed = analytic.maxplus_makespan([load] * n, [compute] * n, stages, [latency] * n, issue, wake)
        repeated = analytic.maxplus_makespan(Repeat(load, n), Repeat(compute, n), stages, Repeat(latency, n), issue,
                                             wake)
        assert repeated == listed, (n, stages, load, compute, latency, issue, wake)
    assert analytic.maxplus_makespan(Repeat(3, 10**9), Repeat(5, 10**9), 2) == 3 + 5 * 10**9  # the anchor
