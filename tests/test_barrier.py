"""The mbarrier on its own: phases, parity, transaction bytes, misuse, wake-up latency."""

from __future__ import annotations

import pytest
import simpy

from tmasim.engine.sm.barrier import Mbarrier
from tmasim.errors import BarrierError


def test_phase_flips_only_when_arrivals_and_bytes_are_both_in():
    env = simpy.Environment()
    bar = Mbarrier(env, "b", arrivals=2)
    waiter = bar.wait(0)
    bar.arrive_expect_tx(100)
    bar.arrive()
    assert bar.phase == 0 and not waiter.triggered
    bar.complete_tx(60)
    assert bar.phase == 0
    bar.complete_tx(40)
    assert bar.phase == 1 and waiter.triggered
    assert bar.pending_arrivals == 2 and bar.pending_tx == 0


def test_parity_wait_passes_for_a_completed_phase_and_blocks_for_the_current_one():
    env = simpy.Environment()
    bar = Mbarrier(env, "b", arrivals=1)
    assert bar.wait(1).triggered          # "phase -1" counts as complete: producers start here
    assert not bar.wait(0).triggered
    bar.arrive()
    assert bar.wait(0).triggered
    assert not bar.wait(1).triggered


def test_more_arrivals_than_expected_is_an_error():
    env = simpy.Environment()
    bar = Mbarrier(env, "sm0.cta0.empty[1]", arrivals=2)
    bar.arrive_expect_tx(16)
    with pytest.raises(BarrierError, match=r"empty\[1\].*1 of 2 expected arrivals left"):
        bar.arrive("x", count=2)


def test_transaction_count_underflow_is_an_error():
    env = simpy.Environment()
    bar = Mbarrier(env, "full[0]", arrivals=1)
    bar.arrive_expect_tx(8192)
    with pytest.raises(BarrierError, match="underflow"):
        bar.complete_tx(16384)


def test_wake_delays_visibility_not_the_flip():
    env = simpy.Environment()
    bar = Mbarrier(env, "b", arrivals=1, wake=250)
    seen = []

    def waiter():
        yield bar.wait(0)
        seen.append(env.now)

    def arriver():
        yield env.timeout(1000)
        bar.arrive()

    env.process(waiter())
    env.process(arriver())
    env.run()
    assert seen == [1250]
    assert bar.phase == 1


def test_a_delayed_arrival_flips_the_phase_when_it_takes_effect_without_an_event_of_its_own():
    env = simpy.Environment()
    barrier = Mbarrier(env, "empty[0]", arrivals=2, wake=10)
    seen = []

    def waiter():
        yield barrier.wait(0)
        seen.append(env.now)

    def arrivals():
        barrier.arrive("wg0", delay=100)  # completes at 100
        yield env.timeout(30)
        barrier.arrive("wg1", delay=50)   # completes at 80: the earlier arrival's 100 still rules
        assert barrier.phase == 1 and barrier.flipped_at == 100

    env.process(waiter())
    env.process(arrivals())
    env.run()
    assert seen == [110]  # effective flip at 100, visible after the 10 ps wake


def test_a_phase_no_one_waits_for_completes_with_no_event_and_a_later_wait_passes_at_once():
    env = simpy.Environment()
    bar = Mbarrier(env, "b", arrivals=1)
    seen = []

    def waiter(parity, delay):
        yield env.timeout(delay)
        yield bar.wait(parity)
        seen.append((parity, env.now))

    env.process(waiter(0, 0))
    env.run()                          # the waiter now waits on phase 0
    queued = len(env._queue)
    bar.arrive()                       # phase 0 completes with a waiter: its event is scheduled
    assert len(env._queue) == queued + 1
    bar.arrive()                       # phase 1: no one waits, no event; it is complete at once
    assert len(env._queue) == queued + 1 and bar.wait(1).processed and bar.phase == 2
    env.process(waiter(1, 5))          # a later wait on phase 1 passes at once
    env.run()
    assert seen == [(0, 0), (1, 5)]
