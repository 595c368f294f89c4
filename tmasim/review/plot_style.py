"""The look shared by every figure: colours, slide-sized type, time units, lazy pyplot.

Kept apart from the figures so that :mod:`tmasim.review.plots` and :mod:`tmasim.review.plot_tables` can both
use it without importing each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tmasim.values import format as fmt

COLORS = {
    "transfer": "#4C72B0",
    "fill": "#A6C8E8",
    "use": "#55A868",
    "compute": "#55A868",
    "epilogue": "#8172B3",
    "store": "#8172B3",
    "wait_full": "#C44E52",
    "wait_empty": "#DD8452",
    "flip": "#333333",
    "race": "#C44E52",
    "capacity": "#555555",
    "remote": "#937860",
    "workspace": "#CCB974",  # a split tile's partial read from or written to its workspace
    "wait_fixup": "#DA8BC3",  # a split tile's peer waiting for the partials before it in K
}
# Colour-blind-safe series colours (seaborn "deep"), in the order lines are drawn.
SERIES = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974",
          "#64B5CD")
# Slide-sized type: readable from the back of a review room at 150 dpi.
STYLE = {"font.size": 11, "axes.titlesize": 13, "axes.labelsize": 11, "xtick.labelsize": 10,
         "ytick.labelsize": 10, "legend.fontsize": 9.5, "axes.spines.top": False, "axes.spines.right": False}


def time_unit(span_ps: float) -> tuple[int, str]:
    """The unit that keeps a time axis of ``span_ps`` readable: (picoseconds per unit, name)."""
    scale, name = fmt.unit_for("time", span_ps)
    return int(scale), name


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend, imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def styled() -> Iterator[Any]:
    """pyplot, with the slide style applied only while a figure is being built (no global
    rcParams change survives the figure)."""
    plt = pyplot()
    with plt.rc_context(STYLE):
        yield plt
