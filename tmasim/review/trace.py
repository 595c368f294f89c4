"""The timeline in the Chrome trace event format (JSON), for ui.perfetto.dev and chrome://tracing.

Built from result tables only (never from the engine): :func:`chrome_trace` turns the spans and
events tables into a JSON-able dict; :func:`write_chrome_trace` writes a run's trace to a file
(gzip-compressed when the name ends in ``.gz``); :func:`validate` lists what breaks the format's
rules or what Perfetto would drop on import.

Layout. One process per SM (``SM n``), one thread per CTA role, in pipeline order:
``cta{c} producer`` (waits on empty barriers), ``cta{c} copy engine`` (TMA transfers),
``cta{c} slot {s}`` (a slot from copy issue to landing, then in use by the consumer; phase flips
of its full and empty barriers as instants), ``cta{c} consumer`` (waits on full barriers,
compute; races as instants). A thread per slot rather than one for all slots because
complete events on one thread must nest or be disjoint, and different slots are busy at the same
time. A lane this module does not know becomes a thread named after the lane. Spans of one
thread that overlap (two consumer warpgroups waiting at once; a racy read of a slot still
filling) go to extra threads, ``cta{c} consumer #2`` and so on, instead of being dropped.

Perfetto rules this follows, each for a reason found in its JSON importer:

* pid = SM + 1 and tids start at 1: Perfetto treats pid/tid 0 as the kernel's idle task.
  The SM number is in the process name and sorts the processes.
* tids are unique across the whole trace: Perfetto applies ``thread_name`` by tid alone.
* Flows are v2 (``bind_id`` with ``flow_out``/``flow_in`` on the complete events), not v1
  ``s``/``f`` events: v1 flow events bind to whatever slice encloses their timestamp, which at
  a span boundary (a transfer ends as the next begins) is ambiguous. A flow runs from a copy's
  transfer to the consumer compute it released; Perfetto draws an arrow from the end of the
  source slice to the *start* of the destination slice, so the destination is the compute
  (which starts when the full-barrier wait ends), not the wait itself, whose start precedes the
  landing and would draw the arrow backwards. Reads that raced ahead of the landing get no flow
  (the copy released nothing); they are marked by a ``race`` instant instead.
* Perfetto reads ``ts`` and ``dur`` as nanoseconds, each rounded on its own; ``dur`` is
  shortened (by under 1 ns) where that rounding would push a slice's end past the next slice's
  start, which Perfetto would drop as overlapping. ``ts`` keeps every picosecond, and every
  span carries its exact ``start_ps``/``end_ps`` in ``args``.

Counters: ``cta{c} slots`` (series ``in use``: a slot counts from its fill start to its use end)
per CTA, and one track per name of an optional ``counters`` table (time_ps, name, value; with an
``sm`` column a row goes to that SM's process, otherwise to a ``GPU`` process).
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tmasim.review.trace_check import validate
from tmasim.review.trace_format import Event, ns_rounded, ns_truncated

__all__ = ["chrome_trace", "write_chrome_trace", "validate", "SPAN_COLUMNS", "EVENT_COLUMNS", "COUNTER_COLUMNS"]

if TYPE_CHECKING:
    import pandas as pd

    from tmasim.output.result import Result

SPAN_COLUMNS = ("start_ps", "end_ps", "sm", "cta", "lane", "kind", "tile", "stage", "bytes")
EVENT_COLUMNS = ("time_ps", "sm", "cta", "kind", "name", "tile", "stage", "phase")
COUNTER_COLUMNS = ("time_ps", "name", "value")

# Display order of the roles inside a CTA; lanes not listed come after them, by name.
_ROLE_RANK = {"producer": 0, "tma": 1, "slot": 2, "consumer": 3}
_ROLE_LABEL = {"producer": "producer", "tma": "copy engine", "consumer": "consumer"}
_UNKNOWN_LANE_RANK = 4
_EVENTS_RANK = 5  # instants of event kinds this module does not know
_COUNTERS_RANK = 6
_CHIP = -1  # the "sm" of the GPU-wide process that holds counters not tied to one SM
# Event kinds shown by spans already (issue = fill start, landed = fill end).
_SKIPPED_EVENT_KINDS = frozenset({"issue", "landed"})
_SLOTS_COUNTER_SERIES = "in use"


# ---------------------------------------------------------------------------------------------
# Time: integer picoseconds in, microsecond floats out (read back as trace_format says)
# ---------------------------------------------------------------------------------------------

def _us(ps: Iterable[int] | np.ndarray) -> np.ndarray:
    """Picoseconds to µs floats that keep every picosecond (``round(us * 1e6) == ps``).

    The nearest double to ``ps / 1e6`` can sit a hair below a whole nanosecond (1.001 µs is
    1000.9999999999999 ns); Perfetto releases that truncate would then read it 1 ns early and a
    slice that touches the previous one would overlap it. Such values move up by one ulp.
    """
    ps = np.asarray(ps, dtype=np.int64)
    if ps.size and ps.min() < 0:
        raise ValueError(f"times must not be negative (got {int(ps.min())} ps)")
    us = ps / 1e6
    floor_ns = ps // 1000
    low = ns_truncated(us) < floor_ns
    while low.any():
        us[low] = np.nextafter(us[low], np.inf)
        low = ns_truncated(us) < floor_ns
    return us


def _ps(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A time column as int64 picoseconds (the engine's clock is typed float but holds ints)."""
    values = frame[column].to_numpy()
    if np.issubdtype(values.dtype, np.integer):
        return values.astype(np.int64)
    return np.rint(values.astype(np.float64)).astype(np.int64)


def _dur_us(start_ps: np.ndarray, end_ps: np.ndarray, ts_us: np.ndarray, end_us: np.ndarray) -> np.ndarray:
    """Durations in µs for complete events at ``ts_us`` that must end by ``end_us`` in every viewer.

    Exact (to the picosecond) unless Perfetto's rounding of ``ts`` and ``dur`` one by one
    would end the slice after its true end as Perfetto sees it (1.6 ns + 1.6 ns = 4 ns, yet
    3.2 ns reads as 3): then the longest duration that rounds to the right end, under 1 ns
    shorter. Chrome's viewer adds in floating point, so ``ts + dur`` is also kept <= ``end_us``.
    """
    start_ps = np.asarray(start_ps, dtype=np.int64)
    end_ps = np.asarray(end_ps, dtype=np.int64)
    if (end_ps < start_ps).any():
        raise ValueError("a span ends before it starts")
    dur = (end_ps - start_ps) / 1e6
    limit = ns_rounded(end_us) - ns_rounded(ts_us)
    over = ns_rounded(dur) > limit
    dur[over] = (limit[over] * 1000 + 499) / 1e6
    late = ts_us + dur > end_us
    dur[late] = end_us[late] - ts_us[late]  # exact when end <= 2 ts (Sterbenz); else off by an ulp
    late = ts_us + dur > end_us
    while late.any():  # at most a step or two: here dur > ts, so one ulp of dur moves the sum
        dur[late] = np.nextafter(dur[late], 0.0)
        late = ts_us + dur > end_us
    return dur


# ---------------------------------------------------------------------------------------------
# Threads: who draws what, and the pids/tids they get
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class _ThreadKey:
    """One track of the timeline; the field order is the display order."""

    sm: int
    cta: int
    rank: int
    sub: int  # the slot number for slot threads, else 0
    label: str
    row: int = 0  # 0, or the extra thread that holds spans overlapping those of row 0

    @property
    def name(self) -> str:
        base = self.label if self.cta < 0 else f"cta{self.cta} {self.label}"
        return base if self.row == 0 else f"{base} #{self.row + 1}"


def _role(sm: int, cta: int, lane: str, stage: int) -> _ThreadKey:
    """The row-0 thread of a span lane (a slot's thread is per stage)."""
    if lane == "slot":
        return _ThreadKey(sm, cta, _ROLE_RANK["slot"], stage, f"slot {stage}")
    if lane in _ROLE_LABEL:
        return _ThreadKey(sm, cta, _ROLE_RANK[lane], 0, _ROLE_LABEL[lane])
    return _ThreadKey(sm, cta, _UNKNOWN_LANE_RANK, 0, str(lane))


class _Ids(NamedTuple):
    pid: int
    tid: int


