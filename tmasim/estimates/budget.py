"""What a run will cost, estimated from its plan before any event runs, and the limits past which
it asks first.

A run's cost follows from its plan: the ring steps the engine simulates (work units x steps per
unit, over the CTAs it simulates: one representative per class when aggregated), the SimPy
events and per-event records each step makes, and the memory the process takes (the interpreter,
the plan, the records, what fast-forward and drift keep). The per-step and per-record costs below
were fitted on the grid of ``benchmarks/bench_estimates.py`` (long and short K, ragged tiles, 2-SM
pairs, clusters, drift, jitter, attention with long sequences and grid launches, narrow and small
stream boxes, records of tiles in milliseconds and seconds, with and without the skip), which
prints estimate against measured: within a factor of two, and high rather than low, except where
fast-forward skips far less than forecast (see :mod:`tmasim.skip_forecast`).

Two thresholds: past :data:`NOTE_SECONDS` or :data:`NOTE_BYTES` a run says so on its first line
with the estimate; past :data:`LIMIT_SECONDS` or :data:`LIMIT_BYTES` it is refused (exit 2)
unless the user confirms (``--yes``; ``allow_large=True`` from Python).

Fast-forward of steady states skips ring steps (engine/fast_forward/jump.py); where it is on and the
durations are deterministic, :mod:`tmasim.skip_forecast` forecasts from the plan how many. A
skipped step costs little (its counters), but its records are still made, by shifting a simulated
period's (engine/fast_forward/record_shift.py), and cost their memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tmasim.errors import ResourceError
from tmasim.values import format as fmt

NOTE_SECONDS = 60.0
LIMIT_SECONDS = 300.0
NOTE_BYTES = 2**30
LIMIT_BYTES = 4 * 2**30

# Measured costs. The byte costs were fitted on the grid of ``benchmarks/bench_estimates.py`` (peak
# RSS, each run in a fresh process on the 2-core development machine). The time costs (CPU seconds
# of ``simulate``) were fitted together by ``benchmarks/fit_estimates.py`` (least squares of the log
# ratio over the grid's runs of at least 0.25 s, on an idle machine: 0.81-1.27x), then raised by
# TIME_MARGIN (where a constant departs from that, its comment says why), so that estimates land
# high rather than low and a slower machine still finds them near: on that machine every case of
# the grid then reads 0.58-1.8x. Kinds of step: "timed" (tiles:
# times given), "flow" (GEMM, stream: copies through the shared fabric), "attention" (K/V blocks).
INTERPRETER_BYTES = 56 * 2**20  # the interpreter with tmasim, numpy and simpy imported (50-57 MB on the grid)
# a UnitProgram's per-step lookups (two list slots); attention's block list; none for equal tiles
# (one value repeated: tiles whose times vary are counted by the tiles workload's plan_size)
PLAN_BYTES_PER_STEP = {"timed": 0, "flow": 16, "attention": 16}
PLAN_BYTES_PER_UNIT = 480       # a work unit, its coordinates, L2 fractions and segment tuples (stream, 16x16
                                # boxes: 450 B a box)
RECORD_BYTES = {"timed": 32, "flow": 56, "attention": 56}  # a packed record (tmasim.engine.recorder keeps each
                                # in 32 bytes); GEMM's peak 49 B a record (the 2-SM pairs with records)
WIDE_RECORD_BYTES = 88          # a record kept whole in the side table besides its placeholder (a span over
                                # 4.3 ms: tiles in milliseconds, 82 B a record more on the grid)
WIDE_SPAN_PS = 2**32            # the longest duration a packed record holds (its 32-bit field, in ps)
# What commands do with a run's records after it (after_run), fitted on the command grid of
# benchmarks/bench_estimates.py (tiles of 100k-2M and GEMM records; CPU seconds and peak RSS of the
# whole command):
FRAME_BYTES_PER_RECORD = 175    # the same record as a row of the spans/events DataFrames (--out, --trace)
FRAME_SECONDS_PER_RECORD = 1.5e-6  # building those DataFrames from the records
OUT_SECONDS_PER_RECORD = 6e-6   # --out: spans.csv and events.csv, and the Gantt chart's first tiles
OUT_BYTES_PER_RECORD = 100      # and the text pandas writes them through
TRACE_SECONDS_PER_RECORD = 46e-6  # --trace: a Chrome trace event per span and instant, JSON, gzip
TRACE_BYTES_PER_RECORD = 2300   # those events as Python dicts, then as one JSON text
REPORT_SECONDS_PER_RECORD = 1e-6  # a report: its tables and three timeline figures (slots as time-averages)
REPORT_BYTES_PER_RECORD = 150
FIGURE_SECONDS = 1.0            # importing matplotlib and drawing one figure
REPORT_FIGURE_SECONDS = 3.0     # a report's figures, page and tables, whatever the run's size
FIGURE_BYTES = 64 * 2**20       # matplotlib imported and a figure drawn
# tmasim plot of a run folder, from the sizes of its CSV files: a row of spans.csv or events.csv
# holds 50-65 bytes (300k tiles: 97 MB for 1.5M spans, 62 MB for 1.2M events)
CSV_ROW_BYTES = 50
CSV_ROW_SECONDS = 6e-6          # reading a row and checking it (tmasim.result_files)
CSV_ROW_MEMORY = 450            # the rows as DataFrames, with what reading them leaves behind
PLOT_ROW_SECONDS = {"slots": 2e-6, "gantt": 1e-6, "bandwidth": 2e-6}  # drawing, per row read
ANIMATE_BYTES_PER_RECORD = 1000  # frames, the one-CTA timeline and its change points (tmasim animate)
ANIMATE_SECONDS_PER_RECORD = 110e-6  # finding each frame's state among the records
# an animation draws at most 300 frames (tmasim.review.animate.MAX_FRAMES) whatever the run's length,
# about 30 ms each, and holds them until it writes the file (1.3 MB each, as PNG images and their text)
ANIMATION_SECONDS = 300 * 0.03
ANIMATION_BYTES = 300 * 1_300_000  # (reference, 200 and 20,000 tiles: 510 and 608 MB peak; 8.6 and 16.9 s)
TIME_MARGIN = 1.3  # the fitted time costs below, raised by this
PLAN_SECONDS_PER_STEP = 0.047e-6 * TIME_MARGIN  # building those lookups
# building a work unit: fitted 3.5 us, kept without the margin, since it grows with the units (stream:
# 1.7 us a box at 32k boxes, 3.2 at 512k), and the margin would put the smallest runs over twice their time
PLAN_SECONDS_PER_UNIT = 3.5e-6
CTA_BYTES = 8 * 2**10           # a simulated CTA: its barriers, slots, processes and counters
# A step simulated with fast-forward on, where copies flow through the fabric: the states it keeps
# to find a repeat (GEMM on the grid: 2-SM pairs 45 MB over 123k simulated steps, grid launch and
# ragged tiles alike)
FAST_FORWARD_BYTES_PER_STEP = 400
DRIFT_BYTES_PER_SM = 160 * 2**10  # with drift, each SM's random state and draws (20-22 MB over 128-132 SMs)
# One simulated ring step: copies, barrier flips, compute (tiles; GEMM and stream; attention).
STEP_SECONDS = {"timed": 5.7e-6 * TIME_MARGIN, "flow": 26e-6 * TIME_MARGIN, "attention": 109e-6 * TIME_MARGIN}
# more per step in a cluster (multicast, remote arrivals): fitted 10.7 us, kept at twice that, since
# the skip forecast can be far over in a cluster (flows drifting in phase: tmasim.skip_forecast)
CLUSTER_STEP_SECONDS = 2 * 10.7e-6
# Per SM on the fabric, per simulated step: the rates' recomputations, with every SM simulated in
# lockstep (run.aggregate = false, a grid launch), with drift (every SM its own flow) and with
# drift in a cluster (whose multicast ties the peers' flows: twenty times more).
SHARER_SECONDS = {"lockstep": 0.088e-6 * TIME_MARGIN, "drift": 0.35e-6 * TIME_MARGIN,
                  "drift_cluster": 7.0e-6 * TIME_MARGIN}
RECORD_SECONDS = 0.32e-6 * TIME_MARGIN  # appending and packing one record
WIDE_RECORD_SECONDS = 1.2e-6 * TIME_MARGIN  # keeping a record whole in the side table (tiles in milliseconds)
WIDE_SHIFT_SECONDS = 0.054e-6 * TIME_MARGIN  # and regenerating one by shifting (tiles in seconds, skipped)
SKIPPED_STEP_SECONDS = 0.2e-6 * TIME_MARGIN  # a step fast-forward skips: its share of the summary's per-step figures
RUN_SECONDS = 0.014             # any run: building the chip, its processes and the summary (fitted 14 ms; kept
                                # without the margin: it is the whole estimate of the shortest runs)
# regenerating one record of a skipped period by shifting a simulated one (attention's is not on the
# grid: kept as it was)
SHIFT_RECORD_SECONDS = {"timed": 0.039e-6 * TIME_MARGIN, "flow": 0.44e-6 * TIME_MARGIN, "attention": 0.25e-6}
EVENTS_PER_STEP = {"timed": 4, "flow": 12, "attention": 12}
RECORDS_PER_STEP = {"timed": 5, "flow": 16, "attention": 32}  # grid: tiles 4-4.5, GEMM 9-13, attention 31


@dataclass(frozen=True)
class Estimate:
    """A run's predicted cost, and what it came from (for the message)."""

    steps: int          # ring steps the engine will simulate
    plan_steps: int     # ring steps the plan holds (all CTAs, aggregated or not)
    seconds: float
    memory: int         # bytes
    events: int         # SimPy events
    records: int        # per-event records kept (0 without run.records)
    how: str            # what the figures come from, in a few words
    skipped: int = 0    # of ``steps``, those fast-forward is expected to skip
    obstacle: str = ""  # why fast-forward will skip little of the run ('' when nothing is seen in its way)
    detail: str = ""    # what the figures come from, for an estimate not of a run (a figure drawn from files)

    @property
    def large(self) -> bool:
        return self.seconds >= NOTE_SECONDS or self.memory >= NOTE_BYTES

    @property
    def too_large(self) -> bool:
        return self.seconds >= LIMIT_SECONDS or self.memory >= LIMIT_BYTES

    def text(self) -> str:
        if self.detail:
            return f"{about(self.seconds)} and {fmt.size(self.memory)} of memory ({self.detail})"
        if not self.steps:  # a plan's own cost
            return (f"{about(self.seconds)} and {fmt.size(self.memory)} of memory {self.how} "
                    f"({self.plan_steps:,} ring steps)")
        records = f", {self.records:,} records" if self.records else ""
        steps = (f"{self.steps:,} ring steps, {self.skipped:,} of them skipped by fast-forward" if self.skipped
                 else f"{self.steps:,} ring steps simulated")
        return (f"{about(self.seconds)} and {fmt.size(self.memory)} of memory ({self.how}: "
                f"{steps}, {self.events:,} events{records})")


