"""``calibrate``: fit GPU preset parameters to a measured table, and check them on held-out points.

    >>> cal = calibrate("out/measured_runs.csv", fit=["copy_latency", "sm_port_bandwidth"])
    >>> cal.train_mape, cal.holdout_mape
    >>> cal.write_preset("my-h100.toml")     # then: gpu = "my-h100.toml" in a scenario

The parameters are fitted in log space (each one's logarithm, so a step is a relative change
and a value stays positive) to minimize the sum of squared log ratios of predicted to measured
values: a relative error, as the MAPE is, without letting the slowest points dominate. A random
fraction of the points (seeded) is held out of the fit; their error says how well the fitted
preset predicts what it was not fitted to.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tmasim.errors import ScenarioError, TmasimError
from tmasim.sweep.points import OK
from tmasim.validation import preset as presets
from tmasim.validation.compare import mape, point_overrides, today
from tmasim.validation.fit import Fit, fit_least_squares
from tmasim.validation.runner import Runner
from tmasim.validation.study import Options, Study, prepare
from tmasim.values import format as fmt
from tmasim.values import units

if TYPE_CHECKING:
    import pandas as pd

# GPU fields a calibration may fit: the continuous ones (times and bandwidths).
GPU_FIELDS = {"copy_latency": "time", "copy_latency_per_kib": "time",
              "copy_latency_per_kib_in_flight": "time", "hbm_latency": "time", "tma_issue": "time",
              "tma_request_time": "time", "cluster_arrive_latency": "time", "barrier_wake": "time",
              "hbm_bandwidth": "bandwidth", "l2_bandwidth": "bandwidth",
              "sm_port_bandwidth": "bandwidth", "smem_bandwidth": "bandwidth", "l2_fit_size": "size",
              "l2_miss_scale": "size",
              "hbm_request_overhead": "size"}
MAPPING_FIELDS = ("ps_per_iter_byte",)
Say = Callable[[str], None]


@dataclass(frozen=True)
class Parameter:
    """One fitted quantity, in the engine's units (ps, or bytes per ps), and where it starts."""

    name: str
    kind: str      # "time", "bandwidth", "size" (bytes) or "mapping" (ps per FMA iteration per byte)
    start: float

    def override(self, value: float) -> str:
        """As a scenario value."""
        if self.kind == "size":
            return f"{round(value)} B"
        return f"{value * units.PS_PER_S!r} B/s" if self.kind == "bandwidth" else f"{value!r} ps"

    def preset_value(self, value: float) -> str:
        """As a preset file writes it: ns to the picosecond, GB/s to 6 digits."""
        if self.kind == "bandwidth":
            return f"{value * 1000:.6g} GB/s"
        if self.kind == "size":
            return f"{value / 2**20:.4g} MiB"
        ns = f"{round(value) / 1000:.3f}".rstrip("0").rstrip(".")
        return f"{ns} ns"

    def show(self, value: float) -> str:
        if self.kind == "size":
            return fmt.size(round(value))
        if self.kind == "bandwidth":
            return fmt.rate(value * units.PS_PER_S)
        return f"{value:.4g} ps" if self.kind == "mapping" else fmt.time(value, 5)


