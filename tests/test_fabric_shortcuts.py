"""The fabric's two shortcuts are exact, bit for bit:

- ``own_bounds``: when no shared link binds, every class freezes at its own bound (its cap, or
  a link only it crosses: its SM's port); the one-pass result equals the progressive filling's,
  rates and order;
- merged rate groups: consecutive one-class levels at the same rate share one group (one clock,
  flows finishing class by class in level order); every flow ends at the same picosecond and in
  the same order as with one group per level.
"""

from __future__ import annotations

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.engine.fabric import flows
from tmasim.engine.fabric.model import Fabric

PORT_CAPACITIES = [0.5, 0.75, 1.0]  # few values: many ties between ports
CAPS = [None, 0.25, 0.5, 0.75]


def _started(ports: list[float], copies: list[tuple[int, int, int | None, bool]], l2: float) -> Fabric:
    """A fabric with flows started now: (port, count, cap index, through HBM) per copy."""
    fabric = Fabric(simpy.Environment())
    links = [fabric.add_link(f"port{i}", c) for i, c in enumerate(ports)]
    shared, hbm = fabric.add_link("L2", l2), fabric.add_link("HBM", l2 / 3)
    for port, count, cap, miss in copies:
        route = ((links[port % len(links)], 1.0), (shared, 1.0), (hbm, 1.0 if miss else 0.25))
        for _ in range(count):
            fabric.start_flow(route, 1000, cap=None if cap is None else CAPS[cap])
    return fabric


def _levels(levels: list[tuple[float, list[flows.FlowClass]]]) -> list[tuple[float, list[int]]]:
    return [(rate, [id(c) for c in members]) for rate, members in levels]


copy_strategy = st.tuples(st.integers(0, 7), st.integers(1, 3), st.sampled_from([None, 1, 2, 3]), st.booleans())
# Half the cases one class per port (the shortcut's case: an SM's one copy in flight), half any mix.
copies_strategy = st.one_of(st.lists(copy_strategy, min_size=1, max_size=8, unique_by=lambda c: c[0]),
                            st.lists(copy_strategy, min_size=1, max_size=14))


@settings(max_examples=300, deadline=None)
@given(ports=st.lists(st.sampled_from(PORT_CAPACITIES), min_size=1, max_size=8), copies=copies_strategy,
       l2=st.sampled_from([1.0, 2.0, 4.0, 8.0, 100.0]))
def test_own_bounds_equal_the_progressive_filling(ports: list[float], copies: list, l2: float) -> None:
    active = list(_started(ports, copies, l2)._active)
    alone = flows.own_bounds(active)
    if alone is not None:
        assert _levels(alone) == _levels(flows.filling(active))


def test_own_bounds_apply_when_only_ports_and_caps_bind() -> None:
    # Eight SMs, one copy each (two capped), on a wide L2: each at its port or its cap.
    active = list(_started([1.0] * 8, [(i, 1, 1 if i in (2, 5) else None, False) for i in range(8)], 100.0)._active)
    alone = flows.own_bounds(active)
    assert alone is not None and _levels(alone) == _levels(flows.filling(active))
    assert [rate for rate, _ in alone] == [0.25, 0.25] + [1.0] * 6
    # The same on a narrow L2 (8 x 1.0 > 4.0): it binds, so the shortcut steps aside.
    assert flows.own_bounds(list(_started([1.0] * 8, [(i, 1, None, False) for i in range(8)], 4.0)._active)) is None


class UnmergedFabric(Fabric):
    """The fabric with one rate group per freeze level (before groups were merged)."""

    _water_fill = Fabric._water_fill_plain


def _finishes(fabric_type: type[Fabric], programs: list[list[tuple[int, int]]], caps: list[int | None],
              l2: float) -> list[tuple[int, int, int]]:
    """Each SM starts its copies one after another (after a delay each): (end, SM, copy) in the
    order the copies' done events fire."""
    env = simpy.Environment()
    fabric = fabric_type(env)
    shared, hbm = fabric.add_link("L2", l2), fabric.add_link("HBM", l2 / 2)
    order: list[tuple[int, int, int]] = []

    def sm(i: int, program: list[tuple[int, int]]) -> simpy.events.ProcessGenerator:
        port = fabric.add_link(f"port{i}", 1.0)
        route = ((port, 1.0), (shared, 1.0), (hbm, 0.5))
        cap = None if caps[i % len(caps)] is None else CAPS[caps[i % len(caps)]]  # type: ignore[index]
        for n, (delay, nbytes) in enumerate(program):
            yield env.timeout(delay)
            flow = fabric.start_flow(route, nbytes, cap=cap)
            yield flow.done
            order.append((flow.end, i, n))

    for i, program in enumerate(programs):
        env.process(sm(i, program))
    env.run()
    return order


@settings(max_examples=120, deadline=None)
@given(programs=st.lists(st.lists(st.tuples(st.integers(0, 400), st.sampled_from([1000, 1500, 4096, 777])),
                                  min_size=1, max_size=6), min_size=2, max_size=10),
       caps=st.lists(st.sampled_from([None, None, 3]), min_size=1, max_size=4),
       l2=st.sampled_from([3.0, 6.0, 100.0]))
def test_merged_groups_finish_every_flow_when_and_in_the_order_separate_groups_do(
        programs: list[list[tuple[int, int]]], caps: list[int | None], l2: float) -> None:
    assert _finishes(Fabric, programs, caps, l2) == _finishes(UnmergedFabric, programs, caps, l2)


def test_equal_ports_share_one_merged_group() -> None:
    env = simpy.Environment()
    fabric = Fabric(env)
    shared = fabric.add_link("L2", 100.0)
    for i in range(6):
        fabric.start_flow(((fabric.add_link(f"port{i}", 1.0), 1.0), (shared, 1.0)), 1000 + i)
    env.run(until=1)
    assert len(fabric._groups) == 1 and fabric._groups[0].merged and fabric._groups[0].nclasses == 6
    env.run()
    assert fabric.recomputations == 7  # one when they start, one per finish (each a different time)
    assert fabric._groups == []  # all drained
