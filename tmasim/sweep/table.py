"""The sweep's one tidy table: one row per point, one column per varied field and figure.

Columns, in order: ``point``, each varied field under its dotted name, ``seed``, ``status``,
``error``, then every summary figure of :func:`tmasim.simulation.simulate` (``seed`` once).
A varied column keeps its values' type when they share one (numbers, strings, booleans);
otherwise (lists, tables, mixed kinds) each value is written as you would give it to ``--set``,
so a column always has one type and a row can be rerun by pasting its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tmasim.sweep.points import Outcome
from tmasim.sweep.spec import SweepPlan

if TYPE_CHECKING:
    import pandas as pd

LEAD_COLUMNS = ("point",)
OUTCOME_COLUMNS = ("seed", "status", "error")
SUMMARY_SUFFIX = " (summary)"  # a figure whose name is a varied field's (``gpu``): ``gpu (summary)``


def build(plan: SweepPlan, outcomes: Mapping[int, Outcome]) -> pd.DataFrame:
    """The rows of the finished points, in point order (all points once the sweep is done)."""
    import pandas as pd

    varied = varied_columns(plan)
    figures = figure_names(outcomes[i] for i in sorted(outcomes))
    rows = []
    for i in sorted(outcomes):
        outcome = outcomes[i]
        row: dict[str, Any] = {"point": i, **{name: varied[name][i] for name in varied}}
        row.update(seed=outcome.seed, status=outcome.status, error=outcome.error)
        row.update({figure_column(name, varied): outcome.stats.get(name) for name in figures})
        rows.append(row)
    columns = [*LEAD_COLUMNS, *varied, *OUTCOME_COLUMNS, *(figure_column(name, varied) for name in figures)]
    return pd.DataFrame(rows, columns=columns)


def figure_column(name: str, varied: Iterable[str]) -> str:
    """One column per name: a summary figure named like a varied field (varying ``gpu`` over
    presets, whose figure ``gpu`` is the preset's name) is ``gpu (summary)``."""
    return f"{name}{SUMMARY_SUFFIX}" if name in varied or name in LEAD_COLUMNS else name


def figure_name(column: str, varied: Iterable[str]) -> str:
    """The summary figure a column holds (undoes :func:`figure_column`)."""
    base = column.removesuffix(SUMMARY_SUFFIX)
    return base if column.endswith(SUMMARY_SUFFIX) and (base in varied or base in LEAD_COLUMNS) else column


def figure_names(outcomes: Iterable[Outcome]) -> list[str]:
    """Summary figures in the order the simulator gives them (first seen first, ok rows first)."""
    names: dict[str, None] = {}
    ordered = sorted(outcomes, key=lambda outcome: outcome.status != "ok")  # a pruned row's bound_ns: in its place
    for outcome in ordered:
        names.update(dict.fromkeys(k for k in outcome.stats if k not in OUTCOME_COLUMNS))
    return list(names)


def varied_columns(plan: SweepPlan) -> dict[str, list[Any]]:
    """Each varied field's value at every point (indexed by point id), one type per column."""
    columns: dict[str, list[Any]] = {}
    for position, axis in enumerate(plan.axes):
        values = [point.values[position][1] for point in plan.points]
        if _one_scalar_kind(values):
            columns[axis.field] = values
        elif _lists_of_one_kind(values):  # tuples: hashable for pandas, a list column for Parquet
            columns[axis.field] = [tuple(v) for v in values]
        else:
            columns[axis.field] = [toml_text(v) for v in values]
    return columns


def _lists_of_one_kind(values: Sequence[Any]) -> bool:
    """Lists of numbers (tiles, shapes, boxes): a list column in Parquet, not strings."""
    return (all(isinstance(v, (list, tuple)) and v for v in values)
            and _one_scalar_kind([x for v in values for x in v])
            and not any(isinstance(x, str) for v in values for x in v))


def _one_scalar_kind(values: Sequence[Any]) -> bool:
    if all(isinstance(v, bool) for v in values) or all(isinstance(v, str) for v in values):
        return True
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def toml_text(value: Any) -> str:
    """A value as TOML inline text: what ``--set FIELD=...`` reads back as the same value.

    tomli-w writes every key and scalar (its quoting and escapes); arrays and tables are
    joined here on one line, as a ``--set`` value is typed (tomli-w writes them over several).
    """
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(str(k))} = {toml_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    import tomli_w

    return tomli_w.dumps({"v": value}).removeprefix("v = ").removesuffix("\n")


def _key(key: str) -> str:
    import tomli_w

    return tomli_w.dumps({key: 0}).removesuffix(" = 0\n")


def outcomes_from_frame(frame: pd.DataFrame, plan: SweepPlan) -> dict[int, Outcome]:
    """Read back the finished points of a result file (its varied columns come from the plan)."""
    import pandas as pd

    varied = [a.field for a in plan.axes]
    skip = {*LEAD_COLUMNS, *varied, *OUTCOME_COLUMNS}
    figures = [c for c in frame.columns if c not in skip]
    outcomes = {}
    for record in frame.to_dict("records"):
        clean = {k: (None if _is_missing(v, pd) else v) for k, v in record.items()}
        point = int(record["point"])
        if point in outcomes:  # a table edited or joined by hand: never two answers for one point
            raise ValueError(f"point {point} appears twice in it")
        stats = _stats(clean, figures, varied)
        seed = None if clean["seed"] is None else int(clean["seed"])
        outcomes[point] = Outcome(point, seed, str(clean["status"]), clean["error"], stats)
    return outcomes


def _stats(row: Mapping[str, Any], figures: Iterable[str], varied: Iterable[str]) -> dict[str, Any]:
    """An ok row's figures; a pruned row's bound (tmasim.sweep.search); nothing for the others."""
    if row["status"] == "ok":
        return {figure_name(name, varied): row[name] for name in figures}
    if row["status"] == "pruned":
        return {"bound_ns": row.get("bound_ns")}
    return {}


def _is_missing(value: Any, pd: Any) -> bool:
    if isinstance(value, (list, dict, tuple)) or getattr(value, "ndim", 0) > 0:  # a list column's array
        return False
    return bool(pd.isna(value))
