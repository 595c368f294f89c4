"""The fabric's rate groups in *own form*: when no shared link binds, one group per distinct
own bound, in rate order, kept from one recomputation to the next.

The full filling (:meth:`~tmasim.engine.fabric.Fabric._water_fill`) rebuilds every group at
every recomputation: each class's clock is re-based onto a new group clock, O(active classes)
however few rates changed. In own form a flow starting or ending re-bounds only its class (and
the classes sharing a link that went from one class to two or back:
:mod:`~tmasim.engine.own_bound_order`), so only those move: each joins the group of its new
bound, keeping its own clock; every other class keeps its group and clock. The rates are the
filling's exactly; the clocks differ from a rebuild's only in float rounding (no re-basing),
which moves no flow's finishing picosecond in any bundled scenario (checked summary by summary
and span by span against the full rebuild).

Classes with no own bound (a store's route: L2 and HBM, no port, no cap) get the levels of
:meth:`~tmasim.engine.own_bound_order.OwnBoundOrder.tail_levels`, one group per level after
the own-form groups, rebuilt at each recomputation (they are few, and their rate follows the
spare capacity every other class leaves).

A fast-forward cut ends the own form (:func:`canonical_at_cut`): the groups are described as a
full grouping would describe them and the order stops following the flows, so that a repeated
state repeats bit for bit; the next grouping is then done in full, on bounds summed afresh.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from tmasim.engine.flows import FlowClass, RateGroup

if TYPE_CHECKING:
    from tmasim.engine.fabric import Fabric

Levels = list[tuple[float, list[FlowClass]]]


def group_own(fabric: Fabric, moved: list[FlowClass], tail: Levels | None) -> None:
    """Group the classes at their own bounds (kept groups when in own form, else afresh), then
    the unbounded classes at ``tail``'s levels."""
    if fabric._own_form and not fabric._own.rebuilt:
        if fabric._tail_groups:
            old = set(map(id, fabric._tail_groups))
            fabric._groups = [g for g in fabric._groups if id(g) not in old]
        _regroup(fabric, moved)
    else:
        _group_all(fabric)
    fabric._own.rebuilt = False
    fabric._tail_groups = _add_tail(fabric, tail) if tail else []


def _group_all(fabric: Fabric) -> None:
    """One class per level in own-bound order, each run of equal bounds one (merged) group:
    the full filling's grouping, every class's clock re-based onto its new group's."""
    groups: list[RateGroup] = []
    fabric._groups = groups
    seq = fabric._seq
    group = RateGroup()
    rate = -1.0
    entries: list[tuple[float, int, FlowClass]] = []
    for rank, key in enumerate(fabric._own.order):
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
    fabric._own_form = True
    fabric._by_rate = {group.rate: group for group in groups}


def _regroup(fabric: Fabric, moved: list[FlowClass]) -> None:
    """Each class whose own bound changed joins the group of its new bound (made when there is
    none, in rate order); the others keep their group and clock."""
    by_rate, groups = fabric._by_rate, fabric._groups
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
        fabric._join(cls, group)
        if group.nclasses > 1:
            group.merged = True
        _drop_if_empty(fabric, old)


def _add_tail(fabric: Fabric, levels: Levels) -> list[RateGroup]:
    """The unbounded classes' groups, one per level, after every own-form group."""
    added = []
    for rate, members in levels:
        group = RateGroup()
        group.rate = rate
        fabric._groups.append(group)
        added.append(group)
        for cls in members:
            old = cls.group
            fabric._join(cls, group)
            _drop_if_empty(fabric, old)
    return added


def _drop_if_empty(fabric: Fabric, group: RateGroup | None) -> None:
    if group is not None and group.nclasses == 0 and fabric._by_rate.get(group.rate) is group:
        fabric._groups.remove(group)
        del fabric._by_rate[group.rate]


def canonical_at_cut(fabric: Fabric) -> None:
    """What fast-forward's cut needs beyond the clocks (fast_forward_state.rebase): own-form
    groups described as the full grouping would describe them (ranks by position in the order
    sorted afresh, merged when shared), and the order stopped, so that the next grouping is
    done in full and the next own bounds are summed afresh."""
    own = fabric._own
    if fabric._own_form:
        own.rebuild()
        for rank, key in enumerate(own.order):
            key[3].rank = rank
        for group in fabric._by_rate.values():
            group.merged = group.nclasses > 1
        fabric._own_form = False
        fabric._by_rate = {}
        fabric._tail_groups = []
    own.stop()
    fabric._changes = 0
