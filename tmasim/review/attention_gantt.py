"""The Gantt chart of an attention CTA: the TMA's K, V and Q copies, the tensor cores and the
softmax units coloured by consumer warpgroup (so ping-pong's alternation shows), and each
warpgroup's own timeline (S GEMM, softmax, P·V, waits, epilogue)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tmasim.review.plot_style import COLORS, SERIES, styled, time_unit

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

WARPGROUP_COLORS = (SERIES[0], SERIES[8])  # blue and gold: apart from the waits' red and orange
PHASES = (("qk", "S = Q·Kᵀ", None), ("pv", "O += P·V", "//"), ("softmax", "softmax", ".."),
          ("correction", "rescale O", "xx"))


def is_attention(spans: pd.DataFrame) -> bool:
    """Whether a run's spans come from the attention CTA (it records a softmax lane)."""
    return bool(len(spans)) and bool((spans["lane"] == "softmax").any())


def attention_window(spans: pd.DataFrame, blocks: int = 6) -> tuple[float, float]:
    """From 0 to the end of the first CTA's ``blocks``-th P·V: the fill and a few steady blocks."""
    one = _first_cta(spans)
    pv = one[(one["lane"] == "tensor") & (one["kind"] == "pv")].sort_values("end_ps")
    if pv.empty:
        return 0.0, float(one["end_ps"].max())
    return 0.0, float(pv["end_ps"].iloc[min(len(pv), blocks * max(1, pv["stage"].nunique())) - 1])


def _first_cta(spans: pd.DataFrame) -> pd.DataFrame:
    return spans[(spans["sm"] == spans["sm"].min()) & (spans["cta"] == spans["cta"].min())]


def attention_gantt(spans: pd.DataFrame, title: str = "", window: tuple[float, float] | None = None) -> Figure:
    from matplotlib.patches import Patch

    one = _first_cta(spans)
    window = window if window is not None else attention_window(spans)
    lo, hi = window
    one = one[(one["end_ps"] >= lo) & (one["start_ps"] <= hi)]
    warpgroups = sorted(int(s[len("consumer"):]) for s in one["lane"].unique() if str(s).startswith("consumer"))
    # One consumer lane: one warpgroup, or two cooperative ones in lockstep (simulated as one).
    names = [f"warpgroup {w}" for w in warpgroups] if len(warpgroups) > 1 else ["consumer\n(lockstep)"]
    rows = ["TMA copies", "tensor cores", "softmax units", *names, "producer waits"]
    scale, unit = time_unit(hi - lo)
    stages = int(one.loc[one["lane"] == "slot", "stage"].max() + 1) // 2 if (one["lane"] == "slot").any() else 1
    with styled() as plt:
        fig, ax = plt.subplots(figsize=(12, 1.4 + 0.62 * len(rows)), layout="constrained")

        def bars(frame: pd.DataFrame, y: float, color: str, hatch: str | None = None, height: float = 0.7) -> None:
            if len(frame):
                xs = list(zip(frame["start_ps"] / scale, (frame["end_ps"] - frame["start_ps"]) / scale, strict=True))
                ax.broken_barh(xs, (y - height / 2, height), facecolors=color, edgecolors="white", linewidth=0.5,
                               hatch=hatch)

        transfers = one[(one["lane"] == "tma") & (one["kind"] == "transfer")]
        k, v = transfers["stage"] < stages, (transfers["stage"] >= stages) & (transfers["stage"] < 2 * stages)
        for part, color in ((k, SERIES[2]), (v, SERIES[4]), (transfers["stage"] == 2 * stages, SERIES[5])):
            bars(transfers[part], 0, color)
        bars(one[one["kind"] == "store"], 0, COLORS["store"], "..")
        for y, lane in ((1, "tensor"), (2, "softmax")):
            part = one[one["lane"] == lane]
            for kind, _, hatch in PHASES:
                for w in warpgroups:
                    bars(part[(part["kind"] == kind) & (part["stage"] == w)], y, WARPGROUP_COLORS[w % 2], hatch)
        for i, w in enumerate(warpgroups, start=3):
            part = one[one["lane"] == f"consumer{w}"]
            for kind, _, hatch in PHASES:
                bars(part[part["kind"] == kind], i, WARPGROUP_COLORS[w % 2], hatch, 0.5)
            bars(part[part["kind"] == "wait_full"], i, COLORS["wait_full"], None, 0.25)
            bars(part[part["kind"] == "epilogue"], i, COLORS["epilogue"], None, 0.5)
        bars(one[one["kind"] == "wait_empty"], len(rows) - 1, COLORS["wait_empty"], None, 0.4)
        ax.set_yticks(range(len(rows)), rows)
        ax.invert_yaxis()
        ax.set_xlim(lo / scale, hi / scale)
        ax.set_xlabel(f"time ({unit})")
        ax.set_title(title)
        handles = [Patch(facecolor=SERIES[2], label="K copy"), Patch(facecolor=SERIES[4], label="V copy"),
                   Patch(facecolor=SERIES[5], label="Q copy"),
                   *[Patch(facecolor=WARPGROUP_COLORS[w % 2], label=name) for w, name in zip(warpgroups, names,
                                                                                           strict=False)],
                   *[Patch(facecolor="white", edgecolor="black", hatch=h, label=label) for _, label, h in PHASES],
                   Patch(facecolor=COLORS["wait_full"], label="wait (full barrier)"),
                   Patch(facecolor=COLORS["wait_empty"], label="wait (empty barrier)")]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig
