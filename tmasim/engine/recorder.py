"""Per-event records, kept as compact numpy columns and turned into DataFrames once, at the end.

Summary-only runs (sweeps) pass ``None`` instead of a :class:`Recorder`; the components test
for that once per event and skip the record entirely.

Memory is bounded by design: a record is appended as a small tuple to a short buffer, and
every :data:`CHUNK` records the buffer becomes one packed numpy array (about 24 bytes a
record instead of some 300 as Python objects). Strings (lanes, kinds, barrier names) are
stored as small integer codes into a table of the distinct strings. Records arrive nearly in
time order (a span when it ends), so a chunk keeps each record's time as the step from the
one before (32 bits, signed) and a span's start as its duration; each chunk is packed in this
narrow layout when its values fit, else (a step over 2 ms, a CTA index over 32767, ...) in
64-bit columns, for that chunk only. A 1,000,000-tile run's records take about 200 MB rather than
1.5 GB (``benchmarks/bench_memory.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tmasim.errors import TmasimError

SPAN_COLUMNS = ("start_ps", "end_ps", "sm", "cta", "lane", "kind", "tile", "stage", "bytes")
EVENT_COLUMNS = ("time_ps", "sm", "cta", "kind", "name", "tile", "stage", "phase")

# Span kinds, by lane:
#   producer: wait_empty          the producer blocked on a slot's empty barrier
#   tma:      transfer            the copy engine streaming a tile's bytes
#   slot:     fill, ready, use    a slot from issue to data landed, landed to compute start,
#                                 compute start to release (empty arrival)
#   consumer: wait_full, compute  the consumer blocked on a full barrier; tensor-core work
# Event kinds: issue, landed, flip (a barrier phase completed), race (a read before landing);
# with clusters: cluster (a CTA joins cluster `name` as rank `stage`), multicast (a peer's slice
# landed in this CTA's slot; `name` is the issuing CTA), remote_arrive (a peer's consumer arrived
# on this CTA's empty barrier; `name` is the arriving consumer); at a deadlock, stuck (a wait
# still open when the run stopped: `name` the barrier, `phase` the parity waited for).

CHUNK = 1 << 14
# As buffered: spans (end, duration, sm, cta, lane, kind, tile, stage, bytes) -- a span is
# recorded when it ends; events (time, sm, cta, kind, name, tile, stage, phase). The first
# field (the time) is packed as the difference from the previous record's (mostly small and
# non-negative: an issue is recorded at the time the copy unit accepts it, which may differ
# from now), strings as codes into the table of distinct strings.
_SPAN_FIELDS = ("end_ps", "duration_ps", "sm", "cta", "lane", "kind", "tile", "stage", "bytes")
_EVENT_FIELDS = EVENT_COLUMNS
_SPAN_NARROW = np.dtype([("end_ps", "<i4"), ("duration_ps", "<u4"), ("sm", "<i2"), ("cta", "<i2"),
                         ("lane", "u1"), ("kind", "u1"), ("tile", "<i4"), ("stage", "<i2"), ("bytes", "<u4")])
_EVENT_NARROW = np.dtype([("time_ps", "<i4"), ("sm", "<i2"), ("cta", "<i2"), ("kind", "u1"), ("name", "<u2"),
                          ("tile", "<i4"), ("stage", "<i2"), ("phase", "<i4")])
_STRINGS = {"span": ("lane", "kind"), "event": ("kind", "name")}


class _Chunk:
    """Up to CHUNK records: packed narrow (times as differences from ``first``) or 64-bit."""

    __slots__ = ("records", "first", "narrow")

    def __init__(self, columns: dict[str, np.ndarray[Any, Any]], narrow: np.dtype[Any]) -> None:
        time = next(iter(columns))
        times = columns[time]
        self.first = int(times[0])
        steps = np.diff(times, prepend=times[:1])
        self.narrow = all(_fits(steps if name == time else values, narrow[name]) for name, values in columns.items())
        layout = narrow if self.narrow else np.dtype([(name, "<i8") for name in columns])
        self.records = np.empty(len(times), dtype=layout)
        for name, values in columns.items():
            self.records[name] = steps if self.narrow and name == time else values

    def __len__(self) -> int:
        return len(self.records)

    def column(self, name: str, time: str) -> np.ndarray[Any, Any]:
        values = self.records[name].astype(np.int64)
        if self.narrow and name == time:
            return self.first + np.cumsum(values)
        return values


def _fits(values: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> bool:
    info = np.iinfo(dtype)
    return bool(values.min() >= info.min and values.max() <= info.max)


class _Table:
    """One kind of record: a buffer of tuples, packed chunks, and the string code tables."""

    __slots__ = ("buffer", "chunks", "narrow", "fields", "codes")

    def __init__(self, fields: tuple[str, ...], narrow: np.dtype[Any], strings: tuple[str, ...]) -> None:
        self.buffer: list[tuple[Any, ...]] = []
        self.chunks: list[_Chunk] = []
        self.narrow, self.fields = narrow, fields
        self.codes: dict[str, dict[str, int]] = {name: {} for name in strings}

    def __len__(self) -> int:
        return sum(len(c) for c in self.chunks) + len(self.buffer)

    def flush(self) -> None:
        """Pack the buffer: one column at a time (strings to codes), then one chunk."""
        if not self.buffer:
            return
        columns = {}
        for name, values in zip(self.fields, zip(*self.buffer, strict=True), strict=True):
            if name in self.codes:
                codes = self.codes[name]
                values = tuple([codes.setdefault(v, len(codes)) for v in values])
            try:
                columns[name] = np.array(values, dtype=np.int64)
            except OverflowError:
                raise TmasimError("run.records: a time or count beyond 64 bits cannot be recorded; "
                                  "set run.records=false") from None
        self.chunks.append(_Chunk(columns, self.narrow))
        self.buffer.clear()

    def column(self, name: str) -> np.ndarray[Any, Any]:
        """One column over every chunk, as int64 (strings decoded for the string columns)."""
        self.flush()
        time = self.fields[0]
        values = (np.concatenate([c.column(name, time) for c in self.chunks]) if self.chunks
                  else np.empty(0, dtype=np.int64))
        if name in self.codes:
            names = np.array(list(self.codes[name]), dtype=object)
            return names[values] if len(names) else values.astype(object)
        return values


class Recorder:
    """Collects spans and events in the column order of SPAN_COLUMNS / EVENT_COLUMNS."""

    __slots__ = ("_spans", "_events", "_span_buffer", "_event_buffer")

    def __init__(self) -> None:
        self._spans = _Table(_SPAN_FIELDS, _SPAN_NARROW, _STRINGS["span"])
        self._events = _Table(_EVENT_FIELDS, _EVENT_NARROW, _STRINGS["event"])
        self._span_buffer = self._spans.buffer
        self._event_buffer = self._events.buffer

    def span(self, start: float, end: float, sm: int, cta: int, lane: str, kind: str,
             tile: int, stage: int, nbytes: int = 0) -> None:
        buffer = self._span_buffer
        buffer.append((end, end - start, sm, cta, lane, kind, tile, stage, nbytes))
        if len(buffer) >= CHUNK:
            self._spans.flush()

    def event(self, time: float, sm: int, cta: int, kind: str, name: str,
              tile: int = -1, stage: int = -1, phase: int = -1) -> None:
        buffer = self._event_buffer
        buffer.append((time, sm, cta, kind, name, tile, stage, phase))
        if len(buffer) >= CHUNK:
            self._events.flush()

    @property
    def span_count(self) -> int:
        return len(self._spans)

    @property
    def event_count(self) -> int:
        return len(self._events)

    def span_columns(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every span as columns (SPAN_COLUMNS order): int64 numbers, strings for lane and kind."""
        table = self._spans
        end = table.column("end_ps")
        start = end - table.column("duration_ps")
        return {"start_ps": start, "end_ps": end, **{name: table.column(name) for name in SPAN_COLUMNS[2:]}}

    def event_columns(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every event as columns (EVENT_COLUMNS order): int64 numbers, strings for kind and name."""
        return {name: self._events.column(name) for name in EVENT_COLUMNS}
