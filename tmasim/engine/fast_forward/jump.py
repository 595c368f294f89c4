"""Fast-forward of periodic steady states, exact (docs/design.md §9).

With deterministic durations a pipeline settles into a periodic regime: the whole chip's
state at some step equals its state a few steps earlier, shifted in time by a constant Δ (a
max-plus system's cycle time). Then the future repeats too, step for step, until the program
stops repeating (a unit's last step, its epilogue). So the run can skip whole periods.

*Cuts.* When the reference CTA's producer reaches a step that is a multiple of the stage count,
the run is *cut*: the fabric's float clocks are rebased to zero and float counters are moved
into exact sums (engine/fast_forward/exact_sum.py: one integer each, whatever the run's length, rounded
once at the end as :func:`math.fsum` of the parts would be), so that equal states hold equal bits.
Cuts happen whether or not the skip is on, so a run with ``run.fast_forward = false`` computes
exactly what the fast-forwarded one does, without the skip.

*State.* At a cut the whole simulation is described relative to now: every CTA's processes
(where each waits, its step relative to its producer's), barrier phases and counts, copy
engines' queues and reservations, tensor cores, every flow in the fabric with its remaining
bytes and rates, and the SimPy event queue (times relative to now, callbacks by owner). Any
piece this module cannot describe makes the state opaque: nothing is skipped.

*Skip.* When the state at cut j equals the state at an earlier cut i, each CTA moved p_c steps
(a multiple of the stages) in Δ = t_j - t_i. If every CTA's steps from cut i on stay identical
for k more periods, the run is that of a program shorter by k·p_c steps per CTA, shifted by
k·Δ: those steps are dropped from the programs (not yet reached by any process), the counters
gain k times their increase over the period, and CTAs that finish later finish k·Δ later.
No event is moved; the tail and the drain are simulated in full.

*Known periods.* A period jumped over is kept by its state (engine/fast_forward/periods.py): a
later cut in that state, its CTAs on steps of the same kinds, jumps at once (with records, the
kept period's records are replayed, moved in time and steps: engine/fast_forward/record_shift.py).
"""

from __future__ import annotations

import gc
import math
from typing import TYPE_CHECKING, Any

import simpy

from tmasim.engine.attention.program import AttentionProgram
from tmasim.engine.fast_forward import attention
from tmasim.engine.fast_forward.cta import CtaStates
from tmasim.engine.fast_forward.exact_sum import DISTINCT, ExactSum
from tmasim.engine.fast_forward.pairs import near_unit_names, unit_names
from tmasim.engine.fast_forward.periods import Period, Periods
from tmasim.engine.fast_forward.record_shift import Mark, RecordShift
from tmasim.engine.fast_forward.state import (
    Describer,
    Opaque,
    State,
    engine_state,
    fabric_state,
    queue_state,
    rebase,
)
from tmasim.engine.program import TimedProgram, UnitProgram
from tmasim.engine.sm.vector_units import PIPES
from tmasim.values import format as fmt

if TYPE_CHECKING:
    from tmasim.engine.chip import Chip
    from tmasim.engine.fabric.model import Fabric
    from tmasim.engine.pipeline.cta import Cta

# Counters the engine only ever adds to: (owner kind, attribute). Ints move by k x their period
# increase; floats are kept exactly between cuts (FLOAT_COUNTERS).
CTA_COUNTERS = ("wait_full_ps", "wait_empty_ps", "slot_cycle_ps", "slot_cycles")
ENGINE_COUNTERS = ("busy_ps", "bytes", "memory_bytes", "store_bytes", "copies")
FLOAT_COUNTERS = {"TensorCore": ("flops",), "CopyEngine": ("hbm_bytes", "l2_bytes"), "Link": ("_bytes_done",)}
# Cuts kept while looking for a repeat across work units (FastForward.crossing), one a unit: the
# oldest go first. States are large: more of them would cost Python's collector time on every run.
SEEN_ACROSS_UNITS = 256


