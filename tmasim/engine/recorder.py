"""Per-event records, kept as small tuples and turned into DataFrames once, at the end.

Summary-only runs (sweeps) pass ``None`` instead of a :class:`Recorder`; the components test
for that once per event and skip the tuple entirely.
"""

from __future__ import annotations

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
# on this CTA's empty barrier; `name` is the arriving consumer).


class Recorder:
    """Collects span and event tuples in the column order of SPAN_COLUMNS / EVENT_COLUMNS."""

    __slots__ = ("spans", "events")

    def __init__(self) -> None:
        self.spans: list[tuple[object, ...]] = []
        self.events: list[tuple[object, ...]] = []

    def span(self, start: float, end: float, sm: int, cta: int, lane: str, kind: str,
             tile: int, stage: int, nbytes: int = 0) -> None:
        self.spans.append((start, end, sm, cta, lane, kind, tile, stage, nbytes))

    def event(self, time: float, sm: int, cta: int, kind: str, name: str,
              tile: int = -1, stage: int = -1, phase: int = -1) -> None:
        self.events.append((time, sm, cta, kind, name, tile, stage, phase))