@dataclass(frozen=True)
class Limits:
    """How a caller wants the estimate handled: ``allow`` lifts the refusal (``--yes``),
    ``notify`` receives the one-line note of a large run, before it starts; ``extra_record_bytes``
    is what the caller keeps per record after the run (DataFrames, an animation)."""

    allow: bool = False
    notify: Callable[[str], None] | None = None
    extra_record_bytes: int = 0
    extra_record_seconds: float = 0.0
    what: str = "run"
    lift: str = "add --yes to run it anyway"
    extra_seconds: float = 0.0  # what the caller does once after the run (its figures: matplotlib, drawing)
    extra_bytes: int = 0        # and the memory that takes (matplotlib, an animation's frames)
    counts: str = ""            # what the estimate counts beyond the run, for its message ("writing its trace")


DEFAULT = Limits(lift="add --yes (tmasim run, animate) or pass allow_large=True (Python) to run it anyway")


def command_line(yes: bool, *, extra_record_bytes: int = 0, extra_record_seconds: float = 0.0,
                 what: str = "run", extra_seconds: float = 0.0, extra_bytes: int = 0, counts: str = "") -> Limits:
    """A command's limits: ``--yes`` lifts them; a large run is noted on stderr before it starts."""
    return Limits(allow=yes, notify=note, extra_record_bytes=extra_record_bytes,
                  extra_record_seconds=extra_record_seconds, what=what, extra_seconds=extra_seconds,
                  extra_bytes=extra_bytes, counts=counts)


