"""``validate``: simulate every measured point and report the error per point and the MAPE.

    >>> v = validate("out/measured_runs.csv")          # the backend's files: mapped built-in
    >>> v.mape, v.table[["measured", "predicted", "error_pct"]]
    >>> v.save("out/validation")    # validation.csv/.json, predicted_vs_measured.png, timeline

The error of a point is (predicted - measured) / measured, in percent; the mean absolute
percentage error (MAPE) averages its absolute value over the points that could be simulated.
"""

from __future__ import annotations

import datetime as dt
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import TmasimError
from tmasim.output.read_back import json_text
from tmasim.sweep.points import OK, Outcome
from tmasim.validation import figures, timeline
from tmasim.validation.mapping import Override, stat_unit
from tmasim.validation.measured import read_table
from tmasim.validation.runner import Runner, progress_bar
from tmasim.validation.study import Options, Study, point_raw, prepare
from tmasim.values import format as fmt
from tmasim.version import __version__

if TYPE_CHECKING:
    import pandas as pd

SHOWN_ROWS = 20


@dataclass
class Validation:
    """The validation table (one row per measured point) and, for backend runs, one timeline."""

    study: Study
    table: pd.DataFrame
    simulations: int = 0
    timeline: pd.DataFrame | None = None
    timeline_run: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> pd.DataFrame:
        return self.table[self.table["status"] == OK]

    @property
    def mape(self) -> float | None:
        """Mean absolute percentage error over the simulated points (None if there are none)."""
        return mape(self.ok["error_pct"])

    def text(self) -> str:
        """A short report: what was compared, the points (or the worst of them), the MAPE."""
        s = self.study
        lines = [f"validate {s.table.path.name} ({s.table.provenance.text()}): {len(self.table)} points, "
                 f"measured {s.measure} (median of repeats) against predicted {s.predict}"]
        lines += [f"  {line}" for line in [*s.describe_mapping(), *s.table.notes, *self.notes]]
        lines += ["", shown_table(self.table, s.keys, s.predict), ""]
        lines.append(self.mape_line())
        return "\n".join(lines)

    def mape_line(self) -> str:
        ok, failed = self.ok, len(self.table) - len(self.ok)
        if ok.empty:
            return "MAPE: no point could be simulated" + _first_error(self.table)
        worst = ok.loc[ok["error_pct"].abs().idxmax()]
        line = (f"MAPE {self.mape:.2f}% over {len(ok)} points (worst: point {int(worst['point'])}, "
                f"{worst['error_pct']:+.1f}%)")
        if not failed:
            return line
        return line + f"; {fmt.plural(failed, 'point')} could not be simulated" + _first_error(self.table)

    def metadata(self) -> dict[str, Any]:
        """What produced the table: the measured file and its device and date, the mapping, the
        base scenario, tmasim's version; written beside the table as validation.json."""
        s = self.study
        return {
            "measured": str(s.table.path), "device": s.table.provenance.device, "measured_on": s.table.provenance.date,
            "numba_simulator": s.table.provenance.simulator, "validated_on": today(),
            "tmasim": __version__, "measure": s.measure, "measure_unit": s.measure_unit, "predict": s.predict,
            "mapping": s.describe_mapping(), "notes": [*s.table.notes, *self.notes],
            "points": len(self.table), "simulated": len(self.ok), "mape_pct": self.mape,
            "timeline_run": self.timeline_run, "base_scenario": s.base_raw,
        }

    def save(self, out: str | Path) -> list[Path]:
        """validation.csv, validation.json, predicted_vs_measured.png (and the timeline's files)."""
        from tmasim.output.paths import replacing, write_error, write_text
        from tmasim.review.plots import save as save_figure

        out = Path(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise write_error("--out", out, err) from None
        written = [out / "validation.csv", out / "validation.json"]
        with replacing(written[0]) as tmp:
            self.table.to_csv(tmp, index=False)
        write_text(written[1], json_text(self.metadata(), indent=2, default=str) + "\n")
        written += save_figure(self.scatter(), out / "predicted_vs_measured.png")
        if self.timeline is not None:
            with replacing(out / "timeline.csv") as tmp:
                self.timeline.to_csv(tmp, index=False)
            written.append(out / "timeline.csv")
            written += save_figure(self.overlay(), out / "timeline_overlay.png")
        return written

    def scatter(self) -> Any:
        s = self.study
        mape_text = "-" if self.mape is None else f"{self.mape:.1f}%"
        title = (f"tmasim against {s.table.path.name}: MAPE {mape_text} over {len(self.ok)} points\n"
                 + textwrap.fill(s.table.provenance.text(), 70))
        hue = "variant" if "variant" in self.table and self.ok["variant"].nunique() > 1 else None
        return figures.predicted_vs_measured(self.table, quantity=s.measure, predict=s.predict, title=title, hue=hue)

    def overlay(self) -> Any:
        assert self.timeline is not None
        row = self.table[self.table["run_id"] == self.timeline_run].iloc[0] if "run_id" in self.table else None
        what = "" if row is None else (f" ({row['variant']}, stages {row['stages']}, tile {row['tile_bytes']} B, "
                                       f"compute_iters {row['compute_iters']}, ctas {row['ctas']})")
        cta = int(self.timeline["cta"].iloc[0])
        title = f"Run {self.timeline_run}{what}, CTA {cta}: measured (upper) vs simulated (lower, hatched)"
        return figures.timeline_overlay(self.timeline, title=title)


def validate(measured: str | Path, options: Options | None = None, *, jobs: int = 1,
             tiles: str | Path | None = None, timeline_run: int | None = None, journal: Path | None = None,
             progress: bool = False) -> Validation:
    """Compare every point of a measured table with the simulator (see the module docstring)."""
    study = prepare(measured, options or Options())
    batch, broken = point_overrides(study)
    with Runner(study.base_raw, study.base_dir) as probe:  # no journal: a typo leaves no file behind
        check_predicted_stat(study, probe, batch)
    with Runner(study.base_raw, study.base_dir, jobs=jobs, journal=journal) as runner:
        with progress_bar(len(batch), f"validate {study.table.path.name}", progress) as advance:
            outcomes = runner.run([b for b in batch if b is not None], advance)
        result = Validation(study, result_table(study, outcomes, broken), runner.simulations)
        if study.table.backend:
            _add_timeline(result, tiles, timeline_run)
    if journal is not None:
        journal.unlink(missing_ok=True)
    return result


def point_overrides(study: Study, **params: Any) -> tuple[list[tuple[Override, ...] | None], dict[int, str]]:
    """Each point's overrides, or None with the reason when its row cannot be mapped."""
    batch: list[tuple[Override, ...] | None] = []
    broken: dict[int, str] = {}
    for index in range(len(study.points)):
        try:
            batch.append(study.overrides(index, **params))
        except TmasimError as err:
            batch.append(None)
            broken[index] = str(err)
    return batch, broken


def check_predicted_stat(study: Study, runner: Runner, batch: Sequence[tuple[Override, ...] | None]) -> None:
    """Simulate one point first, so that a mistyped ``--predict`` costs one simulation."""
    for overrides in batch:
        if overrides is None:
            continue
        outcome = runner.run([overrides])[0]
        if outcome.status != OK:
            continue
        value = outcome.stats.get(study.predict)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            numeric = [k for k, v in outcome.stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            rule = "is not a summary figure" if study.predict not in outcome.stats else "is not a number"
            raise TmasimError(f"--predict: {study.predict!r} {rule} (figures: {', '.join(numeric)})")
        return


def result_table(study: Study, outcomes: Sequence[Outcome], broken: dict[int, str]) -> pd.DataFrame:
    """The points with predicted values, signed and absolute errors (percent), status, error."""
    table = study.points.copy()
    it = iter(outcomes)
    rows: list[tuple[float, str, str | None]] = []
    for index in range(len(table)):
        if index in broken:
            rows.append((math.nan, "invalid", broken[index]))
            continue
        outcome = next(it)
        value = outcome.stats.get(study.predict) if outcome.status == OK else None
        rows.append((math.nan if value is None else float(value), outcome.status, outcome.error))
    predicted, status, errors = zip(*rows, strict=True) if rows else ((), (), ())
    table["predicted"] = list(predicted)
    table["error_pct"] = 100.0 * (table["predicted"] - table["measured"]) / table["measured"]
    table["abs_error_pct"] = table["error_pct"].abs()
    table["status"] = list(status)
    table["error"] = list(errors)
    return table


def mape(errors_pct: pd.Series) -> float | None:
    return None if errors_pct.empty else float(errors_pct.abs().mean())


def shown_table(table: pd.DataFrame, keys: Sequence[str], predict: str) -> str:
    """At most SHOWN_ROWS rows: all of them, or the largest errors (in point order). Key columns
    with one value for every point are said once, above the table, to keep it narrow."""
    same = [k for k in keys if table[k].nunique(dropna=False) == 1]
    columns = ["point", *(k for k in keys if k not in same), "repeats", "measured", "predicted", "error_pct"]
    view = table
    header = "every point: " + ", ".join(f"{k} = {table[k].iloc[0]}" for k in same) + "\n" if same else ""
    if len(table) > SHOWN_ROWS:
        view = table.loc[table["abs_error_pct"].fillna(math.inf).nlargest(SHOWN_ROWS).index].sort_values("point")
        header += f"the {SHOWN_ROWS} points with the largest errors (all {len(table)} are in validation.csv):\n"
    view = view[columns].rename(columns={"measured": f"measured {unit_label(predict)}".rstrip(),
                                         "predicted": f"predicted {unit_label(predict)}".rstrip(),
                                         "error_pct": "error %"})
    return header + view.to_string(index=False, float_format=lambda v: f"{v:.6g}", na_rep="-")


def unit_label(stat: str) -> str:
    unit = stat_unit(stat)
    return f"({unit[1]})" if unit else ""


def _first_error(table: pd.DataFrame) -> str:
    failed = table[table["status"] != OK]
    return "" if failed.empty else f" (point {int(failed.iloc[0]['point'])}: {failed.iloc[0]['error']})"


def _add_timeline(result: Validation, tiles: str | Path | None, run: int | None) -> None:
    """Measured and simulated spans of one recorded run, when the tiles table is there."""
    path = Path(tiles) if tiles is not None else _beside(result.study.table.path)
    if path is None or not path.is_file():
        if tiles is not None:
            raise TmasimError(f"--tiles: {tiles} is not a file")
        result.notes.append("no measured_tiles.csv beside the runs: no timeline overlay")
        return
    frame = read_table(path)
    needed = ("run_id", "cta", "tile", "t_issue_ns", "t_ready_ns", "t_compute_start_ns", "t_compute_end_ns")
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise TmasimError(f"--tiles: {str(path)!r} is not the backend's per-tile table (measured_tiles.csv): "
                          f"no {', '.join(missing[:3])} column{'s' if len(missing) > 1 else ''}")
    runs = timeline.candidate_runs(frame, result.table, result.study.keys)
    if run is None:
        run = timeline.default_run(runs, result.table)
        if run is None:
            result.notes.append(f"no recorded run of {path.name} belongs to a simulated point: no timeline overlay")
            return
    elif run not in runs:
        raise TmasimError(f"--timeline-run: {run} is not a recorded run of a simulated point in {path.name} "
                          f"(recorded: {', '.join(map(str, list(runs)[:12]))})")
    result.timeline = simulate_timeline(result.study, frame, run, runs[run])
    result.timeline_run = run


def _beside(runs_path: Path) -> Path | None:
    for name in ("measured_tiles.csv", "measured_tiles.csv.gz"):
        if (runs_path.parent / name).is_file():
            return runs_path.parent / name
    return None


def simulate_timeline(study: Study, tiles: pd.DataFrame, run: int, point: int) -> pd.DataFrame:
    """The run's point simulated again with records on, beside its measured tiles."""
    import pandas as pd

    from tmasim.inputs.scenario import from_dict, set_field
    from tmasim.simulation import simulate

    raw = point_raw(study, study.overrides(point))
    set_field(raw, "run.records", True)
    spans = simulate(from_dict(raw, study.base_dir)).spans
    return pd.concat([timeline.measured_tiles(tiles, run), timeline.simulated_tiles(spans)], ignore_index=True)


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()
