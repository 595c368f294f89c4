"""An attention CTA's program: per work unit one Q tile, then K/V blocks, then the O epilogue.

Workloads build these (``tmasim.workloads.attention``); :mod:`tmasim.engine.attention.cta`
runs them. A block's costs are per consumer *process*: a ping-pong warpgroup (its BM / 2 rows),
or the lockstep pair of cooperative warpgroups (all BM rows; see the CTA's module doc).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tmasim.engine.program import Copy, Epilogue


@dataclass(frozen=True)
class Mma:
    """One MMA phase: the tensor cores' occupancy, the delay after it until the last instruction
    completes (what a wait on it sees), and the useful FLOPs (masked scores do not count)."""

    occupancy: int
    tail: int
    flops: float


@dataclass(frozen=True)
class VectorWork:
    """Work on the SM's vector pipes, in ps of each whole pipe: ``xu`` (the multi-function unit:
    MUFU.EX2, and F2FP where a preset puts the conversion there), ``fma`` (FFMA, FADD, FMUL),
    ``alu`` (FMNMX, F2FP on the ALU) and ``issue`` (every instruction's slot at the warp
    schedulers), all side by side and each shared with the other warpgroups' work (see
    :class:`~tmasim.engine.sm.vector_units.VectorUnits`), after ``lead`` ps that hold no shared
    pipe (dependent chains: the softmax's row max and its all-reduce, which the exponentials wait
    for, and the last row sum: :mod:`tmasim.workloads.attention_softmax`)."""

    xu: int = 0
    fma: int = 0
    alu: int = 0
    issue: int = 0
    lead: int = 0

    @property
    def pipes(self) -> tuple[int, int, int, int]:
        return self.xu, self.fma, self.alu, self.issue

    @property
    def time(self) -> int:
        """Alone on idle pipes: the lead, then the slowest pipe."""
        return self.lead + max(self.xu, self.fma, self.alu, self.issue)

    def __add__(self, other: VectorWork) -> VectorWork:
        return VectorWork(self.xu + other.xu, self.fma + other.fma, self.alu + other.alu, self.issue + other.issue,
                          self.lead + other.lead)


@dataclass(frozen=True)
class KvBlock:
    """One K/V block as one consumer process sees it: S = Q·Kᵀ, the online softmax on the SM's
    vector units (exponentials, row max and sum), O += P·V, and the rescale of O by the change
    of the row max (``correction``, vector units, after the previous P·V completed).
    ``softmax`` holds the conversion of P to 16 bits. Where P·V reads P from registers (Hopper),
    the registers P_j goes to are the A operand of P·V_{j-1} until that completes, so with
    ``overlap`` the conversion waits for it (FA3's order): then ``early`` is the softmax without
    it and ``convert`` the conversion, run after P·V_{j-1} completes; ``early`` None: no split."""

    k: Copy
    v: Copy
    qk: Mma
    softmax: VectorWork
    pv: Mma
    correction: VectorWork
    early: VectorWork | None = None
    convert: VectorWork = VectorWork()


@dataclass(frozen=True)
class AttentionUnit:
    """A (batch, head, query block): its Q copy, its runs of identical K/V blocks (``(block,
    count)``: a causal unit's full blocks, then its masked diagonal ones), and its epilogue
    (per consumer process: normalize and stage O; the store of the whole O tile)."""

    index: int
    q: Copy
    runs: tuple[tuple[KvBlock, int], ...]
    epilogue: Epilogue

    @property
    def blocks(self) -> int:
        return sum(count for _, count in self.runs)

    def expanded(self) -> list[KvBlock]:
        expanded: list[KvBlock] = []
        for block, count in self.runs:
            expanded += [block] * count
        return expanded


@dataclass(frozen=True)
class AttentionSchedule:
    """How the consumers run (all switches of the attention pipeline).

    ``consumers``: consumer processes (2: ping-pong warpgroups; 1: one warpgroup, or the
    lockstep pair of cooperative ones); ``pingpong``: the processes take turns issuing their
    GEMMs (named barriers); ``overlap``: inside a process, the softmax of block j runs while
    P·V of block j - 1 is on the tensor cores (FA3's intra-warpgroup pipelining);
    ``producer``: a producer warpgroup issues the copies (False: the first consumer does, in
    its own loop, after waiting for the slot); ``o_over``: where O is staged for its TMA store:
    ``""`` a buffer of its own, ``"v"`` over V's ring (FA3: the producer's first V load of the
    next unit waits until O's store has read it), ``"q"`` over Q's buffer (FA4 when O does not
    fit beside the stages: the next unit's Q load waits for O's store); ``issue``: a consumer's
    time to issue a copy; ``correction_apart``: a correction warpgroup rescales O (FA4), so a
    softmax warpgroup does not wait for it (the next P·V of its tile does); ``pair``: the CTA is
    one of a 2-SM MMA pair (:mod:`tmasim.engine.attention.pair`); ``pv_first``: with
    ``overlap``, P·V of block j - 1 is issued before S of block j (Blackwell: P lives in TMEM
    over S, so S_j must wait for P·V to have read it; FA4's order), not after (FA3: two S
    buffers in registers); ``k_before_q``: the producer issues a unit's first K copy before its
    Q copy (FA3's load order: K does not wait for the Q buffer to be free)."""

    consumers: int
    pingpong: bool
    overlap: bool
    producer: bool = True
    o_over: str = ""
    issue: int = 0
    correction_apart: bool = False
    pair: bool = False
    pv_first: bool = False
    k_before_q: bool = False


class AttentionProgram:
    """The units one CTA processes, in order. A *step* is one K/V block (its two copies).

    Fast-forward (engine/fast_forward/jump.py) may drop steps from a unit's middle: each unit's
    first step and block count are kept here, and the CTA's loops read them as they go (the
    units themselves stay as planned, for the summary). A run of identical steps lies inside one
    unit, between its first and its last step (those two are issued and computed differently)."""

    __slots__ = ("units", "schedule", "steps", "_first", "_count", "_blocks", "_starts")

    def __init__(self, units: Sequence[AttentionUnit], schedule: AttentionSchedule) -> None:
        self.units = tuple(units)
        self.schedule = schedule
        self._first: list[int] = []
        self._count: list[int] = []
        self._blocks: list[KvBlock] = []
        for unit in self.units:
            self._first.append(len(self._blocks))
            self._count.append(unit.blocks)
            self._blocks.extend(unit.expanded())
        self.steps = len(self._blocks)
        self._starts = self._unit_starts()

    def _unit_starts(self) -> dict[int, int]:
        return {first: u for u, (first, count) in enumerate(zip(self._first, self._count, strict=True)) if count}

    def first_step(self, unit: int) -> int:
        return self._first[unit]

    def blocks_in(self, unit: int) -> int:
        """The unit's K/V blocks as the program now stands (fast-forward may have dropped some)."""
        return self._count[unit]

    def last_step(self, unit: int) -> int:
        """The unit's last step (its first minus one for a unit without blocks)."""
        return self._first[unit] + self._count[unit] - 1

    def unit_starting(self, step: int) -> int | None:
        """The unit whose first step is ``step`` (units with blocks), or None."""
        return self._starts.get(step)

    def block(self, step: int) -> KvBlock:
        return self._blocks[step]

    def copies(self, step: int) -> tuple[Copy, ...]:
        block = self._blocks[step]
        return (block.k, block.v)

    def unit_of(self, step: int) -> int:
        lo, hi = 0, len(self._first) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._first[mid] <= step:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # ---- fast-forward's view: runs of identical steps -----------------------------------------

    def run_of(self, step: int, units_matter: bool = False) -> tuple[int, int]:
        """The steps around ``step`` identical to it, ``(first, end)`` with end exclusive: the
        same block, inside one unit, neither the unit's first step nor its last."""
        unit = self.unit_of(step)
        first, last = self._first[unit], self.last_step(unit)
        if step <= first or step >= last:
            return step, step + 1
        blocks, block = self._blocks, self._blocks[step]
        lo = step
        while lo - 1 > first and blocks[lo - 1] is block:
            lo -= 1
        return lo, self.run_end(step)

    def run_end(self, step: int, units_matter: bool = False) -> int:
        """Where the run of identical steps around ``step`` ends (exclusive)."""
        unit = self.unit_of(step)
        first, last = self._first[unit], self.last_step(unit)
        if step <= first or step >= last:
            return step + 1
        blocks, block = self._blocks, self._blocks[step]
        end = step + 1
        while end < last and blocks[end] is block:
            end += 1
        return end

    def identical(self, first: int, last: int, units_matter: bool = False) -> bool:
        """Whether steps ``first``..``last`` lie in one run of identical steps."""
        return last < self.steps and self.run_end(first) > last

    def step_kind(self, step: int) -> object:
        """What step ``step`` does (its block), comparable across units (known periods)."""
        return self._blocks[step]

    def drop_steps(self, start: int, count: int, units_matter: bool = False) -> None:
        """Remove ``count`` steps from ``start`` on, all within one run of identical steps."""
        if start + count > self.run_end(start):
            raise ValueError(f"steps {start}..{start + count - 1} are not all identical")
        unit = self.unit_of(start)
        del self._blocks[start:start + count]
        self._count[unit] -= count
        for later in range(unit + 1, len(self._first)):
            self._first[later] -= count
        self.steps -= count
        self._starts = self._unit_starts()

    def signature(self) -> tuple[object, ...]:
        """Equal signatures mean identical work: what aggregation of SMs compares."""
        return (self.schedule, tuple((u.q, u.runs, u.epilogue) for u in self.units))
