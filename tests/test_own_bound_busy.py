"""A busy recomputation (many flow starts and ends for the classes, as SMs in lockstep make)
sorts the own bounds in one pass that keeps nothing for following
(``OwnBoundOrder._sort_once``): it must reach the verdict and the order that a full
``rebuild`` does, and a few classes each changing once must still be followed."""

from __future__ import annotations

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.engine.fabric.model import Fabric
from tmasim.engine.fabric.own_bound_order import OwnBoundOrder

# (port index, route kind, count, cap index) per class; route kinds: L2 only, L2 and HBM, a
# store's (L2 and HBM, no port), port only.
Spec = tuple[int, int, int, int]
CAPS = [None, 0.25, 0.5]


def _fabric(specs: list[Spec], ports: list[float], l2: float) -> Fabric:
    """Flows started at time 0 and not yet settled: the classes as a recomputation sees them."""
    fabric = Fabric(simpy.Environment())
    shared, hbm = fabric.add_link("L2", l2), fabric.add_link("HBM", l2 / 2)
    port_links = [fabric.add_link(f"port{i}", c) for i, c in enumerate(ports)]
    for port, kind, count, cap in specs:
        link = port_links[port % len(port_links)]
        route = [((link, 1.0), (shared, 1.0)), ((link, 1.0), (shared, 1.0), (hbm, 0.5)),
                 ((shared, 1.0), (hbm, 0.25)), ((link, 1.0),)][kind]
        for _ in range(count):
            fabric.start_flow(route, 4096, cap=CAPS[cap])
    return fabric


def _view(order: OwnBoundOrder) -> list[tuple[float, int, int]]:
    """The order as levels see it: bound, kind and class (a cap's index is a position, which
    the two forms number differently but in the same order)."""
    return [(bound, kind, id(cls)) for bound, kind, _, cls in order.order]


@settings(max_examples=200, deadline=None)
@given(specs=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(1, 3), st.integers(0, 2)),
                      min_size=1, max_size=12),
       ports=st.lists(st.sampled_from([0.5, 1.0, 0.1234, 2.0]), min_size=1, max_size=6),
       l2=st.sampled_from([1.0, 3.7, 6.0, 100.0]))
def test_one_pass_sort_decides_and_orders_as_the_rebuild(specs: list[Spec], ports: list[float], l2: float) -> None:
    fabric = _fabric(specs, ports, l2)
    busy, full = OwnBoundOrder(fabric._active, fabric._links), OwnBoundOrder(fabric._active, fabric._links)
    applies = busy.levels_apply(2 * len(fabric._active))  # more changes than classes: one pass
    assert not busy.tracking
    full.rebuild()
    assert applies == (not full._over and not full._unbounded)
    assert bool(busy._over) == bool(full._over)
    if not busy._over:  # the order is read: the own levels, or the tail's after a rebuild
        assert _view(busy) == _view(full)
        assert busy.tail_levels() == full.tail_levels()


def test_a_busy_recomputation_gives_each_class_its_port() -> None:
    # Three SMs start one 1000 B copy each at once on a wide L2: three changes for three
    # classes, sorted in one pass. Ports 1, 0.5 and 0.25 B/ps: ends at 1000, 2000, 4000 ps.
    env = simpy.Environment()
    fabric = Fabric(env)
    shared = fabric.add_link("L2", 100.0)
    flows = [fabric.start_flow(((fabric.add_link(f"port{i}", c), 1.0), (shared, 1.0)), 1000)
             for i, c in enumerate([1.0, 0.5, 0.25])]
    env.run(until=1)
    assert fabric.recomputations == 1 and not fabric._own.tracking  # sorted once, not followed
    env.run()
    assert [flow.end for flow in flows] == [1000, 2000, 4000]


def test_few_classes_changing_once_each_are_followed() -> None:
    # Four classes, one lane's copy ending and the next starting between two recomputations:
    # two changes to one class. Placing it costs less than sorting all four, so the order
    # follows from the second such recomputation in a row; eight changes (every class replaced
    # at once) sort afresh, and a lone calm recomputation between busy ones is sorted too.
    fabric = _fabric([(i, 1, 2, 0) for i in range(4)], [1.0] * 4, 100.0)
    order = fabric._own
    following = []
    for changes in (2, 2, 8, 2, 8, 2, 2):
        assert order.levels_apply(changes)
        following.append(order.tracking)
    assert following == [False, True, False, False, False, False, True]