class _Cut:
    """A cut: when (``now``; ``real``, on the clock of the run without the skip), each CTA's
    producer step and lowest step (``base``, ``low``; ``first_base``, ``first_low``: the same
    in the program as built), its counters and records."""

    __slots__ = ("now", "real", "base", "low", "first_base", "first_low", "ints", "sums", "records")

    def __init__(self, now: int, real: int, base: list[int], low: list[int], first_base: list[int],
                 first_low: list[int], ints: list[Any], sums: list[int], records: Mark | None) -> None:
        self.now, self.real, self.base, self.low, self.ints, self.sums, self.records = (
            now, real, base, low, ints, sums, records)
        self.first_base, self.first_low = first_base, first_low


class FastForward:
    """Cuts the run at the reference CTA's steps; with ``skip``, jumps over repeated periods."""

    def __init__(self, env: simpy.Environment, chip: Chip, stages: int, *, skip: bool, note: str = "") -> None:
        self.env, self.chip, self.stages, self.skip = env, chip, stages, skip
        first = chip.plan.programs[0] if chip.plan.programs else None
        if skip and isinstance(first, TimedProgram) and first.steps > 1 and first.run_of(0)[1] == 1:
            skip, note = False, "per-tile times vary (jitter, or a list of times): no period repeats"
        self.skip = skip
        self.note = note  # why the skip is off (empty: on)
        # With records (or link loads over time), the skipped periods' are regenerated by shifting
        # (record_shift.py).
        series = list(chip.fabric._links.values()) if chip.fabric is not None and chip.fabric.record_series else []
        kept = chip.recorder is not None or bool(series)
        self.records = RecordShift(chip.recorder, series, stages) if skip and kept else None
        sync = chip.sync
        # Attention's CTAs (engine/fast_forward/attention.py): ping-pong there is a turn per GEMM
        # inside a unit, not by unit.
        self.attention = isinstance(first, AttentionProgram)
        # Grid launches' later waves are cut too (adopt); the cuts must fall where they do with
        # the skip off, so this does not depend on the skip.
        self.units_matter = (sync.mode == "pingpong" and sync.consumers > 1  # warpgroups take turns by unit
                             and not self.attention)
        self.waves = not self.units_matter
        self.fabric: Fabric | None = chip.fabric
        self.ctas: list[Cta] = []  # those the state describes: exited ones leave it (see adopt)
        self.adopted: list[Cta] = []  # every CTA started
        self._programs: set[int] = set()
        self._version = 0  # changes whenever self.ctas does (the names' cache)
        self.ref: Cta | None = None
        self.engines = [sm.copy_engine for sm in chip.sms]
        self.cores = [sm.tensor_core for sm in chip.sms]
        self.vectors = [sm.vector_units for sm in chip.sms if self.attention and sm.vector_units is not None]
        self.links = list(self.fabric._links.values()) if self.fabric is not None else []
        # Each float counter with the exact sum of its values at the cuts (it restarts at zero).
        self.floats = [(o, a, ExactSum()) for o in (*self.cores, *self.engines, *self.links)
                       for a in FLOAT_COUNTERS[type(o).__name__]]
        self.seen: dict[tuple[Any, ...], _Cut] = {}
        self.across: dict[tuple[Any, ...], _Cut] = {}  # one cut a unit, its early one (crossing)
        # Across work units: a persistent CTA's tiles recur (the same segments, the same epilogue,
        # a wave's L2 pattern), so the chip's state can repeat whole tiles later, a period of
        # many units with the unit's own jumps inside it. Then each unit's early cut is
        # kept across units and jumps (``across``), in the programs' positions as built and on
        # the full run's clock, and a jump drops whole periods of units (UnitProgram.periodic_end,
        # drop_periods). Not with records (theirs name units) nor ping-pong turns (by unit).
        # Where that may happen, the run is cut every S steps from each unit's first (with the
        # skip off too: cuts rebase the fabric's clocks, and must fall where they fall with it on),
        # and a state names a CTA's slots from its producer's (a unit need not be S steps long).
        self.unit_cuts = bool(not kept and not self.units_matter and not self.attention and chip.plan.programs
                              and all(isinstance(p, UnitProgram) for p in chip.plan.programs))
        self.crossing = self.skip and self.unit_cuts
        self.shifted = 0  # ps skipped so far: a cut's time on the full run's clock is now + shifted
        self.units_skipped = 0  # work units dropped whole (a CTA's units, summed over CTAs)
        self.run: tuple[int, int] | None = None
        self.shifts: list[tuple[int, set[int]]] = []  # (k·Δ, ids of CTAs finished before the skip)
        self.skipped_steps = 0
        self.jumps = 0
        self.opaque = ""
        self._fixed: tuple[int, dict[int, Any], list[Any]] | None = None  # (version, names, changing)
        self.cta_states = CtaStates(env, stages)  # each CTA's part of a cut's state
        self.repeats = False  # whether the reference CTA ever had a run of identical steps
        # Periods seen, jumped over again wherever their state recurs (fast_forward_periods.py)
        self.periods = Periods() if self.skip and not self.units_matter else None
        self.recalled = 0  # jumps made from a known period
        self.handovers = 0  # times a running CTA took the reference over (hand_over)
        chip.on_cta = self.adopt

    # ---- wiring -----------------------------------------------------------------------------

    def adopt(self, cta: Cta) -> None:
        """A CTA starts: the first one is the reference whose steps cut the run. In a grid
        launch, where CTAs start as others exit, the exited ones leave the state (nothing refers
        to them but their exit, named as such), and once the reference's producer is over the
        next CTA to start takes its place, so that the later waves are cut (and skipped) too
        (records follow: a CTA started after a jump moves in time only). Not with ping-pong turns."""
        if id(cta.program) in self._programs:
            self._stop("two CTAs share one program object")
        self._programs.add(id(cta.program))
        self.adopted.append(cta)
        waves = self.waves
        self.ctas = [c for c in self.ctas if not (waves and c.done)] + [cta]
        self._version += 1
        # Cuts seen so far describe other CTAs at the same places of the list: a repeat is
        # sought among cuts of these CTAs only (known periods too, fast_forward_periods.py).
        self.seen.clear()
        cta.steps_may_drop = self.skip
        if self.ref is None or (waves and not self.ref.processes[0].is_alive):
            self.ref = cta
            cta.on_step = self.at_step
            self.run = None
        elif waves and self.chip.plan.persistent:  # it may take the reference over (hand_over)
            cta.on_step = self.hand_over

    def hand_over(self, cta: Cta, step: int) -> int:
        """A CTA that is not the reference reaches a lap: once the reference's producer is over
        (a persistent CTA whose work ran out first, ragged tiles' classes), the first running
        CTA to reach a lap takes its place and cuts the run from there on, the skip on or off
        alike (as adopt does for a grid's next CTA; there, a CTA still to start makes the better
        reference: 128x192 tiles on gemm-h100 launched as a grid skip 189,120 k-steps that way,
        185,952 handing over to a running CTA)."""
        ref = self.ref
        if cta is not ref:
            if ref is not None and ref.processes[0].is_alive:
                return self.next_cut(cta, step)
            self.ref = cta
            self.run = None
            self.seen.clear()
            self.handovers += 1
        return self.at_step(cta, step)

    def _stop(self, why: str) -> None:
        if not self.opaque:
            self.opaque = why
        self.seen.clear()

    # ---- the cut ----------------------------------------------------------------------------

    def next_cut(self, cta: Any, step: int) -> int:
        """The step after ``step`` where ``cta``'s producer cuts the run next."""
        if self.unit_cuts:
            return cta.program.next_cut(step, self.stages)
        return step - step % self.stages + self.stages

    def at_step(self, cta: Any, step: int) -> int:
        """A cut at the reference CTA's producer step ``step``; returns the step of the next one."""
        self._at_step(cta, step)
        return self.next_cut(cta, step)

    def _at_step(self, cta: Cta, step: int) -> None:
        if not self.unit_cuts and step % self.stages:
            return
        self._normalize()
        if not self.skip or self.opaque:
            return
        program: Any = cta.program
        run = program.run_of(step, self.units_matter)
        if run != self.run:
            self.seen.clear()
            self.run = run
        if run[1] - run[0] < 2 * self.stages:
            return
        early = self.crossing and program.early_cut(step, self.stages)
        self.repeats = True
        # Describing the chip allocates tens of thousands of tuples at once: Python's collector
        # would run about fifty times over them (and a full collection every other cut). It runs
        # once after the cut instead; values are unchanged.
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            self._describe_cut(early)
        finally:
            if collecting:
                gc.enable()

    def _describe_cut(self, early: bool = False) -> None:
        """Describe the state at this cut (where a jump may start or end): jump at once over a
        known period, or over the periods since an earlier cut in the same state (at a unit's
        ``early`` cut, first in an earlier unit's; then in this run of identical steps)."""
        low = self._lows()
        if not self._may_jump(low):
            return
        try:
            state = self._state()
        except Opaque as why:
            self._stop(str(why))
            return
        cut = self._cut(low)
        if self._recall(state, cut):
            self.seen.clear()
            return
        if early:
            earlier = self.across.get(state)
            if earlier is not None and self._jump(earlier, cut, state):
                self.seen.clear()
                return
            self.across.pop(state, None)
            self.across[state] = cut
            if len(self.across) > SEEN_ACROSS_UNITS:
                del self.across[next(iter(self.across))]
        earlier = self.seen.get(state)
        if earlier is None:
            self.seen[state] = cut
        else:
            jumped = self._jump(earlier, cut, state)
            if jumped:
                self.seen.clear()
            else:  # not from cut i (not yet, or its steps differ): perhaps from this cut on
                self.seen[state] = cut

    def _may_jump(self, lows: list[int]) -> bool:
        """Whether this cut can start or end a jump: every CTA still running has at least a
        stage count of identical steps ahead of its producer (a moving CTA moves at least that
        much per period; one that cannot move a period here bounds every jump to none). Cuts
        that cannot are not described: near unit boundaries, describing them is wasted."""
        stages, units = self.stages, self.units_matter
        for cta, low in zip(self.ctas, lows, strict=True):
            program: Any = cta.program
            base = cta.issued
            if cta.done or base >= program.steps:
                continue
            # as _jump's bound: min(end of low's run, last step) - base >= S
            if base + stages > program.steps - 1 or not program.identical(low, base + stages - 1, units):
                return False
        return True

    def _normalize(self) -> None:
        """Value-preserving canonical form at a cut (done with the skip off too): fabric clocks
        rebased to zero, busy intervals split at now, float counters moved to exact sums."""
        if self.fabric is not None:  # without one, no engine streams a flow and there are no links
            now: int = self.env.now  # type: ignore[assignment]
            rebase(self.fabric)
            for engine in self.engines:
                if engine._transferring:
                    engine.busy_ps += now - engine._busy_since
                    engine._busy_since = now
            for link in self.links:
                if link._classes:
                    link._busy_ps += now - link._busy_since
                    link._busy_since = now
        for owner, attr, total in self.floats:
            value = getattr(owner, attr)
            if value:  # ExactSum.add, inline: this runs every lap
                counts = total.counts
                counts[value] = counts.get(value, 0) + 1
                setattr(owner, attr, 0.0)
                if len(counts) > DISTINCT:
                    total.fold()

    def _cut(self, low: list[int]) -> _Cut:
        base = [c.issued for c in self.ctas]
        sums = [total.fold() for _, _, total in self.floats]
        records = self.records.mark(self.env.now) if self.records is not None else None  # type: ignore[arg-type]
        now: int = self.env.now  # type: ignore[assignment]
        if self.crossing:
            programs: list[Any] = [c.program for c in self.ctas]
            first_base = [p.original(b) for p, b in zip(programs, base, strict=True)]
            first_low = [p.original(lo) for p, lo in zip(programs, low, strict=True)]
        else:
            first_base, first_low = base, low
        return _Cut(now, now + self.shifted, base, low, first_base, first_low, self._ints(), sums, records)

    def _lows(self) -> list[int]:
        """Each CTA's lowest step a process stands on (engine/fast_forward/cta.py, attention.py)."""
        if self.attention:
            return [attention.low(c) for c in self.ctas]  # type: ignore[arg-type]
        return self.cta_states.lows(self.ctas)

    def _ints(self) -> list[Any]:
        values: list[Any] = [getattr(c, a) for c in self.ctas for a in CTA_COUNTERS]
        values += [getattr(e, a) for e in self.engines for a in ENGINE_COUNTERS]
        values += [t.busy_ps for t in self.cores] + [lk._busy_ps for lk in self.links]
        values += [busy for v in self.vectors for busy in v.busy_ps]
        values.append(self.fabric.recomputations if self.fabric is not None else 0)
        return values

    def _set_ints(self, values: list[Any]) -> None:
        it = iter(values)
        for owner, names in ((c, CTA_COUNTERS) for c in self.ctas):
            for a in names:
                setattr(owner, a, next(it))
        for e in self.engines:
            for a in ENGINE_COUNTERS:
                setattr(e, a, next(it))
        for t in self.cores:
            t.busy_ps = next(it)
        for lk in self.links:
            lk._busy_ps = next(it)
        for v in self.vectors:
            v.busy_ps = [next(it) for _ in v.busy_ps]
        if self.fabric is not None:
            self.fabric.recomputations = next(it)

    # ---- the skip ---------------------------------------------------------------------------

    def _periods(self) -> Periods | None:
        """The known periods, where they apply (not with a GEMM's 2-SM pairs: their state names
        units; attention's describes units relative to the base's)."""
        if self.periods is None or (not self.attention
                                    and any(c.leader is not None or c.follower is not None for c in self.ctas)):
            return None
        return self.periods

    def _recall(self, state: tuple[Any, ...], cut: _Cut) -> bool:
        """Jump at once if ``state`` starts a period seen before and the CTAs' steps allow one."""
        periods = self._periods()
        known = periods.recall(state, self.ctas, cut.low, cut.base) if periods is not None else None
        if known is None:
            return False
        period, k = known
        if self.records is not None:  # its records replayed from here (record_shift.py)
            assert cut.records is not None and period.records is not None
            bases = {c.index: b for c, b in zip(self.ctas, cut.base, strict=True)}
            by_index = {c.index: p for c, p in zip(self.ctas, period.moves, strict=True)}
            if not self.records.recall(period.records, cut.records, bases, k, by_index):
                return False
        self._apply(cut, period.delta, list(period.moves), k, period.ints, period.sums)
        self.recalled += 1
        return True

    def _jump(self, i: _Cut, j: _Cut, state: tuple[Any, ...]) -> bool | None:
        """Skip k periods if every CTA's steps stay identical through them, or with ``crossing``
        repeat with the period (None: not from cut i, but perhaps from cut j on)."""
        delta = j.real - i.real
        moves = [bj - bi for bi, bj in zip(i.first_base, j.first_base, strict=True)]
        # (a move of a whole number of laps: with unit cuts, states name slots from the producer's)
        laps = 1 if self.unit_cuts else self.stages
        if delta <= 0 or any(p < 0 or p % laps for p in moves) or not any(moves):
            return False
        move_of = {id(c): p for c, p in zip(self.ctas, moves, strict=True)}
        if any(move_of.get(id(peer), p) != p for c, p in zip(self.ctas, moves, strict=True) for peer in c.peers):
            return False  # a cluster's CTAs fill each other's slots: they move together or not at all
        k = self._periods_ahead(i, j, moves)
        if not k:
            return False
        if self.crossing and not self._pairs_aligned(j, moves):
            return False
        if self.records is not None:
            assert i.records is not None and j.records is not None
            why = self.records.cannot_shift(i.records, j.records)
            if why:
                self._stop(why)
                return False
            if not self.records.aligned(i.records, j.records):
                return None  # a link's loads are not periodic from cut i yet
        ints = tuple(v - w for v, w in zip(j.ints, i.ints, strict=True))
        sums = tuple(now - before for before, now in zip(i.sums, j.sums, strict=True))
        periods = self._periods()
        if periods is not None and self.crossing and not self._within_runs(i, j, moves, k):
            periods = None  # a period across units or the unit's own jumps: not one to recall by its kinds
        kinds = tuple(c.program.step_kind(lo) if p else None  # type: ignore[attr-defined]
                      for c, p, lo in zip(self.ctas, moves, i.low, strict=True)) if periods is not None else ()
        self._apply(j, delta, moves, k, ints, sums)
        recorded = None
        if self.records is not None and i.records is not None and j.records is not None:
            by_index = {c.index: p for c, p in zip(self.ctas, moves, strict=True)}
            bases = {c.index: b for c, b in zip(self.ctas, i.base, strict=True)} if periods is not None else None
            recorded = self.records.jump(i.records, j.records, k, by_index, bases)
        if periods is not None and (self.records is None or recorded is not None):
            periods.keep(state, Period(delta, tuple(id(c) for c in self.ctas), tuple(moves), kinds, ints, sums,
                                       recorded))
        return True

    def _periods_ahead(self, i: _Cut, j: _Cut, moves: list[int]) -> int:
        """How many more periods every moving CTA's steps allow from cut j: its steps from its
        lowest at cut i on stay identical (with ``crossing``: repeat with its move) through
        them, and a producer waiting at its step stands after the jump for one that exists."""
        k: float = math.inf
        for cta, p, low, base, first_low, first_base in zip(self.ctas, moves, i.low, j.base, i.first_low,
                                                            j.first_base, strict=True):
            if not p:
                continue
            program: Any = cta.program
            last = program.steps - 1  # the producer at ``base`` is at step base + k·p after the jump
            if self.crossing:
                # steps first_low.. repeat with period p up to `end`: k periods need end >= first_base + (k-1)·p
                end = program.periodic_end(first_low, p)
                k = min(k, (end - first_base) // p + 1 if end >= first_base else 0, (last - base) // p)
            else:
                # (the run of identical steps from ``low`` on; it starts at ``low`` or before)
                end = min(program.run_end(low, self.units_matter), last)
                k = min(k, (end - base) // p if base <= end else 0)
            if not k:
                return 0
        return 0 if k == math.inf else int(k)

    def _pairs_aligned(self, j: _Cut, moves: list[int]) -> bool:
        """A 2-SM pair's leader and follower drop the same units (the leader's list of them is
        the follower's too): they move alike and their producers stand in one unit, so the
        same steps as built, repeating alike, go from both."""
        place = {id(c): n for n, c in enumerate(self.ctas)}
        for n, cta in enumerate(self.ctas):
            follower = cta.follower
            if follower is None or not moves[n]:
                continue
            f = place.get(id(follower))
            if f is None or moves[f] != moves[n]:
                return False
            lead, other = cta.program, follower.program
            if lead.unit_of(j.base[n]) != other.unit_of(j.base[f]):
                return False
        return True

    def _within_runs(self, i: _Cut, j: _Cut, moves: list[int], k: int) -> bool:
        """Whether the periods jumped lie in runs of identical steps, with nothing dropped between
        the cuts: a period known by its step kinds (periods.py)."""
        for cta, p, low, bi, bj, fi, fj in zip(self.ctas, moves, i.low, i.base, j.base, i.first_base,
                                             j.first_base, strict=True):
            if p and (bj - bi != fj - fi or cta.program.run_end(low, False) < bj + k * p):
                return False
        return True

    def _apply(self, j: _Cut, delta: int, moves: list[int], k: int, ints: tuple[Any, ...],
               sums: tuple[int, ...]) -> None:
        """Skip k periods of length ``delta`` from cut j: each CTA's next k·p_c steps are dropped,
        the counters gain k times a period's increase (``ints``; the float sums' ``sums``)."""
        for cta, p, base in zip(self.ctas, moves, j.base, strict=True):
            if not p:
                continue
            program: Any = cta.program
            leader = cta.follower is not None and isinstance(program, UnitProgram)  # a GEMM's 2-SM pair
            unit = program.unit_of(base) if leader else 0
            if self.crossing:
                gone = program.drop_periods(base, p, k)
            else:
                gone = program.drop_steps(base, k * p, self.units_matter) or 0
            if gone and leader:  # the follower's hand-overs go with the units
                cta.drop_units(unit, gone)
            self.units_skipped += gone
        self._set_ints([v + k * d for v, d in zip(j.ints, ints, strict=True)])
        for (_, _, total), gained in zip(self.floats, sums, strict=True):
            total.add_units(k * gained)  # the period's float increments, k more times, exactly
        self.shifts.append((k * delta, {id(c) for c in self.adopted if c.finished_at is not None}))
        self.shifted += k * delta
        self.skipped_steps += k * sum(moves)
        self.jumps += 1

    def finish(self) -> None:
        """After the run: CTAs finish as late as in the full run; float counters get their exact sums."""
        self._normalize()
        for shift, finished in self.shifts:
            for cta in self.adopted:
                if id(cta) not in finished and cta.finished_at is not None:
                    cta.finished_at += shift
        for owner, attr, total in self.floats:
            setattr(owner, attr, total.value())
        if self.records is not None:
            self.records.finish()

    def summary(self) -> str:
        if not self.skip:
            return f"off: {self.note}"
        if self.skipped_steps:
            regenerated = ""
            if self.records is not None:  # what was kept: records, or only the links' loads over time
                kept = "records" if self.records.recorder is not None else "links' loads over time"
                regenerated = f"; their {kept} regenerated by shifting a simulated period's"
            known = f", {self.recalled} from periods seen before" if self.recalled else ""
            whole = f", {fmt.plural(self.units_skipped, 'work unit')} of CTAs whole" if self.units_skipped else ""
            return (f"on: {self.skipped_steps} of the run's ring steps skipped in "
                    f"{fmt.plural(self.jumps, 'jump')} over repeated periods (exact{known}{whole}){regenerated}")
        if self.opaque:
            return f"on, nothing skipped: {self.opaque}"
        if not self.repeats:
            return "on, nothing skipped: too few identical steps in a row (per-step times vary, or units are short)"
        return "on, nothing skipped: no state repeated while steps stayed identical"

    # ---- the state, relative to now ---------------------------------------------------------

    def _state(self) -> tuple[Any, ...]:
        now: int = self.env.now  # type: ignore[assignment]
        queue = sorted(self.env._queue)
        events = {id(entry[3]): n for n, entry in enumerate(queue)}
        names = self._names()
        # With records, what only records read (a copy's step, when a span began) is state too.
        bases = {c.index: c.issued for c in self.ctas} if self.records is not None else None
        describe = Describer(names, events, now, bases)
        parts: list[Any] = [len(self.ctas)]
        if self.attention:
            describe.units = {id(c): attention.base_unit(c) for c in self.ctas}  # type: ignore[arg-type]
            reader = attention.AttentionDescriber(describe, self.stages)
            parts += [reader.state(c, now) for c in self.ctas]  # type: ignore[arg-type]
            parts += [attention.vector_state(v, now, describe) for v in self.vectors]
        else:
            # a 2-SM pair's units relative to its leader's current one (pairs.py)
            describe.units = {id(c): c.program.unit_of(min(c.issued, c.program.steps - 1))
                              for c in self.ctas if c._unit_done and c.program.steps}
            if describe.units:
                for n, c in enumerate(self.ctas):
                    if id(c) in describe.units:
                        names.update(near_unit_names(c, n, describe.units[id(c)]))
            try:
                parts += [self.cta_states.state(c, now, describe) for c in self.ctas]
            finally:
                self.cta_states.done()  # the frames' locals read are this cut's only
        parts += [engine_state(e, now, describe) for e in self.engines]
        parts += [max(t._free_at - now, 0) for t in self.cores]
        if self.fabric is not None:
            parts.append(fabric_state(self.fabric, now, describe))
        parts += queue_state(queue, now, describe)
        return State(parts)

    def _names(self) -> dict[int, Any]:
        """Names of the objects a state refers to: fixed ones (kept while the CTAs are the
        same) and the barriers' current and last phase events."""
        if self._fixed is None or self._fixed[0] != self._version:
            names: dict[int, Any] = {}
            if len(self.adopted) > len(self.ctas):  # CTAs that exited and left the state
                described = {id(c) for c in self.ctas}
                names.update((id(c.finished), ("finished", "exited")) for c in self.adopted if id(c) not in described)
            for n, cta in enumerate(self.ctas):
                if self.attention:
                    names.update(attention.names(cta, n))  # type: ignore[arg-type]
                    continue
                names[id(cta)] = ("cta", n)
                names[id(cta.finished)] = ("finished", n)
                for r, proc in enumerate(cta.processes):
                    names[id(proc)] = ("proc", n, r)
                for kind, ring in (("full", cta.ring.full), ("empty", cta.ring.empty)):
                    for s, barrier in enumerate(ring):
                        names[id(barrier)] = (kind, n, s)
                names.update(unit_names(cta, n))
            for n, engine in enumerate(self.engines):
                names[id(engine)] = ("engine", n)
            for n, vector in enumerate(self.vectors):
                for pipe, name in zip(vector.pipes, PIPES, strict=True):
                    names[id(pipe)] = (name, n)
            if self.fabric is not None:
                names[id(self.fabric)] = ("fabric",)
            # the events that change from cut to cut, with their names (made once)
            changing = [] if self.attention else [
                (cta, ("turn", n), tuple((barrier, (kind, n, s, "current"), (kind, n, s, "last"))
                                         for kind, ring in (("full", cta.ring.full), ("empty", cta.ring.empty))
                                         for s, barrier in enumerate(ring)))
                for n, cta in enumerate(self.ctas)]
            self._fixed = (self._version, names, changing)
        names = dict(self._fixed[1])
        if self.attention:
            for n, cta in enumerate(self.ctas):
                names.update(attention.changing(cta, n))  # type: ignore[arg-type]
        stages = self.stages
        for n, (cta, turn, barriers) in enumerate(self._fixed[2]):
            names[id(cta._turn_changed)] = turn
            rotate = cta.issued % stages if self.unit_cuts else 0
            if not rotate:
                for barrier, current, last in barriers:
                    names[id(barrier._current)] = current
                    names[id(barrier._last)] = last
                continue
            # a cut off slot 0: slots named from the producer's on, as CtaStates.state orders them
            for barrier, (kind, _, s, _), _ in barriers:
                slot = (s - rotate) % stages
                names[id(barrier)] = (kind, n, slot)
                names[id(barrier._current)] = (kind, n, slot, "current")
                names[id(barrier._last)] = (kind, n, slot, "last")
        return names
