"""tmasim's own files read back (sweep tables, their metadata, journals, run folders): a file
damaged or edited by hand is refused with the file and the line named, never folded into a
result. Each check raises ``ValueError`` with the line; the caller names the file and what to do.

What is checked is what a reader relies on: JSON nested no deeper than tmasim writes it, metadata
of the right types, one status per row from the known ones, an ``ok`` row's time a finite number
above zero, and every time, size and rate a number that is not negative.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

STATUSES = ("ok", "invalid", "error", "pruned")
# Columns that hold a time, a size or a rate: numbers, never negative (NaN: not measured).
_QUANTITY_ENDINGS = ("_ns", "_ps", "_bytes", "_per_s", "_utilization")


def json_value(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep for Python's parser a ``ValueError`` like any other
    damage (a line of 100,000 brackets)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("it nests arrays or objects deeper than any file tmasim writes") from None


def json_text(value: Any, **options: Any) -> str:
    """JSON that every reader takes: a NaN is ``null``, an infinity the string ``"inf"`` (or
    ``"-inf"``), never the ``NaN``/``Infinity`` that Python alone writes; ``options`` go to
    ``json.dumps`` (``default``, ``indent``)."""
    return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    if isinstance(value, float) or (hasattr(value, "item") and getattr(value, "ndim", 1) == 0):
        number = value.item() if hasattr(value, "item") else value
        if isinstance(number, float) and not math.isfinite(number):
            return None if math.isnan(number) else ("inf" if number > 0 else "-inf")
        return number
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def sweep_metadata(data: Any) -> dict[str, Any]:
    """A sweep's metadata (FILE.meta.json, or the Parquet file's): the fields a resume compares,
    each of its type."""
    if not isinstance(data, Mapping):
        raise ValueError(f"it holds {_kind(data)}, not a JSON object")
    rules: tuple[tuple[str, Any, str], ...] = (
        ("scenario", lambda v: isinstance(v, Mapping), "an object (the base scenario)"),
        ("vary", _is_axes, "a list of [field, [values]] pairs"),
        ("zip", lambda v: isinstance(v, bool) or (isinstance(v, list) and all(isinstance(f, str) for f in v)),
         "true, false or a list of the zipped fields"),
    )
    for key, rule, what in rules:
        if key in data and not rule(data[key]):
            raise ValueError(f"its {key!r} is {_kind(data[key])}, not {what}")
    finished = data.get("points_finished")
    if finished is not None and (isinstance(finished, bool) or not isinstance(finished, int) or finished < 0):
        raise ValueError(f"its 'points_finished' is {_kind(finished)}, not a whole number >= 0")
    return dict(data)


def _is_axes(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(axis, list) and len(axis) == 2 and isinstance(axis[0], str) and isinstance(axis[1], list)
        for axis in value)


def journal_problem(record: Any) -> str | None:
    """What is wrong with one parsed journal line (None: a point's outcome tmasim could have written)."""
    if not isinstance(record, Mapping):
        return f"it holds {_kind(record)}, not a point's outcome"
    point = record.get("point")
    if isinstance(point, bool) or not isinstance(point, int) or point < 0:
        return f"its point is {_kind(point)}, not a whole number >= 0"
    if record.get("status") not in STATUSES:
        return f"its status is {_shown(record.get('status'))}, not one of {', '.join(STATUSES)}"
    seed, error, stats = record.get("seed"), record.get("error"), record.get("stats")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        return f"its seed is {_kind(seed)}, not a whole number"
    if error is not None and not isinstance(error, str):
        return f"its error is {_kind(error)}, not text"
    if not isinstance(stats, Mapping):
        return f"its stats are {_kind(stats)}, not an object"
    if record["status"] == "ok" and not is_time(stats.get("makespan_ns")):
        return f"an ok point whose makespan_ns is {_shown(stats.get('makespan_ns'))}, not a run's time"
    bad = next((k for k, v in stats.items() if _quantity(k) and not _a_quantity(v, allow_missing=True)), None)
    if bad is not None:
        return f"its {bad} is {_shown(stats[bad])}, not a number >= 0"
    return None


def is_time(value: Any) -> bool:
    """A run's time: a finite number above zero (not text, NaN, infinity, zero or a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_table(frame: pd.DataFrame, path: Path, *, sweep: bool) -> None:
    """A sweep table (``sweep``: a status on every row, points unique) or a run's table read back:
    the first bad row is a ``ValueError`` naming its line (CSV) or row (Parquet)."""
    import pandas as pd

    quantities = [c for c in frame.columns if _quantity(str(c))]
    has_status = "status" in frame.columns
    if sweep and not has_status:
        return  # not a tmasim sweep table: the caller says so
    for position, row in enumerate(frame.to_dict("records")):
        problem = _row_problem(row, quantities, has_status, pd)
        if problem is not None:
            raise ValueError(f"{where_row(path, position)}: {problem}")
    if sweep and "point" in frame.columns and frame["point"].duplicated().any():
        position = int(frame["point"].duplicated().to_numpy().argmax())
        raise ValueError(f"{where_row(path, position)}: point {frame['point'].iloc[position]} appears twice")


def _row_problem(row: Mapping[str, Any], quantities: list[Any], has_status: bool, pd: Any) -> str | None:
    status = row.get("status", "ok") if has_status else "ok"
    if status not in STATUSES:
        return f"its status is {_shown(status)}, not one of {', '.join(STATUSES)}"
    timed = status == "ok" and _number(row.get("valid", True), pd) is not False  # a run with races has no time
    if timed and "makespan_ns" in row and not is_time(_number(row["makespan_ns"], pd)):
        return f"an ok row whose makespan_ns is {_shown(row['makespan_ns'])}, not a run's time"
    for column in quantities:
        value = _number(row[column], pd)
        if not _a_quantity(value, allow_missing=True):
            return f"its {column} is {_shown(row[column])}, not a number >= 0"
    if "start_ps" in row and "end_ps" in row and _number(row["end_ps"], pd) < _number(row["start_ps"], pd):
        return f"it ends (end_ps {row['end_ps']}) before it starts (start_ps {row['start_ps']})"
    return None


def _number(value: Any, pd: Any) -> Any:
    """A cell as a Python number where it is one (numpy's included); anything else as it is."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    if isinstance(value, str):  # a CSV column with one text cell is read as text throughout
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _a_quantity(value: Any, *, allow_missing: bool) -> bool:
    if value is None:
        return allow_missing
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (allow_missing and math.isnan(value)) or value >= 0


def _quantity(column: str) -> bool:
    return column.endswith(_QUANTITY_ENDINGS) or column == "bytes"


def where_row(path: Path, position: int) -> str:
    """``line N`` of a CSV file (counting a cell's own line breaks), ``row N`` of a Parquet file."""
    if Path(path).suffix.lower() != ".csv":
        return f"row {position + 1}"
    import csv

    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            reader = csv.reader(handle)
            next(reader, None)  # the header
            for _ in range(position):
                next(reader, None)
            return f"line {reader.line_num + 1}"
    except (OSError, csv.Error):
        return f"data row {position + 1}"


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return _shown(value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}... ({len(text)} characters)"
