"""The pipeline moving: an animation of one CTA's run, built from its spans and events.

Top: the Gantt chart of the run, revealed up to the clock. Bottom: the state at the clock: the
TMA copy engine, each stage slot (empty -> copy in flight -> full -> computing -> released), each
slot's full and empty barrier with its completed phases and parity bit, and the tensor core.

Frames follow the run's change points: every change gets a frame, time between changes is drawn
at a steady pace, and a long stretch in which nothing changes is compressed to a few frames (the
frame says so). At most :data:`MAX_FRAMES` frames whatever the run's length. The figure is drawn
once; each frame only moves a curtain and updates colours and texts, so a GIF of the reference
run takes a few seconds.
"""

from __future__ import annotations

import bisect
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import TmasimError
from tmasim.values import format as fmt
from tmasim.workloads.summary_rows import plural

if TYPE_CHECKING:
    import pandas as pd

    from tmasim.output.result import Result

MAX_FRAMES = 300
TARGET_FRAMES = 160      # frames at a steady pace; beyond that, the longest quiet stretches are capped
FPS = 8
STATE_COLORS = {"empty": "#E8E8E8", "in flight": "#A6C8E8", "full": "#F2C14E", "computing": "#55A868",
                "RACE": "#C44E52", "held": "#BBBBBB"}
FORMATS = (".gif", ".mp4", ".html")


@dataclass(frozen=True)
class Frame:
    time: float          # ps
    compressed: bool     # this frame skips over a stretch in which nothing changes


def frame_times(changes: Sequence[float], end: float, *, target: int = TARGET_FRAMES,
                limit: int = MAX_FRAMES) -> list[Frame]:
    """Frame times: every change point, a steady pace between them (about ``target`` frames); when
    that would need ``limit`` frames or more, the longest stretches without a change are capped
    (compressed) to bring the total back to ``target``."""
    points = sorted({0.0, float(end), *(float(c) for c in changes if 0 <= c <= end)})
    gaps = [hi - lo for lo, hi in zip(points, points[1:], strict=False)]
    step = end / target if end else 1.0
    wanted = [max(1, round(g / step)) for g in gaps]
    cap = max(wanted, default=1) if sum(wanted) < limit else _cap(wanted, target)
    frames: list[Frame] = []
    for lo, gap, want in zip(points, gaps, wanted, strict=False):
        count = min(want, cap)
        frames += [Frame(lo + gap * k / count, count < want and k > 0) for k in range(count)]
    frames.append(Frame(float(end), False))
    if len(frames) > limit:   # too many changes: keep an even subset, the last frame included
        keep = [round(i * (len(frames) - 1) / (limit - 1)) for i in range(limit)]
        frames = [frames[i] for i in keep]
    return frames


