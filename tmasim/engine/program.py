"""A CTA's program as the engine sees it: per ring step, the copies into the slot and the compute.

Workloads (``tmasim.workloads``) build programs; the engine runs them. A step fills one slot of
the stage ring with one or more copies (a GEMM k-step copies an A box and a B box) and is then
consumed by the tensor core. A *work unit* (an output tile) is a run of steps; after its last
step the consumer runs the unit's epilogue (store the tile).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, overload

import numpy as np

FLOW = -1  # a copy's ``busy``: no fixed time, its bytes flow through the fabric


class Copy(NamedTuple):
    """One TMA copy. ``smem_bytes`` land in shared memory and are what the barrier counts;
    ``memory_bytes`` come through the memory system (fewer for a box at a tensor's edge, which
    is zero-filled); ``hbm_fraction`` of them come from HBM, the rest hit in L2. ``busy`` is a
    fixed copy-engine time (the ``tiles`` workload), or ``FLOW``: the bytes share the fabric.
    A flow copy's ``requests`` pass the SM's TMA unit at its request rate, which caps the
    flow's own rate (no event per request)."""

    smem_bytes: int
    memory_bytes: int
    hbm_fraction: float
    latency: int
    busy: int = FLOW
    multicast: int = 0  # cluster ranks (a bit mask) whose SMEM receives the bytes; 0: this CTA's only
    l2_fraction: float = 1.0  # share of the bytes L2 serves; the rest a cluster peer's same load brought
    requests: int = 0  # TMA requests (row segments, docs/design.md 12); 0: bytes alone set the time


class Fixup(NamedTuple):
    """A split output tile's reduction through a global workspace (split-K, stream-K;
    tmasim.workloads.gemm_split), done by each consumer warpgroup for its share of the
    accumulator, under its own flag: wait until the flag counts ``wait_for`` k-iterations (the
    peers before this one in K have added theirs; 0: no wait), read the partial (``read``) and
    add it, write the sum back (``write``), then add ``k_count`` to the flag, which a waiting
    peer sees ``signal`` ps later. The final peer writes nothing and runs the epilogue."""

    tile: int
    wait_for: int
    k_count: int
    read: Copy | None
    write: Copy | None
    signal: int


class Epilogue(NamedTuple):
    """After a unit's last step: the fix-up of a split tile (if any), ``duration`` ps of
    consumer work, then an optional store. With ``store_parts`` (a Tensor Memory accumulator
    drained in C sub-tiles), ``store`` goes out as those parts instead, part ``n`` issued
    ``store_lead + (n + 1) * store_interval`` ps after the epilogue starts, as each sub-tile is drained."""

    duration: int
    store: Copy | None
    fixup: Fixup | None = None
    store_parts: tuple[Copy, ...] = ()
    store_interval: int = 0
    store_lead: int = 0


class Program(Protocol):
    @property
    def steps(self) -> int: ...

    def copies(self, step: int) -> tuple[Copy, ...]: ...

    def compute(self, step: int) -> int: ...

    def flops(self, step: int) -> float: ...

    def tail(self, step: int) -> int: ...

    def hold(self, step: int) -> int: ...

    def epilogue(self, step: int) -> Epilogue | None: ...

    def unit_of(self, step: int) -> int: ...

    def last_step(self, unit: int) -> int: ...


