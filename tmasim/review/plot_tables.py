"""Comparison figures over sweep tables (one row per configuration): stage sweep, stall
breakdown, heatmap. Re-exported by :mod:`tmasim.review.plots`; built from table columns only.

What the columns mean (names, units, row labels, the bound and the knee) is in
:mod:`tmasim.review.columns`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tmasim import names
from tmasim.review.columns import (
    bound_time_ns,
    failure_text,
    field_label,
    is_rate,
    knee,
    measure,
    numeric,
    reference_curves,
    require,
    row_label,
    scenario_prefix,
    value_text,
    varied_fields,
    with_status,
    wrapped,
)
from tmasim.review.plot_style import COLORS, SERIES, styled
from tmasim.values import format as fmt

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

LOG_X_SPAN, LOG_X_MAX_POINTS = 16, 16  # a stage sweep's x on a log scale: values spanning 16x, each labelled
FLAT_SPREAD = 1e-3  # a heat map whose points all lie within 0.1% says so instead of colouring noise

# -------------------------------------------------------------------------------- stage sweep


def stage_sweep(table: pd.DataFrame, x: str = "pipeline.stages", y: str = "makespan_ns", title: str = "") -> Figure:
    """Time (or throughput) against stages, with the bound, the knee and the residency cost.

    Top: ``y`` for each value of the other varied fields (one line each, e.g. per tile shape),
    the closed form (◇) and the bound (dashed: a lower bound on time, an upper bound on
    throughput) where the table has them, and a ring on each line's knee (:func:`tmasim.names.term`:
    the first stage count within 1% of that line's best): past it, more stages stop helping.
    With one line, the background says which term binds at each x. Rows whose status is not "ok"
    are marked ✕ on the axis (in the line's colour) with the reason ("does not fit (SMEM)"), never dropped silently.
    Bottom: what the stages cost: shared memory per CTA (left axis) and CTAs per SM (right).
    """
    table = with_status(table)
    require(table, [x, y])
    groups = _series(table, x)
    xmap = _x_positions(table[x])
    with styled() as plt:
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, height_ratios=[3, 1.4], figsize=(10, 7.2),
                                          layout="constrained")
        divisor, ylabel = measure(y, table.loc[table["status"] == "ok", y])
        colors = dict(zip([label for label, _ in groups], SERIES, strict=False))
        knees = _knee_applies(table, x)
        for k, (label, rows) in enumerate(groups):
            # earlier lines wider, so where lines meet (a plateau) each still shows under the next
            _sweep_line(top, rows, x, y, xmap, divisor, colors[label], label, annotate=len(groups) == 1,
                        under=len(groups) - 1 - k, knee_on=knees)
        _mark_failures(top, table, x, xmap, groups, colors)
        if len(groups) == 1:
            _binding_background(top, groups[0][1], x, xmap)
        top.set_ylabel(ylabel)
        top.set_ylim(0, top.get_ylim()[1] * 1.12)
        top.grid(alpha=0.3)
        top.legend(handles=_sweep_legend(top, table, y, knees), fontsize=9, loc="best", framealpha=0.95)
        _residency_panel(bottom, groups, x, xmap, colors)
        _x_axis(bottom, table[x], x, xmap)
        scenario = f"{table['scenario'].dropna().iloc[0]}: " if "scenario" in table and table[
            "scenario"].notna().any() else ""
        top.set_title(title or f"{scenario}{ylabel.split(' (')[0]} against {field_label(x)}")
    return fig


def _knee_applies(table: pd.DataFrame, x: str) -> bool:
    """Whether a line along ``x`` has a knee: not where ``x`` changes the work itself (a problem
    field, tmasim.inputs.field_roles: K, the tile count), whose points are other problems, not
    costlier ways to do one."""
    from tmasim.inputs.field_roles import PROBLEM, role

    kinds = table["workload"].dropna() if "workload" in table.columns else pd.Series(dtype=object)
    try:
        return role(x, str(kinds.iloc[0]) if not kinds.empty else None) != PROBLEM
    except KeyError:  # a column that is no scenario field: nothing says it is a problem
        return True


def _series(table: pd.DataFrame, x: str) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per combination of the varied fields other than ``x``, in table order."""
    others = [f for f in varied_fields(table) if f != x]
    if not others:
        return [("", table)]
    return [(row_label(rows.iloc[0], others), rows) for _, rows in table.groupby(others, sort=False, dropna=False)]


def _x_positions(values: pd.Series) -> dict[Any, float]:
    """Numbers stay where they are, on a log scale where a few of them span 16x or more (K of
    64 to 4096: the small ones would sit on top of each other); anything else (tile shapes) gets
    evenly spaced slots."""
    if numeric(values):
        unique = [v for v in values.unique() if not _missing(v)]
        if 2 <= len(unique) <= LOG_X_MAX_POINTS and min(unique) > 0 and max(unique) >= LOG_X_SPAN * min(unique):
            return {v: math.log2(float(v)) for v in unique}
        return {v: float(v) for v in values.unique()}
    return {v: float(i) for i, v in enumerate(dict.fromkeys(values))}


def _x_axis(ax: Axes, values: pd.Series, x: str, xmap: dict[Any, float]) -> None:
    from matplotlib.ticker import MaxNLocator

    positions = sorted(xmap.values())
    if not numeric(values):
        ax.set_xticks(list(xmap.values()), [value_text(v) for v in xmap])
    elif len(positions) <= 16:
        ax.set_xticks(positions, [value_text(v) for v in sorted(xmap)])
    elif all(float(v).is_integer() for v in values):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    pad = (positions[-1] - positions[0]) / max(len(positions) - 1, 1) / 2 if len(positions) > 1 else 0.5
    ax.set_xlim(positions[0] - pad, positions[-1] + pad)
    log = numeric(values) and any(position != float(v) for v, position in xmap.items())  # _x_positions
    ax.set_xlabel(field_label(x) + (" (log scale)" if log else ""))


def _sweep_line(ax: Axes, rows: pd.DataFrame, x: str, y: str, xmap: dict[Any, float], divisor: float, color: str,
                label: str, *, annotate: bool, under: int = 0, knee_on: bool = True) -> None:
    """The simulated line, its closed form and bound, and a ring on its knee (named in the
    legend, or next to the ring when it is the only line; none with ``knee_on`` False); ``under``:
    how many lines are drawn over it, each making it wider so that it shows around them where
    they coincide."""
    ok = rows[rows["status"] == "ok"]
    ok = ok.assign(_x=ok[x].map(xmap)).sort_values("_x")
    if ok.empty:
        return
    i = knee(ok["_x"].tolist(), ok[y].tolist(), higher_is_better=is_rate(y)) if knee_on else None
    at = None if i is None else f"{value_text(ok[x].iloc[i])} {field_label(x).split(' (')[0]}"
    name = label or "simulated"
    if at is not None and not annotate:
        name += f"  (knee: {at})"
    ax.plot(ok["_x"], ok[y] / divisor, marker="o", color=color, linewidth=2.2 + 1.6 * under, markersize=6 + 2 * under,
            label=name, zorder=3)
    for values, curve in reference_curves(ok, y):
        if curve == "closed form":
            ax.plot(ok["_x"], values / divisor, linestyle="none", marker="D", markersize=9, markerfacecolor="none",
                    markeredgecolor=color, markeredgewidth=1.3, zorder=4)
        else:
            ax.plot(ok["_x"], values / divisor, linestyle="--", color=color, linewidth=1.4, alpha=0.8)
    if i is None:
        return
    kx, ky = float(ok["_x"].iloc[i]), float(ok[y].iloc[i]) / divisor
    ax.plot([kx], [ky], marker="o", markersize=17, markerfacecolor="none", markeredgecolor=color,
            markeredgewidth=2.2, zorder=5)
    if annotate:
        ax.annotate(f"knee: {at}", (kx, ky), xytext=(14, 18),
                    textcoords="offset points", fontsize=10, color=color, fontweight="bold",
                    arrowprops={"arrowstyle": "-", "color": color, "linewidth": 0.8})


def knee_x(table: pd.DataFrame, x: str = "pipeline.stages", y: str = "makespan_ns") -> dict[str, Any]:
    """Per line of :func:`stage_sweep`, the x it rings: its knee (along x: the first within 1% of its
    best); None along a problem field (:func:`_knee_applies`)."""
    out = {}
    table = with_status(table)
    knees = _knee_applies(table, x)
    for label, rows in _series(table, x):
        ok = rows[rows["status"] == "ok"].sort_values(x)
        i = knee(ok[x].tolist(), ok[y].tolist(), higher_is_better=is_rate(y)) if knees else None
        out[label] = None if i is None else ok[x].iloc[i]
    return out


def _mark_failures(ax: Axes, table: pd.DataFrame, x: str, xmap: dict[Any, float],
                   groups: Sequence[tuple[str, pd.DataFrame]], colors: dict[str, str]) -> None:
    """Per failed row a hollow ✕ on the x axis in its line's colour, over a hatched grey band the
    height of the axes (a column without a result, never a point of a line); the reason once per x."""
    from matplotlib.transforms import blended_transform_factory

    where = blended_transform_factory(ax.transData, ax.transAxes)
    step = _x_step(xmap)
    for value in sorted({v for _, rows in groups for v in rows.loc[rows["status"] != "ok", x]}, key=lambda v: xmap[v]):
        failed = [(label, rows[(rows[x] == value) & (rows["status"] != "ok")]) for label, rows in groups]
        failed = [(label, rows) for label, rows in failed if len(rows)]
        ax.axvspan(xmap[value] - step * 0.2, xmap[value] + step * 0.2, color="#DDDDDD", alpha=0.5, hatch="//",
                   linewidth=0, zorder=0)
        for k, (label, _) in enumerate(failed):
            dx = (k - (len(failed) - 1) / 2) * step * 0.12
            ax.plot([xmap[value] + dx], [0.04], marker="X", markersize=11, color=colors[label], transform=where,
                    clip_on=False, linestyle="none", markerfacecolor="white", markeredgewidth=1.5)
        first = failed[0][1]
        reason = failure_text(first["error"].iloc[0], first["status"].iloc[0])
        ax.text(xmap[value], 0.09, reason, transform=where, rotation=90, fontsize=9, color=COLORS["race"],
                ha="center", va="bottom")


def _x_step(xmap: dict[Any, float]) -> float:
    positions = sorted(set(xmap.values()))
    return min((b - a for a, b in zip(positions, positions[1:], strict=False)), default=1.0)


def _binding_background(ax: Axes, rows: pd.DataFrame, x: str, xmap: dict[Any, float]) -> None:
    """Shade runs of equal ``binding`` and name the term: where more stages help, and where not."""
    from matplotlib.transforms import blended_transform_factory

    ok = rows[rows["status"] == "ok"].assign(_x=lambda f: f[x].map(xmap)).sort_values("_x")
    column = next((c for c in ("binding", "littles_law_binding") if c in ok and ok[c].notna().any()), None)
    if ok.empty or column is None:
        return
    xs, binding = ok["_x"].tolist(), [names.bound(b) for b in ok[column]]
    half = _x_step(xmap) / 2
    where = blended_transform_factory(ax.transData, ax.transAxes)
    start = shade = 0
    for i in range(1, len(xs) + 1):
        if i == len(xs) or binding[i] != binding[start]:
            left = xs[start] - (xs[start] - xs[start - 1]) / 2 if start else xs[0] - half
            right = xs[i - 1] + (xs[i] - xs[i - 1]) / 2 if i < len(xs) else xs[-1] + half
            ax.axvspan(left, right, color=("#EEF1F6", "#F7F7F7")[shade % 2], zorder=0)
            shade += 1
            ax.text((left + right) / 2, 0.97, f"{binding[start]} {names.binds(binding[start])}", transform=where,
                    ha="center", va="top", fontsize=9.5, color="#555555", style="italic")
            if start:
                ax.axvline(left, color="#BBBBBB", linewidth=0.8, zorder=0)
            start = i


def _sweep_legend(ax: Axes, table: pd.DataFrame, y: str, knees: bool = True) -> list[Any]:
    """The lines, then what the marks mean (only the marks drawn)."""
    from matplotlib.lines import Line2D

    handles = list(ax.get_legend_handles_labels()[0])
    ink = "#444444"
    curves = {name for _, name in reference_curves(table[table["status"] == "ok"], y)}
    if curves - {"closed form"}:
        kind = "upper bound" if is_rate(y) else "lower bound"
        handles.append(Line2D([], [], color=ink, linestyle="--", label=kind))
    if "closed form" in curves:
        handles.append(Line2D([], [], color=ink, linestyle="none", marker="D", markerfacecolor="none",
                              label="closed form"))
    if knees:
        handles.append(Line2D([], [], color=ink, linestyle="none", marker="o", markersize=13, markerfacecolor="none",
                              markeredgewidth=2, label=f"{names.term('knee')[:-1]} of its line)"))
    if (table["status"] != "ok").any():
        handles.append(Line2D([], [], color=ink, linestyle="none", marker="X", markersize=9, label="did not run"))
    return handles


def _residency_panel(ax: Axes, groups: Sequence[tuple[str, pd.DataFrame]], x: str, xmap: dict[Any, float],
                     colors: dict[str, str]) -> None:
    """Shared memory per CTA (solid, left) and CTAs per SM (dotted, right), per line."""
    from matplotlib.ticker import MaxNLocator

    right = ax.twinx()
    right.spines["right"].set_visible(True)
    top = 1.0
    # CTAs per SM are small whole numbers, so lines often coincide: each line's triangles are
    # dodged sideways (a tenth of the closest x spacing apart) so that none hides another.
    positions = sorted(set(xmap.values()))
    spacing = min((b - a for a, b in zip(positions, positions[1:], strict=False)), default=1.0)
    for i, (label, rows) in enumerate(groups):
        ok = rows[rows["status"] == "ok"].assign(_x=lambda f: f[x].map(xmap)).sort_values("_x")
        color = colors[label]
        if "smem_per_cta_bytes" in ok:
            ax.plot(ok["_x"], ok["smem_per_cta_bytes"] / 1024, marker="s", color=color, linewidth=1.8, markersize=5)
        if "ctas_per_sm" in ok and ok["ctas_per_sm"].notna().any():
            dodge = (i - (len(groups) - 1) / 2) * 0.1 * spacing
            right.plot(ok["_x"] + dodge, ok["ctas_per_sm"], linestyle=":", marker="^", color=color, linewidth=1.8,
                       markersize=6)
            top = max(top, float(ok["ctas_per_sm"].max()))
    ax.set_ylabel("SMEM per CTA\n(KiB, ■ solid)", fontsize=10)
    right.set_ylabel("CTAs per SM\n(▲ dotted)", fontsize=10)
    ax.set_ylim(bottom=0)
    right.set_ylim(0, top * 1.15 + 0.1)
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


# ---------------------------------------------------------------------------- stall breakdown

PARTS = {  # part -> (legend text, colour)
    "compute": ("compute (tensor core busy, mean per SM)", COLORS["compute"]),
    "tail": ("last-wave tail (busiest SM's extra compute)", "#8C8C8C"),
    # the bound terms, named as tmasim.names.BOUNDS names them
    "copy": (f"{names.bound('copy')} bound (copy engine)", "#4C72B0"),
    "l2": (f"{names.bound('l2')} bound (bandwidth)", "#64B5CD"),
    "hbm": (f"{names.bound('hbm')} bound (bandwidth)", "#2A4D80"),
    "port": (f"{names.bound('port')} bound", "#7F9FD1"),
    "tma": (f"{names.bound('tma')} bound (TMA unit)", "#A58BD1"),
    "smem": (f"{names.bound('smem')} bound (MMA operand reads + TMA writes)", "#937860"),
    "latency": (f"{names.bound('latency')} bound (too few bytes in flight)", COLORS["wait_empty"]),
    "issue": (f"{names.bound('issue')} bound", COLORS["epilogue"]),
    "chain": (f"{names.bound('chain')} bound (MMAs and epilogues in turn)", "#CCB974"),
    "waits": ("not overlapped: fill, drain, barrier waits", COLORS["wait_full"]),
    "launch": ("launch, prologue and end (gpu.launch_overhead)", "#404040"),
}


def decompose(row: pd.Series) -> dict[str, float]:
    """Where one configuration's makespan went, in ns; the parts add up to ``makespan_ns``.

    Three lower bounds, each at least the one before, cut the makespan T into layers:
    ``compute`` = the tensor cores' mean busy time per SM (``compute_busy_ns / sms_used``);
    ``tail`` = up to the busiest SM's compute (``compute_bound_ns``: work that does not divide
    evenly into waves); the binding term's layer = up to the run's lower bound (``bound_ns``;
    tiles: ``interval_bound_ns × tiles``; stream: bytes / Little's-law bandwidth), named by
    ``binding`` (copy, L2, HBM, SM port, TMA requests, round trip, TMA issue, consumer chain:
    :data:`tmasim.names.BOUNDS`);
    ``waits`` = the rest of T, time no bound explains: filling and draining the pipeline and
    stalls on barriers; of it, ``launch`` where the row has a launch cost (``launch_overhead_ns``:
    the launch, prologue and end the makespan adds to the CTAs' work, B200's preset). Each cut is
    clipped to [previous cut, T], so the parts are never negative and always sum to T.
    """
    total = float(row["makespan_ns"])
    sms = float(row.get("sms_used") or 1)
    mean_compute = float(row.get("compute_busy_ns") or 0.0) / sms
    floor = row.get("compute_bound_ns")
    if floor is None or _missing(floor):
        floor = float(row.get("compute_term_ns") or 0.0) * float(row.get("tiles") or 0) or mean_compute
    bound = bound_time_ns(row.to_frame().T)
    bound_ns = float(bound[0].iloc[0]) if bound is not None and not _missing(bound[0].iloc[0]) else 0.0
    cuts = [0.0]
    for value in (mean_compute, float(floor), bound_ns, total):
        cuts.append(min(max(value, cuts[-1]), total))
    named = [row.get(c) for c in ("littles_law_binding", "binding") if not _missing(row.get(c))]
    binding = names.bound_key(named[0]) if named else "latency"
    binding = binding if binding in PARTS else "latency"
    parts = {"compute": cuts[1] - cuts[0], "tail": cuts[2] - cuts[1], binding: cuts[3] - cuts[2],
             "waits": cuts[4] - cuts[3]}
    if binding == "compute":  # the bound is the compute floor: nothing between them
        parts = {"compute": cuts[1], "tail": cuts[2] - cuts[1] + cuts[3] - cuts[2], "waits": cuts[4] - cuts[3]}
    launch = row.get("launch_overhead_ns")
    if not _missing(launch) and launch:  # the launch's own cost: no bound counts it, the makespan does
        parts["launch"] = min(float(launch), parts["waits"])
        parts["waits"] -= parts["launch"]
    return parts


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def stall_breakdown(table: pd.DataFrame, title: str = "", *, shares: bool = False) -> Figure:
    """One stacked horizontal bar per configuration: where its time went (see :func:`decompose`).

    Bars are in time (the bar's length is the makespan, printed at its end) or, with
    ``shares=True``, in percent of each makespan. Rows that did not run are listed with the
    reason instead of a bar.
    """
    table = with_status(table)
    require(table, ["makespan_ns"])
    fields = varied_fields(table)
    labels = [row_label(row, fields) for _, row in table.iterrows()]
    ok = table["status"] == "ok"
    divisor, xlabel = measure("makespan_ns", table.loc[ok, "makespan_ns"])
    with styled() as plt:
        fig, ax = plt.subplots(figsize=(11, 1.9 + 0.48 * len(table)), layout="constrained")
        used: dict[str, None] = {}
        for i, (_, row) in enumerate(table.iterrows()):
            if row["status"] != "ok":
                ax.text(0.005, i, failure_text(row.get("error"), row.get("status")), transform=_row_transform(ax),
                        va="center", fontsize=9.5, color=COLORS["race"], style="italic")
                continue
            _stacked_bar(ax, i, decompose(row), float(row["makespan_ns"]), divisor, shares, used)
        ax.set_yticks(range(len(table)), labels)
        ax.set_ylim(len(table) - 0.5, -0.5)
        ax.set_xlabel("share of the time to finish (%)" if shares else xlabel.replace("time to finish", "time"))
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlim(0, 100 if shares else None)
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=PARTS[p][1], label=PARTS[p][0]) for p in PARTS if p in used],
                  loc="upper center", bbox_to_anchor=(0.5, -0.6 / (len(table) + 2) - 0.08), ncols=2, fontsize=9.5,
                  frameon=False)
        ax.set_title(title or f"{scenario_prefix(table)}where the time went, per configuration")
    return fig


