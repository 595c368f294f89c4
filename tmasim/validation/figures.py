"""The validation figures, built from the validation and timeline tables only.

Matplotlib is imported inside each function, with the Agg backend (through ``tmasim.review.plots``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tmasim.validation.mapping import stat_unit
from tmasim.values import format as fmt

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

BAND = 0.10
COLORS = {"in_flight": "#A6C8E8", "compute": "#55A868"}


def _pyplot():  # noqa: ANN202 (the pyplot module)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def display_unit(stat: str, values: pd.Series) -> tuple[float, str]:
    """(divisor, unit label) that keeps a figure's numbers readable."""
    unit = stat_unit(stat)
    if unit is None:
        return 1.0, ""
    kind, base = unit
    if kind == "time":
        ps = values.median() * (1.0 if base == "ps" else 1e3)
        scale, name = fmt.unit_for("time", ps / 2)  # the median at 1 or more of the unit
        return scale / (1.0 if base == "ps" else 1e3), name
    if kind == "bandwidth":
        return 1e9, "GB/s"
    if kind == "flop_rate":
        return 1e12, "TFLOP/s"
    return 1.0, base


def predicted_vs_measured(table: pd.DataFrame, *, quantity: str, predict: str, title: str,
                          hue: str | None = None) -> Figure:
    """Log-log scatter of predicted against measured, with y = x and a ±10 % band."""
    import numpy as np

    plt = _pyplot()
    ok = table[table["status"] == "ok"]
    scale, unit = display_unit(predict, ok["measured"])
    x, y = ok["measured"] / scale, ok["predicted"] / scale
    fig, ax = plt.subplots(figsize=(6.6, 6.2), layout="constrained")
    lo, hi = (min(x.min(), y.min()) / 1.5, max(x.max(), y.max()) * 1.5) if len(ok) else (0.1, 10.0)
    line = np.geomspace(lo, hi, 50)
    ax.fill_between(line, line * (1 - BAND), line * (1 + BAND), color="#999999", alpha=0.2, linewidth=0,
                    label=f"±{BAND:.0%}")
    ax.plot(line, line, color="#333333", linewidth=1, label="predicted = measured")
    groups = ok.groupby(hue, sort=True) if hue else [(None, ok)]
    for name, group in groups:
        label = f"{hue} = {name}" if hue else "measured points"
        ax.scatter(group["measured"] / scale, group["predicted"] / scale, s=22, alpha=0.8, label=label,
                   edgecolors="white", linewidths=0.4)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
    ax.set_title(title, fontsize=10)
    _plain_log_ticks(ax)
    suffix = f" ({unit})" if unit else ""
    ax.set_xlabel(f"measured {quantity_name(quantity)}{suffix}")
    ax.set_ylabel(f"predicted {quantity_name(predict)}{suffix}")
    ax.grid(which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    return fig


_NAMES = {"kernel_ns": "kernel time", "makespan_ns": "makespan", "gbps": "bandwidth",
          "achieved_bytes_per_s": "bandwidth"}
_SUFFIXES = ("_bytes_per_s", "_per_s", "_ns", "_ps", "_us", "_ms", "_s")


def quantity_name(column: str) -> str:
    """A column or figure name for an axis label, without the unit its suffix repeats."""
    if column in _NAMES:
        return _NAMES[column]
    stem = next((column[: -len(s)] for s in _SUFFIXES if column.endswith(s) and len(column) > len(s)), column)
    return stem.replace("_", " ")


def _plain_log_ticks(ax: Any) -> None:
    """1, 2, 5 x 10^k labelled as plain numbers: easier to read off than 10^k notation."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    low, high = ax.get_xlim()
    subs = (1.0, 2.0, 5.0) if high / low < 1e3 else (1.0,)  # over three decades 2 and 5 would crowd
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(NullFormatter())


def timeline_overlay(frame: pd.DataFrame, *, title: str, max_tiles: int = 32) -> Figure:
    """Per tile (one row each): measured spans in the upper half, simulated in the lower half
    (hatched); light = copy in flight (issue to ready), green = compute."""
    from matplotlib.patches import Patch

    plt = _pyplot()
    shown = frame[frame["tile"] < max_tiles]
    tiles = int(shown["tile"].max()) + 1 if len(shown) else 0
    end_ns = float(shown["compute_end_ns"].max()) if len(shown) else 1.0
    scale, unit = fmt.unit_for("time", max(end_ns * 1000, 2000))  # ns at the least
    scale /= 1000
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.22 * tiles), layout="constrained")
    for source, offset, hatch in (("measured", -0.2, None), ("simulated", 0.2, "///")):
        rows = shown[shown["source"] == source]
        for column, start, end in (("in_flight", "issue_ns", "ready_ns"), ("compute", "compute_start_ns",
                                                                           "compute_end_ns")):
            bars = list(zip(rows[start] / scale, (rows[end] - rows[start]) / scale, strict=True))
            for (left, width), tile in zip(bars, rows["tile"], strict=True):
                ax.broken_barh([(left, width)], (tile + offset - 0.18, 0.36), facecolors=COLORS[column],
                               edgecolors="#555555" if hatch else "white", linewidth=0.4, hatch=hatch)
    ax.set_yticks(range(tiles), [f"tile {t}" for t in range(tiles)], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"time since launch ({unit})")
    ax.grid(axis="x", alpha=0.3)
    total = int(frame["tile"].max()) + 1 if len(frame) else 0
    ax.set_title(title + (f"\n(first {tiles} of {total} tiles)" if total > tiles else ""))
    legend = [Patch(facecolor=COLORS["in_flight"], label="copy in flight (issue → ready)"),
              Patch(facecolor=COLORS["compute"], label="compute"),
              Patch(facecolor="white", edgecolor="#555555", label="upper bar: measured"),
              Patch(facecolor="white", edgecolor="#555555", hatch="///", label="lower bar (hatched): simulated")]
    fig.legend(handles=legend, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    return fig
