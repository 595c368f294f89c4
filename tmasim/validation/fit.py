"""Least squares for a handful of parameters, with batched evaluations: scipy's
``least_squares`` (trust region reflective), fed a forward-difference Jacobian whose p
evaluations are handed over as ONE batch (so a process pool simulates them together), under a
budget that counts evaluations of the whole residual vector (each one simulates every training
point).

scipy replaced a hand-written Levenberg-Marquardt here: on the kinked max-plus problems of
``benchmarks/bench_fit.py`` it reaches every answer the hand-written one did, in a few more
evaluations, and one it stalled on; and it brings bounds and robust losses should a
calibration need them.

The simulator is piecewise linear in its parameters (max-plus recurrences, min of
bandwidths), so the Jacobian is taken with a finite step (``step``, relative, since the
parameters are logarithms) rather than an infinitesimal one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Residuals = np.ndarray
Batch = Callable[[Sequence[np.ndarray]], list[Residuals | None]]  # None: could not be evaluated
Report = Callable[[int, np.ndarray, float], None]


@dataclass(frozen=True)
class Fit:
    """Where the search stopped and why."""

    x: np.ndarray
    residuals: np.ndarray
    cost: float                  # half the sum of squared residuals
    evaluations: int             # residual vectors computed
    iterations: int
    stopped: str                 # "converged" or "budget"
    insensitive: tuple[int, ...] = ()   # parameters that moved no residual: left where they started
    jacobian: np.ndarray | None = None  # the last one taken (residuals x parameters)

    def collinear(self, threshold: float = 0.999) -> list[tuple[int, int]]:
        """Pairs of parameters whose effects on the residuals are (nearly) proportional: the data
        determine a combination of them, not each one (copy_latency and hbm_latency only add)."""
        if self.jacobian is None:
            return []
        norms = np.linalg.norm(self.jacobian, axis=0)
        pairs = []
        for i in range(len(norms)):
            for j in range(i + 1, len(norms)):
                if norms[i] > 0 and norms[j] > 0:
                    cosine = abs(float(self.jacobian[:, i] @ self.jacobian[:, j])) / (norms[i] * norms[j])
                    if cosine > threshold:
                        pairs.append((i, j))
        return pairs


class _Spent(Exception):
    """The evaluation budget is used up: stop where the best point so far is."""


def fit_least_squares(batch: Batch, x0: np.ndarray, *, max_evals: int = 40, step: float = 2e-3,
                      ftol: float = 1e-7, xtol: float = 1e-6, report: Report | None = None) -> Fit:
    """Minimize ½‖r(x)‖² from ``x0``; ``batch`` evaluates r at several points at once."""
    from scipy.optimize import least_squares

    search = _Search(batch, np.asarray(x0, dtype=float), max_evals, step, report)
    if search.best_cost < 1e-20:
        return search.result("converged")
    try:
        found = least_squares(search.residuals, search.best_x, jac=search.jacobian, method="trf", x_scale="jac",
                              ftol=ftol, xtol=xtol, gtol=1e-12, max_nfev=max_evals)
        stopped = "converged" if found.status > 0 else "budget"
    except _Spent:
        stopped = "budget"
    return search.result(stopped)


class _Search:
    """The residuals and Jacobian scipy asks for, counted against the budget, with the best point kept."""

    def __init__(self, batch: Batch, x0: np.ndarray, max_evals: int, step: float, report: Report | None) -> None:
        self.batch, self.max_evals, self.step, self.report = batch, max_evals, step, report
        r0 = batch([x0])[0]
        if r0 is None:
            raise ValueError("the residuals cannot be evaluated at the start")
        self.evals, self.iterations = 1, 0
        self.best_x, self.best_r = x0, r0
        self.cache: dict[bytes, np.ndarray] = {x0.tobytes(): r0}
        self.jac: np.ndarray | None = None

    @property
    def best_cost(self) -> float:
        return _cost(self.best_r)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        key = x.tobytes()
        if key not in self.cache:
            if self.evals >= self.max_evals:
                raise _Spent
            r = self.batch([x.copy()])[0]
            self.evals += 1
            # A point that cannot be evaluated gets residuals no step will prefer.
            self.cache[key] = r if r is not None else np.full_like(self.best_r, 1e6)
            if r is not None and _cost(r) < self.best_cost:
                self.best_x, self.best_r = x.copy(), r
        return self.cache[key]

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """Forward differences, all columns in one batch; a column that fails counts as flat."""
        r = self.residuals(x)
        if self.evals + len(x) > self.max_evals:
            raise _Spent
        trials = [x + self.step * np.eye(len(x))[j] for j in range(len(x))]
        columns = [np.zeros_like(r) if rj is None else (rj - r) / self.step for rj in self.batch(trials)]
        self.evals += len(x)
        self.iterations += 1
        self.jac = np.column_stack(columns)
        if self.report is not None and self.iterations > 1:
            self.report(self.iterations - 1, self.best_x, self.best_cost)
        return self.jac

    def result(self, stopped: str) -> Fit:
        insensitive: tuple[int, ...] = ()
        if self.jac is not None:
            insensitive = tuple(int(i) for i in np.flatnonzero(~np.any(self.jac != 0.0, axis=0)))
        return Fit(self.best_x, self.best_r, self.best_cost, self.evals, self.iterations, stopped, insensitive,
                   self.jac)


def _cost(r: np.ndarray) -> float:
    return 0.5 * float(r @ r)
