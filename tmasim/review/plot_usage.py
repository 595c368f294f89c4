"""How full each resource is over time, from a run's tables: ring slots in use per CTA
(:func:`slot_occupancy`) and bandwidth on the shared links and the SM ports (:func:`bandwidth`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tmasim.review.plot_gantt import cta_keys
from tmasim.review.plot_style import COLORS, SERIES, styled, time_unit
from tmasim.values import format as fmt

# A panel with more change points than this (a run of thousands of tiles: more than the figure has
# pixels across) is drawn as its time-average over OCCUPANCY_BINS equal windows, stated in the legend.
# Drawn one by one, 300,000 tiles' steps overflow the renderer (matplotlib's "Exceeded cell block limit").
MAX_STEPS = 4000
OCCUPANCY_BINS = 1000

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def slot_occupancy(spans: pd.DataFrame, title: str = "", *, stages: int | None = None,
                   max_panels: int = 4, scenario: str = "") -> Figure:
    """Shared-memory slots in use over time, against the number of stages.

    A slot is *filling* from its copy's issue until the bytes land, then *holds data* until the
    last consumer is done with it. Stacked, the two show whether the ring is full of copies in
    flight (latency-bound: more stages would help) or of landed data waiting for the tensor
    core (compute-bound: more stages only cost shared memory). One panel per CTA; with more
    CTAs than ``max_panels``, one per SM (summed, against stages × CTAs on that SM).
    """
    stages = stages if stages is not None else int(spans.loc[spans["lane"] == "slot", "stage"].max()) + 1
    intervals = slot_intervals(spans)
    keys = cta_keys(intervals)
    per_sm = len(keys) > max_panels
    groups = sorted(intervals["sm"].unique()) if per_sm else keys
    shown = groups[:max_panels]
    end = float(spans["end_ps"].max())
    scale, unit = time_unit(end)
    with styled() as plt:
        fig, axes = plt.subplots(len(shown), 1, sharex=True, squeeze=False, layout="constrained",
                                 figsize=(11, 1.6 + 1.7 * len(shown)))
        for ax, group in zip(axes[:, 0], shown, strict=True):
            part = intervals[intervals["sm"] == group] if per_sm else intervals[
                (intervals["sm"] == group[0]) & (intervals["cta"] == group[1])]
            capacity = stages * (part["cta"].nunique() if per_sm else 1)
            _occupancy_panel(ax, part, capacity, scale, end)
            name = f"SM {group}" if per_sm else f"SM {group[0]} · CTA {group[1]}"
            ax.set_ylabel(name if len(shown) > 1 else "slots in use", fontsize=10)
        axes[-1, 0].set_xlabel(f"time ({unit})")
        axes[0, 0].legend(loc="upper right", ncols=3, fontsize=9, framealpha=0.9)
        more = f" (first {len(shown)} of {len(groups)})" if len(shown) < len(groups) else ""
        what = "per SM, summed over its CTAs" if per_sm else ("per CTA" if len(shown) > 1 else "")
        named = f"{scenario}: shared-memory" if scenario else "Shared-memory"
        fig.suptitle(title or f"{named} slots in use ({stages} stages){' ' + what if what else ''}{more}")
        if len(shown) > 1:
            fig.supylabel("slots in use")
    return fig


def slot_intervals(spans: pd.DataFrame) -> pd.DataFrame:
    """One row per slot fill: sm, cta, stage, tile, issued_ps, landed_ps, released_ps."""
    slots = spans[spans["lane"] == "slot"]
    keys = ["sm", "cta", "stage", "tile"]
    fill = slots[slots["kind"] == "fill"].groupby(keys)[["start_ps", "end_ps"]].agg(
        {"start_ps": "min", "end_ps": "max"})
    released = slots.groupby(keys)["end_ps"].max()
    out = fill.rename(columns={"start_ps": "issued_ps", "end_ps": "landed_ps"})
    out["released_ps"] = released.reindex(out.index).clip(lower=out["landed_ps"])
    return out.reset_index()


def _step_count(starts: pd.Series, ends: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """How many [start, end) intervals are open, as change points (times, counts)."""
    import numpy as np

    times = np.concatenate([starts.to_numpy(float), ends.to_numpy(float)])
    deltas = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.argsort(times, kind="stable")
    times, counts = times[order], np.cumsum(deltas[order])
    last = np.r_[times[1:] != times[:-1], True]  # several changes at one instant: keep the last
    return np.r_[0.0, times[last]], np.r_[0.0, counts[last]]


def _occupancy_panel(ax: Axes, part: pd.DataFrame, capacity: int, scale: float, end: float) -> None:
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    t_all, n_all = _step_count(part["issued_ps"], part["released_ps"])
    t_fill, n_fill = _step_count(part["issued_ps"], part["landed_ps"])
    grid = np.union1d(t_all, t_fill)
    held = n_all[np.searchsorted(t_all, grid, side="right") - 1]
    filling = n_fill[np.searchsorted(t_fill, grid, side="right") - 1]
    x = np.r_[grid, end]
    filling, held = np.r_[filling, filling[-1]], np.r_[held, held[-1]]
    mean = ""
    if len(x) > MAX_STEPS:  # more changes than pixels: each bin's time-average, as the bandwidth plot does
        edges = np.linspace(0.0, end, OCCUPANCY_BINS + 1)
        filling, held = (np.r_[binned_mean(x, v, edges), 0.0] for v in (filling, held))
        x, mean = edges, f" (mean per {format_span(edges[1] - edges[0])})"
    ax.fill_between(x / scale, 0, filling, step="post", color=COLORS["fill"], label=f"copy in flight (filling){mean}",
                    edgecolor=COLORS["transfer"], linewidth=0.5)
    ax.fill_between(x / scale, filling, held, step="post", color=COLORS["use"], alpha=0.8,
                    label=f"data landed (waiting or in use){mean}", linewidth=0)
    ax.axhline(capacity, color=COLORS["capacity"], linestyle="--", linewidth=1.2, label=f"slots: {capacity}")
    ax.set_ylim(0, capacity * 1.25 + 0.2)
    ax.set_xlim(0, end / scale)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="x", alpha=0.3)


# ---------------------------------------------------------------------------------- bandwidth


def bandwidth(bw: pd.DataFrame, title: str = "", *, bins: int = 200) -> Figure:
    """Each shared link's load over time against its capacity (dashed).

    Top: L2 and HBM. Bottom: the SMs' ingest ports, summarised as the mean and the busiest
    port at each instant (a chip has 132 of them; per-port lines would be a smear). Loads are
    step functions that flicker as copies start and end; when there are many change points
    the exact steps are drawn faint and their time-average over ``bins`` windows bold.
    """
    end = float(bw["time_ps"].max()) if len(bw) else 1.0
    scale, unit = time_unit(end)
    ports = bw[bw["link"].str.contains(".port", regex=False)]
    shared = [name for name in ("L2", "HBM") if (bw["link"] == name).any()]
    panels = [p for p, present in (("shared", shared), ("ports", len(ports))) if present]
    if not panels:
        raise ValueError("the bandwidth table is empty: run with record_bandwidth=True (tmasim run --out)")
    with styled() as plt:
        fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False, layout="constrained",
                                 figsize=(11, 1.6 + 2.8 * len(panels)))
        for ax, panel in zip(axes[:, 0], panels, strict=True):
            if panel == "shared":
                _shared_panel(ax, bw, shared, end, scale, bins)
            else:
                _ports_panel(ax, ports, end, scale, bins)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9.5, frameon=False)
        axes[-1, 0].set_xlabel(f"time ({unit})")
        axes[-1, 0].set_xlim(0, end / scale)
        fig.suptitle(title or "Bandwidth over time against capacity")
    return fig


def _rate_unit(frame: pd.DataFrame) -> tuple[float, str]:
    """TB/s or GB/s, whichever keeps this panel's capacity between 1 and 1000."""
    import numpy as np

    values = frame[["gbytes_per_s", "capacity_gbytes_per_s"]].replace(np.inf, np.nan).to_numpy(float)
    peak = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
    return (1000.0, "TB/s") if peak >= 1000 else (1.0, "GB/s")


