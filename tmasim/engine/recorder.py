"""Per-event records, kept as one compact byte buffer and turned into DataFrames once, at the end.

Summary-only runs (sweeps) pass ``None`` instead of a :class:`Recorder`; the components test
for that once per event and skip the record entirely.

Records cost little, in time and in memory:

- One stream, in the order things happened: every record is ``WIDTH`` integers packed at once
  (:mod:`struct`) onto one byte buffer, each field as narrow as the engine's values are (the
  time in 64 bits, a duration in 32, an SM in 16, a form in 8, ...: 32 bytes a record, some 300
  as Python objects). No Python object is kept per record or per number; no string: lanes,
  kinds and names are small integer codes that the components look up once, when they are
  built. The buffer is the store: nothing is converted while the run goes on (numpy work in
  the middle of a run is slow: fresh memory to touch, cold caches), and at the end numpy reads
  it in place, as a structured array.
- A record with a value its field cannot hold (a span over 4.3 ms, a CTA index over 32767, a
  float time) is kept whole, as 64-bit numbers, in a side table by its position; the buffer
  holds a placeholder there. Rare, so it costs nothing where it does not happen.
- One record where one moment makes several rows: a copy that lands is its ``transfer`` span
  and its ``landed`` event; a full barrier's flip is the slot's ``fill`` span and the
  ``flip_full`` event; an MMA step is the consumer's ``compute`` span and the slot's ``use``
  span (same start, the slot held ``tail`` longer). The rows are derived when the tables are
  built, in the order they were recorded, so the tables are the same as with one record each.

A 1,000,000-tile run (9,000,000 rows) peaked at 182 MB, the interpreter's 50 included
(``benchmarks/bench_memory.py``).
"""

from __future__ import annotations

import bisect
import struct
from array import array
from collections.abc import Callable
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

# A record: time, a, b, sm, cta, form, tile, stage, value, name. ``form`` says what it is (a
# code into the recorder's table of forms); the others by form:
#   span      time = end, a = duration, value = bytes
#   event     time, value = phase, name = name code
#   COPY      a transfer span (time = end, a = duration, value = bytes) + its landed event (name)
#   FILL      a fill span (time = end, a = duration, value = bytes) + flip_full (b = phase, name)
#   COMPUTE   a compute span (time = end, a = duration) + the slot's use span (ends b later)
#   COMPUTE_FLIP  COMPUTE + the empty barrier's flip when the slot is released (value = phase, name)
#   WAIT_ISSUE  the producer's wait_empty span (time = end, a = duration) + the issue event of the
#               copy it then made (b later, value = phase -1, name = the copy engine)
WIDTH = 10
_FIELDS = ("time", "a", "b", "sm", "cta", "form", "tile", "stage", "value", "name")
# A record as the buffer keeps it: the struct format and the numpy type that reads it in place.
_FORMAT = "qIihhBibiH"
_RECORD = np.dtype([("time", "<i8"), ("a", "<u4"), ("b", "<i4"), ("sm", "<i2"), ("cta", "<i2"), ("form", "u1"),
                    ("tile", "<i4"), ("stage", "i1"), ("value", "<i4"), ("name", "<u2")])
_PACK = struct.Struct("<" + _FORMAT).pack
_PACK_TWO = struct.Struct("<" + 2 * _FORMAT).pack  # two records at once
_RECORD_BYTES = _RECORD.itemsize
assert _RECORD_BYTES == struct.calcsize("<" + _FORMAT) == 32 and _RECORD.names == _FIELDS
_LOW = np.array([np.iinfo(_RECORD[f]).min for f in _FIELDS], dtype=np.int64)
_HIGH = np.array([np.iinfo(_RECORD[f]).max for f in _FIELDS], dtype=np.int64)
_PLACEHOLDER = bytes(_RECORD_BYTES)  # where a record kept whole in the side table stands
_PACK_WHOLE = struct.Struct(f"<{WIDTH}q").pack  # a record kept whole: WIDTH 64-bit numbers
_BLOCK = 1 << 20  # records read at once where the whole stream is summed (bounds the temporaries)

# What a form is: how many span rows and event rows one record of it makes.
SPAN, EVENT, BOTH_COPY, BOTH_FILL, TWO_SPANS, TWO_SPANS_FLIP, SPAN_EVENT = range(7)
_SPAN_ROWS = np.array([1, 0, 1, 1, 2, 2, 1], dtype=np.int64)
_EVENT_ROWS = np.array([0, 1, 1, 1, 0, 1, 1], dtype=np.int64)
_HAS_BYTES = np.array([True, False, True, True, False, False, False])

# The forms every recorder knows from the start (codes the components use directly): (type, lane
# or "", kind). More are added as :meth:`Recorder.span` and :meth:`Recorder.event` meet them.
_KNOWN: tuple[tuple[int, str, str], ...] = (
    (BOTH_COPY, "tma", "transfer"), (BOTH_FILL, "slot", "fill"), (TWO_SPANS, "consumer", "compute"),
    (TWO_SPANS_FLIP, "consumer", "compute"),
    (SPAN, "producer", "wait_empty"), (SPAN, "consumer", "wait_full"), (SPAN, "tma", "store"),
    (SPAN, "consumer", "epilogue"), (SPAN, "consumer", "compute"), (SPAN, "slot", "use"),
    (EVENT, "", "issue"), (EVENT, "", "store"), (EVENT, "", "flip_empty"), (EVENT, "", "landed"),
    (EVENT, "", "flip_full"), (EVENT, "", "multicast"), (EVENT, "", "remote_arrive"), (EVENT, "", "cluster"),
    (EVENT, "", "race"), (SPAN_EVENT, "producer", "wait_empty"))
(COPY, FILL, COMPUTE, COMPUTE_FLIP, WAIT_EMPTY, WAIT_FULL, STORE_SPAN, EPILOGUE, COMPUTE_SPAN, USE_SPAN,
 ISSUE, STORE, FLIP_EMPTY, *_, WAIT_ISSUE) = range(len(_KNOWN))


