"""Calibration's least-squares search on kinked max-plus problems: error and evaluations.

Each problem has the simulator's shape (maxima of sums, fitted in log space) and a known
answer; each is started from 5 random points. An evaluation is one residual vector (in a real
calibration, one simulation of every training point); a Jacobian costs p of them, in one batch.

    python benchmarks/bench_fit.py

Measured when scipy's least_squares replaced the hand-written Levenberg-Marquardt (same
problems, same starts, budget 60 evaluations): scipy (trf, the Jacobian batched) brings all 10
starts to zero cost, in 15-18 evaluations for 2 parameters and 24-57 for 3; the numpy code
needed 13-16 and 25-40 but stalled on one 3-parameter start at cost 0.77. One 3-parameter
start ends at zero cost 0.4 away from the truth for both: that answer is not unique (a term
hidden behind a max).
"""

from __future__ import annotations

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import numpy as np

from tmasim.validation.fit import fit_least_squares


def problems():  # noqa: ANN201
    xs = np.linspace(0.5, 12, 9)

    def kinked(x: np.ndarray) -> np.ndarray:
        a, b = np.exp(x)
        return np.maximum(a, b * xs) + xs

    yield "kinked, 2 parameters", kinked, np.log([3.0, 0.5])
    xs3 = np.linspace(0.2, 20, 15)

    def pipeline(x: np.ndarray) -> np.ndarray:  # latency, copy, compute over stages
        lat, cp, cm = np.exp(x)
        return np.maximum(cp, np.maximum(cm, (lat + cp + cm) / xs3)) * 8 + lat

    yield "pipeline, 3 parameters", pipeline, np.log([6.0, 1.0, 1.5])


def main() -> None:
    rng = np.random.default_rng(0)
    for name, model, truth in problems():
        target = model(truth)
        for start in range(5):
            x0 = truth + rng.normal(0, 1.0, len(truth))
            fit = fit_least_squares(lambda vs: [np.log(model(v) / target) for v in vs], x0, max_evals=60)  # noqa: B023
            error = float(np.max(np.abs(fit.x - truth)))
            print(f"{name:<24} start {start}: error {error:8.2e}  cost {fit.cost:8.2e}  "
                  f"evaluations {fit.evaluations:3d}  ({fit.stopped})")


if __name__ == "__main__":
    main()
