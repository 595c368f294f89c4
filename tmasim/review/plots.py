"""Figures, built from result tables only (never from the engine).

Each function takes DataFrames and returns a matplotlib Figure; :func:`save` writes PNG (and
SVG when asked). Matplotlib is imported lazily, with the non-interactive Agg backend, and every
figure is drawn inside an ``rc_context`` so that the slide-sized fonts never leak into the
caller's matplotlib settings.

Timelines (one run, records on): :func:`gantt`, :func:`slot_occupancy`, :func:`bandwidth`.
Comparisons (sweep tables, or a run's one-row summary): :func:`stage_sweep`,
:func:`stall_breakdown`, :func:`heatmap` (in :mod:`tmasim.review.plot_tables`, re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim import format as fmt
from tmasim.review.plot_style import COLORS, SERIES, STYLE, pyplot, styled, time_unit
from tmasim.review.plot_tables import heatmap, stage_sweep, stall_breakdown

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["COLORS", "SERIES", "STYLE", "bandwidth", "first_tiles_window", "gantt", "heatmap", "save",
           "slot_occupancy", "stage_sweep", "stall_breakdown", "styled", "suggested_tiles", "time_unit"]

_DENSE = 150  # more bars than this in a row: no white separators
_LABELLED = 32  # tile numbers on the bars only when this few tiles are in view
_MAX_ARROWS = 80  # multicast arrows drawn at most (the first ones in the window)
_MAX_FLIPS = 300  # more phase flips than this in a CTA's row merge into a black line: left out


# --------------------------------------------------------------------------------------- Gantt


def gantt(spans: pd.DataFrame, events: pd.DataFrame, title: str = "",
          window: tuple[float, float] | None = None, *, tiles: int | None = None, max_ctas: int = 12,
          layout: str = "auto", note: str = "") -> Figure:
    """What each CTA did over time: copies in flight, compute, barrier waits and phase flips.

    One CTA (``layout="cta"``, the default when there is one) gets the teaching layout: the TMA
    unit's transfers, one row per stage slot (hatched: the copy in flight from issue to landing;
    green: the consumer using it; ▼: full/empty phase flips), the tensor core, then the
    consumer's waits on full barriers and the producer's waits on empty ones.

    Several CTAs (``layout="chip"``) get one row per CTA, labelled by SM and CTA, each split in
    three bands (copies, compute, waits) so a few hundred tiles stay readable; at most
    ``max_ctas`` rows are drawn (the title says how many were left out). ``window`` =
    (start_ps, end_ps) zooms in; ``tiles=N`` zooms to the first N tiles of every CTA. A zoom is
    stated under the title, with ``note`` (e.g. what the rows of an aggregated run stand for).
    """
    zoom, which = "", ""
    if window is None and tiles is not None:
        window = first_tiles_window(spans, tiles)
        which = f"the first {tiles} tiles of each CTA: "
    if window is not None and len(spans):
        end = float(spans["end_ps"].max())
        start, stop = fmt.time(window[0], unicode=True, zero="0"), fmt.time(window[1], unicode=True)
        zoom = f"zoomed to {which}{start} to {stop} of {fmt.time(end, unicode=True)}"
    title = "\n".join(t for t in (title, zoom, note) if t)
    keys = cta_keys(spans)
    if layout not in ("auto", "cta", "chip"):
        raise ValueError(f"layout must be 'auto', 'cta' or 'chip', not {layout!r}")
    if layout == "cta" or (layout == "auto" and len(keys) <= 1):
        return _cta_gantt(spans, events, title, window)
    return _chip_gantt(spans, events, title, window, max_ctas)


def representatives_note(stats: Mapping[str, Any]) -> str:
    """What the rows of an aggregated run are: one SM standing for each class of identical SMs."""
    classes, sms = int(stats.get("sm_classes") or 0), int(stats.get("sms_used") or 0)
    if not classes or classes >= sms:
        return ""
    return (f"each row stands for a class of identical SMs ({sms} SMs simulated as {classes}; "
            "run.aggregate = false draws them all)")


def cta_keys(spans: pd.DataFrame) -> list[tuple[int, int]]:
    """The (sm, cta) pairs that have spans, in SM order."""
    if spans.empty:
        return []
    pairs = spans[["sm", "cta"]].drop_duplicates().sort_values(["sm", "cta"])
    return [(int(sm), int(cta)) for sm, cta in pairs.itertuples(index=False)]


def first_tiles_window(spans: pd.DataFrame, tiles: int) -> tuple[float, float]:
    """(0, end of the N-th tile's compute in the slowest CTA): a zoom that shows the pipeline
    filling and its first steady steps, whatever the run's length."""
    compute = spans[spans["kind"] == "compute"]
    if compute.empty or tiles < 1:
        return 0.0, float(spans["end_ps"].max()) if len(spans) else 1.0
    ends = []
    for _, part in compute.groupby(["sm", "cta"]):
        wanted = sorted(part["tile"].unique())[:tiles]
        ends.append(float(part.loc[part["tile"].isin(wanted), "end_ps"].max()))
    return 0.0, max(ends)


def suggested_tiles(spans: pd.DataFrame, over: int = 48, show: int = 16) -> int | None:
    """``show`` when some CTA computes more than ``over`` tiles (a whole-run chart would be a
    smear; pass it as ``gantt(..., tiles=...)``), else None: the whole run reads fine."""
    compute = spans[spans["kind"] == "compute"]
    if compute.empty:
        return None
    most = int(compute.groupby(["sm", "cta"])["tile"].nunique().max())
    return show if most > over else None


def _in_window(frame: pd.DataFrame, lo: float, hi: float) -> pd.DataFrame:
    """Rows that overlap [lo, hi]: drawing 40,000 spans to show 100 is slow and pointless."""
    return frame[(frame["end_ps"] >= lo) & (frame["start_ps"] <= hi)]


def _bars(ax: Axes, frame: pd.DataFrame, y: float, height: float, color: str, scale: float, *,
          hatch: str | None = None, alpha: float = 1.0, labels: float | None = None, dense: bool = False) -> None:
    """Spans as horizontal bars centred on ``y``; tile numbers on bars wider than ``labels``."""
    if frame.empty:
        return
    xs = list(zip(frame["start_ps"] / scale, (frame["end_ps"] - frame["start_ps"]) / scale, strict=True))
    ax.broken_barh(xs, (y - height / 2, height), facecolors=color, edgecolors="white",
                   linewidth=0 if dense else 0.6, hatch=hatch, alpha=alpha)
    if labels is None or dense:
        return
    for (x, w), tile in zip(xs, frame["tile"], strict=True):
        if w > labels:
            ax.text(x + w / 2, y, str(tile), ha="center", va="center", fontsize=9, color="white", clip_on=True)


def _cta_gantt(spans: pd.DataFrame, events: pd.DataFrame, title: str,
               window: tuple[float, float] | None) -> Figure:
    """The single-CTA teaching layout (the README's reference figure)."""
    from matplotlib.patches import Patch

    one = spans[(spans["sm"] == spans["sm"].min()) & (spans["cta"] == spans["cta"].min())] if len(spans) else spans
    stages = sorted(one.loc[one["lane"] == "slot", "stage"].unique())
    rows = ["TMA transfers", *[f"slot {s}" for s in stages], "tensor core", "consumer waits\n(full barrier)",
            "producer waits\n(empty barrier)"]
    end_ps = float(one["end_ps"].max()) if len(one) else 1.0
    lo, hi = window if window is not None else (0.0, end_ps)
    scale, unit = time_unit(hi - lo)
    one = _in_window(one, lo, hi)
    dense = (one["kind"] == "compute").sum() > _DENSE / 2
    with styled() as plt:
        fig, ax = plt.subplots(figsize=(11, 1.2 + 0.5 * len(rows)), layout="constrained")
        label = (hi - lo) / scale / 60 if (one["kind"] == "compute").sum() <= _LABELLED else None
        kind, lane = one["kind"], one["lane"]
        _bars(ax, one[(lane == "tma") & (kind == "transfer")], 0, 0.76, COLORS["transfer"], scale, labels=label,
              dense=dense)
        _bars(ax, one[kind == "store"], 0, 0.76, COLORS["store"], scale, hatch="..", dense=dense)
        for k, s in enumerate(stages, start=1):
            slot = one[(lane == "slot") & (one["stage"] == s)]
            _bars(ax, slot[slot["kind"] == "use"], k, 0.76, COLORS["use"], scale, labels=label, dense=dense)
            # Drawn over "use", hatched and translucent: a slot used while still filling is a race.
            _bars(ax, slot[slot["kind"] == "fill"], k, 0.76, COLORS["fill"], scale, hatch="//", alpha=0.75,
                  dense=dense)
        base = len(stages) + 1
        _bars(ax, one[kind == "compute"], base, 0.76, COLORS["compute"], scale, labels=label, dense=dense)
        _bars(ax, one[kind == "epilogue"], base, 0.76, COLORS["epilogue"], scale, dense=dense)
        _bars(ax, one[kind == "wait_full"], base + 1, 0.76, COLORS["wait_full"], scale, dense=dense)
        _bars(ax, one[kind == "wait_empty"], base + 2, 0.76, COLORS["wait_empty"], scale, dense=dense)
        marks = _mark_events(ax, events, stages, scale)
        ax.set_yticks(range(len(rows)), rows)
        ax.invert_yaxis()
        ax.spines[["top", "right"]].set_visible(True)
        ax.set_xlim(lo / scale, (hi + (hi - lo) * 0.01) / scale)
        ax.set_xlabel(f"time ({unit})")
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(title)
        drawn = set(one["kind"])
        legend = [Patch(color=COLORS[color], label=text) for kinds, color, text in (
            ({"transfer"}, "transfer", "copy transfer"), ({"fill"}, "fill", "copy in flight (slot filling)"),
            ({"use", "compute"}, "use", "compute (slot in use)"), ({"wait_full"}, "wait_full", "wait: full barrier"),
            ({"wait_empty"}, "wait_empty", "wait: empty barrier"),
            ({"epilogue", "store"}, "epilogue", "epilogue / TMA store")) if drawn & kinds]
        legend += marks
        ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)),
                  ncols=min(len(legend), 4), fontsize=9.5, frameon=False)
    return fig


