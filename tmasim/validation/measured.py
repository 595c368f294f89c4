"""Measured tables: read them, say where they came from, keep the usable rows, group repeats.

A measured table is a CSV (``.csv`` or ``.csv.gz``) or Parquet file with one row per
measurement. Rows whose mapped columns (or, for the backend's files, whose kernel parameters)
are equal are repeats of one point, compared through their median. Provenance (device, date)
comes from ``meta.json`` beside the file when there is one: the backend writes it, and any
other table may carry one (``{"device": {"name": ...}, "date_utc": ...}``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tmasim.errors import ScenarioError, TmasimError
from tmasim.output.read_back import json_value
from tmasim.validation.mapping import BACKEND_COLUMNS, TMA_VARIANTS
from tmasim.values import format as fmt

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Provenance:
    """What the measurements were taken on, and when (None where nothing says)."""

    device: str | None = None
    date: str | None = None
    simulator: bool = False

    def text(self) -> str:
        device = self.device or "unknown device"
        simulator = " (numba CUDA simulator)" if self.simulator and "simulator" not in device else ""
        return f"{device}{simulator}, measured {self.date[:10] if self.date else 'on an unknown date'}"


@dataclass(frozen=True)
class MeasuredTable:
    """The rows of a measured file that can be compared, and notes on the ones left out."""

    path: Path
    frame: pd.DataFrame
    provenance: Provenance
    backend: bool
    notes: tuple[str, ...] = field(default=())


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV or Parquet file as a DataFrame, or a one-line error."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ScenarioError("MEASURED", str(path), "is not a file")
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as err:  # pandas raises many kinds: say which file and why, in one line
        raise ScenarioError("MEASURED", str(path), f"cannot be read as a table ({type(err).__name__}: {err})") from None
    repeated = _repeated_column(frame, path)
    if repeated is not None:
        raise ScenarioError("MEASURED", str(path), f"names column {repeated!r} twice in its header: which one is "
                            "meant cannot be told (rename one)")
    written = rows_written(path)
    if written is not None and len(frame) < written:
        raise ScenarioError("MEASURED", str(path), f"has {len(frame)} rows where meta.json beside it says {written} "
                            "were written: it is truncated (copy it again, or rerun the measurement)")
    return frame


def _repeated_column(frame: pd.DataFrame, path: Path) -> str | None:
    """A header naming a column twice (pandas renames the second ``x.1``, Parquet keeps both)."""
    import csv
    import gzip

    names = [str(c) for c in frame.columns]
    if path.suffix != ".parquet":
        try:
            with (gzip.open if path.suffix == ".gz" else open)(path, "rt", newline="", errors="replace") as handle:
                names = next(csv.reader(handle), names)
        except (OSError, csv.Error, EOFError):
            pass
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def rows_written(path: Path) -> int | None:
    """The rows the backend wrote to ``path`` (``meta.json``'s ``rows``, by file name, a ``.gz``
    copy counting as its CSV), or None where nothing says."""
    try:
        rows = json_value((path.parent / "meta.json").read_text()).get("rows", {})
        value = rows.get(path.name.removesuffix(".gz"))
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_provenance(path: Path) -> Provenance:
    """Device and date from ``meta.json`` beside the file (the backend's layout)."""
    meta_path = path.parent / "meta.json"
    if not meta_path.is_file():
        return Provenance()
    try:
        meta = json_value(meta_path.read_text())
    except (OSError, ValueError) as err:
        why = " ".join(str(err).split())[:120]
        raise ScenarioError("MEASURED", str(meta_path), f"cannot be read ({why})") from None
    probe = meta.get("probe") if isinstance(meta, dict) else None
    source = probe.get("metadata", meta) if isinstance(probe, dict) else meta
    if not isinstance(source, dict):
        raise ScenarioError("MEASURED", str(meta_path), "holds no JSON object (expected {\"device\": {\"name\": ...}, "
                            "\"date_utc\": ...})")
    device = source.get("device", {})
    name = device.get("name") if isinstance(device, dict) else device
    date = source.get("date_utc") or source.get("date")
    return Provenance(_text(name), _text(date), source.get("simulator", False) is True)


def _text(value: object) -> str | None:
    """A name or date as one printable line (None where the file gives none or not a string)."""
    from tmasim.values import format as fmt

    return fmt.escaped(" ".join(value.split()))[:200] if isinstance(value, str) and value.strip() else None


def is_backend_table(frame: pd.DataFrame) -> bool:
    """True for the backend's ``measured_runs.csv`` (every column its map reads is there)."""
    return all(column in frame.columns for column in BACKEND_COLUMNS)


def load(path: str | Path, *, backend: bool | None = None, where: Sequence[str] = ()) -> MeasuredTable:
    """Read, detect the backend's layout (unless told), apply ``--where`` and drop failed runs."""
    path = Path(path)
    frame = read_table(path)
    detected = is_backend_table(frame)
    if backend and not detected:
        missing = [c for c in BACKEND_COLUMNS if c not in frame.columns]
        raise TmasimError(f"--backend: {path} lacks the backend's columns {', '.join(missing)}")
    use_backend = detected if backend is None else backend
    frame = apply_where(frame, where, path)
    notes: list[str] = []
    if use_backend:
        frame, notes = _usable_backend_rows(frame)
    return MeasuredTable(path, frame.reset_index(drop=True), read_provenance(path), use_backend, tuple(notes))


def apply_where(frame: pd.DataFrame, where: Sequence[str], path: Path) -> pd.DataFrame:
    """Keep rows whose COLUMN equals VALUE (compared as text), for each ``--where COLUMN=VALUE``."""
    for item in where:
        column, sep, value = item.partition("=")
        column = column.strip()
        if not sep or not column:
            raise ScenarioError("--where", item, "must look like COLUMN=VALUE (e.g. variant=tma_bulk_1d)")
        check_column(frame, column, path, f"--where {column}")
        frame = frame[frame[column].astype(str) == value.strip()]
    return frame


def check_column(frame: pd.DataFrame, column: str, path: Path, where: str) -> None:
    if column not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:24])) + (", ..." if len(frame.columns) > 24 else "")
        raise ScenarioError(where, column, f"is not a column of {path.name} (columns: {shown})")


