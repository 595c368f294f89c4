"""SM drift: seeded start skew and copy-latency noise that break the lockstep of identical SMs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tmasim.drift import Drift
from tmasim.engine.drift import LatencyNoise, start_skews
from tmasim.errors import ScenarioError
from tmasim.scenario import from_dict
from tmasim.simulation import simulate


def stream(drift: dict[str, Any] | None = None, seed: int = 0, ctas: int = 8, aggregate: bool = True) -> dict[str, Any]:
    run: dict[str, Any] = {"records": False, "seed": seed, "aggregate": aggregate}
    if drift is not None:
        run["drift"] = drift
    raw = {"gpu": "h100-sxm", "workload": {"kind": "stream", "dtype": "bf16", "shape": [ctas * 16 * 64, 64],
                                            "box": [64, 64], "ctas": ctas, "ctas_per_sm": 1},
           "pipeline": {"stages": 2}, "run": run}
    return simulate(from_dict(raw)).stats


def test_drift_off_keeps_aggregation_and_drift_on_turns_it_off() -> None:
    assert stream()["sm_classes"] == 1
    drifting = stream({"start": "100 ns", "latency_cv": 0.1})
    assert drifting["sm_classes"] == drifting["sms_used"] == 8
    assert (drifting["drift_start_ns"], drifting["drift_latency_cv"]) == (100.0, 0.1)
    assert stream({})["sm_classes"] == 1  # an empty table is no drift


def test_start_skew_delays_a_lone_sm_by_its_draw_exactly() -> None:
    still = stream(ctas=1)["makespan_ps"]
    skew = start_skews(Drift(1_000_000, 0.0), 1, seed=7)[0]
    assert 0 < skew < 1_000_000
    assert stream({"start": "1 us"}, seed=7, ctas=1)["makespan_ps"] == still + skew


def test_same_seed_same_result_and_another_seed_another() -> None:
    drift = {"start": "200 ns", "latency_cv": 0.2}
    first, again, other = stream(drift, seed=1), stream(drift, seed=1), stream(drift, seed=2)
    assert first["makespan_ps"] == again["makespan_ps"]
    assert first["makespan_ps"] != other["makespan_ps"]


def test_latency_noise_has_mean_one_and_the_stated_cv() -> None:
    noise = LatencyNoise(0.2, np.random.SeedSequence(0))
    draws = np.array([noise(1_000_000) for _ in range(20_000)]) / 1_000_000
    assert draws.min() > 0
    assert draws.mean() == pytest.approx(1.0, abs=0.01)
    assert draws.std() / draws.mean() == pytest.approx(0.2, rel=0.05)


@pytest.mark.parametrize(("drift", "message"), [
    ({"latency_cv": -0.1}, "run.drift.latency_cv: -0.1 must be a number from 0 to 1"),
    ({"latency_cv": 2}, "run.drift.latency_cv: 2 must be a number from 0 to 1"),
    ({"latency_cv": "5%"}, "run.drift.latency_cv: '5%' must be a number from 0 to 1"),
    ({"start": "-1 ns"}, "run.drift.start: '-1 ns' must be >= 0"),
    ({"skew": "1 ns"}, "run.drift.skew: '1 ns' is not a known field"),
])
def test_bad_drift_is_a_one_line_error(drift: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        stream(drift)
    assert str(err.value).startswith(message)
