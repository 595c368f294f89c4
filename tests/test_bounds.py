"""Layer 1: the steady-state bound max(l, c, issue, (lat + l + c + o) / S) is reached, never beaten."""

from __future__ import annotations

import pytest
from tmasim_helpers import compute_ends, costly_gpu, ps, run

from tmasim import analytic

N = 120


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 6])
@pytest.mark.parametrize(("load", "compute", "latency"), [
    (3_000_000, 5_000_000, 0),           # compute-bound
    (5_000_000, 3_000_000, 0),           # copy-bound
    (1_000_000, 1_500_000, 9_000_000),   # latency-bound until enough stages
    (2_000_000, 2_000_000, 2_000_000),
])
@pytest.mark.parametrize(("issue", "wake"), [(0, 0), (40_000, 90_000)])
def test_steady_state_interval_reaches_the_bound(stages, load, compute, latency, issue, wake):
    result = run(tiles=N, stages=stages, load=ps(load), compute=ps(compute), latency=ps(latency),
                 gpu=costly_gpu(issue, wake))
    bound = analytic.steady_state(load, compute, stages, latency, issue, wake)
    ends = compute_ends(result)
    # Measure over a whole number of slot cycles near the end, where the pipeline is periodic.
    window = stages * 10
    interval = (ends[-1] - ends[-1 - window]) / window
    assert interval >= bound.interval - 1e-9
    assert interval == pytest.approx(bound.interval, rel=1e-9)
    assert result.stats["interval_bound_ns"] * 1000 == pytest.approx(bound.interval)


def test_the_binding_term_moves_from_latency_to_copy_as_stages_grow():
    bindings = [analytic.steady_state(3, 2, s, latency=10).binding for s in (1, 2, 3, 4, 5)]
    assert bindings == ["latency", "latency", "latency", "latency", "copy"]


def test_reported_binding_term_for_the_reference(reference):
    assert reference.stats["binding"] == "compute"
    assert reference.stats["latency_term_ns"] == 4000  # (3 + 5) us / 2 stages
