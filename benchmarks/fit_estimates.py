"""Fit the run estimate's time constants (tmasim/budget.py) on the grid of bench_estimates.py.

A run's estimated seconds are linear in the constants: RUN_SECONDS, the planning costs, each
kind's per-step cost, the cluster's, the sharers', the records' and the skipped steps'. For each
case of the grid this script builds the plan and the chip (as ``simulation.estimate`` does) and
reads each constant's coefficient (the estimate with that constant at 1 and the others at 0); it
then finds the constants that minimize the squared log ratio of estimated to measured time over
the cases (scipy's ``least_squares``, constants kept positive, pulled weakly towards their
current values so that a constant the grid hardly sees stays where it was), and prints them with
each case's ratio before and after.

    python benchmarks/bench_estimates.py --json /tmp/grid.json   # measure (idle machine, ~4 min)
    python benchmarks/fit_estimates.py /tmp/grid.json            # fit (~1 min)

Cases measured under :data:`MIN_SECONDS` are left out (the clock's and the interpreter's noise).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
from bench_estimates import CASES

MIN_SECONDS = 0.25
PULL = 0.05  # weight of each constant's pull towards its current value, in log units
# (name in tmasim.budget, key for a per-kind table or None)
CONSTANTS = [("RUN_SECONDS", None), ("PLAN_SECONDS_PER_STEP", None), ("PLAN_SECONDS_PER_UNIT", None),
             ("STEP_SECONDS", "timed"), ("STEP_SECONDS", "flow"), ("STEP_SECONDS", "attention"),
             ("CLUSTER_STEP_SECONDS", None), ("SHARER_SECONDS", "lockstep"), ("SHARER_SECONDS", "drift"),
             ("SHARER_SECONDS", "drift_cluster"), ("RECORD_SECONDS", None), ("WIDE_RECORD_SECONDS", None),
             ("WIDE_SHIFT_SECONDS", None), ("SKIPPED_STEP_SECONDS", None), ("SHIFT_RECORD_SECONDS", "timed"),
             ("SHIFT_RECORD_SECONDS", "flow"), ("SHIFT_RECORD_SECONDS", "attention")]


def _get(budget, name: str, key: str | None) -> float:
    value = getattr(budget, name)
    return value[key] if key is not None else value


def _set(budget, name: str, key: str | None, value: float) -> None:
    if key is None:
        setattr(budget, name, value)
    else:
        getattr(budget, name)[key] = value


def coefficients(name: str, sets: list[str]) -> list[float]:
    """Each constant's coefficient in this case's estimate (the estimate is linear in them)."""
    import simpy

    from tmasim import budget, simulation
    from tmasim.engine.chip import Chip
    from tmasim.scenario import load

    scenario = load(name, sets)
    scenario.validate()
    plan, _ = simulation.plan_scenario(scenario)
    drift = scenario.run.drift
    chip = Chip(simpy.Environment(), scenario.gpu, plan, simulation._sync(scenario), None,
                aggregate=scenario.run.aggregate and not drift.on, drift=drift, seed=scenario.run.seed)
    saved = [_get(budget, n, k) for n, k in CONSTANTS]
    out = []
    try:
        for n, k in CONSTANTS:
            _set(budget, n, k, 0.0)
        for n, k in CONSTANTS:
            _set(budget, n, k, 1.0)
            out.append(simulation._run_estimate(scenario, plan, chip, budget.Limits()).seconds)
            _set(budget, n, k, 0.0)
    finally:
        for (n, k), value in zip(CONSTANTS, saved, strict=True):
            _set(budget, n, k, value)
    return out


def main() -> None:
    import numpy as np
    from scipy.optimize import least_squares

    from tmasim import budget

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", type=Path, help="the rows bench_estimates.py --json wrote")
    args = parser.parse_args()
    measured = {row["case"]: row["took"] for row in json.loads(args.grid.read_text())
                if "took" in row and "actual_steps" in row and row["took"] >= MIN_SECONDS}
    cases = [(label, name, sets) for label, name, sets, only in CASES if not only and label in measured]
    a = np.array([coefficients(name, sets) for _, name, sets in cases])
    m = np.array([measured[label] for label, _, _ in cases])
    c0 = np.array([_get(budget, n, k) for n, k in CONSTANTS])
    seen = a.any(axis=0)  # constants no case of the grid exercises keep their value

    def residuals(x: np.ndarray) -> np.ndarray:
        c = c0.copy()
        c[seen] = np.exp(x)
        return np.concatenate([np.log(a @ c / m), PULL * (x - np.log(c0[seen]))])

    fit = least_squares(residuals, np.log(c0[seen]))
    c = c0.copy()
    c[seen] = np.exp(fit.x)
    print(f"{'constant':36} {'current':>12} {'fitted':>12}")
    for (n, k), old, new, used in zip(CONSTANTS, c0, c, seen, strict=True):
        print(f"{n + (f'[{k}]' if k else ''):36} {old:12.4g} {new:12.4g}" + ("" if used else "  (not on the grid)"))
    print(f"\n{'case':40} {'measured':>9} {'before':>7} {'after':>7}")
    before, after = a @ c0 / m, a @ c / m
    for (label, _, _), t, r0, r1 in zip(cases, m, before, after, strict=True):
        print(f"{label:40} {t:8.2f}s {r0:6.2f}x {r1:6.2f}x")
    print(f"\nbefore: {before.min():.2f}x to {before.max():.2f}x; after: {after.min():.2f}x to {after.max():.2f}x "
          f"(geometric spread {math.exp(np.log(after).std()):.2f})")


if __name__ == "__main__":
    main()
