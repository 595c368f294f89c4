"""SimPy's event loop, for a run to its end, and its most frequent event, made with fewer calls.

``simpy.Environment.run()`` with no ``until`` calls :meth:`~simpy.Environment.step` once per
event. :func:`run_to_end` is the same loop with ``step``'s body inline: the same events in the
same order, the same clock, the same error when an event fails and no one defused it, and one
Python call fewer per event (some 3% of a ``tiles`` run's time). Nothing in tmasim stops a run
early (no ``until`` event, no :class:`simpy.core.StopSimulation`), so ``step``'s handling of
those is not needed here.
"""

from __future__ import annotations

from heapq import heappop, heappush

import simpy
from simpy.events import NORMAL, Timeout

_new_timeout = Timeout.__new__


def run_to_end(env: simpy.Environment) -> None:
    """Process every event until none is left (as ``env.run()``)."""
    queue = env._queue  # SimPy's heap of (time, priority, id, event); schedule() pushes onto it
    while queue:
        env._now, _, _, event = heappop(queue)
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]  # processed: as step
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):  # a failed event no one handled
            failure = event._value
            error = type(failure)(*failure.args)
            error.__cause__ = failure
            raise error


def timeout(env: simpy.Environment, delay: float) -> Timeout:
    """``env.timeout(delay)``: the same event, scheduled at the same place of SimPy's queue (a
    normal priority, the next event id), made without the two calls SimPy makes for it (its
    ``__init__`` and ``env.schedule``). The engine's two per-step timers use it: a copy's landing
    and a tensor-core step's end."""
    if delay < 0:
        raise ValueError(f"negative delay {delay}")
    event = _new_timeout(Timeout)
    event.env, event.callbacks, event._value, event._delay, event._ok = env, [], None, delay, True
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), event))  # as env.schedule
    return event


def succeed(event: simpy.Event) -> None:
    """``event.succeed()`` for an event made here and not yet triggered: the same place in
    SimPy's queue (now, a normal priority, the next event id), without the call to
    ``env.schedule``. The vector pipes' job ends use it."""
    env = event.env
    event._ok, event._value = True, None
    heappush(env._queue, (env._now, NORMAL, next(env._eid), event))


def events_made(env: simpy.Environment) -> int:
    """The events scheduled so far (all of them processed, once a run is over): SimPy numbers
    each as it schedules it, and :func:`timeout` takes its numbers from the same counter. Takes
    a number itself: call it once, after the run."""
    return next(env._eid)
