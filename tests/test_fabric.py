"""The flow model against closed forms computed by hand, and its invariants under hypothesis."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import pytest
import simpy
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tmasim.engine.fabric.model import Fabric, Flow, Link, Route


@dataclass(frozen=True)
class Job:
    """A flow to start at ``at`` ps over ``route`` (names of links with weights)."""

    at: int
    nbytes: int
    route: tuple[tuple[str, float], ...]
    cap: float | None = None


def run(
    links: dict[str, float], jobs: Sequence[Job], *, series: bool = False
) -> tuple[Fabric, list[Flow]]:
    """Start each job at its time on a fresh fabric, run to the end, return the flows."""
    env = simpy.Environment()
    fabric = Fabric(env, record_series=series)
    by_name = {name: fabric.add_link(name, cap) for name, cap in links.items()}
    flows: list[Flow] = [None] * len(jobs)  # type: ignore[list-item]

    def starter(i: int, job: Job) -> simpy.events.ProcessGenerator:
        yield env.timeout(job.at)
        route = tuple((by_name[name], w) for name, w in job.route)
        flows[i] = fabric.start_flow(route, job.nbytes, cap=job.cap)

    for i, job in enumerate(jobs):
        env.process(starter(i, job))
    env.run()
    return fabric, flows


def ends(flows: Sequence[Flow]) -> list[int | None]:
    return [f.end for f in flows]


# ---- closed forms ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nbytes", "capacity", "expected"),
    [(32768, 3.35, 9781), (100, 3.0, 33), (5, 2.0, 2), (7, 2.0, 4), (1, 3.35, 0)],
)
def test_single_flow_takes_nearest_picosecond_of_bytes_over_capacity(
    nbytes: int, capacity: float, expected: int
) -> None:
    _, (flow,) = run({"L": capacity}, [Job(1000, nbytes, (("L", 1.0),))])
    assert expected == round(nbytes / capacity)
    assert (flow.start, flow.end) == (1000, 1000 + expected)


def test_single_flow_gets_the_narrowest_link_of_its_route() -> None:
    links = {"port": 0.125, "l2": 10.0, "hbm": 3.35}
    _, (flow,) = run(links, [Job(0, 65536, (("port", 1.0), ("l2", 1.0), ("hbm", 1.0)))])
    assert flow.end == 524288  # 65536 / 0.125


def test_rate_is_visible_while_in_flight_and_zero_after() -> None:
    env = simpy.Environment()
    fabric = Fabric(env)
    link = fabric.add_link("L", 4.0)
    flows = [fabric.start_flow(((link, 1.0),), 400) for _ in range(2)]
    env.run(until=1)
    assert [f.rate for f in flows] == [2.0, 2.0]
    env.run()
    assert [f.rate for f in flows] == [0.0, 0.0]
    assert ends(flows) == [200, 200]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 132])
def test_n_equal_flows_share_a_link_equally(n: int) -> None:
    nbytes, capacity = 16384, 3.35
    _, flows = run({"L": capacity}, [Job(0, nbytes, (("L", 1.0),))] * n)
    assert ends(flows) == [round(n * nbytes / capacity)] * n


def test_capped_flow_leaves_the_rest_to_the_other() -> None:
    # C = 4, one flow capped at 1 < C/2: the other gets 3. The capped one moves 300 B in 300 ps;
    # the other moves 900 B at 3 B/ps in 300 ps, then both are done together.
    _, (capped, free) = run(
        {"L": 4.0}, [Job(0, 300, (("L", 1.0),), cap=1.0), Job(0, 900, (("L", 1.0),))]
    )
    assert ends([capped, free]) == [300, 300]


def test_capped_flow_finishes_then_other_speeds_up() -> None:
    # Capped at 1 B/ps for 100 B: done at 100. The other moves 300 B by then at 3 B/ps and its
    # last 700 B at the full 4 B/ps: 175 ps more.
    _, (capped, free) = run(
        {"L": 4.0}, [Job(0, 100, (("L", 1.0),), cap=1.0), Job(0, 1000, (("L", 1.0),))]
    )
    assert ends([capped, free]) == [100, 275]


def test_cap_above_fair_share_does_not_bind() -> None:
    _, flows = run({"L": 4.0}, [Job(0, 400, (("L", 1.0),), cap=3.0)] * 2)
    assert ends(flows) == [200, 200]


def test_classic_two_links_in_series() -> None:
    # Links A (C=10) and B (C=4). Flow x crosses both; y only A; z1, z2 only B.
    # B binds first: x, z1, z2 get 4/3 each; A's residual 10 - 4/3 = 26/3 goes to y.
    # z1, z2, x: 400 B at 4/3 -> 300 ps. y: 1300 B at 26/3 -> 150 ps, so y ends first at 150;
    # nothing on B changes then (B still binds), so x, z1, z2 end at 300.
    jobs = [
        Job(0, 400, (("A", 1.0), ("B", 1.0))),
        Job(0, 1300, (("A", 1.0),)),
        Job(0, 400, (("B", 1.0),)),
        Job(0, 400, (("B", 1.0),)),
    ]
    _, flows = run({"A": 10.0, "B": 4.0}, jobs)
    assert ends(flows) == [300, 150, 300, 300]


def test_max_min_gives_leftover_of_a_tight_link_to_flows_elsewhere() -> None:
    # A (C=3) carries x and y; B (C=2) carries x and z. B binds at 1: x = z = 1, y = 3 - 1 = 2.
    # y (100 B) ends at 50. x and z (100 B) stay at 1 (B still binds) and end at 100.
    jobs = [
        Job(0, 100, (("A", 1.0), ("B", 1.0))),
        Job(0, 100, (("A", 1.0),)),
        Job(0, 100, (("B", 1.0),)),
    ]
    fabric, flows = run({"A": 3.0, "B": 2.0}, jobs, series=True)
    assert ends(flows) == [100, 50, 100]
    stats = fabric.link_stats()
    assert stats["A"].series == ((0, 3.0), (50, 1.0), (100, 0.0))
    assert stats["B"].series == ((0, 2.0), (100, 0.0))


def test_staggered_start_halfway() -> None:
    # C = 2. First flow 1000 B alone at 2 B/ps for 250 ps moves 500 B; the second (1000 B)
    # joins at 250 and both run at 1: the first's 500 B take 500 ps (ends 750), by which the
    # second moved 500 B and finishes its last 500 B alone at 2 B/ps: 250 ps (ends 1000).
    _, flows = run({"L": 2.0}, [Job(0, 1000, (("L", 1.0),)), Job(250, 1000, (("L", 1.0),))])
    assert ends(flows) == [750, 1000]


def test_weight_k_uses_k_times_the_rate() -> None:
    # One flow weighing 3 on a link of 6: its rate is 2 (it loads the link with 6).
    fabric, (flow,) = run({"L": 6.0}, [Job(0, 200, (("L", 3.0),))], series=True)
    assert flow.end == 100
    assert fabric.link_stats()["L"].series == ((0, 6.0), (100, 0.0))


def test_l2_hit_fraction_weight_on_hbm() -> None:
    # 70 % L2 hits: weight 0.3 on HBM (C=3), 1 on L2 (C=100). HBM binds at rate 10, 1000 B: 100 ps.
    fabric, (flow,) = run({"l2": 100.0, "hbm": 3.0}, [Job(0, 1000, (("l2", 1.0), ("hbm", 0.3)))])
    assert flow.end == 100
    stats = fabric.link_stats()
    assert stats["hbm"].bytes_carried == pytest.approx(300.0)
    assert stats["l2"].bytes_carried == 1000.0


def test_unlimited_link_never_binds() -> None:
    _, (capped, port) = run(
        {"inf": math.inf, "port": 2.0},
        [Job(0, 1000, (("inf", 5.0),), cap=4.0), Job(0, 1000, (("inf", 1.0), ("port", 1.0)))],
    )
    assert ends([capped, port]) == [250, 500]


def test_flow_over_only_unlimited_links_finishes_at_once() -> None:
    _, (flow,) = run({"inf": math.inf}, [Job(70, 10**9, (("inf", 1.0),))])
    assert flow.end == 70


def test_zero_byte_flow_finishes_now_and_records_nothing() -> None:
    env = simpy.Environment()
    fabric = Fabric(env)
    link = fabric.add_link("L", 1.0)
    env.run(until=5)
    flow = fabric.start_flow(((link, 1.0),), 0)
    assert flow.done.triggered and flow.end == 5
    env.run()
    assert fabric.link_stats()["L"].bytes_carried == 0.0
    assert fabric.recomputations == 0


def test_busy_time_and_utilization() -> None:
    # 1000 B at 2 B/ps from 100 to 600, then idle until 1000.
    env = simpy.Environment()
    fabric = Fabric(env)
    link = fabric.add_link("L", 2.0)
    env.timeout(100).callbacks.append(lambda _: fabric.start_flow(((link, 1.0),), 1000))
    env.run(until=1000)
    stats = fabric.link_stats()["L"]
    assert (stats.busy_ps, stats.bytes_carried, stats.utilization) == (500, 1000.0, 0.5)
    assert stats.series is None


def test_stats_count_in_flight_progress() -> None:
    env = simpy.Environment()
    fabric = Fabric(env)
    link = fabric.add_link("L", 2.0)
    fabric.start_flow(((link, 3.0),), 3000)  # rate 2/3, loads the link at 2
    env.run(until=300)
    stats = fabric.link_stats()["L"]
    assert stats.bytes_carried == pytest.approx(600.0)
    assert stats.busy_ps == 300


def test_stats_count_progress_after_other_flows_finished() -> None:
    # C = 2. A (1000 B) alone moves 100 B by 50; B (100 B) joins and both run at 1 B/ps, so B
    # ends at 150 and A has moved 200 B; alone again at 2 B/ps, A has moved 300 B by 200.
    env = simpy.Environment()
    fabric = Fabric(env)
    link = fabric.add_link("L", 2.0)
    route = ((link, 1.0),)
    fabric.start_flow(route, 1000)
    env.timeout(50).callbacks.append(lambda _: fabric.start_flow(route, 100))
    env.run(until=200)
    assert fabric.link_stats()["L"].bytes_carried == pytest.approx(100.0 + 300.0)


def test_event_one_picosecond_before_a_completion_does_not_move_it() -> None:
    # A ends at 100 on its own link; B starting elsewhere at 99 must not finish A early.
    _, flows = run({"L": 1.0, "M": 1.0}, [Job(0, 100, (("L", 1.0),)), Job(99, 10, (("M", 1.0),))])
    assert ends(flows) == [100, 109]


def test_flows_started_together_cost_one_recomputation() -> None:
    env = simpy.Environment()
    fabric = Fabric(env)
    link = fabric.add_link("L", 1.0)
    for _ in range(50):
        fabric.start_flow(((link, 1.0),), 100)
    env.run()
    assert fabric.recomputations == 2  # once when they start, once when they all end


def test_done_event_carries_the_flow_and_wakes_a_process() -> None:
    env = simpy.Environment()
    fabric = Fabric(env)
    link = fabric.add_link("L", 1.0)
    seen: list[tuple[int, Flow]] = []

    def copy() -> simpy.events.ProcessGenerator:
        flow = fabric.start_flow(((link, 1.0),), 64)
        yield flow.done
        seen.append((env.now, flow))

    env.process(copy())
    env.run()
    assert len(seen) == 1 and seen[0][0] == 64 and seen[0][1].nbytes == 64


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda f, link: f.start_flow(((link, 1.0),), -1), "non-negative"),
        (lambda f, link: f.start_flow(((link, 1.0),), 10, cap=0.0), "must be positive"),
        (lambda f, link: f.start_flow(((link, -1.0),), 10), "finite and non-negative"),
        (lambda f, link: f.start_flow(((Link("x", 1.0), 1.0),), 10), "not added to this fabric"),
        (lambda f, link: f.add_link("L", 2.0), "already exists"),
        (lambda f, link: f.add_link("M", 0.0), "must be positive"),
    ],
)
def test_misuse_is_refused(make: object, message: str) -> None:
    fabric = Fabric(simpy.Environment())
    link = fabric.add_link("L", 1.0)
    with pytest.raises(ValueError, match=message):
        make(fabric, link)  # type: ignore[operator]


# ---- aggregation: a representative of weight k is exactly k identical flows ---------------


def _sm_workload(
    env: simpy.Environment,
    fabric: Fabric,
    route: Route,
    program: Sequence[tuple[int, int]],
    out: list[int],
) -> None:
    """One SM: after each delay, start a copy of that many bytes and wait for it."""

    def sm() -> simpy.events.ProcessGenerator:
        for delay, nbytes in program:
            yield env.timeout(delay)
            flow = fabric.start_flow(route, nbytes)
            yield flow.done
            out.append(flow.end)

    env.process(sm())


def _aggregation_ends(
    k: int, hbm_weight: float, programs: list[list[tuple[int, int]]], representative: bool
) -> list[list[int]]:
    """Finish times of each program's copies, with k identical SMs run as 1 or as k."""
    env = simpy.Environment()
    fabric = Fabric(env)
    l2, hbm = fabric.add_link("l2", 6.0), fabric.add_link("hbm", 3.0)
    other_port = fabric.add_link("other_port", 0.5)
    outs: list[list[int]] = [[] for _ in programs]
    copies = 1 if representative else k
    weight = k if representative else 1
    for i in range(copies):
        port = fabric.add_link(f"port{i}", 0.75)
        route = ((port, 1.0), (l2, float(weight)), (hbm, weight * hbm_weight))
        _sm_workload(env, fabric, route, programs[0], outs[0] if i == 0 else [])
    _sm_workload(env, fabric, ((other_port, 1.0), (l2, 1.0), (hbm, 1.0)), programs[1], outs[1])
    env.run()
    return outs