class Recorder:
    """Collects spans and events; hands them back in the column order of SPAN_COLUMNS /
    EVENT_COLUMNS, in the order they were recorded."""

    __slots__ = ("_buffer", "_whole_at", "_whole", "_forms", "_form_codes", "_names", "_name_codes")

    def __init__(self) -> None:
        self._buffer = bytearray()  # the records, _RECORD_BYTES each; only ever appended to while the run goes on
        # Records whose values a field cannot hold: their positions (increasing) and the records,
        # WIDTH 64-bit numbers each (88 bytes a record in all, however many there are).
        self._whole_at = array("q")
        self._whole = bytearray()
        self._forms = list(_KNOWN)
        self._form_codes = {form[1:]: code for code, form in enumerate(_KNOWN) if form[0] in (SPAN, EVENT)}
        self._names: list[str] = []
        self._name_codes: dict[str, int] = {}

    # ---- recording (the engine's hot path: each call packs WIDTH ints onto the buffer) -----
    # A number its field cannot hold (a float time, a span over 4.3 ms, ...) makes ``struct``
    # raise, and :meth:`_keep_whole` takes the record: in Python 3.11 a ``try`` costs nothing
    # until something is raised. A call packs its records at once or not at all.

    def name(self, text: str) -> int:
        """The code of a name (a barrier's, a copy engine's): look it up once, record it often."""
        code = self._name_codes.get(text)
        if code is None:
            code = self._name_codes[text] = len(self._names)
            self._names.append(text)
        return code

    def spanned(self, form: int, start: float, end: float, sm: int, cta: int, tile: int, stage: int,
                nbytes: int = 0) -> None:
        """A span of a known form (``WAIT_FULL``, ...)."""
        try:
            self._buffer += _PACK(end, end - start, 0, sm, cta, form, tile, stage, nbytes, 0)
        except struct.error:
            self._keep_whole(end, end - start, 0, sm, cta, form, tile, stage, nbytes, 0)

    def instant(self, form: int, time: float, sm: int, cta: int, name: int, tile: int = -1, stage: int = -1,
                phase: int = -1) -> None:
        """An event of a known form (``ISSUE``, ...); ``name`` is a code from :meth:`name`."""
        try:
            self._buffer += _PACK(time, 0, 0, sm, cta, form, tile, stage, phase, name)
        except struct.error:
            self._keep_whole(time, 0, 0, sm, cta, form, tile, stage, phase, name)

    def copy(self, start: float, end: float, sm: int, cta: int, tile: int, stage: int, nbytes: int,
             name: int) -> None:
        """A load's transfer span and its landed event (on copy engine ``name``)."""
        try:
            self._buffer += _PACK(end, end - start, 0, sm, cta, COPY, tile, stage, nbytes, name)
        except struct.error:
            self._keep_whole(end, end - start, 0, sm, cta, COPY, tile, stage, nbytes, name)

    def wait_issue(self, start: float, end: float, issued: float, sm: int, cta: int, tile: int, stage: int,
                   name: int) -> None:
        """The producer's wait for an empty slot and the issue of the copy it made next (on copy
        engine ``name``, at ``issued``): one record where nothing was recorded between the two."""
        try:
            self._buffer += _PACK(end, end - start, issued - end, sm, cta, WAIT_ISSUE, tile, stage, -1, name)
        except struct.error:
            self._keep_whole(end, end - start, issued - end, sm, cta, WAIT_ISSUE, tile, stage, -1, name)

    def fill(self, start: float, end: float, sm: int, cta: int, tile: int, stage: int, nbytes: int,
             phase: int, name: int) -> None:
        """A slot's fill span (issue to landed) and its full barrier ``name``'s flip."""
        try:
            self._buffer += _PACK(end, end - start, phase, sm, cta, FILL, tile, stage, nbytes, name)
        except struct.error:
            self._keep_whole(end, end - start, phase, sm, cta, FILL, tile, stage, nbytes, name)

    def fill_hook(self, sm: int, cta: int, slot: int, stages: int, name: int, issued: list[float],
                  filled: list[int]) -> Callable[[Any, int], None]:
        """The flip hook of a CTA ring's full barrier ``slot`` (``name``: its code): as :meth:`fill`,
        the slot's fill span, from ``issued[slot]`` (the producer's arrival) to now with
        ``filled[slot]`` bytes, and the flip. The hook packs the record itself, so that the engine's
        most frequent record costs one call. Where the flip is a copy's landing, the copy engine
        leaves that copy's values in the barrier's ``landing`` (as :meth:`copy` takes them): its
        record and the fill's are packed at once, in the order they were made."""
        buffer, keep_whole = self._buffer, self._keep_whole

        def on_flip(barrier: Any, phase: int) -> None:
            nonlocal buffer  # the same bytearray, extended in place
            end = barrier.flipped_at  # now: no arrival on a full barrier takes effect later
            landing = barrier.landing
            if landing is None:
                fill = (end, end - issued[slot], phase, sm, cta, FILL, phase * stages + slot, slot, filled[slot], name)
                try:
                    buffer += _PACK(*fill)
                except struct.error:
                    keep_whole(*fill)
            else:
                barrier.landing = None
                start, landed, copy_sm, copy_cta, tile, stage, nbytes, engine = landing
                try:
                    buffer += _PACK_TWO(landed, landed - start, 0, copy_sm, copy_cta, COPY, tile, stage, nbytes, engine,
                                        end, end - issued[slot], phase, sm, cta, FILL, phase * stages + slot, slot,
                                        filled[slot], name)
                except struct.error:
                    keep_whole(landed, landed - start, 0, copy_sm, copy_cta, COPY, tile, stage, nbytes, engine,
                               end, end - issued[slot], phase, sm, cta, FILL, phase * stages + slot, slot,
                               filled[slot], name)

        return on_flip

    def compute(self, start: float, end: float, released: float, sm: int, cta: int, tile: int,
                stage: int) -> None:
        """A compute span (``start`` to ``end``) and the slot's use span (``start`` to ``released``)."""
        try:
            self._buffer += _PACK(end, end - start, released - end, sm, cta, COMPUTE, tile, stage, 0, 0)
        except struct.error:
            self._keep_whole(end, end - start, released - end, sm, cta, COMPUTE, tile, stage, 0, 0)

    def compute_flip(self, start: float, end: float, released: float, sm: int, cta: int, tile: int,
                     stage: int, phase: int, flipped: float, name: int) -> None:
        """:meth:`compute`, and this release completed phase ``phase`` of empty barrier ``name``
        at ``flipped`` (one record when that is the release time, else two)."""
        if flipped == released:
            try:
                self._buffer += _PACK(end, end - start, released - end, sm, cta, COMPUTE_FLIP, tile, stage, phase,
                                      name)
            except struct.error:
                self._keep_whole(end, end - start, released - end, sm, cta, COMPUTE_FLIP, tile, stage, phase, name)
        else:
            records = (end, end - start, released - end, sm, cta, COMPUTE, tile, stage, 0, 0,
                       flipped, 0, 0, sm, cta, FLIP_EMPTY, tile, stage, phase, name)
            try:
                self._buffer += _PACK_TWO(*records)
            except struct.error:
                self._keep_whole(*records)

    def span(self, start: float, end: float, sm: int, cta: int, lane: str, kind: str,
             tile: int, stage: int, nbytes: int = 0) -> None:
        """Any span, by its lane and kind."""
        self.spanned(self._form((SPAN, lane, kind)), start, end, sm, cta, tile, stage, nbytes)

    def event(self, time: float, sm: int, cta: int, kind: str, name: str,
              tile: int = -1, stage: int = -1, phase: int = -1) -> None:
        """Any event, by its kind and name."""
        self.instant(self._form((EVENT, "", kind)), time, sm, cta, self.name(name), tile, stage, phase)

    def _form(self, form: tuple[int, str, str]) -> int:
        code = self._form_codes.get(form[1:])
        if code is None or self._forms[code][0] != form[0]:
            code = self._form_codes[form[1:]] = len(self._forms)
            self._forms.append(form)
        return code

    def _keep_whole(self, *values: float) -> None:
        """Records (WIDTH values each) that ``struct`` would not pack: a float is cut to its
        integer part, as numpy's conversion did; a record whose integers still do not fit the
        buffer's fields is kept whole in the side table, a placeholder in its place; beyond 64
        bits is an error."""
        for first in range(0, len(values), WIDTH):
            record = tuple(map(int, values[first: first + WIDTH]))
            if not all(-2**63 <= v < 2**63 for v in record):
                raise TmasimError("run.records: a time or count beyond 64 bits cannot be recorded; "
                                  "set run.records=false")
            try:
                self._buffer += _PACK(*record)
            except struct.error:
                self._whole_at.append(len(self._buffer) // _RECORD_BYTES)
                self._whole += _PACK_WHOLE(*record)
                self._buffer += _PLACEHOLDER

    # ---- whole records, by position (fast-forward regenerates skipped periods: record_shift.py)

    @property
    def count(self) -> int:
        """Records so far: the position the next one will have in the stream."""
        return len(self._buffer) // _RECORD_BYTES

    @property
    def forms(self) -> tuple[tuple[int, str, str], ...]:
        """Every form code's (type, lane, kind), indexable by the records' ``form`` field."""
        return tuple(self._forms)

    def rows(self, start: int, end: int) -> np.ndarray[Any, Any]:
        """Records ``start`` to ``end`` (exclusive) of the stream, as int64 rows of WIDTH values."""
        start, end = max(start, 0), min(end, self.count)
        rows = np.empty((max(end - start, 0), WIDTH), dtype=np.int64)
        for i, column in enumerate(self._columns(start, end)):
            rows[:, i] = column
        return rows

    def append_rows(self, rows: np.ndarray[Any, Any]) -> None:
        """Records made elsewhere (int64 rows of WIDTH values), after every record so far."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, WIDTH)
        columns = np.ascontiguousarray(rows.T)  # a field a row: each check and copy below reads contiguously
        if len(rows) and not ((columns.min(axis=1) >= _LOW).all() and (columns.max(axis=1) <= _HIGH).all()):
            fits = np.all((columns >= _LOW[:, None]) & (columns <= _HIGH[:, None]), axis=0)
            wide = np.flatnonzero(~fits)
            self._whole_at.extend((self.count + wide).tolist())
            self._whole += rows[wide].astype("<i8").tobytes()
            columns = np.where(fits, columns, 0)  # the placeholder where a row does not fit
        packed = np.empty(len(rows), dtype=_RECORD)
        for i, name in enumerate(_FIELDS):
            packed[name] = columns[i]
        self._buffer += packed.view(np.uint8).data  # (the bytes: an ndarray itself would broadcast, not append)

    def map_rows(self, start: int, change: Any) -> None:
        """Replace every record from ``start`` on by ``change(rows)`` (as many rows)."""
        rows = self.rows(start, self.count)
        changed = change(rows)
        if len(changed) != len(rows):
            raise ValueError(f"map_rows: {len(rows)} records became {len(changed)}")
        kept = bisect.bisect_left(self._whole_at, start)  # the records kept whole before ``start`` stay
        del self._whole_at[kept:], self._whole[kept * WIDTH * 8:]
        del self._buffer[start * _RECORD_BYTES:]
        self.append_rows(changed)

    # ---- reading back ---------------------------------------------------------------------

    @property
    def span_count(self) -> int:
        return int(self._per_form() @ self._rows_of(_SPAN_ROWS))

    @property
    def event_count(self) -> int:
        return int(self._per_form() @ self._rows_of(_EVENT_ROWS))

    def _per_form(self) -> np.ndarray[Any, Any]:
        """Records of each form, a block at a time (no column of the whole run is built)."""
        counts = np.zeros(len(self._forms), dtype=np.int64)
        for start in range(0, self.count, _BLOCK):
            counts += np.bincount(self._columns(start, min(start + _BLOCK, self.count), _FIELDS.index("form"))[0],
                                  minlength=len(self._forms))
        return counts

    def _rows_of(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return rows[self._types(np.arange(len(self._forms)))]

    def span_columns(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every span as columns (SPAN_COLUMNS order): int64 numbers, strings for lane and kind."""
        rec = self._records()
        form = rec["form"]
        rows = _SPAN_ROWS[self._types(form)]
        pick, second = _expand(rows)
        form = form[pick]
        end = rec["time"][pick]
        end[second] += rec["b"][pick][second]  # the use span of a compute record ends later
        start = rec["time"][pick] - rec["a"][pick]
        nbytes = np.where(_HAS_BYTES[self._types(form)], rec["value"][pick], 0)
        lanes = np.where(second, "slot", self._table(lambda f: f[1])[form])
        kinds = np.where(second, "use", self._table(lambda f: f[2])[form])
        return {"start_ps": start, "end_ps": end, "sm": rec["sm"][pick], "cta": rec["cta"][pick],
                "lane": lanes, "kind": kinds, "tile": rec["tile"][pick], "stage": rec["stage"][pick], "bytes": nbytes}

    def event_columns(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every event as columns (EVENT_COLUMNS order): int64 numbers, strings for kind and name."""
        rec = self._records()
        types = self._types(rec["form"])
        pick = np.flatnonzero(_EVENT_ROWS[types])
        form, kind = rec["form"][pick], types[pick]
        phase = np.select([kind == BOTH_COPY, kind == BOTH_FILL], [-1, rec["b"][pick]], rec["value"][pick])
        names = np.array(self._names, dtype=object)
        later = (kind == TWO_SPANS_FLIP) | (kind == SPAN_EVENT)  # a flip at the release, an issue after a wait
        time = rec["time"][pick] + np.where(later, rec["b"][pick], 0)
        return {"time_ps": time, "sm": rec["sm"][pick], "cta": rec["cta"][pick],
                "kind": self._table(_event_kind)[form],
                "name": names[rec["name"][pick]] if len(names) else np.empty(len(pick), dtype=object),
                "tile": rec["tile"][pick], "stage": rec["stage"][pick], "phase": phase}

    def _records(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every record's fields as int64 columns, in recorded order."""
        return dict(zip(_FIELDS, self._columns(0, self.count), strict=True))

    def _columns(self, start: int, end: int, *fields: int) -> list[np.ndarray[Any, Any]]:
        """Records ``start`` to ``end``'s fields (``fields``' indices; all if none) as int64
        columns, read in place from the buffer, the records kept whole put back in place."""
        fields = fields or tuple(range(WIDTH))
        if end <= start:
            return [np.empty(0, dtype=np.int64) for _ in fields]
        view = np.frombuffer(self._buffer, dtype=_RECORD, count=end - start, offset=start * _RECORD_BYTES)
        try:
            columns = [view[_FIELDS[i]].astype(np.int64) for i in fields]
        finally:
            del view  # the buffer grows again only once no view of it is left
        first, last = bisect.bisect_left(self._whole_at, start), bisect.bisect_left(self._whole_at, end)
        if last > first:
            at = np.array(self._whole_at[first:last], dtype=np.int64) - start
            values = np.frombuffer(self._whole, dtype="<i8", count=(last - first) * WIDTH,
                                   offset=first * WIDTH * 8).reshape(-1, WIDTH)
            for column, i in zip(columns, fields, strict=True):
                column[at] = values[:, i]
        return columns

    def _types(self, form: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.array([f[0] for f in self._forms], dtype=np.int64)[form]

    def _table(self, part: Any) -> np.ndarray[Any, Any]:
        """``part`` of every form, indexable by form codes."""
        table = np.empty(len(self._forms), dtype=object)
        table[:] = [part(f) for f in self._forms]
        return table


def _event_kind(form: tuple[int, str, str]) -> str:
    """The event a record of this form makes: a copy's landing, a fill's flip, or its own kind."""
    return {BOTH_COPY: "landed", BOTH_FILL: "flip_full", TWO_SPANS_FLIP: "flip_empty",
            SPAN_EVENT: "issue"}.get(form[0], form[2])


def _expand(rows: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Record index of each output row (a record making ``rows[i]`` of them), and whether the
    row is its record's second."""
    pick = np.repeat(np.arange(len(rows)), rows)
    starts = np.cumsum(rows) - rows
    second = np.arange(len(pick)) - np.repeat(starts, rows) == 1
    return pick, second