def _cap(wanted: Sequence[int], target: int) -> int:
    """The largest per-stretch frame count that keeps the total within ``target`` (at least 2)."""
    if sum(wanted) <= target:
        return max(wanted, default=1)
    lo, hi = 2, max(wanted)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(w, mid) for w in wanted) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class Timeline:
    """One CTA's spans and events, indexed for 'what is happening at time t'."""

    spans: pd.DataFrame
    events: pd.DataFrame
    stages: list[int]
    end: float

    @classmethod
    def of(cls, result: Result) -> Timeline:
        spans, events = result.spans, result.events
        if spans.empty:
            raise TmasimError("animate: the run kept no per-event records; add --set run.records=true "
                              "(and shrink the problem first)")
        sm, cta = int(spans["sm"].min()), int(spans.loc[spans["sm"] == spans["sm"].min(), "cta"].min())
        one = spans[(spans["sm"] == sm) & (spans["cta"] == cta)]
        ev = events[(events["sm"] == sm) & (events["cta"] == cta)]
        stages = sorted(int(s) for s in one.loc[one["lane"] == "slot", "stage"].unique())
        return cls(one.reset_index(drop=True), ev.reset_index(drop=True), stages, float(one["end_ps"].max()))

    def ready(self, stage: int) -> list[tuple[float, float, str, int]]:
        """Landed but not yet used: from each copy's landing to the start of its tile's compute."""
        slot = self.spans[(self.spans["lane"] == "slot") & (self.spans["stage"] == stage)]
        landed = dict(zip(slot.loc[slot["kind"] == "fill", "tile"], slot.loc[slot["kind"] == "fill", "end_ps"],
                          strict=True))
        used = dict(zip(slot.loc[slot["kind"] == "use", "tile"], slot.loc[slot["kind"] == "use", "start_ps"],
                        strict=True))
        return sorted((landed[t], used[t], "ready", int(t)) for t in landed if t in used and used[t] > landed[t])

    def changes(self) -> list[float]:
        return sorted({*self.spans["start_ps"].tolist(), *self.spans["end_ps"].tolist(),
                       *self.events["time_ps"].tolist()})

    def active(self, lane: str, kinds: tuple[str, ...],
               stage: int | None = None) -> list[tuple[float, float, str, int]]:
        part = self.spans[(self.spans["lane"] == lane) & self.spans["kind"].isin(kinds)]
        if stage is not None:
            part = part[part["stage"] == stage]
        return sorted(zip(part["start_ps"], part["end_ps"], part["kind"], part["tile"], strict=True))

    def flips(self, kind: str, stage: int) -> list[float]:
        part = self.events[(self.events["kind"] == kind) & (self.events["stage"] == stage)]
        return sorted(part["time_ps"].tolist())

    def stuck(self) -> list[tuple[float, str, str]]:
        """A run that stopped (deadlock): (time, who, barrier) of each wait still open then."""
        part = self.events[self.events["kind"] == "stuck"]
        return [(float(time), "producer" if ".empty[" in name else "consumer", str(name).rsplit(".", 1)[-1])
                for time, name in zip(part["time_ps"], part["name"], strict=True)]

    def held(self, stage: int) -> list[tuple[float, float, str, int]]:
        """In a run that stopped: the slot from the end of its last use on, if its empty barrier
        never flipped after it and no copy refilled it (computed, never released)."""
        if not self.stuck():
            return []
        slot = self.spans[(self.spans["lane"] == "slot") & (self.spans["stage"] == stage)]
        uses = slot[slot["kind"] == "use"]
        if uses.empty:
            return []
        last = uses.loc[uses["end_ps"].idxmax()]
        end = float(last["end_ps"])
        refilled = ((slot["kind"] == "fill") & (slot["start_ps"] >= end)).any()
        if refilled or any(t >= end for t in self.flips("flip_empty", stage)):
            return []
        return [(end, float("inf"), "held", int(last["tile"]))]


def at(intervals: Sequence[tuple[float, float, str, int]], t: float) -> list[tuple[str, int]]:
    """What the intervals hold at time t: (kind, tile) of each one covering t (start inclusive,
    end exclusive: at a hand-over the new interval holds)."""
    return [(kind, tile) for start, end, kind, tile in intervals if start <= t < end]


def slot_state(fill: Sequence[Any], use: Sequence[Any], t: float,
               held: Sequence[Any] = ()) -> tuple[str, str]:
    kept = at(held, t)
    if kept:
        return "held", f"tile {kept[0][1]} computed,\nnever released"  # shown without the state word
    using = at(use, t)
    filling = at(fill, t)
    if using and filling:
        return "RACE", f"tile {using[0][1]}: read before it landed"
    if using:
        return "computing", f"tile {using[0][1]}"
    if filling:
        kind, tile = filling[0]
        return ("in flight", f"tile {tile}") if kind == "fill" else ("full", f"tile {tile}, waiting")
    return "empty", ""


def animate(result: Result, path: Path, *, title: str | None = None, fps: int = FPS,
            target: int | None = None) -> Path:
    """Write the animation (.gif, .mp4 where ffmpeg exists, or a self-contained .html player)."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise TmasimError(f"--out: {str(path)!r} must end in .gif, .mp4 or .html")
    if suffix == ".mp4" and shutil.which("ffmpeg") is None:
        raise TmasimError("--out: an .mp4 needs ffmpeg, which is not installed here; write a .gif or .html")
    line = Timeline.of(result)
    frames = frame_times(line.changes(), line.end, target=target or TARGET_FRAMES)
    title = title or _title(result)
    movie = _Movie(line, title)
    from tmasim.output.paths import replacing, write_error

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        movie.close()
        raise write_error("--out", path, err) from None
    try:
        with replacing(path) as tmp:
            if suffix == ".mp4":
                movie.animation(frames, fps).save(tmp, writer=_ffmpeg(fps))
            else:
                images = movie.render(frames)
                if suffix == ".gif":
                    _write_gif(images, tmp, fps)
                else:
                    _write_html(images, tmp, fps, title)
    finally:
        movie.close()
    return path


def frames_of(result: Result, title: str | None = None, target: int = TARGET_FRAMES) -> list[Any]:
    """The animation's frames as PIL images (for notebooks and tests)."""
    line = Timeline.of(result)
    movie = _Movie(line, title or _title(result))
    try:
        return movie.render(frame_times(line.changes(), line.end, target=target))
    finally:
        movie.close()