@settings(max_examples=60, deadline=None)
@given(
    k=st.integers(1, 12),
    hbm_weight=st.sampled_from([0.25, 0.5, 0.75, 1.0]),
    programs=st.lists(
        st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 20000)), min_size=1, max_size=6),
        min_size=2,
        max_size=2,
    ),
)
def test_representative_with_weight_k_matches_k_identical_flows(
    k: int, hbm_weight: float, programs: list[list[tuple[int, int]]]
) -> None:
    # Hit fractions are dyadic so that k × w and w + ... + w are the same float.
    assert _aggregation_ends(k, hbm_weight, programs, True) == _aggregation_ends(
        k, hbm_weight, programs, False
    )


# ---- properties over random flows -----------------------------------------------------------

LINKS = {"a": 2.0, "b": 3.5, "c": 0.75, "d": math.inf}

jobs_strategy = st.lists(
    st.builds(
        Job,
        at=st.integers(0, 5000),
        nbytes=st.integers(0, 5000),
        route=st.lists(
            st.tuples(st.sampled_from(sorted(LINKS)), st.sampled_from([0.3, 0.5, 1.0, 2.0, 4.0])),
            min_size=0,
            max_size=3,
        ).map(tuple),
        cap=st.one_of(st.none(), st.floats(0.05, 4.0)),
    ),
    min_size=1,
    max_size=25,
)