def _mark_events(ax: Axes, events: pd.DataFrame, stages: Sequence[int], scale: int) -> list[Any]:
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


# Bands of one CTA row in the chip layout: (offset from the row centre, height).
_BANDS = {"copies": (-0.28, 0.2), "compute": (-0.06, 0.2), "wait_full": (0.13, 0.13), "wait_empty": (0.29, 0.13)}
_BAND_NAMES = {"copies": "copies", "compute": "compute", "wait_full": "consumer waits", "wait_empty": "producer waits"}


def _chip_gantt(spans: pd.DataFrame, events: pd.DataFrame, title: str, window: tuple[float, float] | None,
                max_ctas: int) -> Figure:
    """One row per CTA, three bands each: copies (TMA), compute (tensor core), waits."""
    keys = cta_keys(spans)
    shown = keys[:max_ctas]
    lo, hi = window if window is not None else (0.0, float(spans["end_ps"].max()) if len(spans) else 1.0)
    scale, unit = time_unit(hi - lo)
    view = _in_window(spans, lo, hi)
    flips = events[events["time_ps"].between(lo, hi)] if not events.empty else events
    if not flips.empty and flips[flips["kind"] == "flip_full"].groupby(["sm", "cta"]).size().max() > _MAX_FLIPS:
        flips = flips[flips["kind"] == "race"]  # too many to tell apart: zoom in to see them
    with styled() as plt:
        fig, ax = plt.subplots(figsize=(12, 2.2 + 0.95 * len(shown)), layout="constrained")
        for row, (sm, cta) in enumerate(shown):
            part = view[(view["sm"] == sm) & (view["cta"] == cta)]
            _cta_row(ax, part, row, scale)
            _cta_flips(ax, flips, sm, cta, row, scale)
        for row in range(1, len(shown)):  # solid between SMs, dotted between CTAs of one SM
            same_sm = shown[row][0] == shown[row - 1][0]
            ax.axhline(row - 0.5, color="#999999" if not same_sm else "#CCCCCC", linewidth=1.0 if not same_sm else 0.6,
                       linestyle=":" if same_sm else "-")
        _cluster_marks(ax, events, shown, lo, hi, scale)
        ax.set_yticks(range(len(shown)), _row_labels(events, shown))
        ax.set_ylim(len(shown) - 0.5, -0.5)
        _band_key(ax, len(shown))
        ax.set_xlim(lo / scale, (hi + (hi - lo) * 0.01) / scale)
        ax.set_xlabel(f"time ({unit})")
        ax.grid(axis="x", alpha=0.3)
        more = f"first {len(shown)} of {len(keys)} CTAs" if len(shown) < len(keys) else ""
        ax.set_title("\n".join(t for t in (title, more) if t))
        ax.legend(handles=_chip_legend(view, flips), loc="upper center", bbox_to_anchor=(0.5, -0.09 - 0.5 / (
            len(shown) + 2)), ncols=4, fontsize=9, frameon=False)
    return fig