def _assign_ids(keys: Iterable[_ThreadKey]) -> dict[_ThreadKey, _Ids]:
    """pid = SM + 1 (the GPU-wide process after the last SM); tids 1, 2, ... in display order."""
    ordered = sorted(set(keys))
    last_sm = max((k.sm for k in ordered), default=-1)
    chip_pid = max(last_sm, 0) + 2

    def pid(sm: int) -> int:
        return chip_pid if sm == _CHIP else sm + 1

    return {key: _Ids(pid(key.sm), tid) for tid, key in enumerate(ordered, start=1)}


def _metadata_events(ids: Mapping[_ThreadKey, _Ids]) -> list[Event]:
    """Names and sort order of every process and thread used. A process's metadata carries the
    tid of its first thread: without a tid Perfetto would make up a thread with tid = pid."""
    threads = sorted(ids.items(), key=lambda item: item[1].tid)
    processes: dict[int, tuple[int, int]] = {}  # pid -> (sm, first tid)
    for key, (pid, tid) in threads:
        processes.setdefault(pid, (key.sm, tid))
    out: list[Event] = []
    for pid, (sm, tid) in sorted(processes.items()):
        out.append(_meta("process_name", pid, tid, name="GPU" if sm == _CHIP else f"SM {sm}"))
        out.append(_meta("process_sort_index", pid, tid, sort_index=sm))
    for key, (pid, tid) in threads:
        out.append(_meta("thread_name", pid, tid, name=key.name))
        out.append(_meta("thread_sort_index", pid, tid, sort_index=tid))
    return out


def _meta(what: str, pid: int, tid: int, **args: Any) -> Event:
    # ts 0 although the format lets metadata omit it: some importers reject an event without ts.
    return {"ph": "M", "name": what, "pid": pid, "tid": tid, "ts": 0, "args": args}


# ---------------------------------------------------------------------------------------------
# Spans -> complete events, flows
# ---------------------------------------------------------------------------------------------

@dataclass
class _Slice:
    """A complete event under construction, with the span it came from."""

    key: _ThreadKey
    start_ps: int
    end_ps: int
    sm: int
    cta: int
    lane: str
    kind: str
    tile: int
    event: Event


def _require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} table lacks {'columns' if len(missing) > 1 else 'column'} {', '.join(missing)}")


def _slices(spans: pd.DataFrame) -> list[_Slice]:
    """Every span as a complete event, on its role's thread (or an overflow row of it)."""
    _require(spans, SPAN_COLUMNS, "spans")
    if spans.empty:
        return []
    start, end = _ps(spans, "start_ps"), _ps(spans, "end_ps")
    ts = _us(start)
    dur = _dur_us(start, end, ts, _us(end))
    rows = zip(start.tolist(), end.tolist(), ts.tolist(), dur.tolist(),
               *(spans[c].tolist() for c in SPAN_COLUMNS[2:]), strict=True)
    out = []
    for s, e, t, d, sm, cta, lane, kind, tile, stage, nbytes in rows:
        sm, cta, tile, stage, nbytes = int(sm), int(cta), int(tile), int(stage), int(nbytes)
        args: dict[str, Any] = {"tile": tile, "stage": stage}
        if nbytes:
            args["bytes"] = nbytes
        args |= {"start_ps": s, "end_ps": e}
        event = {"ph": "X", "name": f"{kind} {tile}" if tile >= 0 else str(kind), "cat": str(lane),
                 "ts": t, "dur": d, "args": args}
        out.append(_Slice(_role(sm, cta, str(lane), stage), s, e, sm, cta, str(lane), str(kind), tile, event))
    _spread_overlaps(out)
    return out


def _spread_overlaps(slices: list[_Slice]) -> None:
    """Move slices that overlap others of their thread to extra rows (greedy interval partitioning)."""
    by_thread: dict[_ThreadKey, list[_Slice]] = defaultdict(list)
    for item in slices:
        by_thread[item.key].append(item)
    for key, items in by_thread.items():
        row_ends: list[int] = []  # where the last slice of each row ends
        for item in sorted(items, key=lambda x: (x.start_ps, x.end_ps)):
            row = next((r for r, end in enumerate(row_ends) if end <= item.start_ps), len(row_ends))
            if row == len(row_ends):
                row_ends.append(0)
            row_ends[row] = item.end_ps
            if row:
                item.key = _ThreadKey(key.sm, key.cta, key.rank, key.sub, key.label, row)


