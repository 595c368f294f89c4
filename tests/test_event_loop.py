"""engine/event_loop.py: SimPy's loop and timeout, with fewer calls, must do exactly what SimPy does."""

from __future__ import annotations

import pytest
import simpy

from tmasim.engine.event_loop import run_to_end, timeout


def _program(env: simpy.Environment, log: list[tuple[float, str]], make_timeout) -> None:  # type: ignore[no-untyped-def]
    shared = env.event()

    def worker(name: str, delays: list[int]):  # type: ignore[no-untyped-def]
        for delay in delays:
            yield make_timeout(env, delay)
            log.append((env.now, name))
        if name == "a":
            shared.succeed()

    def waiter():  # type: ignore[no-untyped-def]
        yield shared
        log.append((env.now, "waiter"))
        yield make_timeout(env, 0)
        log.append((env.now, "waiter again"))

    env.process(worker("a", [3, 0, 5]))
    env.process(worker("b", [2, 1, 5, 0]))
    env.process(waiter())


def test_run_to_end_and_timeout_match_simpy_event_for_event() -> None:
    logs = []
    for loop, make in ((lambda env: env.run(), lambda env, d: env.timeout(d)), (run_to_end, timeout)):
        env = simpy.Environment()
        log: list[tuple[float, str]] = []
        _program(env, log, make)
        loop(env)
        logs.append((log, env.now))
    assert logs[0] == logs[1]
    assert logs[1][1] == 8 and logs[1][0][-2:] == [(8, "waiter"), (8, "waiter again")]


def test_timeout_is_scheduled_as_simpy_schedules_it() -> None:
    env = simpy.Environment()
    ours, theirs = timeout(env, 7), env.timeout(7)
    (t1, p1, id1, e1), (t2, p2, id2, e2) = sorted(env._queue)
    assert (t1, p1, e1) == (7, 1, ours) and (t2, p2, e2) == (7, 1, theirs) and id2 == id1 + 1
    assert type(ours) is type(theirs) and ours.triggered and ours.ok and ours.value is None
    with pytest.raises(ValueError, match="negative delay"):
        timeout(env, -1)


def test_a_failed_process_stops_the_run_as_simpy_does() -> None:
    def failing(env: simpy.Environment):  # type: ignore[no-untyped-def]
        yield env.timeout(4)
        raise RuntimeError("barrier misuse at 4")

    errors = []
    for loop in (lambda env: env.run(), run_to_end):
        env = simpy.Environment()
        env.process(failing(env))
        with pytest.raises(RuntimeError) as caught:
            loop(env)
        errors.append((str(caught.value), type(caught.value.__cause__), env.now))
    assert errors[0] == errors[1] == ("barrier misuse at 4", RuntimeError, 4)
