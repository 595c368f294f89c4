"""The own-bound shortcut kept current event by event, instead of recomputed over every class.

:func:`~tmasim.engine.fabric.flows.own_bounds` reads the max-min rates off in one pass when no shared
link binds: each class freezes at its own bound (its cap, or a link only it crosses), in the
order (bound, kind, index). That pass costs O(Σ route length) per recomputation, and a chip of
many SM classes recomputes at every flow start and finish, so the pass dominated such runs.

A class's own bound changes only when its flow count changes or one of its links gains or loses
its only-one-class status (another class starting or ending there). :class:`OwnBoundOrder`
recomputes the bound of just those classes (the *dirty* ones), keeps the classes sorted by
(bound, kind, index) with bisection, and keeps each link's load at the own bounds
(Σ count × weight × bound) by adding and subtracting the changes. Loads so kept drift from a
fresh sum by float rounding, about 1e-16 relative per change, far inside the ``_ROOM`` margin
the decision leaves (1e-6): a link judged to have room has room in exact arithmetic, so the
levels read off are the progressive filling's, bit for bit (tests/test_own_bound_order.py).
Loads are summed afresh (zero) whenever a link goes idle.

Following the flows costs a little at every flow start and end, for nothing when the fabric
settles recomputation after recomputation without the own bounds (one link binding every class:
the single-level case), and more than one sort per recomputation when many classes change
between two (SMs in lockstep). So the order stops following after :data:`IDLE_LIMIT` such
recomputations in a row, or when the changes since the last outnumber a :data:`BUSY`-th of the
classes; the fabric then reports nothing to it, and the next use sorts every class afresh. A
recomputation with that many changes sorts in one pass that keeps nothing for following
(:meth:`OwnBoundOrder._sort_once`): the one-pass form's cost, no bookkeeping on top.

The index of a class frozen at its cap is its position among the active classes in the
one-pass form; its activation number orders the same way (the fabric's active classes are kept
in activation order), so it stands in for the position.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from itertools import count

from tmasim.engine.fabric.flows import _ROOM, FlowClass, Link, nearly_full, own_bound, own_keys

Key = tuple[float, int, int, FlowClass]

# Recomputations in a row the fabric settles without the own bounds (one link binding every
# class: HBM or L2 saturated) before the order stops following the flows; the next filling
# that needs it sorts every class afresh, O(classes log classes), as the one-pass form did.
IDLE_LIMIT = 8
# Flow starts and ends per recomputation above 1 / BUSY of the classes: sort afresh each time.
# Placing one changed class costs about as much as two classes' share of a sort in one pass;
# a lane's copy ending and its next starting are two changes to one class. So with BUSY = 2
# a few classes each changing once (4 SM classes, one copy replaced each time) are followed,
# and SMs in lockstep (every class changing at once) are sorted afresh.
BUSY = 2
# Calm recomputations (not busy) in a row before a stopped order follows the flows again:
# starting to follow costs a full rebuild, wasted when a busy one comes next (aggregated SMs
# alternate one and the other), so a lone calm one is sorted in one pass too.
CALM = 2


class OwnBoundOrder:
    """The active classes in own-bound order, with each link's load at those bounds.

    ``tracking``: whether the order follows the flows event by event. The fabric reports to it
    only then; while it does not, nothing is kept, and :meth:`levels_apply` starts afresh."""

    def __init__(self, active: dict[FlowClass, None], links: dict[str, Link]) -> None:
        self._active, self._links = active, links  # the fabric's own, read, never changed
        self.tracking = False
        self.rebuilt = False  # sorted afresh since the fabric last grouped the classes
        self._idle = 0
        self._calm = 0  # calm recomputations in a row while not following
        self.order: list[Key] = []  # sorted; ties on (bound, kind, index) cannot occur
        self._dirty: dict[FlowClass, None] = {}
        self._touched: dict[Link, None] = {}
        self._over: set[Link] = set()  # shared links with less than _ROOM to spare
        self._unbounded = 0  # active classes with no finite own bound
        self._seq = count()
        self.moved: list[FlowClass] = []  # classes placed anew since the fabric last grouped them

    # ---- what the fabric reports ------------------------------------------------------------

    def activated(self, cls: FlowClass) -> None:
        """``cls`` just joined its links' class lists (its count is still 0)."""
        cls.ob_seq = next(self._seq)
        cls.ob_key = None  # a key left from before the order last stopped is no place
        self._dirty[cls] = None
        self._sharing_changed(cls)

    def deactivated(self, cls: FlowClass) -> None:
        """``cls`` just left its links' class lists: withdraw its load and its place."""
        self._withdraw(cls)
        self._sharing_changed(cls)
        for link, _ in cls.route:
            if not link._classes:
                link._load = 0.0  # idle: the next busy period sums afresh

    def counted(self, cls: FlowClass) -> None:
        """``cls``'s flow count changed."""
        self._dirty[cls] = None

    def _sharing_changed(self, cls: FlowClass) -> None:
        """A class started or ended on ``cls``'s links: where a link went from one class to two
        or back, the classes left on it may change bound; every link's room is rechecked."""
        dirty, touched = self._dirty, self._touched
        for link, _ in cls.route:
            touched[link] = None
            if len(link._classes) <= 2:
                for other in link._classes:
                    dirty[other] = None

    # ---- the levels -------------------------------------------------------------------------

    def idle(self) -> None:
        """The fabric settled a recomputation without the own bounds."""
        self._idle += 1
        if self._idle > IDLE_LIMIT:
            self.tracking = False

    def stop(self) -> None:
        """Stop following the flows (a fast-forward cut: the next use starts afresh, so what
        follows the cut is a function of the flows alone)."""
        self.tracking = False
        self._idle = self._calm = 0

    def levels_apply(self, changes: int) -> bool:
        """Bring the order up to date; True when the own bounds are the max-min rates.
        ``changes``: flow starts and ends since the last call. When they are many for the
        classes (SMs in lockstep), the order is sorted afresh and does not follow the flows:
        following them would cost more per event than one sort per recomputation."""
        self._idle = 0
        if changes * BUSY > len(self._active):
            self._calm = 0
            self._sort_once()
        elif not self.tracking:
            self._calm += 1
            if self._calm < CALM:
                self._sort_once()
            else:
                self.rebuild()
        elif self._dirty:
            for cls in self._dirty:
                if cls.n:
                    self._place(cls)
            self._dirty.clear()
        if self._touched:
            over = self._over
            for link in self._touched:
                if len(link._classes) > 1 and link._load > link.capacity * (1 - _ROOM):
                    over.add(link)
                else:
                    over.discard(link)
            self._touched.clear()
        return not self._over and not self._unbounded

    def rebuild(self) -> None:
        """Everything afresh, summed in activation order (a function of the classes alone),
        and from now on followed event by event."""
        links = self._links.values()
        for link in links:
            link._load = 0.0
        self.order, self._unbounded = [], 0
        self._dirty.clear()
        for cls in self._active:
            cls.ob_seq = next(self._seq)
            cls.ob_key = None
            if cls.n:
                self._place(cls, sort=False)
        self.order.sort()
        self._over.clear()
        over = self._over
        for link in links:
            if len(link._classes) > 1 and link._load > link.capacity * (1 - _ROOM):
                over.add(link)
        self._touched.clear()
        self.moved.clear()
        self.rebuilt = True  # a fresh order is grouped in full
        self.tracking = True

    def _sort_once(self) -> None:
        """What :meth:`rebuild` decides, for an order that will not follow the flows: the keys
        and the shared links' room in one pass, in activation order (the same sums, so the same
        verdict), no loads kept on the links, no sort and no keys on the classes when a link is
        nearly full (the full filling follows). With room, classes with no own bound need the
        loads for :meth:`tail_levels`: everything is rebuilt then."""
        self.tracking = False
        self._dirty.clear()
        self._touched.clear()
        order, unbounded, load = own_keys(self._active)
        self.order, self._unbounded, self._over = order, unbounded, set()
        self.moved.clear()
        full = nearly_full(load)
        if full is not None:
            self._over.add(full)
            return
        if unbounded:
            self.rebuild()
            self.tracking = False
            return
        order.sort()
        for key in order:
            key[3].ob_key = key
        self.rebuilt = True

    def tail_levels(self) -> list[tuple[float, list[FlowClass]]] | None:
        """The levels of the classes with no own bound (a store's route: L2 and HBM, no port,
        no cap), when every class with one freezes at it first; else None.

        With every shared link keeping room at the own bounds, the unbounded classes rise alone
        past the highest own bound if the first link they fill saturates above it (by the
        margin): each such link's load, Σ count × weight × min(bound, level) + level × their
        weight, is then below capacity until every bounded class has frozen. What is left is a
        progressive filling of the unbounded classes alone over the links' spare capacity."""
        if self._over or not self._unbounded:
            return None
        order = self.order
        first = len(order) - self._unbounded  # unbounded keys sort last (bound inf)
        tail = [key[3] for key in order[first:]]
        spare: dict[Link, float] = {}
        weight: dict[Link, float] = {}
        crossing: dict[Link, int] = {}
        for cls in tail:
            for link, w in cls.route:
                if link.capacity < math.inf:
                    spare[link] = link.capacity - link._load
                    weight[link] = weight.get(link, 0.0) + cls.n * w
                    crossing[link] = crossing.get(link, 0) + 1
        levels: list[tuple[float, list[FlowClass]]] = []
        level = 0.0
        while tail:
            best: tuple[float, int, Link] | None = None
            for link, k in crossing.items():
                if k:
                    candidate = (spare[link] / weight[link], link._index, link)
                    if best is None or candidate < best:
                        best = candidate
            if best is None:
                return None  # some class crosses no finite link: unbounded rate
            level = max(level, best[0])
            link = best[2]
            members = [cls for cls in tail if any(lk is link for lk, _ in cls.route)]
            tail = [cls for cls in tail if cls not in members]
            for cls in members:
                for lk, w in cls.route:
                    if lk in crossing:
                        spare[lk] -= cls.n * w * level
                        weight[lk] -= cls.n * w
                        crossing[lk] -= 1
            levels.append((level, members))
        highest = order[first - 1][0] if first else 0.0
        if not levels[0][0] * (1 - _ROOM) > highest:
            return None
        return levels

    def _place(self, cls: FlowClass, sort: bool = True) -> None:
        """Recompute ``cls``'s own bound and move its load and its place in the order."""
        bound, kind, index = own_bound(cls, cls.ob_seq)
        n = cls.n
        key = (bound, kind, index, cls)
        if cls.ob_key is not None and cls.ob_key[:3] == key[:3] and cls.ob_n == n:
            return
        self._withdraw(cls)
        cls.ob_key, cls.ob_n = key, n
        self.moved.append(cls)
        if sort:
            insort(self.order, key)
        else:
            self.order.append(key)
        touched = self._touched
        if bound == math.inf:
            self._unbounded += 1
            return
        for link, weight in cls.route:
            link._load += n * weight * bound
            touched[link] = None

    def _withdraw(self, cls: FlowClass) -> None:
        key = cls.ob_key
        if key is None:
            return
        order = self.order
        del order[bisect_left(order, key)]
        cls.ob_key = None
        bound, n = key[0], cls.ob_n
        if bound == math.inf:
            self._unbounded -= 1
            return
        touched = self._touched
        for link, weight in cls.route:
            link._load -= n * weight * bound
            touched[link] = None