def _link_flows(slices: list[_Slice], events: pd.DataFrame | None = None) -> int:
    """Bind each copy's transfer to the computes its landing released; returns the flow count.

    Per (sm, cta, tile) the transfer that landed last completed the full barrier. Every
    consumer compute of that tile that started at or after the landing gets the flow (one
    arrow per consumer warpgroup); one that started earlier read before the data landed. A
    multicast transfer (cluster runs: ``multicast`` events name its issuer) lands in several
    CTAs: it is drawn once, on its issuer, with arrows to the computes it released in each.
    """
    receivers = _multicast_receivers(events)
    landed: dict[tuple[int, int, int], _Slice] = {}
    computes: dict[tuple[int, int, int], list[_Slice]] = defaultdict(list)
    for item in slices:
        if item.lane == "tma" and item.kind == "transfer":
            into = receivers.get((item.sm, item.cta, item.tile, item.end_ps), [(item.sm, item.cta)])
            for sm, cta in into:
                tile_key = (sm, cta, item.tile)
                if tile_key not in landed or item.end_ps > landed[tile_key].end_ps:
                    landed[tile_key] = item
        elif item.lane == "consumer" and item.kind == "compute":
            computes[(item.sm, item.cta, item.tile)].append(item)
    released_by: dict[int, tuple[_Slice, list[_Slice]]] = {}
    for tile_key, source in sorted(landed.items(), key=lambda kv: (kv[1].start_ps, kv[0])):
        released = [c for c in computes.get(tile_key, []) if c.start_ps >= source.end_ps]
        if released:
            released_by.setdefault(id(source), (source, []))[1].extend(released)
    for flows, (source, released) in enumerate(released_by.values(), start=1):
        source.event |= {"bind_id": flows, "flow_out": True}
        for compute in released:
            compute.event |= {"bind_id": flows, "flow_in": True}
    return len(released_by)


def _multicast_receivers(events: pd.DataFrame | None) -> dict[tuple[int, int, int, int], list[tuple[int, int]]]:
    """(issuer sm, issuer cta, tile, landing ps) -> the CTAs a multicast copy landed in."""
    if events is None or events.empty or "multicast" not in set(events["kind"]):
        return {}
    casts = events[events["kind"] == "multicast"]
    issuers = casts["name"].str.extract(r"sm(\d+)\.cta(\d+)").astype(int)
    out: dict[tuple[int, int, int, int], list[tuple[int, int]]] = defaultdict(list)
    for (sm, cta, tile, t), (src_sm, src_cta) in zip(casts[["sm", "cta", "tile", "time_ps"]].itertuples(index=False),
                                                      issuers.itertuples(index=False), strict=True):
        out[(int(src_sm), int(src_cta), int(tile), int(t))].append((int(sm), int(cta)))
    return out


# ---------------------------------------------------------------------------------------------
# Events -> instants; counters
# ---------------------------------------------------------------------------------------------

def _instants(events: pd.DataFrame) -> list[tuple[_ThreadKey, Event]]:
    """Barrier phase flips on their slot's thread, races on the consumer's, other kinds on an
    ``events`` thread; issue and landed are left out (they are the fill span's ends)."""
    _require(events, EVENT_COLUMNS, "events")
    kept = events[~events["kind"].isin(_SKIPPED_EVENT_KINDS)]
    if kept.empty:
        return []
    times = _us(_ps(kept, "time_ps")).tolist()
    out = []
    rows = zip(times, *(kept[c].tolist() for c in EVENT_COLUMNS[1:]), strict=True)
    for t, sm, cta, kind, name, tile, stage, phase in rows:
        sm, cta, tile, stage, phase = int(sm), int(cta), int(tile), int(stage), int(phase)
        key, label, args = _instant_place(sm, cta, str(kind), str(name), stage)
        args |= {"tile": tile, "stage": stage}
        if phase >= 0:
            args["phase"] = phase
        out.append((key, {"ph": "i", "s": "t", "name": label, "cat": str(kind), "ts": t, "args": args}))
    return out