def _shared_panel(ax: Axes, bw: pd.DataFrame, names: Sequence[str], end: float, scale: float, bins: int) -> None:
    divisor, rate = _rate_unit(bw[bw["link"].isin(names)])
    links = {name: bw[bw["link"] == name] for name in names}
    equal = len(names) == 2 and coincide(*(links[n]["time_ps"] for n in names), *(links[n]["gbytes_per_s"]
                                                                                  for n in names))
    for k, name in enumerate(names):
        link = links[name]
        # L2 drawn wide and first: a stream reads everything from HBM, and L2's line runs under HBM's.
        label = f"{name} (wide: under {names[1]} where equal)" if equal and k == 0 else name
        _load_line(ax, link["time_ps"], link["gbytes_per_s"], end, scale, divisor, SERIES[k], label, bins,
                   width=WIDE if k == 0 and len(names) == 2 else 1.6)
        _capacity(ax, link, divisor, SERIES[k], f"{name} capacity")
    ax.set_title("shared links: L2 and HBM", fontsize=11, loc="left")
    ax.set_ylabel(f"bandwidth ({rate})")


WIDE = 4.5  # the line drawn first where two may coincide: it shows on both sides of the one on top


def coincide(t1: Any, t2: Any, v1: Any, v2: Any) -> bool:
    """Whether two step functions (change times, values) are equal, within 0.5% of their peak,
    at some change point where either is above zero: where one line would hide the other."""
    import numpy as np

    t1, t2, v1, v2 = (np.asarray(a, float) for a in (t1, t2, v1, v2))
    if not len(t1) or not len(t2):
        return False
    grid = np.union1d(t1, t2)
    a = v1[np.clip(np.searchsorted(t1, grid, side="right") - 1, 0, None)]
    b = v2[np.clip(np.searchsorted(t2, grid, side="right") - 1, 0, None)]
    live = (a > 0) | (b > 0)
    peak = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))), 1e-30)
    return bool(np.any(live & (np.abs(a - b) <= 0.005 * peak)))