def _title(result: Result) -> str:
    stats = result.stats
    first = "" if stats.get("ctas", 1) == 1 else " (first CTA)"
    return (f"{stats['scenario']}: {plural(stats['stages'], 'stage')}{first}, "
            f"{fmt.time(stats['makespan_ps'], 4, unicode=True)}")


def _ffmpeg(fps: int) -> Any:
    from matplotlib import animation

    return animation.FFMpegWriter(fps=fps)


def _write_gif(images: list[Any], path: Path, fps: int) -> None:
    first, *rest = images
    first.save(path, save_all=True, append_images=rest, duration=round(1000 / fps), loop=0, optimize=False)


def _write_html(images: list[Any], path: Path, fps: int, title: str) -> None:
    """One HTML file, no outside resources: the frames as base64 PNGs, a slider and a play button;
    its title names the scenario (the animation's own title)."""
    import base64
    import html
    import io
    import json

    encoded = []
    for image in images:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=3)
        encoded.append("data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"))
    page = _HTML.replace("__TITLE__", html.escape(f"tmasim animate: {title}"))
    page = page.replace("__LAST__", str(len(images) - 1)).replace("__DELAY__", str(round(1000 / fps)))
    page = page.replace("__FRAMES__", json.dumps(encoded))
    path.write_text(page, encoding="utf-8")


_HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>__TITLE__</title>
<style>body{font-family:sans-serif;margin:1em}img{max-width:100%}input[type=range]{width:70%}
button{font-size:1.2em}</style></head>
<body><img id="frame" alt="pipeline animation"><br>
<button id="play">play</button> <input id="slider" type="range" min="0" max="__LAST__" value="0">
<span id="index"></span>
<script>
const frames = __FRAMES__;
const img = document.getElementById("frame"), slider = document.getElementById("slider");
const index = document.getElementById("index"), play = document.getElementById("play");
let timer = null;
function show(i) { img.src = frames[i]; slider.value = i; index.textContent = (+i + 1) + " / " + frames.length; }
slider.oninput = () => show(slider.value);
play.onclick = () => {
  if (timer) { clearInterval(timer); timer = null; play.textContent = "play"; return; }
  play.textContent = "pause";
  timer = setInterval(() => {
    const next = +slider.value + 1;
    if (next >= frames.length) { clearInterval(timer); timer = null; play.textContent = "play"; return; }
    show(next);
  }, __DELAY__);
};
show(0);
</script></body></html>
"""


def _palette(image: Any) -> Any:
    """48 colours from a frame plus every colour a state can take."""
    from PIL import Image, ImageColor

    from tmasim.review.plot_style import COLORS

    base = image.quantize(colors=48, method=Image.Quantize.MEDIANCUT).getpalette()[: 48 * 3]
    extra = [c for name in (*STATE_COLORS.values(), *COLORS.values()) for c in ImageColor.getrgb(name)]
    colours = (base + extra)[: 256 * 3]
    palette = Image.new("P", (1, 1))
    palette.putpalette(colours + [0] * (768 - len(colours)))
    return palette


class _Movie:
    """The figure, drawn once; :meth:`update` moves the clock."""

    def __init__(self, line: Timeline, title: str) -> None:
        import matplotlib

        from tmasim.review.plot_style import pyplot, time_unit

        self.line = line
        self.scale, self.unit = time_unit(line.end)
        plt = pyplot()
        self._rc = plt.rc_context({"font.size": 15, "axes.titlesize": 18, "axes.labelsize": 15,
                                   "xtick.labelsize": 13, "ytick.labelsize": 14})
        self._rc.__enter__()
        self.fig = plt.figure(figsize=(12.8, 7.2), dpi=100)
        self.gantt = self.fig.add_axes((0.14, 0.52, 0.83, 0.38))
        self.state = self.fig.add_axes((0.02, 0.0, 0.96, 0.42))
        self.fig.suptitle(title, fontsize=19)
        self._matplotlib = matplotlib
        self._draw_gantt()
        self._draw_state()

    def close(self) -> None:
        from tmasim.review.plot_style import pyplot

        pyplot().close(self.fig)
        self._rc.__exit__(None, None, None)

    # -- the static Gantt, with a curtain over the future
    def _draw_gantt(self) -> None:
        from matplotlib.patches import Rectangle

        from tmasim.review.plot_style import COLORS

        ax, line, k = self.gantt, self.line, self.scale
        rows = ["TMA", *[f"slot {s}" for s in line.stages], "tensor core"]
        spans = line.spans

        wide = line.end / k / 40   # bars wider than this carry their tile number

        def bars(frame: Any, y: float, color: str, hatch: str | None = None, label: bool = False) -> None:
            if not len(frame):
                return
            xs = list(zip(frame["start_ps"] / k, (frame["end_ps"] - frame["start_ps"]) / k, strict=True))
            ax.broken_barh(xs, (y - 0.38, 0.76), facecolors=color, edgecolors="white", linewidth=0.5, hatch=hatch)
            if label and len(xs) <= 40:
                for (x, w), tile in zip(xs, frame["tile"], strict=True):
                    if w > wide:
                        ax.text(x + w / 2, y, str(tile), ha="center", va="center", color="white", fontsize=13)

        bars(spans[spans["kind"] == "transfer"], 0, COLORS["transfer"], label=True)
        for y, s in enumerate(line.stages, start=1):
            slot = spans[(spans["lane"] == "slot") & (spans["stage"] == s)]
            ready = line.ready(s)
            if ready:
                ax.broken_barh([(a / k, (b - a) / k) for a, b, _, _ in ready], (y - 0.38, 0.76),
                               facecolors=STATE_COLORS["full"], edgecolors="white", linewidth=0.5)
            bars(slot[slot["kind"] == "use"], y, COLORS["use"])
            bars(slot[slot["kind"] == "fill"], y, COLORS["fill"], "//")
            for start, _, _, _ in (h for h in line.held(s) if h[0] < line.end):
                ax.broken_barh([(start / k, (line.end - start) / k)], (y - 0.38, 0.76), facecolors=STATE_COLORS["held"],
                               edgecolors="#777777", linewidth=0, hatch="xx")
                ax.text((start + line.end) / 2 / k, y, "never released", ha="center", va="center", fontsize=13)
        bars(spans[spans["kind"] == "compute"], len(rows) - 1, COLORS["compute"], label=True)
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlim(0, line.end / k * 1.01)
        ax.set_xlabel(f"time ({self.unit})", labelpad=1)
        ax.grid(axis="x", alpha=0.3)
        self.curtain = Rectangle((0, -0.5), line.end / k * 1.02, len(rows), facecolor="white", alpha=0.88,
                                 edgecolor="none", zorder=5)
        ax.add_patch(self.curtain)
        self.now = ax.axvline(0, color="#C44E52", linewidth=2.5, zorder=6)

    # -- the state panel: one box per resource, texts updated per frame
    def _draw_state(self) -> None:
        from matplotlib.patches import FancyBboxPatch

        ax, line = self.state, self.line
        ax.set_xlim(-0.01, 1.01)
        ax.set_ylim(0, 1)
        ax.axis("off")
        n = len(line.stages)
        self.clock = ax.text(0.0, 0.97, "", fontsize=22, fontweight="bold", va="top", family="monospace")
        self.note = ax.text(1.0, 0.97, "", fontsize=15, va="top", ha="right", color="#C44E52")
        boxes = [("TMA copy engine", 0.0, 0.2)] + [
            (f"slot {s}", 0.23 + i * (0.54 / n), 0.54 / n - 0.02) for i, s in enumerate(line.stages)] + [
            ("tensor core", 0.8, 0.2)]
        self.boxes, self.titles, self.labels, self.bits = [], [], [], []
        for name, x, w in boxes:
            patch = FancyBboxPatch((x, 0.12), w, 0.55, boxstyle="round,pad=0.005,rounding_size=0.02",
                                   facecolor=STATE_COLORS["empty"], edgecolor="#333333", linewidth=1.5)
            ax.add_patch(patch)
            self.titles.append(ax.text(x + w / 2, 0.6, name, ha="center", va="center", fontsize=16,
                                       fontweight="bold"))
            self.boxes.append(patch)
            self.labels.append(ax.text(x + w / 2, 0.4, "", ha="center", va="center", fontsize=15))
        for i in range(n):
            x = 0.23 + i * (0.54 / n) + (0.54 / n - 0.02) / 2
            self.bits.append(ax.text(x, 0.2, "", ha="center", va="center", fontsize=13, family="monospace"))
        self.legend = ax.text(0.0, 0.02, "slot: empty -> in flight -> full -> computing -> released"
                                         "      bits: full/empty barrier phase parity",
                              fontsize=12.5, color="#555555")
        self._fills = [sorted(line.active("slot", ("fill",), s) + line.ready(s)) for s in line.stages]
        self._uses = [line.active("slot", ("use",), s) for s in line.stages]
        self._tma = line.active("tma", ("transfer",))
        self._mma = line.active("consumer", ("compute",))
        self._full = [line.flips("flip_full", s) for s in line.stages]
        self._empty = [line.flips("flip_empty", s) for s in line.stages]
        self._held = [line.held(s) for s in line.stages]
        self._stuck = line.stuck()

    def update(self, frame: Frame) -> list[Any]:
        t, k = frame.time, self.scale
        self.curtain.set_x(t / k)
        self.now.set_xdata([t / k, t / k])
        self.clock.set_text(f"t = {t / k:7.3f} {self.unit}")
        self.note.set_text(">> fast-forward: nothing changes here" if frame.compressed else "")
        if self._stuck and t >= self._stuck[0][0]:
            self.note.set_text("stopped: " + "; ".join(f"{who} waits on {barrier}" for _, who, barrier in self._stuck))
        tma = at(self._tma, t)
        waiting = sum(1 for fill in self._fills for kind, _ in at(fill, t) if kind == "fill") - len(tma)
        idle = f"idle;\n{waiting} in latency" if waiting > 0 else "idle"
        self._set(0, "in flight" if tma else "empty", f"copying tile {tma[0][1]}" if tma else idle)
        for i in range(len(self.line.stages)):
            state, text = slot_state(self._fills[i], self._uses[i], t, self._held[i])
            self._set(i + 1, state, f"{state}\n{text}" if text and state != "held" else text or state)
            full = bisect.bisect_right(self._full[i], t)
            empty = bisect.bisect_right(self._empty[i], t)
            self.bits[i].set_text(f"full {full % 2}  empty {empty % 2}")
        mma = at(self._mma, t)
        self._set(len(self.boxes) - 1, "computing" if mma else "empty", f"tile {mma[0][1]}" if mma else "idle")
        return [self.curtain, self.now, self.clock, self.note, *self.boxes, *self.titles, *self.labels, *self.bits]

    def _set(self, index: int, state: str, text: str) -> None:
        self.boxes[index].set_facecolor(STATE_COLORS[state])
        self.labels[index].set_text(text)

    def render(self, frames: list[Frame]) -> list[Any]:
        """Each frame as a palette image: the static figure is drawn once, then only what moves;
        one palette for all frames (so unchanged pixels stay identical and the GIF stays small)."""
        from PIL import Image

        dynamic = self.update(frames[len(frames) // 2])
        for artist in dynamic:
            artist.set_animated(True)
        canvas = self.fig.canvas
        canvas.draw()
        background = canvas.copy_from_bbox(self.fig.bbox)
        palette: Any = None
        images = []
        for frame in frames:
            canvas.restore_region(background)
            for artist in self.update(frame):
                self.fig.draw_artist(artist)
            rgb = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).convert("RGB")
            palette = palette or _palette(rgb)
            images.append(rgb.quantize(palette=palette, dither=Image.Dither.NONE))
        return images

    def animation(self, frames: list[Frame], fps: int) -> Any:
        from matplotlib.animation import FuncAnimation

        return FuncAnimation(self.fig, self.update, frames=frames, interval=1000 / fps, blit=False,
                             repeat=False, cache_frame_data=False)
