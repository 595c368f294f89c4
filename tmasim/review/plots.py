"""Figures, built from result tables only (never from the engine).

Each function takes DataFrames and returns a matplotlib Figure; :func:`save` writes PNG (and
SVG when asked). Matplotlib is imported lazily, with the non-interactive Agg backend, and every
figure is drawn inside an ``rc_context`` so that the slide-sized fonts never leak into the
caller's matplotlib settings.

Timelines (one run, records on): :func:`gantt` (:mod:`tmasim.review.plot_gantt`),
:func:`slot_occupancy` and :func:`bandwidth` (:mod:`tmasim.review.plot_usage`).
Comparisons (sweep tables, or a run's one-row summary): :func:`stage_sweep`,
:func:`stall_breakdown`, :func:`heatmap` (:mod:`tmasim.review.plot_tables`). This module is
the one place callers import figures from, and writes them (:func:`save`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.review.plot_gantt import (
    cta_keys,
    first_tiles_window,
    gantt,
    representatives_note,
    step_noun,
    suggested_tiles,
)
from tmasim.review.plot_style import COLORS, SERIES, STYLE, pyplot, styled, time_unit
from tmasim.review.plot_tables import heatmap, stage_sweep, stall_breakdown
from tmasim.review.plot_usage import bandwidth, binned_mean, slot_intervals, slot_occupancy

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLORS", "SERIES", "STYLE", "bandwidth", "binned_mean", "cta_keys", "first_tiles_window", "gantt",
           "heatmap", "representatives_note", "save", "slot_intervals", "slot_occupancy", "stage_sweep",
           "stall_breakdown", "step_noun", "styled", "suggested_tiles", "time_unit"]


def save(fig: Figure, path: Path, *, svg: bool = False, trust: str | None = None) -> list[Path]:
    """Write ``path`` (PNG; SVG only if it ends in .svg) and, if asked, an SVG beside it; closes
    the figure. ``trust``: the run's ``validated`` line (tmasim.validation.trust), printed small
    under the figure so it travels with it."""
    plt = pyplot()
    if trust:
        footnote(fig, trust)
    path = Path(path)
    if not path.suffix:  # what matplotlib would write: say so
        path = path.with_name(path.name + ".png")
    from tmasim.output.paths import replacing, write_error

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        plt.close(fig)
        raise write_error("--out", path, err) from None
    written = [path]
    try:
        literal_where_unparsable(fig)
        with replacing(path) as tmp, plt.rc_context(SAME_BYTES):
            dpi: Any = "figure" if path.suffix.lower() == ".svg" else 150
            kind = path.suffix[1:].lower() or "png"
            fig.savefig(tmp, format=kind, dpi=dpi, metadata=_metadata(kind))
        if svg and path.suffix.lower() != ".svg":
            with replacing(path.with_suffix(".svg")) as tmp, plt.rc_context(SAME_BYTES):
                fig.savefig(tmp, format="svg", metadata=_metadata("svg"))
            written.append(path.with_suffix(".svg"))
    finally:
        plt.close(fig)
    return written


def footnote(fig: Figure, trust: str) -> None:
    """The trust line in small grey print at the bottom of ``fig``, wrapped to its width (as the
    figure-wide x label, so the constrained layout keeps room for it)."""
    import textwrap

    width = max(60, int(fig.get_figwidth() * 17))  # characters of 6-point text across the figure
    text = textwrap.fill(f"validated: {trust}", width)
    fig.supxlabel(text, fontsize=6, color="0.35", x=0.01, ha="left")


# The same figure gives the same bytes, run to run: SVG element ids from a fixed salt (else a
# random one), and no date in the file.
SAME_BYTES = {"svg.hashsalt": "tmasim"}


def _metadata(kind: str) -> dict[str, Any]:
    return {"Date": None} if kind == "svg" else {}


def literal_where_unparsable(fig: Figure) -> None:
    """A text with ``$`` pairs that is not math text matplotlib can parse (a scenario named
    ``cost $x^$``) is drawn as written instead of failing the save with the parser's error
    (``plot --title`` is checked before, with its own message)."""
    from matplotlib import cbook
    from matplotlib.mathtext import MathTextParser
    from matplotlib.text import Text

    parser = MathTextParser("path")
    for text in fig.findobj(Text):
        content = text.get_text()
        if not cbook.is_math_text(content):
            continue
        try:
            parser.parse(content, 72)
        except ValueError:
            text.set_parse_math(False)
