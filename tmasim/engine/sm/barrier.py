"""The mbarrier: an arrival count, a transaction byte count and a phase.

A phase completes when every expected arrival is in and the transaction count is back to
zero; then the phase number advances and the waiters on that phase's parity wake up. The
producer announces bytes with ``arrive_expect_tx``; the copy engine retires them with
``complete_tx`` as they land. Starting a copy never makes its destination ready: only the
phase flip does.

A barrier that receives multicast copies (``signed_tx``) lets its transaction count go below
zero while an arrival is still pending, as the hardware's does: a peer's slice can land before
this CTA's producer announced the stage's bytes. Once every arrival is in, a negative count is
an underflow.

``wake`` models the barrier's round trip: a completed phase becomes visible to waiters that
many picoseconds after it flips (a waiter that arrives later passes at once). This keeps the
timing a max-plus system: visible = max(arrival at the wait, flip + wake).
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from tmasim.engine.event_loop import timeout
from tmasim.errors import BarrierError
from tmasim.values import format as fmt

FlipHook = Callable[["Mbarrier", int], None]


class Mbarrier:
    """One mbarrier object in shared memory, named by its scope (``sm0.cta1.full[2]``)."""

    __slots__ = ("env", "name", "arrivals", "wake", "phase", "signed_tx", "flipped_at", "_pending", "_tx", "_current",
                 "_last", "_complete", "_on_flip", "_ready_at", "landing", "landing_recorded")

    def __init__(self, env: simpy.Environment, name: str, arrivals: int, wake: int = 0,
                 on_flip: FlipHook | None = None, *, signed_tx: bool = False) -> None:
        self.env = env
        self.name = name
        self.arrivals = arrivals
        self.wake = wake
        self.phase = 0  # phases completed so far; the phase in progress has this number
        self.signed_tx = signed_tx
        self.flipped_at: float = 0  # when the last phase completed (its arrivals' effective times)
        self._ready_at: float = 0  # the latest effective arrival time of the phase in progress
        self._pending = arrivals
        self._tx = 0
        # The phase in progress's event is made when someone first waits for it (None until then);
        # a phase that completed with no event made is `_complete`, an event already processed.
        self._current: simpy.Event | None = None
        self._complete = env.event()
        self._complete._ok, self._complete._value, self._complete.callbacks = True, None, None  # type: ignore[assignment]
        self._last = env.event()  # "the phase before phase 0": complete from the start
        self._last.succeed()
        self._on_flip = on_flip
        # With records: a copy landing on this barrier leaves its record's values here for the flip
        # hook, when the hook records a completing copy with the fill (``landing_recorded``).
        self.landing: tuple[float, ...] | None = None
        self.landing_recorded = False

    def watch(self, on_flip: FlipHook | None, *, records_landing: bool = False) -> None:
        """Call ``on_flip(barrier, completed phase)`` at each flip from now on. ``records_landing``:
        the hook records the copy whose landing completed the phase (left in ``landing``)."""
        self._on_flip = on_flip
        self.landing_recorded = records_landing

    @property
    def pending_arrivals(self) -> int:
        return self._pending

    @property
    def pending_tx(self) -> int:
        return self._tx

    def wait(self, parity: int) -> simpy.Event:
        """An event that fires once the phase of this parity has completed (try_wait.parity).

        As on hardware, parity is all the barrier knows: if the in-progress phase has another
        parity, the most recent phase of this parity counts as complete.
        """
        if (self.phase & 1) != parity:
            return self._last
        current = self._current
        if current is None:
            current = self._current = simpy.Event(self.env)
        return current

    def arrive(self, who: str = "", count: int = 1, phase: int | None = None, delay: int = 0) -> None:
        """Count ``count`` arrivals. ``phase``, when given, is the phase the caller means to
        arrive on: arriving on any other is misuse (an arrival that spills into the next phase
        because the barrier expects fewer arrivals than there are threads, or an early one).
        ``delay``: the arrival takes effect that much later (``tcgen05.commit`` arrives when the
        MMAs already issued complete), without an event of its own."""
        if phase is not None and phase != self.phase:
            self._wrong_phase(who, phase)
        if count > self._pending:
            raise BarrierError(
                f"{self.name}: {who or 'a thread'} arrives at {fmt.time(self.env.now)} but phase "
                f"{self.phase} has {self._pending} of {self.arrivals} expected arrivals left "
                "(more arrivals than the barrier was initialized for)")
        self._pending -= count
        if delay and self.env._now + delay > self._ready_at:
            self._ready_at = self.env._now + delay
        self._maybe_flip()

    def expect_arrivals(self, count: int) -> None:
        """Set the arrival count before first use (when it depends on the cluster's wiring)."""
        if self.phase or self._pending != self.arrivals:
            raise BarrierError(f"{self.name}: its arrival count can change only before first use")
        self.arrivals = self._pending = count

    def expect_tx(self, nbytes: int) -> None:
        self._tx += nbytes

    def arrive_expect_tx(self, nbytes: int, who: str = "", phase: int | None = None) -> None:
        if phase is not None and phase != self.phase:
            self._wrong_phase(who, phase)
        self._tx += nbytes
        self.arrive(who)

    def _wrong_phase(self, who: str, phase: int) -> None:
        at = fmt.time(self.env.now)
        if phase < self.phase:
            raise BarrierError(
                f"{self.name}: {who} arrives for phase {phase} at {at}, but that phase already completed "
                f"with {fmt.plural(self.arrivals, 'arrival')} (more arrivals than the barrier was initialized for)")
        raise BarrierError(
            f"{self.name}: {who} arrives for phase {phase} at {at} while phase {self.phase} is still in "
            f"progress ({self.arrivals - self._pending}/{self.arrivals} arrivals, {self._tx} bytes outstanding): "
            "the slot is reused before it was released")

    def complete_tx(self, nbytes: int, who: str = "") -> None:
        if nbytes > self._tx and not (self.signed_tx and self._pending):
            raise BarrierError(
                f"{self.name}: {who or 'a copy'} completes {nbytes} bytes at {fmt.time(self.env.now)} "
                f"but phase {self.phase} expects only {self._tx} more (transaction-count underflow: "
                "expect_tx announced fewer bytes than the copies deliver)")
        self._tx -= nbytes
        self._maybe_flip()

    def _maybe_flip(self) -> None:
        if self._pending or self._tx:
            if self._tx < 0 and not self._pending:
                raise BarrierError(
                    f"{self.name}: phase {self.phase} received {-self._tx} bytes more than expect_tx announced "
                    f"by {fmt.time(self.env.now)} (transaction-count underflow)")
            return
        done = self._current
        now = self.env._now  # SimPy's clock, without the property's call (a hot path)
        late = self._ready_at - now if self._ready_at > now else 0
        self.flipped_at = now + late
        self._ready_at = 0
        self.phase += 1
        self._pending = self.arrivals
        self._current = None
        delayed = self.wake or late  # waiters run later: the phase's event is needed until then
        if done is None:  # no one waited for this phase
            done = simpy.Event(self.env) if delayed else self._complete
        self._last = done
        if self._on_flip is not None:
            self._on_flip(self, self.phase - 1)
        if delayed:
            timeout(self.env, self.wake + late).callbacks.append(lambda _: _succeed(done))
        elif done.callbacks:
            done.succeed()
        elif done is not self._complete:  # made, but no one waits now: complete at once, no event
            done._ok, done._value, done.callbacks = True, None, None  # type: ignore[assignment]

    def describe_wait(self, parity: int) -> str:
        state = f"{self.arrivals - self._pending}/{self.arrivals} arrivals, {self._tx} bytes outstanding"
        return f"{self.name} parity {parity} (phase {self.phase} in progress: {state})"


def _succeed(event: simpy.Event) -> None:
    event.succeed()
