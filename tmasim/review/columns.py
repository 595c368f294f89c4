"""What a sweep table's columns mean: their names in words, their units, the label of a row,
and the references a figure or an answer draws from them (the bound, the knee).

A sweep table (see :mod:`tmasim.sweep.table`) has one column per varied field, named by its
dotted path (``pipeline.stages``), a ``status`` ("ok", "invalid", "error") with its ``error``,
then every summary figure. A run's one-row ``summary`` works too, wherever no varied field is
needed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim import names
from tmasim.values import format as fmt

if TYPE_CHECKING:
    import pandas as pd

KNEE_TOLERANCE = names.KNEE_TOLERANCE  # the knee (tmasim.names.TERMS): where more of x stops helping
_NAMES = {
    "makespan_ns": "time to finish", "bound_ns": "bound", "closed_form_ns": "closed form",
    "serial_ns": "no-overlap time", "achieved_flops_per_s": "achieved throughput",
    "achieved_bytes_per_s": "achieved bandwidth into the SMs", "tiles_per_s": "tile throughput",
    "smem_per_cta_bytes": "SMEM per CTA", "ctas_per_sm": "CTAs per SM",
    "consumer_wait_full_ns": "consumer waits (full barriers)",
    "producer_wait_empty_ns": "producer waits (empty barriers)", "interval_bound_ns": "bound per tile",
    "binding": "binding", "littles_law_bytes_per_s": "Little's-law bandwidth",
    "littles_law_binding": "binding", "efficiency": "share of the bound reached",
    "copy_utilization": "copy engines busy", "compute_utilization": "tensor cores busy",
    "hbm_utilization": "HBM busy", "l2_utilization": "L2 busy", "residency_limit": "residency limited by",
    "ctas": "CTAs", "sms_used": "SMs used", "waves": "units per CTA (persistent) or waves (grid)",
    "races": "reads before data landed", "status": "status", "error": "error",
    **{key: name.text for key, name in names.TRAFFIC.items()},
    **{f"{key}_bound_ns": f"{name.text} bound" for key, name in names.BOUNDS.items()},
    **{f"{key}_term_ns": f"{name.text} term" for key, name in names.BOUNDS.items()},
    "smem_bytes_per_k_step": "shared-memory traffic per k-step", "operands": "MMA operand source",
    "useful_flops_per_s": "useful throughput (FLOP convention)", "sm_finish_max_ns": "busiest SM's finish",
    "sm_finish_mean_ns": "mean SM finish",
}
# Their values are bounds' names (tmasim.names.BOUNDS); littles_law_binding: a stream table written before
# stream's bound was ``binding`` too.
_BOUND_COLUMNS = ("binding", "littles_law_binding")
_ROW_LABELS = {"pipeline.stages": "{} stages", "workload.tile": "tile {}", "workload.box": "box {}",
               "pipeline.consumers": "{} consumers", "run.seed": "seed {}"}
_FIELDS = {"pipeline.stages": "pipeline stages", "workload.tile": "tile (M×N×K)", "workload.box": "TMA box",
           "pipeline.consumers": "consumer warpgroups", "run.seed": "seed"}
# Column suffix -> the kind of quantity (tmasim.format's units). Memory sizes are binary, amounts
# moved over links decimal (see tmasim.format).
_KINDS = {"_bytes_per_s": "rate", "_flops_per_s": "flop_rate", "smem_per_cta_bytes": "size",
          "bytes_in_flight_per_sm": "size", "_bytes": "amount"}
_TILE_RATES = ((1e9, "G tiles/s"), (1e6, "M tiles/s"), (1e3, "k tiles/s"), (1.0, "tiles/s"))


# ------------------------------------------------------------------------------ table helpers


def scenario_prefix(table: pd.DataFrame) -> str:
    """``"gemm-h100: "``: every figure's title names the scenario its table came from."""
    if "scenario" not in table.columns or not table["scenario"].notna().any():
        return ""
    names = list(dict.fromkeys(str(s) for s in table["scenario"].dropna()))
    return f"{', '.join(names)}: "


def wrapped(title: str, width_in: float) -> str:
    """A title broken into lines that fit a figure ``width_in`` inches wide (slide-sized type)."""
    import textwrap

    return "\n".join(line for part in title.split("\n")
                     for line in textwrap.wrap(part, width=max(24, int(width_in * 8.5))) or [""])