def _row_labels(events: pd.DataFrame, shown: Sequence[tuple[int, int]]) -> list[str]:
    """"SM s · CTA c", and the CTA's cluster and rank in it when it ran in a cluster."""
    joined = events[events["kind"] == "cluster"] if not events.empty else events
    ranks = {(int(r.sm), int(r.cta)): (str(r.name).removeprefix("cluster "), int(r.stage))
             for r in joined.itertuples()}
    return [f"SM {sm} · CTA {cta}" + (f"\ncluster {ranks[sm, cta][0]}, rank {ranks[sm, cta][1]}"
                                      if (sm, cta) in ranks else "") for sm, cta in shown]


def _cluster_marks(ax: Axes, events: pd.DataFrame, shown: Sequence[tuple[int, int]], lo: float, hi: float,
                   scale: float) -> None:
    """A multicast copy is drawn once, on its issuer's copies band, with an arrow to each other
    CTA it landed in; a peer's remote arrival on an empty barrier is a diamond on the waits band."""
    if events.empty:
        return
    rows = {key: row for row, key in enumerate(shown)}
    mine = events[events["time_ps"].between(lo, hi)]
    casts = mine[mine["kind"] == "multicast"]
    sources = casts["name"].str.extract(r"sm(\d+)\.cta(\d+)").astype(float)
    arrows = 0
    for (sm, cta, t), (src_sm, src_cta) in zip(casts[["sm", "cta", "time_ps"]].itertuples(index=False),
                                                sources.itertuples(index=False), strict=True):
        src, dst = rows.get((int(src_sm), int(src_cta))), rows.get((int(sm), int(cta)))
        if src is None or dst is None or src == dst or arrows >= _MAX_ARROWS:
            continue
        arrows += 1
        y0, y1 = src + _BANDS["copies"][0], dst + _BANDS["copies"][0]
        ax.annotate("", xy=(t / scale, y1 + (0.12 if y1 < y0 else -0.12)), xytext=(t / scale, y0),
                    arrowprops={"arrowstyle": "-|>", "color": COLORS["transfer"], "lw": 0.8, "alpha": 0.8})
    remote = mine[mine["kind"] == "remote_arrive"]
    for (sm, cta), times in remote.groupby(["sm", "cta"])["time_ps"]:
        row = rows.get((int(sm), int(cta)))
        if row is not None:
            ax.plot(times / scale, [row + _BANDS["wait_empty"][0]] * len(times), "D", color=COLORS["remote"],
                    markersize=3, linestyle="none")


