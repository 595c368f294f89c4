"""Shared bandwidth as a flow model: max-min fair rates by weighted progressive filling.

A copy in its transfer phase is a *flow* of bytes over a *route* of links (its SM's port, L2,
HBM), each crossed with a *weight*: the units of that link's capacity one unit of the flow's
rate consumes there. Weights let one representative SM stand for k identical ones (weight k on
shared links) and let a copy that hits L2 for part of its bytes load HBM with only the rest
(weight 0.3 for a 70 % hit rate). Rates are max-min fair, as in SimGrid's flow-level model:
every flow's rate rises together until a link saturates (Σ weight·rate = capacity) or the
flow reaches its own cap; flows so stopped freeze and the rest keep rising.

Cost is what shapes the design: a GEMM moves ~10^6 flows over 132 SMs. So

- flows with the same (route, cap) form a *class*; max-min gives them equal rates, so the
  water-filling works on classes with a count, never on flows;
- classes frozen at the same level share one *rate group*; a group keeps a virtual clock (bytes
  served per flow since it was formed) so advancing time costs O(#groups), usually one, and a
  heap of its classes' next finish tags; each class keeps a heap of its flows' finish tags in
  its own clock, an offset from its group's;
- the common case, every class frozen by one link they all cross (HBM or L2 saturated), is
  detected in O(log #links) from a heap of each link's capacity / weight, and only changes the
  one group's rate; anything else runs the full progressive filling, O(Σ route length · log);
- the other common case, no shared link binding (each SM's copy at its cap or its own port, as
  when SMs do unequal work and seldom fill L2), is read off the classes' own bounds
  (:func:`~tmasim.engine.fabric.flows.own_bounds`), kept sorted class by class as flows start and end
  (:mod:`~tmasim.engine.fabric.own_bound_order`), and its one-class levels at equal rates share one
  *merged* group, so advancing time costs O(#distinct rates), not O(#SMs). The groups are kept
  between recomputations: only a class whose bound changed moves (:mod:`.own_groups`), so a
  flow event costs O(log #classes); stores, with no own bound, take the spare capacity's levels.
  The rates are the full filling's exactly (tests/test_fabric_shortcuts.py,
  tests/test_own_bound_order.py); clocks kept rather than re-based differ from the rebuild's
  only by float rounding, and no bundled scenario's flow ends a picosecond apart.

Times are integer picoseconds: a flow finishes at the nearest picosecond to its exact time,
computed from the clock snapshot taken when rates last changed, so a flow alone on a link of
capacity C finishes exactly ``round(B / C)`` after it starts.
"""

from __future__ import annotations

import heapq
import math
from itertools import count
from typing import Any

import simpy

from tmasim.engine.event_loop import timeout
from tmasim.engine.fabric.flows import Flow, FlowClass, Link, LinkStats, RateGroup, Route, filling
from tmasim.engine.fabric.own_bound_order import OwnBoundOrder
from tmasim.engine.fabric.own_groups import OwnGroups

__all__ = ["Fabric", "Flow", "Link", "LinkStats", "Route"]


def _rank(cls: FlowClass) -> int:
    return cls.rank


def _own_key(cls: FlowClass) -> tuple[float, int, int, FlowClass]:
    # ob_key is set for every grouped class in own form
    return cls.ob_key  # type: ignore[return-value]