@dataclass
class Calibration:
    """The fitted values, the search, and every point's error before and after."""

    study: Study
    parameters: tuple[Parameter, ...]
    fitted: dict[str, float]
    fit: Fit
    table: pd.DataFrame
    simulations: int
    seed: int
    holdout_fraction: float
    notes: list[str] = field(default_factory=list)

    def split_mape(self, split: str, column: str = "error_pct") -> float | None:
        rows = self.table[(self.table["split"] == split) & (self.table["status"] == OK)]
        return mape(rows[column])

    @property
    def train_mape(self) -> float | None:
        return self.split_mape("train")

    @property
    def holdout_mape(self) -> float | None:
        return self.split_mape("holdout")

    def text(self) -> str:
        s = self.study
        counts = self.table["split"].value_counts()
        lines = [f"calibrate against {s.table.path.name} ({s.table.provenance.text()}): "
                 f"{counts.get('train', 0)} training points, {counts.get('holdout', 0)} held out (seed {self.seed}), "
                 f"measured {s.measure} against predicted {s.predict}",
                 f"  {self.fit.iterations} iterations, {self.fit.evaluations} evaluations, {self.simulations} "
                 f"simulations; stopped: {self.fit.stopped}"]
        lines += [f"  note: {note}" for note in self.notes]
        width = max(len(p.name) for p in self.parameters)
        for p in self.parameters:
            lines.append(f"  {p.name:<{width}}  {p.show(p.start):>12} -> {p.show(self.fitted[p.name]):>12}")
        for split in ("train", "holdout"):
            before, after = self.split_mape(split, "start_error_pct"), self.split_mape(split)
            if after is not None:
                lines.append(f"MAPE {split:<7} {after:6.2f}%   (before: {before:.2f}%)")
        if self.holdout_mape is None:
            lines.append("MAPE holdout: none held out (--holdout 0)")
        return "\n".join(lines)

    def source(self) -> str:
        """What each fitted value's ``source`` says in the preset file."""
        held = "no holdout" if self.holdout_mape is None else f"holdout MAPE {self.holdout_mape:.2f}%"
        prov = self.study.table.provenance
        return (f"calibrated by tmasim calibrate from {self.study.table.path.name} on {today()} ({held}, "
                f"train MAPE {self.train_mape:.2f}%; measured on {prov.device or 'an unknown device'}"
                f"{', ' + prov.date[:10] if prov.date else ''})")

    def write_preset(self, path: str | Path) -> Path:
        """The base preset with the fitted GPU values replaced, loadable as ``gpu = "PATH"``."""
        path = Path(path)
        gpu_values = {p.name: p.preset_value(self.fitted[p.name]) for p in self.parameters if p.kind != "mapping"}
        comments = [f"Calibrated by tmasim calibrate against {self.study.table.path} on {today()}.",
                    *(f"Mapping constant (not a GPU field): {p.name} = {self.fitted[p.name]:.6g} ps; pass "
                      f"--ps-per-iter-byte '{self.fitted[p.name]:.6g} ps' to tmasim validate"
                      for p in self.parameters if p.kind == "mapping")]
        text = presets.calibrated_text(self.study.base_raw.get("gpu", "ideal"), self.study.base_dir, name=path.stem,
                                       fitted=gpu_values, source=self.source(), comments=comments)
        from tmasim.output.paths import write_error, write_text

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise write_error("--out", path, err) from None
        return write_text(path, text)


def calibrate(measured: str | Path, fit: Sequence[str], options: Options | None = None, *, holdout: float = 0.25,
              seed: int = 0, max_evals: int = 40, jobs: int = 1, journal: Path | None = None,
              say: Say | None = None) -> Calibration:
    """Fit ``fit`` (GPU fields, or the backend map's ``ps_per_iter_byte``) to the measured table."""
    _check_numbers(holdout, seed, max_evals)
    study = prepare(measured, options or Options())
    parameters = parameters_of(study, fit)
    with Runner(study.base_raw, study.base_dir, jobs=jobs, journal=journal) as runner:
        problem = Problem(study, parameters, runner)
        start = problem.predictions(problem.values(np.zeros(len(parameters))))
        train, held = split(problem.usable(start), holdout, seed)
        if len(train) < len(parameters):
            raise TmasimError(f"--fit: {fmt.plural(len(parameters), 'parameter')} "
                              f"{'needs' if len(parameters) == 1 else 'need'} at least as many "
                              f"training points; "
                              f"{len(train)} remain (lower --holdout or fit fewer)")
        result = fit_least_squares(problem.batch(train), np.zeros(len(parameters)), max_evals=max_evals,
                                   report=_reporter(parameters, say, len(train)))
        fitted = problem.values(result.x)
        final = problem.predictions(fitted)
        simulations = runner.simulations
    table = _table(study, start, final, train, held)
    notes = [f"{parameters[i].name} changes no training point: left at its start value" for i in result.insensitive]
    notes += [f"{parameters[i].name} and {parameters[j].name} change the predictions alike: this table determines "
              "a combination of them, not each one" for i, j in result.collinear()]
    if journal is not None:
        journal.unlink(missing_ok=True)
    return Calibration(study, parameters, fitted, result, table, simulations, seed, holdout, notes)


def _check_numbers(holdout: float, seed: int, max_evals: int) -> None:
    if not 0.0 <= holdout < 1.0:
        raise ScenarioError("--holdout", holdout, "must be a fraction in [0, 1)")
    if seed < 0:
        raise ScenarioError("--seed", seed, "must be >= 0")
    if max_evals < 3:
        raise ScenarioError("--max-evals", max_evals, "must be at least 3 (a start, a Jacobian, a step)")


def parameters_of(study: Study, names: Sequence[str]) -> tuple[Parameter, ...]:
    """The fitted parameters with their start values, or a one-line error naming the problem."""
    if not names:
        raise TmasimError("--fit: name at least one field to fit (e.g. --fit copy_latency,sm_port_bandwidth)")
    gpu = study.gpu
    known = (*GPU_FIELDS, *MAPPING_FIELDS)
    result = []
    for name in names:
        if name not in known:
            raise ScenarioError("--fit", name, f"is not a field calibrate can fit (fittable: {', '.join(known)})")
        if name in MAPPING_FIELDS:
            if study.backend is None:
                raise ScenarioError("--fit", name, "is a constant of the backend map, and this is no backend table")
            result.append(Parameter(name, "mapping", study.backend.ps_per_iter_byte))
            continue
        start = float(getattr(gpu, name))
        if not math.isfinite(start) or start <= 0:
            raise ScenarioError(f"gpu.{name}", start, "cannot be fitted from a zero or unlimited start (fits are in "
                                f"log space): start it at a positive value with --set gpu.{name}=...")
        result.append(Parameter(name, GPU_FIELDS[name], start))
    if len({p.name for p in result}) < len(result):
        raise ScenarioError("--fit", ",".join(names), "names a field twice")
    return tuple(result)


