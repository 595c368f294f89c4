"""Fast-forward of periodic steady states, exact (docs/design.md §9).

With deterministic durations a pipeline settles into a periodic regime: the whole chip's
state at some step equals its state a few steps earlier, shifted in time by a constant Δ (a
max-plus system's cycle time). Then the future repeats too, step for step, until the program
stops repeating (a unit's last step, its epilogue). So the run can skip whole periods.

*Cuts.* When the reference CTA's producer reaches a step that is a multiple of the stage count,
the run is *cut*: the fabric's float clocks are rebased to zero and float counters are moved
into exact sums (engine/exact_sum.py: one integer each, whatever the run's length, rounded
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
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import PENDING, Process

from tmasim.engine.barrier import Mbarrier
from tmasim.engine.copy_engine import Multicast
from tmasim.engine.exact_sum import DISTINCT, ExactSum
from tmasim.engine.program import TimedProgram

if TYPE_CHECKING:
    from tmasim.engine.chip import Chip
    from tmasim.engine.cta import Cta
    from tmasim.engine.fabric import Fabric

# Counters the engine only ever adds to: (owner kind, attribute). Ints move by k x their period
# increase; floats are kept exactly between cuts (FLOAT_COUNTERS).
CTA_COUNTERS = ("wait_full_ps", "wait_empty_ps", "slot_cycle_ps", "slot_cycles")
ENGINE_COUNTERS = ("busy_ps", "bytes", "memory_bytes", "store_bytes", "copies")
FLOAT_COUNTERS = {"TensorCore": ("flops",), "CopyEngine": ("hbm_bytes", "l2_bytes"), "Link": ("_bytes_done",)}
# Free variables of the engine's scheduled callbacks, and what they hold. Only records read
# ``start`` and ``tile``; a variable not listed makes the state opaque.
_CELLS_EXACT = {"copy", "cta", "stage", "who", "late"}
_CELLS_RECORDS = {"start", "tile"}


class Opaque(Exception):
    """A part of the state this module cannot describe: the run is not skipped from here."""


class _Cut:
    __slots__ = ("now", "base", "low", "ints", "sums")

    def __init__(self, now: int, base: list[int], low: list[int], ints: list[Any], sums: list[int]) -> None:
        self.now, self.base, self.low, self.ints, self.sums = now, base, low, ints, sums


class FastForward:
    """Cuts the run at the reference CTA's steps; with ``skip``, jumps over repeated periods."""

    def __init__(self, env: simpy.Environment, chip: Chip, stages: int, *, skip: bool, note: str = "") -> None:
        self.env, self.chip, self.stages, self.skip = env, chip, stages, skip
        first = chip.plan.programs[0] if chip.plan.programs else None
        if skip and isinstance(first, TimedProgram) and first.steps > 1 and first.run_of(0)[1] == 1:
            skip, note = False, "per-tile times vary (jitter, or a list of times): no period repeats"
        self.skip = skip
        self.note = note  # why the skip is off (empty: on)
        sync = chip.sync
        self.units_matter = sync.mode == "pingpong" and sync.consumers > 1  # warpgroups take turns by unit
        self.fabric: Fabric | None = chip.fabric
        self.ctas: list[Cta] = []
        self.ref: Cta | None = None
        self.engines = [sm.copy_engine for sm in chip.sms]
        self.cores = [sm.tensor_core for sm in chip.sms]
        self.links = list(self.fabric._links.values()) if self.fabric is not None else []
        # Each float counter with the exact sum of its values at the cuts (it restarts at zero).
        self.floats = [(o, a, ExactSum()) for o in (*self.cores, *self.engines, *self.links)
                       for a in FLOAT_COUNTERS[type(o).__name__]]
        self.seen: dict[tuple[Any, ...], _Cut] = {}
        self.run: tuple[int, int] | None = None
        self.shifts: list[tuple[int, set[int]]] = []  # (k·Δ, ids of CTAs finished before the skip)
        self.skipped_steps = 0
        self.jumps = 0
        self.opaque = ""
        self._fixed: tuple[int, dict[int, Any]] | None = None
        self.repeats = False  # whether the reference CTA ever had a run of identical steps
        chip.on_cta = self.adopt

    # ---- wiring -----------------------------------------------------------------------------

    def adopt(self, cta: Cta) -> None:
        """A CTA starts: the first one is the reference whose steps cut the run."""
        if any(c.program is cta.program for c in self.ctas):
            self._stop("two CTAs share one program object")
        self.ctas.append(cta)
        cta.steps_may_drop = self.skip
        if self.ref is None:
            self.ref = cta
            cta.on_step = self.at_step

    def _stop(self, why: str) -> None:
        if not self.opaque:
            self.opaque = why
        self.seen.clear()

    # ---- the cut ----------------------------------------------------------------------------

    def at_step(self, cta: Cta, step: int) -> None:
        if step % self.stages:
            return
        self._normalize()
        if not self.skip or self.opaque:
            return
        run = cta.program.run_of(step, self.units_matter)  # type: ignore[attr-defined]
        if run != self.run:
            self.seen.clear()
            self.run = run
        if run[1] - run[0] < 2 * self.stages:
            return
        self.repeats = True
        try:
            state = self._state()
        except Opaque as why:
            self._stop(str(why))
            return
        cut = self._cut()
        earlier = self.seen.get(state)
        if earlier is None:
            self.seen[state] = cut
        elif self._jump(earlier, cut):
            self.seen.clear()

    def _normalize(self) -> None:
        """Value-preserving canonical form at a cut (done with the skip off too): fabric clocks
        rebased to zero, busy intervals split at now, float counters moved to exact sums."""
        if self.fabric is not None:  # without one, no engine streams a flow and there are no links
            now: int = self.env.now  # type: ignore[assignment]
            _rebase(self.fabric)
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

    def _cut(self) -> _Cut:
        base = [c.issued for c in self.ctas]
        low = [min([b, *(_step(p) for p in c.processes[1:] if p.is_alive)])
               for c, b in zip(self.ctas, base, strict=True)]
        sums = [total.fold() for _, _, total in self.floats]
        return _Cut(self.env.now, base, low, self._ints(), sums)  # type: ignore[arg-type]

    def _ints(self) -> list[Any]:
        values: list[Any] = [getattr(c, a) for c in self.ctas for a in CTA_COUNTERS]
        values += [getattr(e, a) for e in self.engines for a in ENGINE_COUNTERS]
        values += [t.busy_ps for t in self.cores] + [lk._busy_ps for lk in self.links]
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
        if self.fabric is not None:
            self.fabric.recomputations = next(it)

    # ---- the skip ---------------------------------------------------------------------------

    def _jump(self, i: _Cut, j: _Cut) -> bool:
        """Skip k periods if every CTA's steps stay identical through them."""
        delta = j.now - i.now
        moves = [bj - bi for bi, bj in zip(i.base, j.base, strict=True)]
        if delta <= 0 or any(p < 0 or p % self.stages for p in moves) or not any(moves):
            return False
        move_of = {id(c): p for c, p in zip(self.ctas, moves, strict=True)}
        if any(move_of.get(id(peer), p) != p for c, p in zip(self.ctas, moves, strict=True) for peer in c.peers):
            return False  # a cluster's CTAs fill each other's slots: they move together or not at all
        k = math.inf
        for cta, p, low, base in zip(self.ctas, moves, i.low, j.base, strict=True):
            if p:
                first, end = cta.program.run_of(low, self.units_matter)  # type: ignore[attr-defined]
                # A producer waiting at ``base`` is inside that step's loop body: after the jump it
                # stands for step base + k·p, which must exist.
                end = min(end, cta.program.steps - 1)
                k = min(k, (end - base) // p if first <= low and base <= end else 0)
        if not k or k == math.inf:
            return False
        k = int(k)
        for cta, p, base in zip(self.ctas, moves, j.base, strict=True):
            if p:
                cta.program.drop_steps(base, k * p, self.units_matter)  # type: ignore[attr-defined]
        self._set_ints([v + k * (v - w) for v, w in zip(j.ints, i.ints, strict=True)])
        for (_, _, total), before, now in zip(self.floats, i.sums, j.sums, strict=True):
            total.add_units(k * (now - before))  # the period's float increments, k more times, exactly
        self.shifts.append((k * delta, {id(c) for c in self.ctas if c.finished_at is not None}))
        self.skipped_steps += k * sum(moves)
        self.jumps += 1
        return True

    def finish(self) -> None:
        """After the run: CTAs finish as late as in the full run; float counters get their exact sums."""
        self._normalize()
        for shift, finished in self.shifts:
            for cta in self.ctas:
                if id(cta) not in finished and cta.finished_at is not None:
                    cta.finished_at += shift
        for owner, attr, total in self.floats:
            setattr(owner, attr, total.value())

    def summary(self) -> str:
        if not self.skip:
            return f"off: {self.note}"
        if self.skipped_steps:
            return (f"on: {self.skipped_steps} of the run's ring steps skipped in {self.jumps} jump(s) over "
                    "repeated periods (exact)")
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
        describe = _Describer(names, events)
        parts: list[Any] = [len(self.ctas)]
        parts += [self._cta_state(c, now, describe) for c in self.ctas]
        parts += [_engine_state(e, now, describe) for e in self.engines]
        parts += [max(t._free_at - now, 0) for t in self.cores]
        if self.fabric is not None:
            parts.append(_fabric_state(self.fabric, now, describe))
        parts += [(t - now, prio, describe.event(ev)) for t, prio, _, ev in queue]
        return tuple(parts)

    def _names(self) -> dict[int, Any]:
        """Names of the objects a state refers to: fixed ones (kept while the CTAs are the
        same) and the barriers' current and last phase events."""
        if self._fixed is None or self._fixed[0] != len(self.ctas):
            names: dict[int, Any] = {}
            for n, cta in enumerate(self.ctas):
                names[id(cta)] = ("cta", n)
                names[id(cta.finished)] = ("finished", n)
                for r, proc in enumerate(cta.processes):
                    names[id(proc)] = ("proc", n, r)
                for kind, ring in (("full", cta.ring.full), ("empty", cta.ring.empty)):
                    for s, barrier in enumerate(ring):
                        names[id(barrier)] = (kind, n, s)
            for n, engine in enumerate(self.engines):
                names[id(engine)] = ("engine", n)
            if self.fabric is not None:
                names[id(self.fabric)] = ("fabric",)
            self._fixed = (len(self.ctas), names)
        names = dict(self._fixed[1])
        for n, cta in enumerate(self.ctas):
            names[id(cta._turn_changed)] = ("turn", n)
            for kind, ring in (("full", cta.ring.full), ("empty", cta.ring.empty)):
                for s, barrier in enumerate(ring):
                    names[id(barrier._current)] = (kind, n, s, "current")
                    names[id(barrier._last)] = (kind, n, s, "last")
        return names

    def _cta_state(self, cta: Cta, now: int, describe: _Describer) -> tuple[Any, ...]:
        if cta.done:
            return ("done",)
        if cta.leader is not None or cta.follower is not None or cta._reads:
            raise Opaque("2-SM MMA pairs and unchecked reads are not described")
        base = cta.issued
        stages = self.stages
        procs: list[tuple[Any, ...] | None] = []
        roles = ("producer", *(f"consumer{w}" for w in range(len(cta.processes) - 1)))
        for role, proc in zip(roles, cta.processes, strict=True):
            if not proc.is_alive:
                procs.append(None)
                continue
            frame = proc._generator.gi_frame  # type: ignore[attr-defined]
            local = frame.f_locals
            inner = proc._generator.gi_yieldfrom  # type: ignore[attr-defined]
            waited = local["t0"] - now if role in cta._waiting else None
            target = None if proc is self.env.active_process else describe.target(proc._target)
            procs.append((frame.f_lineno, local.get("i", -1) - base, waited, target,
                          None if inner is None or inner.gi_frame is None else inner.gi_frame.f_lineno))
        barriers = tuple((b.phase - base // stages, b._pending, b._tx, max(b._ready_at - now, 0),
                          b._last._value is PENDING, describe.callbacks(b._current.callbacks))
                         for ring in (cta.ring.full, cta.ring.empty) for b in ring)
        released = tuple(t - now for t in cta._released_at)
        exit_waiters = describe.callbacks(cta.finished.callbacks)
        return (tuple(procs), barriers, released, cta._consumers_left, cta._stores_left, cta._turn,
                cta.finished_at is not None, exit_waiters, tuple(sorted(cta._waiting)))


def _step(proc: Process) -> int:
    gen: Any = proc._generator
    return int(gen.gi_frame.f_locals.get("i", 0))


def _engine_state(engine: Any, now: int, describe: _Describer) -> tuple[Any, ...]:
    ready = tuple((r - now, copy, describe.target_of(done), cta, stage)
                  for r, _, copy, done, cta, _, stage in sorted(engine._ready, key=lambda e: e[:2]))
    pending = tuple((copy, describe.target_of(done), cta, stage) for copy, done, cta, _, stage in engine._pending)
    wake = engine._wake_at - now if engine._wake_at != math.inf else None
    return (max(engine._accept_free - now, 0), max(engine._transfer_free - now, 0), engine.in_flight,
            engine.bytes_in_flight, engine._transferring, engine._busy_since - now if engine._transferring else None,
            wake, ready, pending, engine.latency_noise is None)


def _fabric_state(fabric: Fabric, now: int, describe: _Describer) -> tuple[Any, ...]:
    numbers = {id(c): n for n, c in enumerate(fabric._classes.values())}  # a class's name: its number

    def _class_name(cls: Any) -> int:
        return numbers[id(cls)]

    groups = {id(g): n for n, g in enumerate(fabric._groups)}
    classes = []
    for cls in fabric._active:
        flows = tuple((tag, flow.nbytes, describe.callbacks(flow.done.callbacks))
                      for tag, _, flow in sorted(cls.heap, key=lambda e: e[:2]))
        group = None if cls.group is None else groups[id(cls.group)]
        classes.append((_class_name(cls), cls.n, cls.offset, cls.start_sum, group, flows))
    group_states = tuple((g.rate, g.clock, g.nclasses) for g in fabric._groups)
    links = tuple((lk._weight, tuple(_class_name(c) for c in lk._classes)) for lk in fabric._links.values())
    fresh = tuple(_class_name(c) for c in fabric._fresh)
    return (fabric._t - now, fabric._settle_pending, tuple(classes), group_states, links, fresh)


class _Describer:
    """Names for the objects an event or a callback refers to, relative to the cut."""

    def __init__(self, names: dict[int, Any], queued: dict[int, int]) -> None:
        self.names, self.queued = names, queued

    def name(self, obj: Any) -> Any:
        found = self.names.get(id(obj))
        if found is None:
            raise Opaque(f"a {type(obj).__name__} the fast-forward cannot name")
        return found

    def target(self, event: Any) -> Any:
        """What a suspended process waits on: a barrier's phase, a queued event, a CTA's exit."""
        if id(event) in self.queued:
            return ("queued", self.queued[id(event)])
        if isinstance(event, simpy.events.Condition):  # a cluster slot waiting for its CTAs to exit
            return ("all of", tuple(self.name(e) for e in event._events))
        return self.name(event)

    def target_of(self, done: Any) -> Any:
        """Where a copy's bytes complete: a barrier, or (a store) the CTA's callback."""
        if isinstance(done, Mbarrier):
            return self.name(done)
        if isinstance(done, Multicast):
            return ("multicast", tuple(self.name(b) for b in done.barriers), tuple(p.name for p in done.ports))
        if hasattr(done, "__self__"):
            return (done.__func__.__name__, self.name(done.__self__))
        raise Opaque(f"a copy target {type(done).__name__}")

    def callbacks(self, callbacks: list[Any] | None) -> tuple[Any, ...]:
        """What an event will call, by owner (most events have no callback: the fast path)."""
        return tuple(self._callbacks(callbacks)) if callbacks else ()

    def _callbacks(self, callbacks: list[Any]) -> Iterable[Any]:
        for cb in callbacks:
            owner = getattr(cb, "__self__", None)
            if owner is not None:
                if isinstance(owner, Process):
                    yield ("resume", self._process(owner))
                elif isinstance(owner, simpy.events.Condition):
                    yield ("condition", self.target(owner))
                else:
                    yield (cb.__func__.__name__, self.name(owner))
                continue
            code = cb.__code__
            cells = {var: cell.cell_contents for var, cell in zip(code.co_freevars, cb.__closure__ or (), strict=True)}
            described = []
            for var, value in cells.items():
                if var in _CELLS_RECORDS:
                    continue
                if var in ("self", "barrier"):
                    described.append(self.name(value))
                elif var == "use" and isinstance(cells.get("barrier"), Mbarrier):  # a remote arrival's phase
                    described.append(value - cells["barrier"].phase)
                elif var == "done":
                    described.append(self.event(value) if isinstance(value, simpy.Event) else self.target_of(value))
                elif var in _CELLS_EXACT:
                    described.append(value)
                else:
                    raise Opaque(f"a callback holding {var!r}")
            yield (code.co_qualname, tuple(described))

    def _process(self, proc: Process) -> Any:
        found = self.names.get(id(proc))
        if found is not None:
            return found
        gen: Any = proc._generator
        if gen.gi_code.co_name == "_slot" and gen.gi_frame is not None:  # a grid launch's CTA slot
            local = gen.gi_frame.f_locals
            return ("slot", local["sm"].index, len(local["queue"]))
        if gen.gi_code.co_name == "_cluster_slot" and gen.gi_frame is not None:  # a grid launch's cluster slot
            local = gen.gi_frame.f_locals
            return ("cluster slot", tuple(sm.index for sm in local["slot_sms"]), len(local["queue"]))
        raise Opaque(f"a process {gen.gi_code.co_name}")

    def event(self, event: simpy.Event) -> Any:
        named = self.names.get(id(event))
        value = event._value
        shown = "pending" if value is PENDING else (value if value is None or isinstance(value, (int, str)) else
                                                    type(value).__name__)
        is_timer = getattr(self._fabric_of(event), "_timer", None) is event
        ok = getattr(event, "_ok", None)
        return (named, type(event).__name__, ok, shown, is_timer, self.callbacks(event.callbacks))

    def _fabric_of(self, event: simpy.Event) -> Any:
        for cb in event.callbacks or ():
            owner = getattr(cb, "__self__", None)
            if owner is not None and type(owner).__name__ == "Fabric":
                return owner
        return None


def _rebase(fabric: Fabric) -> None:
    """Move every flow class's clock to zero (tags become the bytes left), recompute link
    weights from the flows, rebuild the heaps and the timer: the fabric's float state becomes a
    function of the flows in it, so a repeated state repeats bit for bit."""
    fabric._advance()
    for cls in fabric._active:
        clock = cls.clock()
        if clock:
            cls.heap = [(tag - clock, seq, flow) for tag, seq, flow in cls.heap]
            heapq.heapify(cls.heap)
            cls.start_sum -= cls.n * clock
        cls.offset = 0.0
    for group in fabric._groups:
        group.clock = 0.0
        group.heap = []
    for cls in fabric._active:
        if cls.group is not None and cls.heap:
            fabric._push_head(cls, cls.group)
    for link in fabric._links.values():
        link._weight = sum(c.n * w for c in link._classes for lk, w in c.route if lk is link) if link._classes else 0.0
    fabric._rebuild_link_heap()
    fabric._cap_heap = []
    for cls in fabric._classes.values():
        cls.in_cap_heap = False
    for cls in fabric._active:
        if cls.cap < math.inf:
            cls.in_cap_heap = True
            heapq.heappush(fabric._cap_heap, (cls.cap, next(fabric._seq), cls))
    if not fabric._settle_pending:
        fabric._timer = None
        fabric._schedule()
