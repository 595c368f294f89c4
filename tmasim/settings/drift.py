"""SM drift as the scenario states it (``run.drift``): what keeps identical SMs from running in
lockstep. This is data, checked where it is built; the engine draws the skews and the noise
from it (:mod:`tmasim.engine.drift`).

- **start skew**: each SM starts its first CTA ``U(0, start)`` after time zero (the block
  scheduler does not launch 132 CTAs in one cycle);
- **copy latency noise**: each copy's latency is multiplied by a Gamma draw of mean 1 and
  coefficient of variation ``latency_cv``.

With either source on, no two SMs are identical, so the run is not aggregated.
"""

from __future__ import annotations

from dataclasses import dataclass

from tmasim.errors import ScenarioError
from tmasim.values import fields as read

MIN_CV = 1e-6  # the smallest latency_cv: a copy of 1 s would vary by a picosecond


@dataclass(frozen=True)
class Drift:
    start: int  # ps: start skews are uniform on [0, start)
    latency_cv: float  # coefficient of variation of each copy's latency

    def __post_init__(self) -> None:
        """Checked on every construction (as the other config dataclasses)."""
        read.checked_time("run.drift.start", self.start, positive=False)
        cv = self.latency_cv
        if isinstance(cv, bool) or not isinstance(cv, (int, float)) or not 0 <= cv <= 1:
            raise ScenarioError("run.drift.latency_cv", cv, "must be a number from 0 to 1 (a coefficient of variation)")
        if 0 < cv < MIN_CV:  # the latency's gamma has shape 1/cv²: past this it overflows
            raise ScenarioError("run.drift.latency_cv", cv, f"must be 0 (no noise) or from {MIN_CV:g} to 1: a smaller "
                                                            "coefficient of variation is no noise at a picosecond")

    @property
    def on(self) -> bool:
        return self.start > 0 or self.latency_cv > 0


NO_DRIFT = Drift(0, 0.0)