def _instant_place(sm: int, cta: int, kind: str, name: str, stage: int) -> tuple[_ThreadKey, str, dict[str, Any]]:
    """The thread, the label and the first args of one instant."""
    short = name.removeprefix(f"sm{sm}.cta{cta}.")
    if kind.startswith("flip_") and stage >= 0:
        return _role(sm, cta, "slot", stage), f"{short} flip", {"barrier": name}
    if kind == "race":
        return _role(sm, cta, "consumer", stage), "race", {"reader": name, "what": "read before its copy landed"}
    if kind == "cluster":
        return _ThreadKey(sm, cta, _EVENTS_RANK, 0, "events"), f"{name}, rank {stage}", {"cluster": name}
    if kind == "remote_arrive" and stage >= 0:
        return _role(sm, cta, "slot", stage), "remote arrival", {"from": name}
    return _ThreadKey(sm, cta, _EVENTS_RANK, 0, "events"), kind, {"name": name}


def _slot_counters(spans: pd.DataFrame) -> list[tuple[_ThreadKey, Event]]:
    """``cta{c} slots``: how many slots are in use, from each slot's fill start to its use end."""
    slots = spans[spans["lane"] == "slot"]
    if slots.empty:
        return []
    held = (slots.groupby(["sm", "cta", "stage", "tile"], sort=False)
            .agg(start=("start_ps", "min"), end=("end_ps", "max")).reset_index())
    steps = _slot_steps(held)
    steps["in_use"] = steps.groupby(["sm", "cta"])["delta"].cumsum()
    steps = steps[steps["delta"] != 0]  # a release and an acquire at once change nothing
    times = _us(_ps(steps, "time_ps")).tolist()
    out = []
    for t, sm, cta, value in zip(times, steps["sm"].tolist(), steps["cta"].tolist(), steps["in_use"].tolist(),
                                 strict=True):
        key = _ThreadKey(int(sm), int(cta), _COUNTERS_RANK, 0, "counters")
        out.append((key, {"ph": "C", "name": f"cta{int(cta)} slots", "ts": t,
                          "args": {_SLOTS_COUNTER_SERIES: int(value)}}))
    return out


def _slot_steps(held: pd.DataFrame) -> pd.DataFrame:
    """+1 at each hold's start, -1 at its end, summed per (sm, cta, time), in time order."""
    import pandas as pd

    ups = held[["sm", "cta"]].assign(time_ps=held["start"], delta=1)
    downs = held[["sm", "cta"]].assign(time_ps=held["end"], delta=-1)
    steps = pd.concat([ups, downs], ignore_index=True)
    return steps.groupby(["sm", "cta", "time_ps"], as_index=False)["delta"].sum()


def _external_counters(counters: pd.DataFrame | None) -> list[tuple[_ThreadKey, Event]]:
    """One counter track per name (series ``value``); rows whose value is not finite are left
    out, since JSON has no NaN or infinity."""
    if counters is None or counters.empty:
        return []
    _require(counters, COUNTER_COLUMNS, "counters")
    values = counters["value"].to_numpy(dtype=np.float64)
    kept = counters[np.isfinite(values)]
    times = _us(_ps(kept, "time_ps")).tolist()
    sms = kept["sm"].tolist() if "sm" in kept.columns else [None] * len(kept)
    out = []
    for t, name, value, sm in zip(times, kept["name"].tolist(), kept["value"].tolist(), sms, strict=True):
        on_sm = sm is not None and not (isinstance(sm, float) and math.isnan(sm))
        key = _ThreadKey(int(sm) if on_sm else _CHIP, -1, _COUNTERS_RANK, 0, "counters")
        out.append((key, {"ph": "C", "name": str(name), "ts": t, "args": {"value": float(value)}}))
    return out


def _counter_threads(placed: list[tuple[_ThreadKey, Event]], known: set[_ThreadKey]) -> list[tuple[_ThreadKey, Event]]:
    """Move counters onto a thread that exists already (the first of their CTA, else of their
    SM): Perfetto files a counter under the process of its tid, and a thread made only for
    counters would show as an empty track. Where there is none, a ``counters`` thread stays."""
    first: dict[tuple[int, int], _ThreadKey] = {}
    for key in sorted(known):
        first.setdefault((key.sm, key.cta), key)
        first.setdefault((key.sm, -1), key)
    return [(first.get((key.sm, key.cta), key), event) for key, event in placed]