def _row_transform(ax: Axes) -> Any:
    from matplotlib.transforms import blended_transform_factory

    return blended_transform_factory(ax.transAxes, ax.transData)


def _stacked_bar(ax: Axes, i: int, parts: dict[str, float], total: float, divisor: float, shares: bool,
                 used: dict[str, None]) -> None:
    left = 0.0
    for part, ns in parts.items():
        width = ns / total * 100 if shares else ns / divisor
        if width <= 0:
            continue
        ax.barh(i, width, left=left, height=0.68, color=PARTS[part][1], edgecolor="white", linewidth=0.8)
        used[part] = None
        left += width
    if not shares:  # the number carries its unit: a bar read alone on a slide still says what it is
        ax.text(left, i, f"  {fmt.time_ns(total, unicode=True)}", va="center", fontsize=9.5)


# ------------------------------------------------------------------------------------ heatmap


def heatmap(table: pd.DataFrame, x: str, y: str, value: str = "makespan_ns", title: str = "") -> Figure:
    """``value`` over two varied fields, each cell printed; the points the sweep's answer names
    (:func:`tmasim.sweep.answer.find_all`) outlined: its best (solid) and its knee (dashed), per
    problem, and none where no design field varies (nothing to choose); cells that did not run
    hatched with the reason. Lower is better for times, higher for rates."""
    import numpy as np

    table = with_status(table)
    require(table, [x, y, value])
    cols, rows = list(dict.fromkeys(table[x])), list(dict.fromkeys(table[y]))
    if numeric(table[x]):
        cols = sorted(cols)
    if numeric(table[y]):
        rows = sorted(rows)
    grid = np.full((len(rows), len(cols)), np.nan)
    failed: dict[tuple[int, int], str] = {}
    for _, r in table.iterrows():
        i, j = rows.index(r[y]), cols.index(r[x])
        if r["status"] == "ok":
            grid[i, j] = float(r[value])
        else:
            failed[(i, j)] = failure_text(r.get("error"), r.get("status"))
    divisor, label = measure(value, grid[np.isfinite(grid)])
    better = "higher" if is_rate(value) else "lower"
    finite = grid[np.isfinite(grid)]
    spread = (finite.max() - finite.min()) / abs(finite.min()) if len(finite) and finite.min() else 0.0
    flat = spread < FLAT_SPREAD  # a colour scale over a sliver of a percent would shout about noise
    width = 2.5 + 1.15 * len(cols) - (1.0 if flat else 0.0)
    with styled() as plt:
        fig, ax = plt.subplots(figsize=(max(width, 4.5), 1.9 + 0.7 * len(rows)), layout="constrained")
        cmap = plt.get_cmap("viridis_r" if better == "lower" else "viridis").with_extremes(bad="#EEEEEE")
        if flat:  # one quiet colour: the numbers in the cells are the message
            from matplotlib.colors import ListedColormap

            cmap = ListedColormap(["#DCE6F2"]).with_extremes(bad="#EEEEEE")
        image = ax.imshow(np.ma.masked_invalid(grid / divisor), cmap=cmap, aspect="auto")
        if not flat:
            bar = fig.colorbar(image, ax=ax)
            bar.set_label(f"{label}\n({better} is better)")
        _heat_labels(ax, grid / divisor, image, failed)
        chosen = _outline_answer(ax, table, x, y, cols, rows)
        ax.set_xticks(range(len(cols)), [value_text(c) for c in cols])
        ax.set_yticks(range(len(rows)), [value_text(r) for r in rows])
        ax.set_xlabel(field_label(x))
        ax.set_ylabel(field_label(y))
        ax.spines[:].set_visible(False)
        what = f"{label.split(' (')[0]} ({label.split(' (')[-1]}" if flat else label.split(" (")[0]
        default = f"{scenario_prefix(table)}{what} by {field_label(x)} and {field_label(y)}"
        if flat:
            default += f"\nall points within {fmt.percent(spread)} of each other"
        if not chosen:
            default += "\nno design field varies: nothing to choose, no best outlined"
        ax.set_title(wrapped(title or default, fig.get_figwidth()))
    return fig


