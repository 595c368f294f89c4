"""Figures, built from result tables only (never from the engine).

Each function takes DataFrames and returns a matplotlib Figure; :func:`save` writes PNG (and
SVG when asked). Matplotlib is imported here, with the non-interactive Agg backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

_TIME_UNITS = ((10**12, "s"), (10**9, "ms"), (10**6, "µs"), (10**3, "ns"), (1, "ps"))
COLORS = {
    "transfer": "#4C72B0",
    "fill": "#A6C8E8",
    "use": "#55A868",
    "compute": "#55A868",
    "wait_full": "#C44E52",
    "wait_empty": "#DD8452",
    "flip": "#333333",
    "race": "#C44E52",
}


def time_unit(span_ps: float) -> tuple[int, str]:
    """The unit that keeps a time axis of ``span_ps`` readable: (picoseconds per unit, name)."""
    for scale, name in _TIME_UNITS:
        if span_ps >= 2 * scale:
            return scale, name
    return 1, "ps"


def _pyplot():  # noqa: ANN202 (returns the pyplot module)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def gantt(spans: pd.DataFrame, events: pd.DataFrame, title: str = "",
          window: tuple[float, float] | None = None) -> Figure:
    """Copy engine, each stage slot, compute and barrier waits of one CTA, over time.

    Rows, top to bottom: the TMA unit's transfers; each slot (light: the copy in flight from
    issue to landing; green: the consumer using it; ticks: full/empty phase flips); the
    tensor core's compute; the consumer's waits on full barriers and the producer's waits on
    empty barriers. ``window`` = (start_ps, end_ps) zooms in.
    """
    plt = _pyplot()
    from matplotlib.patches import Patch

    one = spans[(spans["sm"] == spans["sm"].min()) & (spans["cta"] == spans["cta"].min())] if len(spans) else spans
    stages = sorted(one.loc[one["lane"] == "slot", "stage"].unique())
    rows = ["TMA transfers", *[f"slot {s}" for s in stages], "tensor core", "consumer waits\n(full barrier)",
            "producer waits\n(empty barrier)"]
    end_ps = float(one["end_ps"].max()) if len(one) else 1.0
    lo, hi = window if window is not None else (0.0, end_ps)
    scale, unit = time_unit(hi - lo)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.5 * len(rows)), layout="constrained")

    def bars(frame: pd.DataFrame, row: int, color: str, *, hatch: str | None = None, label: bool = False,
             alpha: float = 1.0) -> None:
        if frame.empty:
            return
        xs = list(zip(frame["start_ps"] / scale, (frame["end_ps"] - frame["start_ps"]) / scale, strict=True))
        ax.broken_barh(xs, (row - 0.38, 0.76), facecolors=color, edgecolors="white", linewidth=0.6, hatch=hatch,
                       alpha=alpha)
        if label:
            for (x, w), tile in zip(xs, frame["tile"], strict=True):
                if w > (hi - lo) / scale / 60:
                    ax.text(x + w / 2, row, str(tile), ha="center", va="center", fontsize=8, color="white")

    lane = one["lane"]
    bars(one[(lane == "tma") & (one["kind"] == "transfer")], 0, COLORS["transfer"], label=True)
    for k, s in enumerate(stages, start=1):
        slot = one[(lane == "slot") & (one["stage"] == s)]
        bars(slot[slot["kind"] == "use"], k, COLORS["use"], label=True)
        # Drawn over "use", hatched and translucent: a slot used while still filling is a race.
        bars(slot[slot["kind"] == "fill"], k, COLORS["fill"], hatch="//", alpha=0.75)
    base = len(stages) + 1
    bars(one[one["kind"] == "compute"], base, COLORS["compute"], label=True)
    bars(one[one["kind"] == "wait_full"], base + 1, COLORS["wait_full"])
    bars(one[one["kind"] == "wait_empty"], base + 2, COLORS["wait_empty"])
    marks = _mark_events(ax, events, stages, scale)

    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlim(lo / scale, (hi + (hi - lo) * 0.01) / scale)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title)
    legend = [Patch(color=COLORS["transfer"], label="copy transfer"),
              Patch(color=COLORS["fill"], label="copy in flight (slot filling)"),
              Patch(color=COLORS["use"], label="compute (slot in use)"),
              Patch(color=COLORS["wait_full"], label="wait: full barrier"),
              Patch(color=COLORS["wait_empty"], label="wait: empty barrier"), *marks]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)),
              ncols=min(len(legend), 4), fontsize=8, frameon=False)
    return fig


def _mark_events(ax, events: pd.DataFrame, stages: Sequence[int], scale: int) -> list:  # noqa: ANN001
    """Barrier phase flips as ticks over each slot, races as crosses on the tensor core row;
    returns legend handles for what was drawn."""
    from matplotlib.lines import Line2D

    if events.empty:
        return []
    handles = [Line2D([], [], marker="v", linestyle="none", color=COLORS["flip"], label="barrier phase flip")]
    first = events[(events["sm"] == events["sm"].min()) & (events["cta"] == events["cta"].min())]
    for k, s in enumerate(stages, start=1):
        flips = first[first["kind"].str.startswith("flip") & (first["stage"] == s)]
        ax.plot(flips["time_ps"] / scale, [k - 0.45] * len(flips), marker="v", linestyle="none",
                color=COLORS["flip"], markersize=4)
    races = first[first["kind"] == "race"]
    if len(races):
        ax.plot(races["time_ps"] / scale, [len(stages) + 1] * len(races), marker="x", linestyle="none",
                color=COLORS["race"], markersize=10, markeredgewidth=2, clip_on=False)
        handles.append(Line2D([], [], marker="x", linestyle="none", color=COLORS["race"], markeredgewidth=2,
                              label="race: read before data landed"))
    return handles


def save(fig: Figure, path: Path, *, svg: bool = False) -> list[Path]:
    """Write ``path`` (PNG) and, if asked, an SVG beside it; closes the figure."""
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    written = [path]
    if svg:
        fig.savefig(path.with_suffix(".svg"))
        written.append(path.with_suffix(".svg"))
    plt.close(fig)
    return written