class Problem:
    """Parameter vectors (log ratios to the start values) to predictions and residuals."""

    def __init__(self, study: Study, parameters: Sequence[Parameter], runner: Runner) -> None:
        self.study, self.parameters, self.runner = study, tuple(parameters), runner
        self.measured = study.points["measured"].to_numpy(dtype=float)

    def values(self, x: np.ndarray) -> dict[str, float]:
        return {p.name: p.start * math.exp(float(xi)) for p, xi in zip(self.parameters, x, strict=True)}

    def _overrides(self, values: Mapping[str, float]) -> tuple[list[Any], dict[int, str]]:
        gpu = {p.name: p.override(values[p.name]) for p in self.parameters if p.kind != "mapping"}
        per_iter = [values[p.name] for p in self.parameters if p.kind == "mapping"]
        return point_overrides(self.study, gpu=gpu, ps_per_iter_byte=per_iter[0] if per_iter else None)

    def predictions(self, values: Mapping[str, float], points: Sequence[int] | None = None) -> list[float | None]:
        """The predicted figure of each point (all points, or ``points``); None where it fails."""
        batch, _ = self._overrides(values)
        chosen = range(len(batch)) if points is None else points
        todo = [i for i in chosen if batch[i] is not None]
        outcomes = dict(zip(todo, self.runner.run([batch[i] for i in todo]), strict=True))
        result: list[float | None] = []
        for i in chosen:
            outcome = outcomes.get(i)
            value = outcome.stats.get(self.study.predict) if outcome is not None and outcome.status == OK else None
            result.append(float(value) if isinstance(value, (int, float)) and value > 0 else None)
        return result

    def usable(self, start: Sequence[float | None]) -> list[int]:
        return [i for i, value in enumerate(start) if value is not None]

    def batch(self, train: Sequence[int]) -> Callable[[Sequence[np.ndarray]], list[np.ndarray | None]]:
        """Residuals log(predicted / measured) of the training points, for several vectors at once."""
        def evaluate(xs: Sequence[np.ndarray]) -> list[np.ndarray | None]:
            return [self._residuals(self.predictions(self.values(x), train), train) for x in xs]

        return evaluate

    def _residuals(self, predicted: Sequence[float | None], train: Sequence[int]) -> np.ndarray | None:
        if any(p is None for p in predicted):
            return None
        return np.log(np.asarray(predicted, dtype=float) / self.measured[list(train)])


def split(usable: Sequence[int], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(train, holdout): a seeded random ``fraction`` of the points held out, at least one if any."""
    order = np.random.default_rng(seed).permutation(len(usable))
    n_hold = 0 if fraction == 0 or len(usable) < 2 else min(len(usable) - 1, max(1, round(fraction * len(usable))))
    held = sorted(usable[i] for i in order[:n_hold])
    train = sorted(usable[i] for i in order[n_hold:])
    return train, held


def _table(study: Study, start: Sequence[float | None], final: Sequence[float | None], train: Sequence[int],
           held: Sequence[int]) -> pd.DataFrame:
    table = study.points.copy()
    splits = {**dict.fromkeys(train, "train"), **dict.fromkeys(held, "holdout")}
    table["split"] = [splits.get(i, "left out") for i in range(len(table))]
    table["start_predicted"] = [math.nan if v is None else v for v in start]
    table["predicted"] = [math.nan if v is None else v for v in final]
    for column, source in (("start_error_pct", "start_predicted"), ("error_pct", "predicted")):
        table[column] = 100.0 * (table[source] - table["measured"]) / table["measured"]
    table["status"] = [OK if v is not None else "invalid" for v in final]
    return table


def _reporter(parameters: Sequence[Parameter], say: Say | None, points: int) -> Callable[..., None] | None:
    if say is None:
        return None

    def report(iteration: int, x: np.ndarray, cost: float) -> None:
        values = ", ".join(f"{p.name} {p.show(p.start * math.exp(float(xi)))}"
                           for p, xi in zip(parameters, x, strict=True))
        rms = math.sqrt(2 * cost / max(1, points))
        say(f"iteration {iteration}: {values} (rms relative error {rms:.3g})")

    return report


def stderr_say(text: str) -> None:
    print(f"tmasim calibrate: {text}", file=sys.stderr, flush=True)
