"""SM drift in the engine: the draws behind ``run.drift`` (:class:`tmasim.drift.Drift`, the
scenario's data).

Two seeded sources, each its own ``numpy`` stream spawned from the run's seed:

- **start skew**: each SM starts its first CTA ``U(0, start)`` after time zero (the block
  scheduler does not launch 132 CTAs in one cycle);
- **copy latency noise**: each copy's latency is multiplied by a Gamma draw of mean 1 and
  coefficient of variation ``latency_cv`` (shape 1/cv², scale cv²: positive, right-skewed, as
  memory latencies are), one stream per SM.

With either source on, no two SMs are identical, so the run is not aggregated.
"""

from __future__ import annotations

import numpy as np

from tmasim.settings.drift import Drift

START_STREAM, LATENCY_STREAM = 100, 101  # spawn keys, apart from the tiles workload's streams
_BATCH = 4096


def start_skews(drift: Drift, sms: int, seed: int) -> list[int]:
    """Each SM's start delay in ps."""
    if not drift.start:
        return [0] * sms
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(START_STREAM,)))
    return np.rint(rng.uniform(0, drift.start, sms)).astype(np.int64).tolist()


def latency_noise(drift: Drift, sm: int, seed: int) -> LatencyNoise | None:
    """The scaler of SM ``sm``'s copy latencies, or None without latency noise."""
    if not drift.latency_cv:
        return None
    return LatencyNoise(drift.latency_cv, np.random.SeedSequence(seed, spawn_key=(LATENCY_STREAM, sm)))


class LatencyNoise:
    """Scales copy latencies by Gamma(1/cv², cv²) draws, drawn in batches."""

    __slots__ = ("_rng", "_shape", "_scale", "_draws", "_next")

    def __init__(self, cv: float, seed: np.random.SeedSequence) -> None:
        self._rng = np.random.default_rng(seed)
        self._shape, self._scale = 1 / cv**2, cv**2
        self._draws: list[float] = []
        self._next = 0

    def __call__(self, latency: int) -> int:
        if self._next == len(self._draws):
            self._draws = self._rng.gamma(self._shape, self._scale, _BATCH).tolist()
            self._next = 0
        factor = self._draws[self._next]
        self._next += 1
        return round(latency * factor)
