"""Levenberg-Marquardt least squares for a handful of parameters, with batched evaluations.

Why not scipy: calibration needs one thing from it, ``least_squares`` with a forward-difference
Jacobian, and this is that method in ~80 lines of numpy, with two things ``least_squares`` does
not offer: the p + 1 evaluations of a Jacobian are handed over as ONE batch (so a process pool
simulates them together), and the budget counts evaluations of the whole residual vector
(each one simulates every training point). Gauss-Newton steps use the residuals' structure,
which Nelder-Mead ignores: p + 1 evaluations per iteration, and few iterations near the answer.

The simulator is piecewise linear in its parameters (max-plus recurrences, min of
bandwidths), so the Jacobian is taken with a finite step (``step``, relative, since the
parameters are logarithms) rather than an infinitesimal one, and the damping falls back to
short gradient steps where a kink makes the linear model wrong.
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
    stopped: str                 # "converged", "budget", "no better step"
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


def levenberg_marquardt(batch: Batch, x0: np.ndarray, *, max_evals: int = 40, step: float = 2e-3,
                        max_step: float = 1.0, ftol: float = 1e-7, xtol: float = 1e-6,
                        report: Report | None = None) -> Fit:
    """Minimize ½‖r(x)‖² from ``x0``; ``batch`` evaluates r at several points at once."""
    x = np.asarray(x0, dtype=float)
    r = batch([x])[0]
    if r is None:
        raise ValueError("the residuals cannot be evaluated at the start")
    evals, lam, iterations, stopped = 1, 1e-3, 0, "budget"
    insensitive: tuple[int, ...] = ()
    jac: np.ndarray | None = None
    if _cost(r) < 1e-20:
        return Fit(x, r, _cost(r), evals, 0, "converged")
    while evals + len(x) + 1 <= max_evals:
        jac = _jacobian(batch, x, r, step)
        evals += len(x)
        insensitive = tuple(int(i) for i in np.flatnonzero(~np.any(jac != 0.0, axis=0)))
        accepted, x_new, r_new, lam, used = _damped_step(batch, x, r, jac, lam, max_step, max_evals - evals)
        evals += used
        iterations += 1
        if not accepted:
            stopped = "no better step" if evals < max_evals else "budget"
            break
        gain = _cost(r) - _cost(r_new)
        moved = float(np.max(np.abs(x_new - x)))
        x, r = x_new, r_new
        if report is not None:
            report(iterations, x, _cost(r))
        if gain <= ftol * max(_cost(r), 1e-30) or moved < xtol or _cost(r) < 1e-20:
            stopped = "converged"
            break
    return Fit(x, r, _cost(r), evals, iterations, stopped, insensitive, jac)


def _cost(r: np.ndarray) -> float:
    return 0.5 * float(r @ r)


def _jacobian(batch: Batch, x: np.ndarray, r: np.ndarray, step: float) -> np.ndarray:
    """Forward differences, all columns in one batch; a column that fails counts as flat."""
    trials = [x + step * np.eye(len(x))[j] for j in range(len(x))]
    columns = [np.zeros_like(r) if rj is None else (rj - r) / step for rj in batch(trials)]
    return np.column_stack(columns)


def _damped_step(batch: Batch, x: np.ndarray, r: np.ndarray, jac: np.ndarray, lam: float, max_step: float,
                 budget: int) -> tuple[bool, np.ndarray, np.ndarray, float, int]:
    """Raise the damping until a step lowers the cost (or the budget ends): (accepted, x, r, λ, evals)."""
    a, g = jac.T @ jac, jac.T @ r
    scale = np.diag(a) + 1e-12 * max(float(np.max(np.diag(a))), 1e-30)
    used = 0
    while used < budget and lam < 1e10:
        delta = np.linalg.solve(a + lam * np.diag(scale), -g)
        largest = float(np.max(np.abs(delta)))
        if largest > max_step:  # at most a factor e per parameter per step: stay near the linear model
            delta *= max_step / largest
        r_new = batch([x + delta])[0]
        used += 1
        if r_new is not None and _cost(r_new) < _cost(r):
            return True, x + delta, r_new, max(lam / 3.0, 1e-9), used
        lam *= 4.0
    return False, x, r, lam, used