def _cta_row(ax: Axes, part: pd.DataFrame, row: int, scale: float) -> None:
    kind = part["kind"]
    for kinds, band, color, hatch in ((("transfer",), "copies", COLORS["transfer"], None),
                                      (("store",), "copies", COLORS["store"], ".."),
                                      (("compute",), "compute", COLORS["compute"], None),
                                      (("epilogue",), "compute", COLORS["epilogue"], None),
                                      (("wait_full",), "wait_full", COLORS["wait_full"], None),
                                      (("wait_empty",), "wait_empty", COLORS["wait_empty"], None)):
        offset, height = _BANDS[band]
        alpha = 0.85 if band.startswith("wait") else 1.0  # waits are context: lighter than the work
        band_spans = part[kind.isin(kinds)]
        _bars(ax, band_spans, row + offset, height, color, scale, hatch=hatch, dense=len(band_spans) > _DENSE,
              alpha=alpha)


def _cta_flips(ax: Axes, events: pd.DataFrame, sm: int, cta: int, row: int, scale: float) -> None:
    """Full-barrier flips above the copies band (data landed), empty-barrier flips under the
    waits (slot released), races as red crosses on the compute band."""
    if events.empty:
        return
    mine = events[(events["sm"] == sm) & (events["cta"] == cta)]
    full = mine[mine["kind"] == "flip_full"]["time_ps"] / scale
    empty = mine[mine["kind"] == "flip_empty"]["time_ps"] / scale
    races = mine[mine["kind"] == "race"]["time_ps"] / scale
    size = 3.5 if len(full) < 120 else 2.2
    ax.plot(full, [row - 0.44] * len(full), "v", color=COLORS["flip"], markersize=size, linestyle="none")
    ax.plot(empty, [row + 0.43] * len(empty), "^", color=COLORS["flip"], markersize=size * 0.8, linestyle="none",
            markerfacecolor="white", markeredgewidth=0.6)
    ax.plot(races, [row] * len(races), "x", color=COLORS["race"], markersize=8, markeredgewidth=2, linestyle="none",
            clip_on=False)


