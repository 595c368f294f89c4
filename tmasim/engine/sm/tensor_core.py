"""The SM's tensor cores: one FIFO server shared by every consumer warpgroup on the SM (the
SM's vector units are in :mod:`tmasim.engine.sm.vector_units`)."""

from __future__ import annotations

import simpy

from tmasim.engine.event_loop import timeout
from tmasim.engine.sm.vector_units import VectorUnits  # noqa: F401  (its home before; importers keep working)


class TensorCore:
    """Serializes tensor-core work in request order. One event per request: the start time is
    known at request time (max of now and when the previous work ends), so no queue process
    is needed."""

    __slots__ = ("env", "name", "_free_at", "busy_ps", "flops")

    def __init__(self, env: simpy.Environment, name: str) -> None:
        self.env = env
        self.name = name
        self._free_at: float = 0  # SimPy's clock is typed float; it holds ints here
        self.busy_ps = 0
        self.flops = 0.0

    def run(self, duration: int, flops: float = 0.0, wait: int = 0, hold: int = 0) -> tuple[float, simpy.Timeout]:
        """Queue ``duration`` ps of work; returns its start time and an event ``wait`` ps after
        its end (a completion delay the tensor cores do not stay busy for). The next work
        starts ``hold`` ps after this one ends: the SM's shared memory is still busy with other
        traffic the step brought (TMA writes, tmasim.operands); this one's event does not wait."""
        now = self.env._now  # SimPy's clock, without the property's call (a hot path)
        start = self._free_at if self._free_at > now else now
        end = start + duration
        self._free_at = end + hold
        self.busy_ps += duration
        self.flops += flops
        return start, timeout(self.env, end + wait - now)

    def run_with(self, other: TensorCore, duration: int, flops: float = 0.0,
                 wait: int = 0, hold: int = 0) -> tuple[float, simpy.Timeout]:
        """Work that needs this SM's tensor cores and ``other``'s at once (Blackwell's 2-SM MMA):
        it starts when both are free and keeps both busy; the FLOPs are counted here. ``wait``
        and ``hold`` as in :meth:`run`."""
        now = self.env._now
        start = max(now, self._free_at, other._free_at)
        end = start + duration
        self._free_at = other._free_at = end + hold
        self.busy_ps += duration
        other.busy_ps += duration
        self.flops += flops
        return start, self.env.timeout(end + wait - now)