def _ports_panel(ax: Axes, ports: pd.DataFrame, end: float, scale: float, bins: int) -> None:
    divisor, rate = _rate_unit(ports)
    times, mean, top = port_summary(ports)
    equal = coincide(times, times, mean, top)
    label = "mean over SM ports" + ("\n(wide: under the busiest where equal)" if equal else "")
    _load_line(ax, times, mean, end, scale, divisor, SERIES[2], label, bins, width=WIDE)
    _load_line(ax, times, top, end, scale, divisor, SERIES[3], "busiest SM port", bins, fill=False, width=1.6)
    _capacity(ax, ports, divisor, SERIES[3], "SM port capacity")
    ax.set_title(f"SM ingest ports ({ports['link'].nunique()} simulated SMs)", fontsize=11, loc="left")
    ax.set_ylabel(f"bandwidth per SM ({rate})")


def port_summary(ports: pd.DataFrame) -> tuple[Any, Any, Any]:
    """Mean and max over SM ports at every change point of any port (steps held forward)."""
    wide = ports.pivot_table(index="time_ps", columns="link", values="gbytes_per_s", aggfunc="last")
    wide = wide.sort_index().ffill().fillna(0.0)
    return wide.index.to_numpy(float), wide.mean(axis=1).to_numpy(), wide.max(axis=1).to_numpy()


def _load_line(ax: Axes, times: Any, load: Any, end: float, scale: float, divisor: float, color: str, label: str,
               bins: int, *, fill: bool = True, width: float = 1.8) -> None:
    """A load step function up to ``end``, shaded underneath. With more change points than
    ``bins`` (a flickering load) it is averaged over ``bins`` equal windows instead."""
    import numpy as np

    t = np.r_[np.asarray(times, float), end]
    v = np.r_[np.asarray(load, float), np.asarray(load, float)[-1]] / divisor
    if len(t) > bins:
        edges = np.linspace(0.0, end, bins + 1)
        t, v = edges, np.r_[binned_mean(t, v, edges), 0.0]
        label = f"{label} (mean per {format_span(edges[1] - edges[0])})"
    ax.step(t / scale, v, where="post", color=color, linewidth=width, label=label)
    if fill:
        ax.fill_between(t / scale, 0, v, step="post", color=color, alpha=0.12, linewidth=0)


def binned_mean(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The time-average of a step function (value[i] from times[i] on) over each bin."""
    import numpy as np

    cumulative = np.r_[0.0, np.cumsum(values[:-1] * np.diff(times))]

    def integral(x: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(times, x, side="right") - 1, 0, len(times) - 1)
        return cumulative[k] + values[k] * (x - times[k])

    return np.diff(integral(edges)) / np.diff(edges)


def format_span(ps: float) -> str:
    return fmt.time(ps, 3, unicode=True)


def _capacity(ax: Axes, link: pd.DataFrame, divisor: float, color: str, label: str) -> None:
    capacity = float(link["capacity_gbytes_per_s"].max())
    if capacity != float("inf"):
        ax.axhline(capacity / divisor, color=color, linestyle="--", linewidth=1.3, label=label)