def _usable_backend_rows(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Verified runs of the TMA variants: the simulator models TMA pipelines, not ld/st copies."""
    notes = []
    if "status" in frame.columns:
        failed = frame["status"].astype(str) != "ok"
        if failed.any():
            notes.append(f"left out {fmt.plural(int(failed.sum()), 'run')} whose status is not ok")
        frame = frame[~failed]
    other = ~frame["variant"].isin(TMA_VARIANTS)
    if other.any():
        names = ", ".join(sorted(map(str, frame.loc[other, "variant"].unique())))
        notes.append(f"left out {fmt.plural(int(other.sum()), 'run')} of {names}: not a TMA pipeline, which "
                     f"is what tmasim models")
        frame = frame[~other]
    return frame, notes


def unusable_note(frame: pd.DataFrame, measure: str) -> str | None:
    """Rows whose measured value is no time or rate (empty, text, NaN, infinite, zero, negative)
    are left out of the comparison: this says how many and why (None: every row is usable)."""
    import numpy as np
    import pandas as pd

    values = pd.to_numeric(frame[measure], errors="coerce")
    kinds = {"empty": frame[measure].isna(), "not a number": values.isna() & frame[measure].notna(),
             "infinite": np.isinf(values), "zero": values == 0, "negative": values < 0}
    counts = {kind: int(mask.sum()) for kind, mask in kinds.items() if mask.any()}
    if not counts:
        return None
    shown = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return (f"left out {fmt.plural(sum(counts.values()), 'row')} whose {measure} is not a finite number above zero "
            f"({shown})")


def group_points(frame: pd.DataFrame, keys: Sequence[str], measure: str, factor: float) -> pd.DataFrame:
    """One row per point: its key columns, the median measured value (in the predicted figure's
    unit), how many repeats it had, and its first ``run_id`` if the table has one."""
    import numpy as np
    import pandas as pd

    values = pd.to_numeric(frame[measure], errors="coerce") * factor
    work = frame.assign(_measured=values)
    usable = values.notna() & np.isfinite(values) & (values > 0)
    work = work[usable]
    if work.empty:
        missing, infinite = int(values.isna().sum()), int(np.isinf(values).sum())
        below = len(values) - missing - infinite
        raise TmasimError(f"--measure {measure}: no row has a finite positive number in that column "
                          f"({len(values)} rows: {missing} empty or not a number, {infinite} infinite, "
                          f"{below} zero or negative)")
    grouped = work.groupby(list(keys), sort=False, dropna=False)
    points = grouped["_measured"].agg(["median", "size"]).reset_index()
    points = points.rename(columns={"median": "measured", "size": "repeats"})
    if "run_id" in work.columns:
        points["run_id"] = grouped["run_id"].min().to_numpy()
    points.insert(0, "point", range(len(points)))
    return points