def note(line: str) -> None:
    """A command's one-line note, on stderr before the work it announces."""
    import sys

    print(line, file=sys.stderr, flush=True)


def after_run(*, out: bool = False, trace: bool = False, report: bool = False,
              animation: bool = False) -> dict[str, Any]:
    """What a command does with a run's records once it has run, as :func:`command_line`'s
    ``extra_*`` arguments: the DataFrames of spans and events (``--out``, ``--trace``, a report), the
    CSV tables and the Gantt chart of ``--out``, the Chrome trace's events (``--trace``), a report's
    tables and figures, an animation's frames. Their memory is held together (the frames, then the
    largest of what is built from them); their times add up."""
    seconds, held, figures, counts = 0.0, 0, 0.0, []
    if out or trace or report:
        seconds, held = FRAME_SECONDS_PER_RECORD, FRAME_BYTES_PER_RECORD
    if out:
        seconds += OUT_SECONDS_PER_RECORD
        figures += FIGURE_SECONDS
        counts.append("its tables and Gantt chart")
    if trace:
        seconds += TRACE_SECONDS_PER_RECORD
        counts.append("its trace")
    if out or trace:  # written one after the other: the larger of the two is held at a time
        held += max(OUT_BYTES_PER_RECORD if out else 0, TRACE_BYTES_PER_RECORD if trace else 0)
    if report:
        seconds += REPORT_SECONDS_PER_RECORD
        held = max(held, FRAME_BYTES_PER_RECORD + REPORT_BYTES_PER_RECORD)
        figures += REPORT_FIGURE_SECONDS
        counts.append("the report's tables and figures")
    if animation:
        seconds += ANIMATE_SECONDS_PER_RECORD
        held += ANIMATE_BYTES_PER_RECORD
        figures += ANIMATION_SECONDS
        counts.append("the animation's frames")
    drawn = FIGURE_BYTES + (ANIMATION_BYTES if animation else 0) if out or report or animation else 0
    return {"extra_record_bytes": held, "extra_record_seconds": seconds, "extra_seconds": figures,
            "extra_bytes": drawn, "counts": f"writing {' and '.join(counts)}" if counts else ""}


