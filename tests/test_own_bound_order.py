"""The own-bound order kept class by class (engine/fabric/own_bound_order.py) equals the one-pass
``own_bounds`` and the full progressive filling at every recomputation, on random runs where
classes start, finish, share ports and change counts, and so do the levels of classes with no
own bound (a store's route) when the shortcut takes them; runs with groups kept between
recomputations (engine/fabric/own_groups.py) give every flow's end, in order, as the reference fabric
(one rate group per level, full filling each time) does."""

from __future__ import annotations

import math

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.engine.fabric import flows
from tmasim.engine.fabric.model import Fabric

CAPS = [None, 0.25, 0.5, 0.75]


def _levels(levels: list[tuple[float, list[flows.FlowClass]]]) -> list[tuple[float, list[int]]]:
    return [(rate, [id(c) for c in members]) for rate, members in levels]


class CheckedFabric(Fabric):
    """Before each filling, compares the kept order with the one-pass and full fillings."""

    checks = 0
    applied = 0
    tails = 0

    def _water_fill(self) -> None:
        active = list(self._active)
        applies = self._own.levels_apply(self._changes)
        one_pass = flows.own_bounds(active)
        assert applies == (one_pass is not None)
        if applies:
            kept = [(key[0], [key[3]]) for key in self._own.order]
            assert _levels(kept) == _levels(one_pass) == _levels(flows.filling(active))  # type: ignore[arg-type]
            CheckedFabric.applied += 1
        elif (tail := self._own.tail_levels()) is not None:
            # Bounded classes at their bounds in own order, exactly; then the tail's levels,
            # same members, rates equal up to the float order of the spare capacity's sums.
            bounded = [(key[0], [key[3]]) for key in self._own.order if key[0] < math.inf]
            full = flows.filling(active)
            assert _levels(full[:len(bounded)]) == _levels(bounded)
            rest = full[len(bounded):]
            assert [[id(c) for c in m] for _, m in rest] == [[id(c) for c in m] for _, m in tail]
            assert all(math.isclose(a, b, rel_tol=1e-12) for (a, _), (b, _) in zip(rest, tail, strict=True))
            CheckedFabric.tails += 1
        CheckedFabric.checks += 1
        super()._water_fill()


class PlainFabric(Fabric):
    _water_fill = Fabric._water_fill_plain


Program = list[tuple[int, int, int, int | None]]  # (delay, bytes, route, cap index) per copy


def _run(fabric_type: type[Fabric], programs: list[Program], ports: list[float], l2: float,
         port_of: list[int]) -> list[tuple[int, int, int]]:
    """Lanes start copies one after another (a delay before each); several lanes may share a
    port, and a lane's copies take one of three routes (L2 only, through HBM, capped)."""
    env = simpy.Environment()
    fabric = fabric_type(env)
    shared, hbm = fabric.add_link("L2", l2), fabric.add_link("HBM", l2 / 2)
    port_links = [fabric.add_link(f"port{i}", c) for i, c in enumerate(ports)]
    order: list[tuple[int, int, int]] = []

    def lane(i: int, program: Program) -> simpy.events.ProcessGenerator:
        port = port_links[port_of[i % len(port_of)] % len(port_links)]
        routes = [((port, 1.0), (shared, 1.0)), ((port, 1.0), (shared, 1.0), (hbm, 0.5)), ((port, 2.0), (hbm, 1.0)),
                  ((shared, 1.0), (hbm, 0.25))]  # the last: a store's, no port
        for n, (delay, nbytes, route, cap) in enumerate(program):
            yield env.timeout(delay)
            flow = fabric.start_flow(routes[route], nbytes, cap=None if cap is None else CAPS[cap])
            yield flow.done
            order.append((flow.end, i, n))

    for i, program in enumerate(programs):
        env.process(lane(i, program))
    env.run()
    return order


copy = st.tuples(st.integers(0, 300), st.sampled_from([1000, 1500, 4096, 777]), st.integers(0, 3),
                 st.sampled_from([None, None, 1, 2, 3]))


@settings(max_examples=150, deadline=None)
@given(programs=st.lists(st.lists(copy, min_size=1, max_size=6), min_size=1, max_size=10),
       ports=st.lists(st.sampled_from([0.5, 0.75, 1.0, 0.1234, 0.0987]), min_size=1, max_size=8),
       port_of=st.lists(st.integers(0, 7), min_size=1, max_size=10),
       l2=st.sampled_from([1.0, 3.0, 6.0, 100.0, 3.7]))  # non-dyadic values: inexact clocks
def test_kept_order_equals_the_fillings_and_runs_match_the_reference(
        programs: list[Program], ports: list[float], port_of: list[int], l2: float) -> None:
    checked = _run(CheckedFabric, programs, ports, l2, port_of)
    assert checked == _run(Fabric, programs, ports, l2, port_of) == _run(PlainFabric, programs, ports, l2, port_of)


def test_the_random_runs_exercise_both_regimes() -> None:
    # Four SMs, one copy each on a wide L2: own bounds. Then eight, four through L2 and four
    # to HBM only (1.5 B/ps): HBM binds at 0.375 B/ps, below their ports' 0.5, and no link is
    # crossed by all, so the full filling runs.
    CheckedFabric.checks = CheckedFabric.applied = 0
    wide = [[(i * 10, 4096, 0, None)] for i in range(4)]
    _run(CheckedFabric, wide, [1.0] * 4, 100.0, [0, 1, 2, 3])
    assert CheckedFabric.applied == CheckedFabric.checks > 0
    CheckedFabric.checks = CheckedFabric.applied = 0
    narrow = [[(0, 4096, 0 if i < 4 else 2, None)] for i in range(8)]
    _run(CheckedFabric, narrow, [1.0] * 8, 3.0, list(range(8)))
    assert CheckedFabric.applied < CheckedFabric.checks


def test_a_port_shared_by_two_lanes_halves_each_and_frees_when_one_ends() -> None:
    # Two lanes on one port of 1 B/ps (L2 wide): 1000 B and 3000 B both at 0.5 B/ps until the
    # first ends at 2000 ps (its 1000 B); the other's last 2000 B at 1.0: ends at 4000 ps.
    order = _run(CheckedFabric, [[(0, 1000, 0, None)], [(0, 3000, 0, None)]], [1.0], 100.0, [0, 0])
    assert order == [(2000, 0, 0), (4000, 1, 0)]


def test_a_store_takes_the_spare_capacity_its_first_full_link_leaves() -> None:
    # Two loads at their ports (1 B/ps each, HBM weight 0.5) and a store on L2 (100 B/ps,
    # weight 1) and HBM (50 B/ps, weight 0.25): L2 leaves 98 B/ps, HBM 49 / 0.25 = 196, so the
    # store runs at 98 B/ps, above both ports: the tail's level. 9800 B end at 100 ps; the
    # loads' 4000 B at 4000 ps.
    CheckedFabric.tails = 0
    order = _run(CheckedFabric, [[(0, 4000, 1, None)], [(0, 4000, 1, None)], [(0, 9800, 3, None)]],
                 [1.0, 1.0, 1.0], 100.0, [0, 1, 2])
    assert order == [(100, 2, 0), (4000, 0, 0), (4000, 1, 0)]
    assert CheckedFabric.tails > 0
