"""Gantt charts of a run, from its span and event tables: one CTA's lanes and barrier phase
flips, or the chip's CTAs as rows (copies, compute, consumer and producer waits), with cluster
arrows and the window the figure zooms into."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tmasim.review.attention_gantt import attention_gantt, attention_window, is_attention
from tmasim.review.plot_style import COLORS, styled, time_unit
from tmasim.values import format as fmt

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_DENSE = 150  # more bars than this in a row: no white separators
_LABELLED = 32  # tile numbers on the bars only when this few tiles are in view
_MAX_ARROWS = 80  # multicast arrows drawn at most (the first ones in the window)
_MAX_FLIPS = 300  # more phase flips than this in a CTA's row merge into a black line: left out


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
    if is_attention(spans):
        return _attention(spans, title, window, tiles, note)
    if window is None and tiles is not None:
        window = first_tiles_window(spans, tiles)
        which = f"the first {tiles} {step_noun(spans)} of each CTA: "
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


def _attention(spans: pd.DataFrame, title: str, window: tuple[float, float] | None, blocks: int | None,
               note: str) -> Figure:
    """An attention run: its first CTA's copies, tensor cores, softmax units and warpgroups, by
    default over its first K/V blocks (``blocks`` of them with ``tiles=``)."""
    which = "" if window is not None else f"the first {blocks or 6} K/V blocks of one CTA: "
    window = window if window is not None else attention_window(spans, blocks or 6)
    start, stop = fmt.time(window[0], unicode=True, zero="0"), fmt.time(window[1], unicode=True)
    zoom = f"zoomed to {which}{start} to {stop} of {fmt.time(float(spans['end_ps'].max()), unicode=True)}"
    keys = cta_keys(spans)
    if keys:  # one CTA is drawn, lane by lane: say which, and what it stands for
        sm = keys[0][0]
        note = note.replace(f"{ROWS_STAND_FOR} (", f"the CTA drawn (SM {sm}) stands for its class of identical SMs\n(")
        zoom = zoom.replace("of one CTA:", f"of one CTA (SM {sm}):")
    return attention_gantt(spans, "\n".join(t for t in (title, zoom, note) if t), window)


ROWS_STAND_FOR = "each row stands for a class of identical SMs"


def representatives_note(stats: Mapping[str, Any]) -> str:
    """What the rows of an aggregated run are: one SM standing for each class of identical SMs."""
    classes, sms = int(stats.get("sm_classes") or 0), int(stats.get("sms_used") or 0)
    if not classes or classes >= sms:
        return ""
    return (f"{ROWS_STAND_FOR} ({sms} SMs simulated as {classes}; "
            "run.aggregate = false draws them all)")


def cta_keys(spans: pd.DataFrame) -> list[tuple[int, int]]:
    """The (sm, cta) pairs that have spans, in SM order."""
    if spans.empty:
        return []
    pairs = spans[["sm", "cta"]].drop_duplicates().sort_values(["sm", "cta"])
    return [(int(sm), int(cta)) for sm, cta in pairs.itertuples(index=False)]


def step_noun(spans: pd.DataFrame) -> str:
    """What one ring step of the run is called: a GEMM's (its work units end in an epilogue) is a
    k-step, a tile pipeline's a tile."""
    return "k-steps" if "epilogue" in set(spans["kind"]) else "tiles"


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
        _bars(ax, one[kind.isin(WORKSPACE)], 0, 0.76, COLORS["workspace"], scale, hatch="//", dense=dense)
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
        _bars(ax, one[kind == "wait_fixup"], base + 1, 0.76, COLORS["wait_fixup"], scale, dense=dense)
        _bars(ax, one[kind == "wait_empty"], base + 2, 0.76, COLORS["wait_empty"], scale, dense=dense)
        marks = _mark_events(ax, events, stages, scale)
        marks += _mark_stuck(ax, one, events, stages, scale)
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
            ({"epilogue", "store"}, "epilogue", "epilogue / TMA store"), *_SPLIT_LEGEND) if drawn & kinds]
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