def about(seconds: float) -> str:
    """``about 3.4 min``, or ``under 1 s``."""
    text = duration(seconds)
    return text if text.startswith("under") else f"about {text}"


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s" if seconds >= 1 else "under 1 s"


def plan_estimate(steps: int, units: int, *, simulated: int, extra_plan_bytes: int = 0,
                  kind: str = "timed") -> Estimate:
    """Before planning: what building a plan of ``steps`` ring steps over ``units`` work units
    costs, and at least what running ``simulated`` of those steps costs (all of them when nothing
    is aggregated; one SM's share otherwise), at ``kind``'s per-step cost."""
    memory = INTERPRETER_BYTES + steps * PLAN_BYTES_PER_STEP[kind] + units * PLAN_BYTES_PER_UNIT + extra_plan_bytes
    seconds = steps * PLAN_SECONDS_PER_STEP + units * PLAN_SECONDS_PER_UNIT + simulated * STEP_SECONDS[kind]
    return Estimate(0, steps, seconds, memory, 0, 0, "to plan and run it, estimated before planning")


def run_estimate(steps: int, plan_steps: int, units: int, ctas: int, *, flow: bool, sharers: int, drift: bool,
                 records: bool, skipped: int = 0, extra_plan_bytes: int = 0, extra_record_bytes: int = 0,
                 extra_record_seconds: float = 0.0, attention: bool = False, cluster: bool = False,
                 wide: bool = False, fast_forward: bool = False, extra_seconds: float = 0.0,
                 extra_bytes: int = 0, counts: str = "") -> Estimate:
    """After planning, before the run: ``steps`` run by ``ctas`` CTAs on ``sharers`` SMs sharing
    the fabric (when ``flow``), ``skipped`` of them by fast-forward rather than simulated;
    ``attention`` for attention's K/V steps, ``cluster`` for CTAs in clusters (or 2-SM pairs),
    ``wide`` where the steps' spans are too long for a packed record (kept whole, 88 B more),
    ``fast_forward`` where the skip is on (it keeps states to compare); ``extra_seconds`` what the
    caller does once after the run, ``extra_bytes`` its memory, ``counts`` what that is (for the message)."""
    kind = "attention" if attention else "flow" if flow else "timed"
    memory = (extra_bytes + INTERPRETER_BYTES + plan_steps * PLAN_BYTES_PER_STEP[kind] + units * PLAN_BYTES_PER_UNIT
              + ctas * CTA_BYTES + extra_plan_bytes + (sharers * DRIFT_BYTES_PER_SM if drift else 0))
    if fast_forward and flow:
        memory += (steps - skipped) * FAST_FORWARD_BYTES_PER_STEP
    planning = plan_steps * PLAN_SECONDS_PER_STEP + units * PLAN_SECONDS_PER_UNIT
    return _estimate(steps, plan_steps, memory, kind, sharers=sharers if flow else 0, drift=drift, records=records,
                     skipped=skipped, extra_record_bytes=extra_record_bytes, extra_record_seconds=extra_record_seconds,
                     how=f"from the plan, {counts} included" if counts else "from the plan",
                     planning=planning + extra_seconds, cluster=cluster, wide=wide)