class Repeat(Sequence[int]):
    """One value for every step, without a list of them: 10^8 equal tiles need no 800 MB list."""

    __slots__ = ("value", "size")

    def __init__(self, value: int, count: int) -> None:
        self.value, self.size = value, count

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return Repeat(self.value, len(range(*index.indices(self.size))))
        if not -self.size <= index < self.size:
            raise IndexError(index)
        return self.value

    def __iter__(self) -> Iterator[int]:
        return itertools.repeat(self.value, self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(other) == self.size and all(v == self.value for v in other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Repeat({self.value}, {self.size})"


@dataclass(frozen=True)
class TimedProgram:
    """Steps with times given directly (the ``tiles`` workload): one copy per step that keeps
    the copy engine busy ``load[i]`` ps after ``latency[i]``, then ``compute[i]`` ps."""

    load: Sequence[int]
    compute_ps: Sequence[int]
    latency: Sequence[int]
    tile_bytes: int
    # Equal tiles (:class:`Repeat`) share one copy and one compute time: no per-step lookups.
    _same_copies: tuple[Copy, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _same_compute: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.load, Repeat) and isinstance(self.latency, Repeat):
            copy = Copy(self.tile_bytes, self.tile_bytes, 1.0, self.latency.value, self.load.value)
            object.__setattr__(self, "_same_copies", (copy,))
        if isinstance(self.compute_ps, Repeat):
            object.__setattr__(self, "_same_compute", self.compute_ps.value)

    @property
    def steps(self) -> int:
        return len(self.load)

    @property
    def shared_copies(self) -> tuple[Copy, ...] | None:
        """Every step's copies, where the tiles are equal (one description for all), else None."""
        return self._same_copies

    def copies(self, step: int) -> tuple[Copy, ...]:
        if self._same_copies is not None:
            return self._same_copies
        return (Copy(self.tile_bytes, self.tile_bytes, 1.0, self.latency[step], self.load[step]),)

    def compute(self, step: int) -> int:
        if self._same_compute is not None:
            return self._same_compute
        return self.compute_ps[step]

    def flops(self, step: int) -> float:
        return 0.0

    def tail(self, step: int) -> int:
        return 0

    def hold(self, step: int) -> int:
        return 0

    def epilogue(self, step: int) -> Epilogue | None:
        return None

    def unit_of(self, step: int) -> int:
        return 0

    def last_step(self, unit: int) -> int:
        return self.steps - 1

    def identical(self, first: int, last: int, units_matter: bool = True) -> bool:
        """Whether steps ``first``..``last`` lie in one run of identical steps."""
        if last >= self.steps:
            return False
        return self.run_of(first)[1] > last

    def step_kind(self, step: int) -> object:
        """What step ``step`` does, comparable across the program (fast-forward's known periods)."""
        return (self.copies(step), self.compute(step))

    def run_of(self, step: int, units_matter: bool = True) -> tuple[int, int]:
        """The steps around ``step`` that are identical to it: all of them when every tile is
        the same (:class:`Repeat`), else just ``step`` (fast-forward, engine/fast_forward/jump.py)."""
        if self._same_copies is not None and self._same_compute is not None:
            return 0, self.steps
        return step, step + 1

    def run_end(self, step: int, units_matter: bool = True) -> int:
        """Where the run of identical steps around ``step`` ends (exclusive): ``run_of(step)[1]``."""
        return self.run_of(step)[1]

    def drop_steps(self, start: int, count: int, units_matter: bool = True) -> None:
        """Remove ``count`` steps from ``start`` on, all within one run of identical steps."""
        if start + count > self.run_end(start):
            raise ValueError(f"steps {start}..{start + count - 1} are not all identical")
        for name in ("load", "compute_ps", "latency"):
            seq = getattr(self, name)
            object.__setattr__(self, name, Repeat(seq.value, len(seq) - count))

    def longest_span_ps(self) -> int:
        """The longest time one step's copy (latency + load) or compute takes: what a record spans."""
        return max(_most(self.load) + _most(self.latency), _most(self.compute_ps))


@dataclass(frozen=True)
class Segment:
    """``steps`` identical ring steps: the same copies, then the same compute. ``compute`` is
    the tensor cores' occupancy (MMA instructions x II); ``tail`` the time after it until the
    last MMA completes (latency - II), which the slot's release waits for."""

    steps: int
    copies: tuple[Copy, ...]
    compute: int
    flops: float
    tail: int = 0
    expect: int = 0  # bytes each step's full barrier expects; 0: the sum of this CTA's own copies
    hold: int = 0  # ps the SM's shared memory stays busy after the MMAs (TMA writes; tmasim.operands)


@dataclass(frozen=True)
class Unit:
    """A work unit (a GEMM output tile: its k-loop, whose last step may differ at a tensor's
    edge) and the epilogue that follows its last step."""

    index: int
    segments: tuple[Segment, ...]
    epilogue: Epilogue | None

    @property
    def steps(self) -> int:
        return sum(s.steps for s in self.segments)


class UnitProgram:
    """The units one CTA processes, in order (a persistent CTA walks several)."""

    __slots__ = ("units", "steps", "_segment_of_step", "_unit_of_step", "_last_step", "_ends", "_drops", "_codes",
                 "_cuts")

    def __init__(self, units: Sequence[Unit]) -> None:
        self.units = tuple(units)
        self.steps = sum(unit.steps for unit in self.units)
        # Steps fast-forward dropped: (where, as the program then stood; how many had been dropped
        # before that place, in all), in order; original positions (:meth:`original`) follow.
        self._drops: tuple[list[int], list[int]] = ([], [])
        self._codes: np.ndarray | None = None  # each original step's kind as a number (periodic_end)
        self._cuts: tuple[int, list[int], set[int]] | None = None  # (stages, cuts as built, early ones)

    def __getattr__(self, name: str) -> Any:
        """The per-step tables, built when first read: a whole-chip plan holds a program for
        every CTA (148 of 865 tiles each), and the engine runs only the few that aggregation
        keeps; the others are read for their units alone."""
        if name not in _PER_STEP:
            raise AttributeError(name)
        segment_of_step: list[Segment] = []
        unit_of_step: list[int] = []
        last_step: dict[int, Epilogue | None] = {}
        ends: list[int] = []  # each unit's last step
        at = 0
        for position, unit in enumerate(self.units):
            for segment in unit.segments:
                segment_of_step.extend([segment] * segment.steps)
                unit_of_step.extend([position] * segment.steps)
                at += segment.steps
            last_step[at - 1] = unit.epilogue
            ends.append(at - 1)
        self._segment_of_step, self._unit_of_step = segment_of_step, unit_of_step
        self._last_step, self._ends = last_step, ends
        return getattr(self, name)

    def copies(self, step: int) -> tuple[Copy, ...]:
        return self._segment_of_step[step].copies

    def compute(self, step: int) -> int:
        return self._segment_of_step[step].compute

    def flops(self, step: int) -> float:
        return self._segment_of_step[step].flops

    def tail(self, step: int) -> int:
        return self._segment_of_step[step].tail

    def hold(self, step: int) -> int:
        return self._segment_of_step[step].hold

    def expected(self, step: int) -> int:
        """Bytes the step's full barrier expects (a multicast stage: the whole stage, most of
        it delivered by peers' slices)."""
        segment = self._segment_of_step[step]
        return segment.expect or sum(c.smem_bytes for c in segment.copies)

    def epilogue(self, step: int) -> Epilogue | None:
        return self._last_step.get(step)

    def unit_of(self, step: int) -> int:
        """The position (0, 1, ...) in this program of the unit that ``step`` belongs to."""
        return self._unit_of_step[step]

    def last_step(self, unit: int) -> int:
        """The step that ends the unit at position ``unit`` (as the program now stands: the
        fast-forward may have dropped steps before it)."""
        return self._ends[unit]

    def identical(self, first: int, last: int, units_matter: bool = True) -> bool:
        """Whether steps ``first``..``last`` lie in one run of identical steps (as
        :meth:`run_of` counts them), looking at those steps only. The rule is run_of's, written
        inline in both: a method call per step costs the every-SM GEMM 4-8%."""
        if last >= self.steps:
            return False
        seg_of, unit_of, ends = self._segment_of_step, self._unit_of_step, self._last_step
        segment, unit = seg_of[first], unit_of[first]
        for y in range(first, last + 1):
            if seg_of[y] is not segment:
                return False
            if (unit_of[y] != unit or y in ends) if units_matter else ends.get(y) is not None:
                return False
        return True

    def step_kind(self, step: int) -> object:
        """What step ``step`` does (its segment), comparable across units: fast-forward's known
        periods (engine/fast_forward/periods.py) recur where the same segment runs."""
        return self._segment_of_step[step]

    def run_of(self, step: int, units_matter: bool = True) -> tuple[int, int]:
        """The steps around ``step`` that are identical to it, ``(first, end)`` with end
        exclusive: the same segment and no epilogue; where ``units_matter`` (ping-pong
        warpgroups take turns by unit) also the same unit, its last step excluded: :meth:`run_end`,
        then the walk back. The test is written inline in each loop (a call per step cost the
        every-SM GEMM's cuts 2%)."""
        seg_of, unit_of, last = self._segment_of_step, self._unit_of_step, self._last_step
        segment, unit = seg_of[step], unit_of[step]
        end, first = self.run_end(step, units_matter), step
        if units_matter:
            if step not in last:
                while (first > 0 and seg_of[first - 1] is segment and unit_of[first - 1] == unit
                       and first - 1 not in last):
                    first -= 1
        elif last.get(step) is None:
            while first > 0 and seg_of[first - 1] is segment and last.get(first - 1) is None:
                first -= 1
        return first, end

    def run_end(self, step: int, units_matter: bool = True) -> int:
        """Where the run of identical steps around ``step`` ends (exclusive): ``run_of(step)[1]``
        without the walk back to its first step (which is never after ``step``)."""
        seg_of, unit_of, last, steps = self._segment_of_step, self._unit_of_step, self._last_step, self.steps
        segment, unit = seg_of[step], unit_of[step]
        end = step + 1
        if units_matter:
            if step not in last:
                while end < steps and seg_of[end] is segment and unit_of[end] == unit and end not in last:
                    end += 1
        elif last.get(step) is None:
            while end < steps and seg_of[end] is segment and last.get(end) is None:
                end += 1
        return end

    def drop_steps(self, start: int, count: int, units_matter: bool = True) -> int:
        """Remove ``count`` steps from ``start`` on, all within one run of identical steps
        (fast-forward skips them, engine/fast_forward/jump.py); returns the units that went
        (a run may pass the end of a unit with no epilogue)."""
        if start + count > self.run_end(start, units_matter):
            raise ValueError(f"steps {start}..{start + count - 1} are not all identical")
        return self._remove(start, count)

    def original(self, step: int) -> int:
        """Where ``step`` (as the program now stands) was in the program as built: later than
        ``step`` by the steps fast-forward dropped before it."""
        where, dropped = self._drops
        n = bisect.bisect_right(where, step)
        return step + dropped[n - 1] if n else step

    def next_cut(self, step: int, stages: int) -> int:
        """The step after ``step`` where fast-forward cuts the run: every ``stages`` steps from
        each unit's first, in the program as built (so a run with the skip off cuts at the same
        places, and the places recur with the units); ``steps`` when none is left."""
        cuts = self._cut_places(stages)[0]
        at = self.original(step)
        n = bisect.bisect_right(cuts, at)
        return step + cuts[n] - at if n < len(cuts) else self.steps

    def early_cut(self, step: int, stages: int) -> bool:
        """Whether ``step`` is its unit's early cut, where fast-forward looks for a repeat across
        units: ``2 * stages`` steps from the unit's first as built (``stages`` in a unit shorter
        than ``3 * stages + 1``), early enough that no jump inside the unit has passed it, late
        enough that the consumers have left the unit before (a cut is described only then)."""
        return self.original(step) in self._cut_places(stages)[1]

    def _cut_places(self, stages: int) -> tuple[list[int], set[int]]:
        """The cuts as built (every ``stages`` steps from each unit's first) and each unit's early one."""
        cuts = self._cuts
        if cuts is None or cuts[0] != stages:
            starts, lengths = [], []
            at = 0
            for unit in self.units:
                starts.append(at)
                lengths.append(unit.steps)
                at += unit.steps
            start, length = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
            per_unit = -(-length // stages)
            first = np.repeat(start, per_unit)
            within = np.arange(len(first), dtype=np.int64) - np.repeat(np.cumsum(per_unit) - per_unit, per_unit)
            early = set((start + np.where(length > 3 * stages, 2 * stages, stages)).tolist())
            cuts = self._cuts = (stages, (first + within * stages).tolist(), early)
        return cuts[1], cuts[2]

    def periodic_end(self, first: int, period: int) -> int:
        """In the program as built (original positions), the first step from ``first`` on whose
        kind differs from the kind ``period`` steps later: steps ``first``.. up to that one
        repeat with that period (a step's kind: its segment, whether it ends a unit and the
        unit's epilogue). Across units too: a persistent CTA's tiles recur (fast-forward's
        skip of whole waves, engine/fast_forward/jump.py)."""
        codes = self._codes
        if codes is None:
            codes = self._codes = _kind_codes(self.units)
        stop = len(codes) - period
        at, window = first, max(4 * period, 1024)  # compared a window at a time: most runs end soon
        while at < stop:
            end = min(at + window, stop)
            differ = np.flatnonzero(codes[at:end] != codes[at + period:end + period])
            if len(differ):
                return at + int(differ[0])
            at, window = end, 2 * window
        return max(first, stop)

    def drop_periods(self, start: int, period: int, count: int) -> int:
        """Remove ``count`` periods of ``period`` steps from ``start`` on, where the program as
        built repeats with that period (checked: :meth:`periodic_end`), whole units among them:
        the unit at ``start`` goes on with the steps after the dropped ones (of the same kinds),
        later units move down by the units dropped. Returns how many units were dropped (whose
        ends fell among the steps)."""
        first = self.original(start)
        if self.periodic_end(first, period) < first + (count - 1) * period:
            raise ValueError(f"steps {start}..{start + count * period - 1} are not {count} periods of {period}")
        return self._remove(start, count * period)

    def _remove(self, start: int, count: int) -> int:
        """Remove steps ``start``..``start + count - 1``: units whose last step is among them go,
        later units move down as many places, and the unit at ``start`` (if it goes on) takes the
        steps after them. Returns how many units went."""
        stop = start + count
        gone = sum(1 for e in self._ends if start <= e < stop)
        del self._segment_of_step[start:stop]
        unit_of = self._unit_of_step
        del unit_of[start:stop]
        if gone:
            unit_of[start:] = [u - gone for u in unit_of[start:]]
        self._last_step = {(s - count if s >= stop else s): e for s, e in self._last_step.items()
                           if not start <= s < stop}
        self._ends = [s - count if s >= stop else s for s in self._ends if not start <= s < stop]
        self.steps -= count
        where, dropped = self._drops
        if where and start < where[-1]:
            raise ValueError(f"steps dropped at {start}, before an earlier drop at {where[-1]}")
        where.append(start)
        dropped.append((dropped[-1] if dropped else 0) + count)
        return gone

    def signature(self) -> tuple[object, ...]:
        """Equal signatures mean identical work: what aggregation of SMs compares."""
        return tuple((u.segments, u.epilogue) for u in self.units)


_PER_STEP = frozenset({"_segment_of_step", "_unit_of_step", "_last_step", "_ends"})


def _kind_codes(units: Sequence[Unit]) -> np.ndarray:
    """Each step of ``units`` as a number, equal where two steps are of one kind: the same
    segment (the object), and for a unit's last step, that it ends one and its epilogue."""
    numbers: dict[tuple[int, object], int] = {}
    codes, repeats = [], []
    for unit in units:
        for n, segment in enumerate(unit.segments):
            steps = segment.steps - (n == len(unit.segments) - 1)
            if steps > 0:
                codes.append(numbers.setdefault((id(segment), None), len(numbers)))
                repeats.append(steps)
        last = unit.segments[-1]
        # A split tile's fix-up is a unit's own (its tile, its peers' flag): it never repeats, so
        # no period a skip drops holds one (a peer would wait on a partial no one adds).
        end = ("end", unit.epilogue) if unit.epilogue is None or unit.epilogue.fixup is None else ("fixup", unit.index)
        codes.append(numbers.setdefault((id(last), end), len(numbers)))
        repeats.append(1)
    return np.repeat(np.asarray(codes, dtype=np.int64), repeats)


def _most(values: Sequence[int]) -> int:
    """The largest of a program's per-step times: one value repeated, or a sequence of them."""
    if isinstance(values, Repeat):
        return int(values.value)
    return int(np.max(np.asarray(values))) if len(values) else 0