def _band_key(ax: Axes, rows: int) -> None:
    """Name the bands of the first row on the right-hand axis, once."""
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks([offset for offset, _ in _BANDS.values()], list(_BAND_NAMES.values()), fontsize=8,
                     color="#555555")
    right.tick_params(length=0)
    right.spines[["top", "right"]].set_visible(False)


def _chip_legend(spans: pd.DataFrame, events: pd.DataFrame) -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    drawn = set(spans["kind"])
    handles: list[Any] = [Patch(color=COLORS[kind], label=text) for kind, text in (
        ("transfer", "copy transfer (TMA)"), ("compute", "compute (tensor core)"),
        ("wait_full", "consumer waits: full barrier"), ("wait_empty", "producer waits: empty barrier"))
        if kind in drawn]
    if drawn & {"epilogue", "store"}:
        handles.append(Patch(color=COLORS["epilogue"], label="epilogue / TMA store"))
    kinds = set(events["kind"]) if not events.empty else set()
    if "flip_full" in kinds:
        handles.append(Line2D([], [], marker="v", linestyle="none", color=COLORS["flip"], label="full barrier flips"))
    if "flip_empty" in kinds:
        handles.append(Line2D([], [], marker="^", linestyle="none", color=COLORS["flip"], markerfacecolor="white",
                              label="empty barrier flips"))
    if (events["kind"] == "race").any():
        handles.append(Line2D([], [], marker="x", linestyle="none", color=COLORS["race"], markeredgewidth=2,
                              label="race: read before data landed"))
    if (events["kind"] == "multicast").any():
        handles.append(Line2D([], [], marker=">", color=COLORS["transfer"], lw=0.8,
                              label="multicast slice to a peer CTA"))
    if (events["kind"] == "remote_arrive").any():
        handles.append(Line2D([], [], marker="D", linestyle="none", color=COLORS["remote"], markersize=4,
                              label="remote arrival (peer released a slot)"))
    return handles


# ------------------------------------------------------------------------------ slot occupancy


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
    x = np.r_[grid, end] / scale
    filling, held = np.r_[filling, filling[-1]], np.r_[held, held[-1]]
    ax.fill_between(x, 0, filling, step="post", color=COLORS["fill"], label="copy in flight (filling)",
                    edgecolor=COLORS["transfer"], linewidth=0.5)
    ax.fill_between(x, filling, held, step="post", color=COLORS["use"], alpha=0.8,
                    label="data landed (waiting or in use)", linewidth=0)
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
    for k, name in enumerate(names):
        link = bw[bw["link"] == name]
        # L2 drawn wider: a stream reads everything from HBM, and L2's line would hide under it.
        _load_line(ax, link["time_ps"], link["gbytes_per_s"], end, scale, divisor, SERIES[k], name, bins,
                   width=2.6 if name == "L2" else 1.6)
        _capacity(ax, link, divisor, SERIES[k], f"{name} capacity")
    ax.set_title("shared links: L2 and HBM", fontsize=11, loc="left")
    ax.set_ylabel(f"bandwidth ({rate})")


def _ports_panel(ax: Axes, ports: pd.DataFrame, end: float, scale: float, bins: int) -> None:
    divisor, rate = _rate_unit(ports)
    times, mean, top = port_summary(ports)
    _load_line(ax, times, top, end, scale, divisor, SERIES[3], "busiest SM port", bins, fill=False)
    _load_line(ax, times, mean, end, scale, divisor, SERIES[2], "mean over SM ports", bins)
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


# --------------------------------------------------------------------------------------- files


def save(fig: Figure, path: Path, *, svg: bool = False) -> list[Path]:
    """Write ``path`` (PNG; SVG only if it ends in .svg) and, if asked, an SVG beside it; closes
    the figure."""
    plt = pyplot()
    path = Path(path)
    if not path.suffix:  # what matplotlib would write: say so
        path = path.with_name(path.name + ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    written = [path]
    if path.suffix.lower() == ".svg":
        fig.savefig(path)
    else:
        fig.savefig(path, dpi=150)
        if svg:
            fig.savefig(path.with_suffix(".svg"))
            written.append(path.with_suffix(".svg"))
    plt.close(fig)
    return written


