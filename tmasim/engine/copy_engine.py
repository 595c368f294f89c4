"""The SM's TMA unit: accepts requests one at a time, keeps many in flight.

Each request pays, in order:
  1. issue   - the unit takes ``issue`` ps per request, one request after another;
  2. latency - a delay before its bytes stream, which overlaps other copies (pipelined);
  3. transfer - the bytes move. With a fixed busy time (the ``tiles`` workload) transfers go
     one after another through the engine; through the fabric they are flows that share
     bandwidth with every other copy on the chip.
When the last byte lands the engine calls ``complete_tx`` on the request's mbarrier.
"""

from __future__ import annotations

import simpy

from tmasim.engine.barrier import Mbarrier
from tmasim.engine.recorder import Recorder


class CopyEngine:
    __slots__ = ("env", "name", "sm", "issue", "recorder", "_accept_free", "_transfer_free",
                 "busy_ps", "bytes", "copies")

    def __init__(self, env: simpy.Environment, name: str, sm: int, issue: int,
                 recorder: Recorder | None) -> None:
        self.env = env
        self.name = name
        self.sm = sm
        self.issue = issue
        self.recorder = recorder
        self._accept_free: float = 0  # SimPy's clock is typed float; it holds ints here
        self._transfer_free: float = 0
        self.busy_ps = 0
        self.bytes = 0
        self.copies = 0

    def accept(self) -> float:
        """When the unit takes the next request, and reserve its issue slot."""
        now = self.env.now
        accepted = self._accept_free if self._accept_free > now else now
        self._accept_free = accepted + self.issue
        return accepted

    def copy_serial(self, nbytes: int, busy: int, latency: int, barrier: Mbarrier,
                    cta: int, tile: int, stage: int) -> tuple[float, float]:
        """A copy with a fixed transfer time; returns (accepted, landed) times.

        All times are fixed at issue (FIFO transfers, known durations), so the whole copy costs
        one simulation event: the completion that retires its bytes on the barrier.
        """
        now = self.env.now
        accepted = self.accept()
        ready = accepted + self.issue + latency
        start = ready if ready > self._transfer_free else self._transfer_free
        landed = start + busy
        self._transfer_free = landed
        self.busy_ps += busy
        self.bytes += nbytes
        self.copies += 1
        self.env.timeout(landed - now).callbacks.append(lambda _: barrier.complete_tx(nbytes, self.name))
        if self.recorder is not None:
            self.recorder.span(start, landed, self.sm, cta, "tma", "transfer", tile, stage, nbytes)
        return accepted, landed