def _lower_bound(job: Job) -> float:
    """Time the flow would take alone: bytes over its tightest link (capacity / weight) or cap."""
    merged: dict[str, float] = {}
    for name, weight in job.route:
        merged[name] = merged.get(name, 0.0) + weight
    rates = [LINKS[name] / w for name, w in merged.items()]
    rates.append(math.inf if job.cap is None else job.cap)
    return job.nbytes / min(rates)


@settings(max_examples=150, deadline=None)
@given(jobs=jobs_strategy)
def test_no_link_is_ever_over_capacity_and_no_flow_beats_its_route(jobs: list[Job]) -> None:
    fabric, flows = run(LINKS, jobs, series=True)
    for stats in fabric.link_stats().values():
        assert stats.series is not None
        assert all(load <= stats.capacity * (1 + 1e-9) for _, load in stats.series)
        assert stats.series[-1][1] == 0.0  # everything drained
    for job, flow in zip(jobs, flows, strict=True):
        assert flow.end is not None and flow.start == job.at
        assert flow.end - flow.start >= _lower_bound(job) - 0.5 - 1e-6


@settings(max_examples=100, deadline=None)
@given(jobs=jobs_strategy)
def test_bytes_are_conserved_on_every_link(jobs: list[Job]) -> None:
    fabric, _ = run(LINKS, jobs)
    expected = dict.fromkeys(LINKS, 0.0)
    for job in jobs:
        for name, weight in job.route:
            expected[name] += weight * job.nbytes
    carried = {name: s.bytes_carried for name, s in fabric.link_stats().items()}
    assert carried == pytest.approx(expected, rel=1e-12, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(jobs=jobs_strategy)
def test_series_integrates_to_bytes_carried(jobs: list[Job]) -> None:
    # ∫ load dt over the change points equals the bytes carried, up to the rounding of each
    # completion to the nearest picosecond (at most half a picosecond of load per flow).
    fabric, _ = run(LINKS, jobs, series=True)
    for name, stats in fabric.link_stats().items():
        assert stats.series is not None
        if math.isinf(stats.capacity):
            continue
        points = stats.series
        integral = sum(
            load * (t1 - t0) for (t0, load), (t1, _) in zip(points, points[1:], strict=False)
        )
        slack = 0.5 * stats.capacity * len(jobs) + 1e-6
        assert abs(integral - stats.bytes_carried) <= slack, name


# ---- against a naive per-flow reference -----------------------------------------------------
#
# The reference works in exact rationals, one flow at a time, with none of the engine's
# machinery (classes, rate groups, virtual clocks, heaps, the single-level shortcut). Examples
# whose exact schedule puts a completion within a hair of half a picosecond are discarded:
# there, which way the engine's float rounding goes is noise, not a property.

Rate = Fraction | None  # None: no finite constraint, the flow is done at once


def _reference_rates(flows: dict[int, tuple[Job, Fraction]]) -> dict[int, Rate]:
    """Textbook progressive filling over individual flows."""
    routes = {i: _merged(job.route) for i, (job, _) in flows.items()}
    rates: dict[int, Rate] = {}
    level = Fraction(0)
    while len(rates) < len(flows):
        unfrozen = [i for i in flows if i not in rates]
        best: Rate = None
        who = unfrozen
        for i in unfrozen:
            cap = flows[i][0].cap
            if cap is not None and (best is None or Fraction(cap) < best):
                best, who = Fraction(cap), [i]
        for name, capacity in LINKS.items():
            weight = sum((routes[i].get(name, Fraction(0)) for i in unfrozen), Fraction(0))
            if weight > 0 and capacity < math.inf:
                used = sum(
                    (routes[i].get(name, Fraction(0)) * r for i, r in rates.items() if r),
                    Fraction(0),
                )
                share = (Fraction(capacity) - used) / weight
                if best is None or share < best:
                    best, who = share, [i for i in unfrozen if name in routes[i]]
        level = level if best is None else max(level, best)
        rates.update(dict.fromkeys(who, None if best is None else level))
    return rates


def _merged(route: tuple[tuple[str, float], ...]) -> dict[str, Fraction]:
    merged: dict[str, Fraction] = {}
    for name, weight in route:
        merged[name] = merged.get(name, Fraction(0)) + Fraction(weight)
    return {name: w for name, w in merged.items() if w > 0}


def _rounded(remaining: Fraction, rate: Rate) -> int:
    if rate is None:
        return 0
    exact = remaining / rate
    assume(abs(exact - math.floor(exact) - Fraction(1, 2)) > Fraction(1, 10**6))
    return round(exact)


def _reference_ends(jobs: Sequence[Job]) -> list[int]:
    """Event by event: rates change only at starts and (rounded) completions."""
    pending = sorted(range(len(jobs)), key=lambda i: jobs[i].at)
    remaining: dict[int, tuple[Job, Fraction]] = {}
    finish: dict[int, int] = {}
    t = 0
    while pending or remaining:
        rates = _reference_rates(remaining)
        due = {i: t + _rounded(rem, rates[i]) for i, (_, rem) in remaining.items()}
        t_next = min([*due.values(), *(jobs[i].at for i in pending[:1])])
        for i, (job, rem) in list(remaining.items()):
            if due[i] <= t_next:
                finish[i] = t_next
                del remaining[i]
            else:
                remaining[i] = (job, rem - (rates[i] or 0) * (t_next - t))
        t = t_next
        while pending and jobs[pending[0]].at == t:
            i = pending.pop(0)
            if jobs[i].nbytes == 0:
                finish[i] = t
            else:
                remaining[i] = (jobs[i], Fraction(jobs[i].nbytes))
    return [finish[i] for i in range(len(jobs))]


@settings(max_examples=150, deadline=None)
@given(jobs=jobs_strategy)
def test_matches_exact_per_flow_reference(jobs: list[Job]) -> None:
    expected = _reference_ends(jobs)
    _, flows = run(LINKS, jobs)
    assert ends(flows) == expected