def _estimate(steps: int, plan_steps: int, memory: int, kind: str, *, sharers: int, drift: bool, records: bool,
              how: str, skipped: int = 0, extra_record_bytes: int = 0, extra_record_seconds: float = 0.0,
              planning: float = 0.0, cluster: bool = False, wide: bool = False) -> Estimate:
    simulated = steps - skipped
    per_record = RECORDS_PER_STEP[kind] if records else 0
    sharing = "lockstep" if not drift else "drift_cluster" if cluster else "drift"
    per_step = STEP_SECONDS[kind] + (CLUSTER_STEP_SECONDS if cluster else 0.0) + sharers * SHARER_SECONDS[sharing]
    record_seconds = RECORD_SECONDS + (WIDE_RECORD_SECONDS if wide else 0.0)
    seconds = (RUN_SECONDS + planning + simulated * (per_step + per_record * record_seconds)
               + skipped * (SKIPPED_STEP_SECONDS
                            + per_record * (SHIFT_RECORD_SECONDS[kind] + (WIDE_SHIFT_SECONDS if wide else 0.0)))
               + steps * per_record * extra_record_seconds)
    kept = steps * per_record
    memory += kept * (RECORD_BYTES[kind] + (WIDE_RECORD_BYTES if wide else 0) + extra_record_bytes)
    return Estimate(steps, plan_steps, seconds, memory, simulated * EVENTS_PER_STEP[kind], kept, how, skipped)


def check(estimate: Estimate, limits: Limits) -> None:
    """Refuse a run past the limits (unless allowed); say so first for a large one."""
    if estimate.too_large and not limits.allow:
        raise ResourceError(f"{limits.what}: {estimate.text()}, over the limit of {duration(LIMIT_SECONDS)} or "
                            f"{fmt.size(LIMIT_BYTES)}; {limits.lift}, or make it smaller")
    if estimate.large and limits.notify is not None:
        limits.notify(f"tmasim: note: a large {limits.what}: {estimate.text()}")


def max_jobs() -> int:
    """The most worker processes a command starts: four per CPU (at least 8), never over 256."""
    return min(256, max(8, 4 * (os.cpu_count() or 1)))


def check_jobs(jobs: object) -> int:
    """``--jobs`` as a whole number in 1..max_jobs(), refused in one line before any worker starts
    (a 23-digit value included)."""
    from tmasim.errors import TmasimError

    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise TmasimError(f"--jobs: {str(jobs)[:40]!r} must be a whole number >= 1")
    if jobs > max_jobs():
        shown = f"{jobs:,}" if jobs < 10**12 else f"a {len(str(jobs))}-digit number"
        raise TmasimError(f"--jobs: {shown} is over the {max_jobs()} worker processes this machine takes "
                          f"(4 per CPU, at most 256); give --jobs {os.cpu_count() or 1} or fewer")
    return jobs


def plot_estimate(rows: int, kind: str, *, files: str) -> Estimate:
    """``tmasim plot`` of a run folder whose ``files`` (spans, events, bandwidth) hold about
    ``rows`` rows (from their sizes, before reading them): reading and checking every row, then
    drawing ``kind`` (a timeline of a whole run is drawn zoomed or time-averaged: its cost is
    per row, never per bar)."""
    seconds = FIGURE_SECONDS + rows * (CSV_ROW_SECONDS + PLOT_ROW_SECONDS.get(kind, 0.0))
    memory = INTERPRETER_BYTES + FIGURE_BYTES + rows * CSV_ROW_MEMORY
    return Estimate(0, 0, seconds, memory, 0, 0, "from the folder's files", detail=f"{files}: about {rows:,} rows")
