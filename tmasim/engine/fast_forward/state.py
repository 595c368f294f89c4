"""Fast-forward's description of the running simulation relative to now (docs/design.md §9):
the copy engines, the fabric's flows, and the SimPy event queue with each callback named by its
owner, so that two cuts' states compare equal exactly when the future repeats. Anything this
module cannot describe raises :class:`Opaque`: the run is then not skipped from there."""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import PENDING, Process

from tmasim.engine.sm.barrier import Mbarrier
from tmasim.engine.sm.copy_engine import Multicast

if TYPE_CHECKING:
    from tmasim.engine.fabric.model import Fabric

# Free variables of the engine's scheduled callbacks, and what they hold. Only records read
# ``start`` and ``tile`` (state only when records are kept); a variable not listed makes the
# state opaque.
_CELLS_EXACT = {"copy", "cta", "stage", "who", "late"}
_CELLS_RECORDS = {"start", "tile"}


class Opaque(Exception):
    """A part of the state this module cannot describe: the run is not skipped from here."""


class State(tuple):
    """A cut's state: a tuple whose hash is computed once (a state is looked up among the known
    periods and the earlier cuts, and kept: each hash would walk all of it again)."""

    _hash: int

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = value = tuple.__hash__(self)
            return value


def engine_state(engine: Any, now: int, describe: Describer) -> tuple[Any, ...]:
    stage = describe.stage
    ready = tuple((r - now, copy, describe.target_of(done), cta, stage(s), describe.tile(cta, tile, s))
                  for r, _, copy, done, cta, tile, s in sorted(engine._ready, key=lambda e: e[:2]))
    pending = tuple((copy, describe.target_of(done), cta, stage(s), describe.tile(cta, tile, s))
                    for copy, done, cta, tile, s in engine._pending)
    wake = engine._wake_at - now if engine._wake_at != math.inf else None
    return (max(engine._accept_free - now, 0), max(engine._transfer_free - now, 0), engine.in_flight,
            engine.bytes_in_flight, engine._transferring, engine._busy_since - now if engine._transferring else None,
            wake, ready, pending, engine.latency_noise is None)


def fabric_state(fabric: Fabric, now: int, describe: Describer) -> tuple[Any, ...]:
    numbers = {id(c): n for n, c in enumerate(fabric._classes.values())}  # a class's name: its number

    def _class_name(cls: Any) -> int:
        return numbers[id(cls)]

    groups = {id(g): n for n, g in enumerate(fabric._groups)}
    classes = []
    for cls in fabric._active:
        flows = tuple((tag, flow.nbytes, describe.callbacks(flow.done.callbacks))
                      for tag, _, flow in sorted(cls.heap, key=lambda e: e[:2]))
        group = None if cls.group is None else groups[id(cls.group)]
        rank = cls.rank if cls.group is not None and cls.group.merged else None  # its turn in a merged group
        classes.append((_class_name(cls), cls.n, cls.offset, cls.start_sum, group, rank, flows))
    group_states = tuple((g.rate, g.clock, g.nclasses, g.merged) for g in fabric._groups)
    links = tuple((lk._weight, tuple(_class_name(c) for c in lk._classes)) for lk in fabric._links.values())
    fresh = tuple(_class_name(c) for c in fabric._fresh)
    return (fabric._t - now, fabric._settle_pending, tuple(classes), group_states, links, fresh)


def queue_state(queue: list[tuple[Any, ...]], now: int, describe: Describer) -> list[tuple[Any, ...]]:
    """SimPy's event queue (sorted), each entry as ``(time - now, priority, Describer.event)``.
    Most queued events have no callback: they are described here without the calls."""
    names, pending = describe.names, PENDING
    parts = []
    for t, prio, _, ev in queue:
        if ev.callbacks:
            parts.append((t - now, prio, describe.event(ev)))
            continue
        value = ev._value
        shown = "pending" if value is pending else (value if value is None or isinstance(value, (int, str)) else
                                                    type(value).__name__)
        # no callback: no fabric's timer, nothing called
        parts.append((t - now, prio, (names.get(id(ev)), type(ev).__name__, getattr(ev, "_ok", None), shown, False,
                                      ())))
    return parts