def _heat_labels(ax: Axes, grid: Any, image: Any, failed: dict[tuple[int, int], str]) -> None:
    import numpy as np

    for (i, j), v in np.ndenumerate(grid):
        if (i, j) in failed:
            ax.add_patch(_hatched_cell(i, j))
            ax.text(j, i, failed[(i, j)].replace(" (", "\n("), ha="center", va="center", fontsize=8.5,
                    color=COLORS["race"])
        elif np.isfinite(v):
            r, g, b, _ = image.cmap(image.norm(v))
            ink = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.55 else "black"
            ax.text(j, i, f"{v:.4g}", ha="center", va="center", fontsize=10, color=ink)


def _hatched_cell(i: int, j: int) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="none", edgecolor="#BBBBBB", hatch="//", linewidth=0)


def answer_cells(table: pd.DataFrame, x: str, y: str) -> dict[str, list[tuple[str, str]]]:
    """The (x, y) values of the points the sweep's answer names, as printed: ``best`` and ``knee``
    per problem that has a design field to choose along (none where nothing is chosen)."""
    from tmasim.sweep import answer

    cells: dict[str, list[tuple[str, str]]] = {"best": [], "knee": []}
    for found in answer.find_all(table):
        if found.fields:
            for kind, row in (("best", found.best), ("knee", found.knee)):
                cells[kind].append((answer._value(row[x]), answer._value(row[y])))
    return cells