def _mark_stuck(ax: Axes, one: pd.DataFrame, events: pd.DataFrame, stages: Sequence[int], scale: int) -> list[Any]:
    """A run that stopped (deadlock): each wait still open at the stop, marked on its row with the
    barrier it waits on, each slot computed but never released (its empty barrier never flipped
    after its last use), drawn held to the stop and labelled so, and each slot still filling at
    the stop (its full barrier never flipped) labelled so. Returns legend handles."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if events.empty or len(one) == 0:
        return []
    first = events[(events["sm"] == one["sm"].iloc[0]) & (events["cta"] == one["cta"].iloc[0])]
    stuck = first[first["kind"] == "stuck"]
    if stuck.empty:
        return []
    stop = float(stuck["time_ps"].max())
    base = len(stages) + 1
    for _, wait in stuck.iterrows():
        row = base + 2 if ".empty[" in wait["name"] else base + 1
        barrier = str(wait["name"]).rsplit(".", 1)[-1]
        ax.plot([stop / scale], [row], marker="<", color=COLORS["race"], markersize=11, clip_on=False)
        ax.text(stop / scale, row, f"still waiting on {barrier}  ", ha="right", va="center", fontsize=10,
                color="black", fontweight="bold")
    handles: list[Any] = [Line2D([], [], marker="<", linestyle="none", color=COLORS["race"],
                                 label="a wait still open when the run stopped")]
    flips = first[first["kind"] == "flip_empty"]
    full_flips = first[(first["kind"] == "flip_full") & (first["time_ps"] >= stop)]
    held = False
    for k, s in enumerate(stages, start=1):
        filling = one[(one["lane"] == "slot") & (one["stage"] == s) & (one["kind"] == "fill") & (one["end_ps"] >= stop)]
        if len(filling) and not (full_flips["stage"] == s).any():  # issued, its full barrier never flipped
            start = float(filling["start_ps"].min())
            ax.text((start + stop) / 2 / scale, k, f"never ready: full[{s}] never flipped", ha="center", va="center",
                    fontsize=10)
        uses = one[(one["lane"] == "slot") & (one["stage"] == s) & (one["kind"] == "use")]
        if uses.empty:
            continue
        last = float(uses["end_ps"].max())
        refilled = (one["lane"] == "slot") & (one["stage"] == s) & (one["kind"] == "fill") & (one["start_ps"] >= last)
        if last >= stop or (flips[flips["stage"] == s]["time_ps"] >= last).any() or refilled.any():
            continue
        held = True
        ax.barh(k, (stop - last) / scale, left=last / scale, height=0.76, color="#BBBBBB", hatch="xx",
                edgecolor="#777777", linewidth=0)
        ax.text((last + stop) / 2 / scale, k, "computed, never released", ha="center", va="center", fontsize=10)
    if held:
        handles.append(Patch(facecolor="#BBBBBB", hatch="xx", edgecolor="#777777",
                             label="slot computed, never released (empty barrier never flipped)"))
    return handles


# A split tile's reduction (split-K, stream-K; tmasim.workloads.gemm_split): its partial's moves,
# drawn with the copies, and a peer's wait for the partials before it, with the consumer's waits.
WORKSPACE = ("workspace_read", "workspace_write")
_SPLIT_LEGEND = (({"workspace_read", "workspace_write"}, "workspace", "split tile's partial: workspace read / write"),
                 ({"wait_fixup"}, "wait_fixup", "wait: peers' partials (split tile)"))

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
                                      (WORKSPACE, "copies", COLORS["workspace"], "//"),
                                      (("wait_fixup",), "wait_full", COLORS["wait_fixup"], None),
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
    handles += [Patch(color=COLORS[color], label=text) for kinds, color, text in _SPLIT_LEGEND if drawn & kinds]
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