class Describer:
    """Names for the objects an event or a callback refers to, relative to the cut."""

    def __init__(self, names: dict[int, Any], queued: dict[int, int], now: int = 0,
                 bases: dict[int, int] | None = None) -> None:
        self.names, self.queued, self.now = names, queued, now
        self.bases = bases  # with records: each CTA's producer step (by CTA index), else None
        self.units: dict[int, int] = {}  # attention CTAs (by id): the unit their units are relative to

    def tile(self, cta: Any, tile: Any, stage: Any) -> Any:
        """A copy's ``tile`` as records keep it: its step relative to its CTA's producer (a load),
        or its unit (a store); None without records (nothing else reads it)."""
        if self.bases is None:
            return None
        if not isinstance(stage, int) or stage < 0:
            return ("unit", tile)
        if cta not in self.bases:
            raise Opaque(f"a copy of CTA {cta}, which the fast-forward does not follow")
        return tile - self.bases[cta]

    def stage(self, stage: int) -> Any:
        """A copy's ``stage`` (its slot, for a load): without records only whether it is a load,
        a store or a workspace move (what the engine reads of it; the slot is its barrier's)."""
        if self.bases is None and stage >= 0:
            return "load"
        return stage

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
        if isinstance(done, functools.partial) and hasattr(done.func, "__self__") and len(done.args) == 1:
            method: Any = done.func  # an attention CTA's store of a unit's O
            owner = method.__self__
            return (method.__func__.__name__, self.name(owner), done.args[0] - self.units[id(owner)])
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
                elif hasattr(owner, "fast_forward_state"):  # an object that says what it holds (a 2-SM pair's)
                    yield (cb.__func__.__name__, owner.fast_forward_state(self))
                else:
                    yield (cb.__func__.__name__, self.name(owner))
                continue
            if not hasattr(cb, "__code__"):  # a callable object (a 2-SM pair's remote arrival)
                if not hasattr(cb, "fast_forward_state"):
                    raise Opaque(f"a callback {type(cb).__name__}")
                yield cb.fast_forward_state(self)
                continue
            code = cb.__code__
            cells = {var: cell.cell_contents for var, cell in zip(code.co_freevars, cb.__closure__ or (), strict=True)}
            described = []
            for var, value in cells.items():
                if var in _CELLS_RECORDS:
                    if self.bases is not None:  # records read them: part of the state
                        described.append(value - self.now if var == "start" else
                                         self.tile(cells.get("cta"), value, cells.get("stage")))
                    continue
                if var in ("self", "barrier"):
                    described.append(self.name(value))
                elif var == "use" and isinstance(cells.get("barrier"), Mbarrier):  # a remote arrival's phase
                    described.append(value - cells["barrier"].phase)
                elif var == "done":
                    described.append(self.event(value) if isinstance(value, simpy.Event) else self.target_of(value))
                elif var == "stage":
                    described.append(self.stage(value))
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


def rebase(fabric: Fabric) -> None:
    """Move every flow class's clock to zero (tags become the bytes left), recompute link
    weights from the flows, rebuild the heaps and the timer: the fabric's float state becomes a
    function of the flows in it, so a repeated state repeats bit for bit."""
    fabric._advance()
    for cls in fabric._active:
        clock = cls.clock()
        if clock:
            cls.heap = [(tag - clock, seq, flow) for tag, seq, flow in cls.heap]
            heapq.heapify(cls.heap)
        # Each in-flight flow started at clock tag - nbytes: their sum, from the flows alone (a
        # running sum would carry its rounding from cut to cut, and a repeated state would not
        # repeat bit for bit).
        cls.start_sum = math.fsum(tag - flow.nbytes for tag, _, flow in cls.heap)
        cls.offset = 0.0
    for group in fabric._groups:
        group.clock = 0.0
        group.heap = []
    for cls in fabric._active:
        if cls.group is not None and cls.heap:
            fabric._push_head(cls, cls.group)
    for link in fabric._links.values():
        link._weight = sum(c.n * w for c in link._classes for lk, w in c.route if lk is link) if link._classes else 0.0
    fabric.canonical_at_cut()
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
