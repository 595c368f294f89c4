"""Closed forms and bounds for a stage-ring pipeline: the references the simulator must meet.

Notation, per tile i: ``l`` the copy engine's busy time, ``c`` the compute time, ``lat`` the
pipelined latency before the copy's transfer, ``issue`` the copy unit's cost per request and
``wake`` the mbarrier round trip (a phase flip becomes visible ``wake`` later).

* :func:`anchor_time`: N equal tiles, no latency or costs. S = 1: N(l + c);
  S >= 2: l + c + (N - 1) max(l, c).
* :func:`maxplus`: the exact per-tile times for any per-tile l, c, lat with costs, as a
  max-plus recurrence (the engine must reproduce it to the picosecond).
* :func:`steady_state`: the interval bound max(l, c, issue, (lat + l + c + o) / S) with
  o = issue + 2 wake: one slot cycles in at least lat + l + c + o, and S slots share the load.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tmasim.engine.program import Repeat


def anchor_time(tiles: int, load: int, compute: int, stages: int) -> int:
    """The anchor formula of docs/design.md §2 (exact, integer picoseconds)."""
    if tiles < 1 or stages < 1:
        raise ValueError("tiles and stages must be >= 1")
    if stages == 1:
        return tiles * (load + compute)
    return load + compute + (tiles - 1) * max(load, compute)


def serial_time(load: Sequence[int], compute: Sequence[int], latency: Sequence[int] | None = None,
                issue: int = 0, wake: int = 0) -> int:
    """No overlap at all (one stage): every tile's copy, then its compute, one after another."""
    n = len(load)
    lat = sum(latency) if latency is not None else 0
    return sum(load) + sum(compute) + lat + n * issue + (2 * n - 1) * wake


@dataclass(frozen=True)
class TileTimes:
    """Per-tile event times from the recurrence (ps)."""

    accepted: list[int]
    landed: list[int]
    compute_start: list[int]
    compute_end: list[int]

    @property
    def makespan(self) -> int:
        return self.compute_end[-1]


def maxplus_steps(load: Sequence[int], compute: Sequence[int], stages: int,
                  latency: Sequence[int] | None = None, issue: int = 0,
                  wake: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """Exact per-tile times (accepted, landed, compute start, compute end) of one producer,
    one consumer and an S-slot ring, tile by tile, in O(S) memory:

    ready_i    = max(ready_{i-1}, end_{i-S} + wake)              producer passes empty[s]
    accepted_i = max(ready_i, accepted_{i-1} + issue)             copy unit takes the request
    landed_i   = max(accepted_i + issue + lat_i, landed_{i-1}) + l_i   serial transfers
    start_i    = max(landed_i + wake, end_{i-1});  end_i = start_i + c_i
    """
    ends: deque[int] = deque(maxlen=stages)
    ready = landed = end = 0
    accepted = -issue
    for i, (load_i, compute_i) in enumerate(zip(load, compute, strict=True)):
        if i >= stages:
            ready = max(ready, ends[0] + wake)
        accepted = max(ready, accepted + issue)
        landed = max(accepted + issue + (latency[i] if latency is not None else 0), landed) + load_i
        start = max(landed + wake, end)
        end = start + compute_i
        ends.append(end)
        yield accepted, landed, start, end


def maxplus(load: Sequence[int], compute: Sequence[int], stages: int, latency: Sequence[int] | None = None,
            issue: int = 0, wake: int = 0) -> TileTimes:
    """:func:`maxplus_steps`, collected per tile."""
    steps = list(maxplus_steps(load, compute, stages, latency, issue, wake))
    return TileTimes(*(list(column) for column in zip(*steps, strict=True)))


def maxplus_makespan(load: Sequence[int], compute: Sequence[int], stages: int,
                     latency: Sequence[int] | None = None, issue: int = 0, wake: int = 0) -> int:
    """The makespan from the recurrence, without keeping per-tile times (equal tiles: in the
    time the recurrence takes to become periodic, see :func:`_periodic_makespan`)."""
    if all(isinstance(s, Repeat) for s in (load, compute, latency or Repeat(0, len(load)))) and len(load):
        return _periodic_makespan(len(load), load[0], compute[0], stages, latency[0] if latency else 0, issue, wake)
    last = (0, 0, 0, 0)
    for last in maxplus_steps(load, compute, stages, latency, issue, wake):  # noqa: B007 (keep the last)
        pass
    return last[3]


def _periodic_makespan(n: int, load: int, compute: int, stages: int, latency: int, issue: int, wake: int) -> int:
    """:func:`maxplus_steps` for ``n`` equal tiles, exactly. With equal inputs the recurrence is
    a max-plus linear system with constant coefficients: once its state (ready, accepted, landed
    and the last S ends, relative to the last end) equals the state p steps earlier, every
    later step repeats it p steps later, shifted by the same time, so the rest is arithmetic."""
    ends: deque[int] = deque(maxlen=stages)
    history: deque[tuple[int, tuple[int, ...]]] = deque(maxlen=stages)  # (end, relative state) of past steps
    ready = landed = end = 0
    accepted = -issue
    for i in range(n):
        if i >= stages:
            ready = max(ready, ends[0] + wake)
        accepted = max(ready, accepted + issue)
        landed = max(accepted + issue + latency, landed) + load
        end = max(landed + wake, end) + compute
        ends.append(end)
        if i < stages - 1:  # the ring's first lap: the rule for `ready` changes after it
            continue
        state = (ready - end, accepted - end, landed - end, *(e - end for e in ends))
        for p in range(1, len(history) + 1):
            if history[-p][1] == state:  # steps i-p+1 .. i repeat forever, each lap later by shift
                shift = end - history[-p][0]
                laps, rem = divmod(n - 1 - i, p)
                return history[-p + rem][0] + (laps + 1) * shift
        history.append((end, state))
    return end


@dataclass(frozen=True)
class Bound:
    """The steady-state interval bound and the term that binds."""

    interval: float
    terms: dict[str, float]

    @property
    def binding(self) -> str:
        return max(self.terms, key=lambda k: self.terms[k])


def steady_state(load: float, compute: float, stages: int, latency: float = 0.0,
                 issue: int = 0, wake: int = 0) -> Bound:
    """interval >= max(copy, compute, issue, (lat + copy + compute + o) / S), o = issue + 2 wake.

    Terms are named ``copy``, ``compute``, ``issue`` and ``latency`` (the slot round trip shared
    by S slots: the term that more stages shrink).
    """
    overhead = issue + 2 * wake
    terms = {
        "copy": float(load),
        "compute": float(compute),
        "issue": float(issue),
        "latency": (latency + load + compute + overhead) / stages,
    }
    return Bound(max(terms.values()), terms)


def applies_anchor(load: Sequence[int], compute: Sequence[int], latency: Sequence[int], issue: int,
                   wake: int) -> bool:
    """The anchor formula holds for equal tiles with no latency and no costs."""
    return (issue == 0 and wake == 0 and not any(latency)
            and len(set(load)) == 1 and len(set(compute)) == 1)