def _outline_answer(ax: Axes, table: pd.DataFrame, x: str, y: str, cols: list[Any], rows: list[Any]) -> bool:
    """Outline the answer's best (solid) and knee (dashed) cells, with a legend saying so; False
    when the answer chooses nothing."""
    from matplotlib.patches import Rectangle

    from tmasim.sweep.answer import _value

    where = {(_value(c), _value(r)): (i, j) for i, r in enumerate(rows) for j, c in enumerate(cols)}
    cells = answer_cells(table, x, y)
    styles = {"best": ("solid", "best"), "knee": ("dashed", names.term("knee"))}
    handles = []
    for kind in ("best", "knee"):
        style, label = styles[kind]
        spots = [where[c] for c in dict.fromkeys(cells[kind]) if c in where]
        inset = 0.47 if kind == "best" else 0.40
        for i, j in spots:
            ax.add_patch(Rectangle((j - inset, i - inset), 2 * inset, 2 * inset, fill=False, edgecolor="#D62728",
                                   linewidth=2.5, linestyle=style))
        if spots:
            handles.append(Rectangle((0, 0), 1, 1, fill=False, edgecolor="#D62728", linewidth=2, linestyle=style,
                                     label=label))
    if handles:
        problems = len({c for c in cells["best"]}) > 1
        # one entry a row: the knee's label (its rule) is wider than a heat map of two columns
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.04 * problems), fontsize=8.5,
                  ncol=1, frameon=False, title="per problem" if problems else None, title_fontsize=8.5)
    return bool(handles)