# ---------------------------------------------------------------------------------------------
# The trace
# ---------------------------------------------------------------------------------------------

_PHASE_ORDER = {"X": 1, "i": 2, "I": 2, "C": 3}


def _order(event: Event) -> tuple[int, float, int]:
    """Metadata first, then by time; at one time, flow sources before everything else, since
    Perfetto drops a flow whose destination it reads before its source."""
    if event["ph"] == "M":
        return (0, 0.0, 0)
    rank = 0 if event.get("flow_out") else _PHASE_ORDER.get(event["ph"], 4)
    return (1, event["ts"], rank)


def chrome_trace(spans: pd.DataFrame, events: pd.DataFrame, *, stats: Mapping[str, Any] | None = None,
                 scenario: Mapping[str, Any] | None = None, counters: pd.DataFrame | None = None) -> dict[str, Any]:
    """The timeline as a Chrome trace (a JSON-able dict); see the module docstring for the layout.

    ``spans`` and ``events`` are :attr:`Result.spans` and :attr:`Result.events`; ``stats`` and
    ``scenario`` (the summary and ``Scenario.to_dict()``) go into ``metadata`` so that a trace
    says what produced it; ``counters`` (time_ps, name, value[, sm]) adds one counter track per
    name, e.g. bandwidth per link.
    """
    slices = _slices(spans)
    flows = _link_flows(slices, events)
    placed = [(s.key, s.event) for s in slices] + _instants(events)
    known = {key for key, _ in placed}
    placed += _counter_threads(_slot_counters(spans) + _external_counters(counters), known)
    ids = _assign_ids(key for key, _ in placed)
    trace_events = _metadata_events(ids)
    for key, event in placed:
        event["pid"], event["tid"] = ids[key]
        trace_events.append(event)
    trace_events.sort(key=_order)
    return {
        "traceEvents": trace_events,
        "displayTimeUnit": "ns",
        "metadata": _metadata(stats, scenario, flows),
    }


def _metadata(stats: Mapping[str, Any] | None, scenario: Mapping[str, Any] | None, flows: int) -> dict[str, Any]:
    from tmasim.version import __version__

    return {
        "generator": f"tmasim {__version__}",
        "time": "ts and dur in µs (float); exact integer picoseconds in args start_ps/end_ps",
        "flows": f"{flows} copy landing -> consumer compute (v2: bind_id, flow_out/flow_in)",
        "scenario": _plain(dict(scenario)) if scenario is not None else None,
        "stats": _plain(dict(stats)) if stats is not None else None,
    }


def _plain(value: Any) -> Any:
    """Plain JSON values: numpy scalars unwrapped, NaN and infinities as null, others as text."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


TRACE_SUFFIXES = (".json", ".json.gz")  # plain JSON under any other name; gzip for .gz


def write_chrome_trace(result: Result, path: str | Path, *, counters: pd.DataFrame | None = None) -> Path:
    """Write a run's trace as JSON (gzip-compressed when ``path`` ends in ``.gz``); returns the path."""
    from tmasim.errors import TmasimError
    from tmasim.output.paths import check_suffix

    check_suffix("--trace", Path(path), TRACE_SUFFIXES)
    if result.recorder is None:
        raise TmasimError("no timeline to trace: the run kept no records (run.records = false)")
    trace = chrome_trace(result.spans, result.events, stats=result.stats, scenario=result.scenario.to_dict(),
                         counters=counters)
    text = json.dumps(trace, separators=(",", ":"), allow_nan=False)
    from tmasim.output.paths import replacing

    path = Path(path)
    with replacing(path, "--trace") as tmp:
        if path.name.endswith(".gz"):  # no time and no temporary name in the header: the same bytes every run
            with tmp.open("wb") as raw, gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw, mtime=0) as stream:
                stream.write(text.encode("utf-8"))
        else:
            tmp.write_text(text, encoding="utf-8")
    return path
