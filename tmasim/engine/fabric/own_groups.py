"""The fabric's rate groups in *own form*: when no shared link binds, one group per distinct
own bound, in rate order, kept from one recomputation to the next.

The full filling (:meth:`~tmasim.engine.fabric.model.Fabric._water_fill`) rebuilds every group at
every recomputation: each class's clock is re-based onto a new group clock, O(active classes)
however few rates changed. In own form a flow starting or ending re-bounds only its class (and
the classes sharing a link that went from one class to two or back:
:mod:`~tmasim.engine.fabric.own_bound_order`), so only those move: each joins the group of its new
bound, keeping its own clock; every other class keeps its group and clock. The rates are the
filling's exactly; the clocks differ from a rebuild's only in float rounding (no re-basing),
which moves no flow's finishing picosecond in any bundled scenario (checked summary by summary
and span by span against the full rebuild).

Classes with no own bound (a store's route: L2 and HBM, no port, no cap) get the levels of
:meth:`~tmasim.engine.fabric.own_bound_order.OwnBoundOrder.tail_levels`, one group per level after
the own-form groups, rebuilt at each recomputation (they are few, and their rate follows the
spare capacity every other class leaves).

The fabric owns one :class:`OwnGroups` and hands it what the groups need: the own-bound
order, its group list (returned anew by :meth:`OwnGroups.group`), how a class joins a group
keeping its clock, and its stamp counter. Nothing here reads the fabric's other state.

A fast-forward cut ends the own form (:meth:`OwnGroups.canonical_at_cut`): the groups are
described as a full grouping would describe them and the order stops following the flows, so
that a repeated state repeats bit for bit; the next grouping is then done in full, on bounds
summed afresh.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from tmasim.engine.fabric.flows import FlowClass, RateGroup
from tmasim.engine.fabric.own_bound_order import OwnBoundOrder

Levels = list[tuple[float, list[FlowClass]]]


class OwnGroups:
    """The own form's groups: one per distinct own bound, found by rate, and the unbounded
    classes' (the tail's) after them.

    ``kept``: True while the fabric's groups are in own form, kept from one recomputation to the
    next; the fabric calls :meth:`forget` when it groups the classes any other way."""

    def __init__(self, order: OwnBoundOrder, join: Callable[[FlowClass, RateGroup], None],
                 seq: Iterator[int]) -> None:
        self._order = order
        self._join = join  # moves a class into a group, keeping its clock (Fabric._join)
        self._seq = seq  # the fabric's stamps for group heap entries
        self.kept = False
        self._by_rate: dict[float, RateGroup] = {}
        self._tail: list[RateGroup] = []

    def group(self, groups: list[RateGroup], tail: Levels | None) -> list[RateGroup]:
        """The fabric's groups (``groups``, its current list) with the classes at their own
        bounds, kept where the order was followed, else afresh, then the unbounded classes at
        ``tail``'s levels."""
        order = self._order
        if self.kept and not order.rebuilt:
            if self._tail:
                old = set(map(id, self._tail))
                groups = [g for g in groups if id(g) not in old]
            self._regroup(groups, order.moved)
        else:
            groups = self._group_all()
        order.moved.clear()
        order.rebuilt = False
        self._tail = self._add_tail(groups, tail) if tail else []
        return groups

    def forget(self) -> None:
        """The groups leave own form (one level, or the full filling)."""
        self.kept = False
        self._by_rate = {}
        self._tail = []

    def emptied(self, group: RateGroup) -> None:
        """``group`` lost its last class (the fabric drops it from its list)."""
        if self._by_rate.get(group.rate) is group:
            del self._by_rate[group.rate]

    def canonical_at_cut(self) -> None:
        """What fast-forward's cut needs beyond the clocks (fast_forward_state.rebase): own-form
        groups described as the full grouping would describe them (ranks by position in the
        order sorted afresh, merged when shared), and the order stopped, so that the next
        grouping is done in full and the next own bounds are summed afresh."""
        order = self._order
        if self.kept:
            order.rebuild()
            for rank, key in enumerate(order.order):
                key[3].rank = rank
            for group in self._by_rate.values():
                group.merged = group.nclasses > 1
            self.forget()
        order.stop()

    def _group_all(self) -> list[RateGroup]:
        """One class per level in own-bound order, each run of equal bounds one (merged) group:
        the full filling's grouping, every class's clock re-based onto its new group's."""
        groups: list[RateGroup] = []
        seq = self._seq
        group = RateGroup()
        rate = -1.0
        entries: list[tuple[float, int, FlowClass]] = []
        for rank, key in enumerate(self._order.order):
            cls = key[3]
            if key[0] != rate:
                rate = key[0]
                if rate == float("inf"):
                    break  # the unbounded classes: the tail's
                group = RateGroup()
                group.rate = rate
                groups.append(group)
                entries = group.heap
            elif group.nclasses == 1:
                group.merged = True
            old = cls.group
            offset = cls.offset if old is None else old.clock + cls.offset
            cls.group = group
            cls.offset = offset  # the new group's clock is 0.0: as _join's clock - group.clock
            cls.rank = rank
            group.nclasses += 1
            cls.stamp = stamp = next(seq)
            entries.append((cls.heap[0][0] - offset, stamp, cls))
        for group in groups:
            heapq.heapify(group.heap)
        self.kept = True
        self._by_rate = {group.rate: group for group in groups}
        return groups

    def _regroup(self, groups: list[RateGroup], moved: list[FlowClass]) -> None:
        """Each class whose own bound changed joins the group of its new bound (made when there
        is none, in rate order); the others keep their group and clock."""
        by_rate = self._by_rate
        for cls in moved:
            key = cls.ob_key
            old = cls.group
            if key is None or key[0] == float("inf") or (old is not None and old.rate == key[0]):
                continue  # ended since, unbounded (the tail's), or same rate (a new order among equals)
            rate = key[0]
            group = by_rate.get(rate)
            if group is None:
                group = by_rate[rate] = RateGroup()
                group.rate = rate
                at = len(groups)
                while at and groups[at - 1].rate > rate:
                    at -= 1
                groups.insert(at, group)
            self._join(cls, group)
            if group.nclasses > 1:
                group.merged = True
            self._drop_if_empty(groups, old)

    def _add_tail(self, groups: list[RateGroup], levels: Levels) -> list[RateGroup]:
        """The unbounded classes' groups, one per level, after every own-form group."""
        added = []
        for rate, members in levels:
            group = RateGroup()
            group.rate = rate
            groups.append(group)
            added.append(group)
            for cls in members:
                old = cls.group
                self._join(cls, group)
                self._drop_if_empty(groups, old)
        return added

    def _drop_if_empty(self, groups: list[RateGroup], group: RateGroup | None) -> None:
        if group is not None and group.nclasses == 0 and self._by_rate.get(group.rate) is group:
            groups.remove(group)
            del self._by_rate[group.rate]