class Fabric:
    """The chip's links and the flows crossing them, with max-min fair rates kept current.

    Flows starting (or ending) at one instant are settled together by one zero-delay event,
    so a burst costs one recomputation; one timeout then waits for the earliest completion and
    is superseded (ignored) whenever rates change first.
    """

    def __init__(self, env: simpy.Environment, *, record_series: bool = False) -> None:
        self.env = env
        self.record_series = record_series
        self.recomputations = 0
        self._links: dict[str, Link] = {}
        self._classes: dict[tuple[Any, float], FlowClass] = {}
        self._active: dict[FlowClass, None] = {}
        self._fresh: list[FlowClass] = []  # activated since the last settle, not yet grouped
        self._groups: list[RateGroup] = []
        self._link_heap: list[tuple[float, int, Link]] = []  # (capacity / weight, index, link)
        self._stale_links: dict[Link, None] = {}  # levels changed since the heap was last read
        self._cap_heap: list[tuple[float, int, FlowClass]] = []
        self._own = OwnBoundOrder(self._active, self._links)  # the own-bound levels, kept current class by class
        self._changes = 0  # flow starts and ends since the own bounds were last brought up to date
        self._seq = count()
        # The groups in own form (one per distinct bound, ascending), kept from one
        # recomputation to the next: only classes whose bound changed move.
        self._own_groups = OwnGroups(self._own, self._join, self._seq)
        self._t0: int = env.now  # type: ignore[assignment]
        self._t = self._t0  # when group clocks were last advanced
        self._settle_pending = False
        self._timer: simpy.Event | None = None

    def _now(self) -> int:
        """SimPy types ``now`` as int | float; the engine keeps integer picoseconds (§4). Read
        as ``env._now``: no property call (a hot path)."""
        return self.env._now  # type: ignore[return-value]

    # ---- public API -------------------------------------------------------------------------

    def add_link(self, name: str, capacity_bytes_per_ps: float) -> Link:
        if name in self._links:
            raise ValueError(f"link {name!r} already exists in this fabric")
        link = Link(name, capacity_bytes_per_ps)
        link._index = len(self._links)
        link._fabric = self
        if self.record_series:
            link._series.append((self._now(), 0.0))
        self._links[name] = link
        return link

    def start_flow(self, route: Route, nbytes: int, *, cap: float | None = None) -> Flow:
        """Start moving ``nbytes`` over ``route``, a sequence of ``(link, weight)`` pairs.

        ``cap`` bounds this flow's own rate (bytes/ps). Zero bytes finish at once. The route
        tuple is the key of the flow's class: reuse the same tuples for identical copies.
        """
        if nbytes < 0:
            raise ValueError(f"flow of {nbytes} bytes: nbytes must be non-negative")
        if cap is not None and not cap > 0:
            raise ValueError(f"flow cap {cap} must be positive (bytes per picosecond)")
        now = self._now()
        flow = Flow(self.env, nbytes, now)
        if nbytes == 0:
            self._end(flow, now)  # before touching the clocks: a timer's snapshot stays valid
            return flow
        self._advance()
        cls = self._class_for(route, math.inf if cap is None else cap)
        if cls.n == 0:
            self._activate(cls)
        self._add(cls, flow)
        self._request_settle()
        return flow

    def link_stats(self) -> dict[str, LinkStats]:
        """Per link, bytes carried so far (in-flight flows included) and utilization."""
        now = self._now()
        elapsed = now - self._t0
        progress = {cls: self._progress(cls, now) for cls in self._active}
        return {
            link.name: self._stats(link, now, elapsed, progress) for link in self._links.values()
        }

    # ---- classes and flows ------------------------------------------------------------------

    def _class_for(self, route: Route, cap: float) -> FlowClass:
        key = (route if isinstance(route, tuple) else tuple(route), cap)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = FlowClass(self._normalized(route), cap)
        return cls

    def _normalized(self, route: Route) -> tuple[tuple[Link, float], ...]:
        """Merge repeated links and drop zero weights, which never constrain a flow."""
        merged: dict[Link, float] = {}
        for link, weight in route:
            if link._fabric is not self:
                raise ValueError(f"{link!r} was not added to this fabric")
            if not (weight >= 0 and math.isfinite(weight)):
                raise ValueError(f"weight {weight} on {link!r} must be finite and non-negative")
            merged[link] = merged.get(link, 0.0) + weight
        return tuple((link, w) for link, w in merged.items() if w > 0)

    def _activate(self, cls: FlowClass) -> None:
        now = self._now()
        self._active[cls] = None
        self._fresh.append(cls)
        cls.offset = cls.start_sum = 0.0  # a fresh clock at 0 keeps a lone flow's tag exact
        for link, _ in cls.route:
            if not link._classes:
                link._busy_since = now
            link._classes[cls] = None
        if self._own.tracking:
            self._own.activated(cls)
        if cls.cap < math.inf and not cls.in_cap_heap:
            cls.in_cap_heap = True
            heapq.heappush(self._cap_heap, (cls.cap, next(self._seq), cls))

    def _deactivate(self, cls: FlowClass) -> None:
        now = self._now()
        del self._active[cls]
        for link, _ in cls.route:
            del link._classes[cls]
            if not link._classes:
                link._busy_ps += now - link._busy_since
        if self._own.tracking:
            self._own.deactivated(cls)
        group = cls.group
        if group is not None:
            group.nclasses -= 1
            if group.nclasses == 0:
                self._groups.remove(group)
                self._own_groups.emptied(group)
        cls.group = None
        cls.stamp = -1

    def _add(self, cls: FlowClass, flow: Flow) -> None:
        clock = cls.clock()
        tag = clock + flow.nbytes
        flow._cls = cls
        cls.n += 1
        self._changes += 1
        if self._own.tracking:
            self._own.counted(cls)
        cls.start_sum += clock
        heapq.heappush(cls.heap, (tag, next(self._seq), flow))
        if cls.group is not None and cls.heap[0][2] is flow:
            self._push_head(cls, cls.group)
        self._add_weight(cls, 1)

    def _finish_head(self, cls: FlowClass) -> None:
        tag, _, flow = heapq.heappop(cls.heap)
        cls.n -= 1
        self._changes += 1
        if self._own.tracking:
            self._own.counted(cls)
        cls.start_sum -= tag - flow.nbytes
        for link, weight in cls.route:
            link._bytes_done += weight * flow.nbytes
        if cls.n == 0:
            self._deactivate(cls)
        elif cls.group is not None:
            self._push_head(cls, cls.group)
        self._add_weight(cls, -1)
        self._end(flow, self._now())
        self._request_settle()

    def _end(self, flow: Flow, now: int) -> None:
        flow.end = now
        flow.done.succeed()  # (not with the flow: flow and event would make a cycle, work for the collector)

    def _add_weight(self, cls: FlowClass, sign: int) -> None:
        """Keep each link's Σ count × weight; its saturation level goes to the link heap when
        next read (:meth:`_tightest_link`), once however many flows changed it meanwhile."""
        stale = self._stale_links
        for link, weight in cls.route:
            if not link._classes:
                link._weight = 0.0  # idle: wipe the float drift of the busy period
            else:
                link._weight += sign * weight
                if link.capacity < math.inf:
                    stale[link] = None

    def _push_head(self, cls: FlowClass, group: RateGroup) -> None:
        cls.stamp = next(self._seq)
        heapq.heappush(group.heap, (cls.heap[0][0] - cls.offset, cls.stamp, cls))

    def _join(self, cls: FlowClass, group: RateGroup) -> None:
        """Move a class into ``group``, keeping its own clock (and so its tags) unchanged."""
        clock = cls.clock()
        if cls.group is not None:
            cls.group.nclasses -= 1
        cls.group = group
        cls.offset = clock - group.clock
        group.nclasses += 1
        self._push_head(cls, group)

    # ---- time -------------------------------------------------------------------------------

    def _advance(self) -> None:
        """Finish flows due by now under the current snapshot, then move the clocks to now."""
        now = self._now()
        elapsed = now - self._t
        for group in tuple(self._groups):
            self._finish_due(group, elapsed)
        if elapsed:
            for group in self._groups:
                group.clock += group.rate * elapsed
            self._t = now

    def _finish_due(self, group: RateGroup, elapsed: int) -> None:
        if group.merged:
            self._finish_due_by_rank(group, elapsed)
            return
        rate = group.rate
        while (entry := group.top()) is not None:
            if round((entry[0] - group.clock) / rate) > elapsed:
                return
            heapq.heappop(group.heap)
            self._finish_head(entry[2])

    def _finish_due_by_rank(self, group: RateGroup, elapsed: int) -> None:
        """A merged group's due flows, class by class in level order, each class's in finish
        order: what the one-class groups it stands for would have done, one after another."""
        rate = group.rate
        entry = group.top()
        if entry is None or round((entry[0] - group.clock) / rate) > elapsed:
            return  # the common case: nothing due
        due = []
        while entry is not None and round((entry[0] - group.clock) / rate) <= elapsed:
            heapq.heappop(group.heap)
            due.append(entry[2])
            entry = group.top()
        due.sort(key=_own_key if self._own_groups.kept else _rank)
        for cls in due:
            self._finish_head(cls)
            while cls.group is group and round((cls.heap[0][0] - cls.offset - group.clock) / rate) <= elapsed:
                self._finish_head(cls)

    def _request_settle(self) -> None:
        if not self._settle_pending:
            self._settle_pending = True
            timeout(self.env, 0).callbacks.append(self._settle)

    def _settle(self, _event: simpy.Event) -> None:
        self._advance()
        self._settle_pending = False
        self._recompute()
        self._schedule()

    def _on_timer(self, event: simpy.Event) -> None:
        if event is not self._timer:
            return  # superseded: rates changed after it was scheduled
        self._timer = None
        self._advance()  # finishes the flow(s) it was set for: same snapshot, same rounding

    def _schedule(self) -> None:
        best: int | None = None
        for group in self._groups:
            entry = group.top()
            if entry is not None:
                due = round((entry[0] - group.clock) / group.rate)
                best = due if best is None or due < best else best
        if best is None:
            self._timer = None
            return
        self._timer = timer = timeout(self.env, best)
        timer.callbacks.append(self._on_timer)

    # ---- rates ------------------------------------------------------------------------------

    def _recompute(self) -> None:
        self.recomputations += 1
        if self._single_level():
            if self._own_groups.kept:
                self._own_groups.forget()
            self._own.idle()
        else:
            self._water_fill()
        self._fresh.clear()
        if self.record_series:
            self._record_loads()

    def _single_level(self) -> bool:
        """Handle, in O(log), the case where one link that every class crosses binds first."""
        if not self._active:
            return True
        link, level = self._tightest_link()
        if level > self._min_cap():
            return False
        if link is not None and len(link._classes) != len(self._active):
            return False
        groups = self._groups
        if len(groups) == 1 and (not groups[0].merged or groups[0].nclasses == 1):  # all in it or fresh
            group, joining = groups[0], self._fresh
            group.merged = False
        else:
            group, joining = RateGroup(), list(self._active)
            self._groups = [group]
        for cls in joining:
            self._join(cls, group)
        group.rate = level
        return True

    def _tightest_link(self) -> tuple[Link | None, float]:
        """The link that saturates first if all flows rise together, and at what rate. Stale
        entries (a level the link has left) are dropped here: only a link's current level is
        valid, so pushing it once per change or once per read gives the same answer."""
        stale = self._stale_links
        if stale:
            heap = self._link_heap
            for link in stale:
                if link._classes:
                    heapq.heappush(heap, (link.capacity / link._weight, link._index, link))
            stale.clear()
            if len(heap) > 4 * len(self._links) + 64:
                self._rebuild_link_heap()
        heap = self._link_heap
        while heap:
            ratio, _, link = heap[0]
            if link._classes and ratio == link.capacity / link._weight:
                return link, ratio
            heapq.heappop(heap)
        return None, math.inf

    def _min_cap(self) -> float:
        heap = self._cap_heap
        while heap:
            cls = heap[0][2]
            if cls.n:
                return cls.cap
            cls.in_cap_heap = False
            heapq.heappop(heap)
        return math.inf

    def _rebuild_link_heap(self) -> None:
        self._stale_links.clear()
        self._link_heap = [
            (link.capacity / link._weight, link._index, link)
            for link in self._links.values()
            if link._classes and link.capacity < math.inf
        ]
        heapq.heapify(self._link_heap)

    def _water_fill(self) -> None:
        """Progressive filling over classes: each freeze level becomes one rate group, or joins
        the group before it when both are one class at the same rate (a merged group). When no
        shared link binds, the levels are the own bounds, kept current by :attr:`_own`, and the
        groups are kept between recomputations (:mod:`.own_groups`)."""
        own = self._own
        tail = None
        changes, self._changes = self._changes, 0
        if own.levels_apply(changes) or (tail := own.tail_levels()) is not None:
            self._groups = self._own_groups.group(self._groups, tail)
            return
        own.moved.clear()
        if self._own_groups.kept:
            self._own_groups.forget()
        levels = filling(list(self._active))
        groups: list[RateGroup] = []
        self._groups = groups
        alone: RateGroup | None = None  # the last group, if its levels had one class each
        seq = self._seq
        for rank, (rate, members) in enumerate(levels):
            if alone is not None and len(members) == 1 and rate == alone.rate:
                group = alone
                group.merged = True
            else:
                group = RateGroup()
                group.rate = rate
                groups.append(group)
                alone = group if len(members) == 1 else None
            entries = group.heap
            for cls in members:  # _join, with the heap built once below
                old = cls.group
                clock = cls.offset if old is None else old.clock + cls.offset
                cls.group = group
                cls.offset = clock - group.clock
                cls.rank = rank
                group.nclasses += 1
                cls.stamp = stamp = next(seq)
                entries.append((cls.heap[0][0] - cls.offset, stamp, cls))
        for group in groups:
            heapq.heapify(group.heap)

    def canonical_at_cut(self) -> None:
        """A fast-forward cut's canonical form of the own-bound state (:mod:`.own_groups`)."""
        self._own_groups.canonical_at_cut()
        self._changes = 0

    def _water_fill_plain(self) -> None:
        """The reference the shortcuts must equal bit for bit (tests, benchmarks/bench_attention.py):
        the full progressive filling, one rate group per freeze level."""
        self._groups = []
        for rate, members in filling(list(self._active)):
            group = RateGroup()
            group.rate = rate
            for cls in members:
                self._join(cls, group)
            self._groups.append(group)

    # ---- statistics -------------------------------------------------------------------------

    def _progress(self, cls: FlowClass, now: int) -> float:
        """Bytes the class's in-flight flows have moved: n × clock − Σ start clocks."""
        group = cls.group
        if group is None or group.rate == math.inf:
            return 0.0
        clock = group.clock + group.rate * (now - self._t) + cls.offset
        return cls.n * clock - cls.start_sum

    def _stats(
        self, link: Link, now: int, elapsed: int, progress: dict[FlowClass, float]
    ) -> LinkStats:
        in_flight = (
            w * progress[cls] for cls in link._classes for lk, w in cls.route if lk is link
        )
        carried = link._bytes_done + sum(in_flight)
        busy = link._busy_ps + (now - link._busy_since if link._classes else 0)
        limited = elapsed and link.capacity < math.inf
        utilization = carried / (link.capacity * elapsed) if limited else 0.0
        series = tuple(link._series) if self.record_series else None
        return LinkStats(link.name, link.capacity, carried, busy, utilization, series)

    def _record_loads(self) -> None:
        """Append each link's new load (Σ weight × rate) where it changed."""
        loads = dict.fromkeys(self._links.values(), 0.0)
        for cls in self._active:
            assert cls.group is not None
            for link, weight in cls.route:
                loads[link] += cls.n * weight * cls.group.rate
        now = self._now()
        for link, load in loads.items():
            series = link._series
            if series and series[-1][0] == now:
                series.pop()
            if not series or series[-1][1] != load:
                series.append((now, load))