def read_csv(path: Path) -> pd.DataFrame:
    """A table tmasim wrote as CSV, refused (ValueError) when it was cut short: every file tmasim
    writes ends with a newline, a sweep table has a status on every row, and a sweep's metadata
    beside it (FILE.meta.json) says how many rows it wrote (a cut at a row boundary)."""
    import io

    import pandas as pd

    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        raise ValueError("it is truncated: its last line is cut off")
    frame = pd.read_csv(io.BytesIO(data))
    if "status" in frame.columns and frame["status"].isna().any():
        row = int(frame["status"].isna().to_numpy().argmax()) + 2  # 1-based, after the header line
        raise ValueError(f"line {row} has no status: the file is truncated or damaged")
    written = _rows_written(path.with_name(path.name + ".meta.json"), "points_finished")
    if written is not None and len(frame) < written:
        raise ValueError(f"it is truncated: it has {len(frame)} rows where {written} were written "
                         f"({path.name}.meta.json)")
    return frame


def _rows_written(meta: Path, key: str) -> int | None:
    """The row count a metadata file beside a table records (None where there is none)."""
    from tmasim.output.read_back import json_value

    try:
        value = json_value(meta.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def varied_fields(table: pd.DataFrame) -> list[str]:
    """The varied fields of a sweep table: the columns between ``point`` and ``seed`` (the
    table's layout, tmasim.sweep.table), top-level fields such as ``gpu`` included; else its
    dotted column names (no summary figure has a dot)."""
    columns = [str(c) for c in table.columns]
    laid_out = []
    if "point" in columns and "seed" in columns and columns.index("point") < columns.index("seed"):
        laid_out = columns[columns.index("point") + 1:columns.index("seed")]
    return [*laid_out, *(c for c in columns if "." in c and c not in laid_out)]  # hand-made tables too


def require(table: pd.DataFrame, columns: Iterable[str]) -> None:
    """A missing column is the caller's mistake: name it and what there is."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        varied = ", ".join(varied_fields(table)) or "none"
        raise KeyError(f"no column {missing[0]!r} in the table (varied fields: {varied})")


def with_status(table: pd.DataFrame) -> pd.DataFrame:
    """A run's summary has no ``status``: every row of it ran."""
    if "status" in table.columns:
        return table
    return table.assign(status="ok", error=None)


def is_time(column: str) -> bool:
    return column.endswith("_ns")


def is_rate(column: str) -> bool:
    return column.endswith("_per_s")


def measure(column: str, values: Any) -> tuple[float, str]:
    """(divisor, axis label) for a summary column: its name in words, with a unit that keeps
    its numbers between 1 and 1000 (µs, TB/s, KiB, %)."""
    import numpy as np

    finite = np.asarray(values, float)
    finite = finite[np.isfinite(finite)]
    peak = float(np.max(np.abs(finite))) if len(finite) else 1.0
    name = figure_label(column)
    if is_time(column):
        scale, unit = fmt.unit_for("time", peak * 1000)
        return scale / 1000, f"{name} ({unit})"
    kind = _kind(column)
    if kind is not None:
        scale, unit = fmt.unit_for(kind, peak)
        return scale, f"{name} ({unit})"
    if column == "tiles_per_s":
        divisor, unit = next(((d, u) for d, u in _TILE_RATES if peak >= d), _TILE_RATES[-1])
        return divisor, f"{name} ({unit})"
    if _is_share(column):
        return 0.01, f"{name} (%)"
    return 1.0, name


def _kind(column: str) -> str | None:
    return next((kind for suffix, kind in _KINDS.items() if column.endswith(suffix)), None)


def _is_share(column: str) -> bool:
    return column.endswith("utilization") or column == "efficiency"


def figure_label(column: str) -> str:
    """A summary column in words: ``makespan_ns`` -> "time to finish"."""
    return _NAMES.get(column, re.sub(r"_(ns|bytes|per_s|bytes_per_s|flops_per_s)$", "", column).replace("_", " "))


def figure_text(column: str, value: Any) -> str:
    """A summary figure in the unit a reader expects (µs, KiB, TB/s, %), for files (µ, not u)."""
    if fmt.missing(value):
        return fmt.MISSING
    if column in _BOUND_COLUMNS:
        return names.bound(value)
    if isinstance(value, str | bool):
        return str(value)
    if is_time(column):
        return fmt.time_ns(value, unicode=True)
    kind = _kind(column) or ("amount" if column == "bytes" else None)
    if kind is not None:
        return {"rate": fmt.rate, "flop_rate": fmt.flop_rate, "size": fmt.size, "amount": fmt.amount}[kind](value)
    if _is_share(column):
        return fmt.percent(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def field_label(field: str) -> str:
    """``pipeline.stages`` -> "pipeline stages": what a slide reader calls the field."""
    return _FIELDS.get(field, field.rsplit(".", 1)[-1].replace("_", " "))


def value_text(value: Any) -> str:
    """A varied value as it reads on a slide: ``[128, 256, 64]`` -> ``128×256×64``, 4.0 -> 4."""
    if isinstance(value, (list, tuple)):
        return "×".join(value_text(v) for v in value)
    if isinstance(value, str) and re.fullmatch(r"[\[(]\s*\d+(\s*,\s*\d+)*\s*[\])]", value):  # a list, as CSV keeps it
        return "×".join(re.findall(r"\d+", value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def row_label(row: pd.Series, fields: Sequence[str]) -> str:
    """A configuration in words: ``stages 3, tile 128×256×64``; a run's scenario otherwise."""
    if not fields:
        return f"{row.get('scenario', 'run')}, {value_text(row.get('stages', '?'))} stages"
    return ", ".join(_one_field(f, row[f]) for f in fields)


def _one_field(field: str, value: Any) -> str:
    text = _ROW_LABELS.get(field, f"{field_label(field)} {{}}").format(value_text(value))
    return text[:-1] if text.startswith("1 ") and text.endswith("s") else text  # "1 stage", "2 stages"


def numeric(values: pd.Series) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(values)) and not pd.api.types.is_bool_dtype(values)


def failure_text(error: Any, status: Any = None) -> str:
    """Why a row has no result, in three words where possible, with the sweep's own status words
    (``invalid``: the point cannot run or its run means nothing; ``error``: it raised)."""
    text = str(error or "")
    if "shared memory" in text:
        return "does not fit (SMEM)"
    if "fits on no SM" in text or "residency" in text.lower():
        return "does not fit"
    if status in ("invalid", "error"):
        return str(status)
    return "invalid" if text else "no result"


# ------------------------------------------------------------------------ bound and knee


def bound_time_ns(rows: pd.DataFrame) -> tuple[Any, str] | None:
    """The lower bound on the makespan that the table carries, as a time per row, and its name.

    gemm: ``bound_ns`` (the binding one of compute, L2, HBM, SM port, round trip); tiles:
    ``interval_bound_ns`` × ``tiles`` (the steady-state interval, every tile); stream: the
    bytes over the Little's-law bandwidth.
    """
    if "bound_ns" in rows and rows["bound_ns"].notna().any():
        return rows["bound_ns"], "bound"
    if {"interval_bound_ns", "tiles"} <= set(rows) and rows["interval_bound_ns"].notna().any():
        return rows["interval_bound_ns"] * rows["tiles"], "steady-state bound (tiles × interval)"
    if {"littles_law_bytes_per_s", "memory_bytes"} <= set(rows) and rows["littles_law_bytes_per_s"].notna().any():
        return rows["memory_bytes"] / rows["littles_law_bytes_per_s"] * 1e9, "Little's-law bound"
    return None


def reference_curves(rows: pd.DataFrame, y: str) -> list[tuple[Any, str]]:
    """What to overlay on ``y``: the closed form and the bound, in ``y``'s terms.

    A throughput column (``*_per_s``) is work / makespan with the work fixed per row, so its
    bound is ``y × makespan / bound``; other columns than time and throughput get none.
    """
    curves = []
    if "closed_form_ns" in rows and rows["closed_form_ns"].notna().any():
        curves.append((rows["closed_form_ns"], "closed form"))
    bound = bound_time_ns(rows)
    if bound is not None:
        curves.append(bound)
    if y == "makespan_ns":
        return curves
    if is_rate(y) and "makespan_ns" in rows:
        return [(rows[y] * rows["makespan_ns"] / t, name) for t, name in curves]
    return []


def knee(xs: Sequence[float], ys: Sequence[float], *, higher_is_better: bool) -> int | None:
    """Index of the first point within :data:`KNEE_TOLERANCE` of the best (the knee along ``x``,
    the cheapest x there): where more of ``x`` stops helping."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None and math.isfinite(y)]
    if not pairs:
        return None
    best = max(y for _, y in pairs) if higher_is_better else min(y for _, y in pairs)
    for i, y in enumerate(ys):
        if y is not None and math.isfinite(y) and (
                y >= best * (1 - KNEE_TOLERANCE) if higher_is_better else y <= best * (1 + KNEE_TOLERANCE)):
            return i
    return None
