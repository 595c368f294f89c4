"""The SM's TMA unit: accepts requests one at a time, keeps many in flight.

Each request pays, in order:
  1. issue    - the unit takes ``issue`` ps per request, one request after another;
  2. latency  - a delay before its bytes stream, which overlaps other copies (pipelined); it
     grows by ``latency_per_kib_in_flight`` per KiB the unit has in flight when the copy is issued,
     its own included (queueing on the way back to the SM: B200's round trips lengthen with
     the stages in flight);
  3. transfer - the bytes move (no faster than the unit passes the copy's requests, one per
     row segment of the box, at ``request_time`` each), in the order the copies became ready, up
     to ``lanes`` copies at once (one lane: the unit streams a box's requests before the next
     box's, so an SM's own copies do not share its port and the first stage lands first; two,
     as B200's mainloop table shows, overlap two copies, each at its own request pace, sharing
     the port). With a fixed busy time (the ``tiles`` workload)
     the transfer takes that time; otherwise it is a flow through the fabric, sharing L2 and
     HBM bandwidth with every other SM's transfer on the chip.
When the last byte lands the engine calls ``complete_tx`` on the request's mbarrier. Optional
caps on copies or bytes in flight hold a request back until an earlier copy lands.

A representative SM standing for ``multiplicity`` identical SMs (aggregation) weighs that many
times on the shared links, so the flow model sees the load of all of them.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import simpy

from tmasim.engine.event_loop import timeout
from tmasim.engine.program import Copy
from tmasim.engine.recorder import ISSUE, STORE, STORE_SPAN, WAIT_EMPTY, Recorder
from tmasim.engine.sm.barrier import Mbarrier

if TYPE_CHECKING:
    from tmasim.engine.fabric.model import Fabric, Link



class Multicast:
    """Where a multicast load lands: the same slot's full barrier in every receiving CTA of the
    cluster, through each receiver's SM port. The copy is read once from L2 (and HBM)."""

    __slots__ = ("barriers", "ports", "ctas")

    def __init__(self, barriers: tuple[Mbarrier, ...], ports: tuple[Link, ...],
                 ctas: tuple[tuple[int, int], ...]) -> None:
        self.barriers = barriers
        self.ports = ports
        self.ctas = ctas  # (sm, cta) of each receiver, for the records

    def complete_tx(self, nbytes: int, who: str = "") -> None:
        for barrier in self.barriers:
            barrier.complete_tx(nbytes, who)


# A copy's ``stage`` below 0: not a load into a ring slot. A store of the output tile; or a
# split tile's partial written to, or read from, its reduction workspace (tmasim.workloads.gemm_split),
# which pass through L2 like a store and a load, counted apart from both.
STORE_STAGE, WORKSPACE_WRITE, WORKSPACE_READ = -1, -2, -3

# What a landed copy notifies: a load's mbarrier (complete_tx), the barriers of a multicast, or a
# store's callback.
Target = Mbarrier | Multicast | Callable[[float], None]


@dataclass(frozen=True)
class Routes:
    """The links a copy crosses: its SM's ingest port, then L2, then (for misses) HBM."""

    fabric: Fabric
    port: Link
    l2: Link
    hbm: Link


class CopyEngine:
    __slots__ = ("env", "name", "sm", "issue", "recorder", "routes", "multiplicity", "max_copies", "max_bytes",
                 "_accept_free", "_transfer_free", "_route_cache", "_pending", "_ready", "_wake_at", "_requests",
                 "in_flight", "bytes_in_flight", "_transferring", "_busy_since", "busy_ps", "bytes", "memory_bytes",
                 "l2_bytes", "hbm_bytes", "copies", "store_bytes", "workspace_bytes", "workspace_hbm_bytes",
                 "latency_noise", "_code", "request_time",
                 "request_overhead", "lanes", "latency_per_kib_in_flight")

    def __init__(self, env: simpy.Environment, name: str, sm: int, issue: int, recorder: Recorder | None, *,
                 routes: Routes | None = None, multiplicity: int = 1, max_copies: int = 0,
                 max_bytes: int = 0, latency_noise: Callable[[int], int] | None = None,
                 request_time: int = 0, request_overhead: int = 0, lanes: int = 1,
                 latency_per_kib_in_flight: int = 0) -> None:
        self.env = env
        self.name = name
        self.sm = sm
        self.issue = issue
        self.recorder = recorder
        self._code = recorder.name(name) if recorder is not None else 0  # the name, as the records keep it
        self.routes = routes
        self.multiplicity = multiplicity
        self.max_copies = max_copies
        self.max_bytes = max_bytes
        self.latency_noise = latency_noise  # SM drift: scales each copy's latency
        self.request_time = request_time  # ps per request through the unit (0: no request ceiling)
        self.request_overhead = request_overhead  # HBM bytes each request costs beyond its own
        self.lanes = lanes  # copies the unit streams at once, each at most one request per request_time
        self.latency_per_kib_in_flight = latency_per_kib_in_flight  # ps per KiB in flight (GpuSpec)
        self._accept_free: float = 0  # SimPy's clock is typed float; it holds ints here
        self._transfer_free: float = 0
        self._route_cache: dict[tuple[float, object, float], tuple[tuple[Link, float], ...]] = {}
        self._pending: deque[tuple[Copy, Target, int, int, int]] = deque()
        # Flow copies by the time their latency ends: (ready, sequence, copy, target, cta, tile, stage).
        self._ready: list[tuple[float, int, Copy, Target, int, int, int]] = []
        self._wake_at = math.inf
        self._requests = 0
        self.in_flight = 0
        self.bytes_in_flight = 0
        self._transferring = 0
        self._busy_since: float = 0
        self.busy_ps: float = 0
        self.bytes = 0          # loads landed in shared memory (one SM's worth)
        self.memory_bytes = 0   # loads read through the memory system
        self.l2_bytes = 0.0     # of which L2 served (less where a cluster's same loads coalesce)
        self.hbm_bytes = 0.0    # of which from HBM
        self.store_bytes = 0    # stores written to global memory
        self.workspace_bytes = 0  # split tiles' partials written to and read from the workspace
        self.workspace_hbm_bytes = 0.0  # of which through HBM (a workspace larger than L2 holds)
        self.copies = 0

    def load(self, copy: Copy, barrier: Mbarrier | Multicast, cta: int, tile: int, stage: int,
             waited: float | None = None) -> None:
        """Copy ``copy`` into shared memory; retire its bytes on ``barrier`` when they land.
        ``waited``: with records, when the producer's wait for the slot began (its span is
        recorded here, with the issue when the copy starts now)."""
        if (self.max_copies or self.max_bytes) and self._full(copy):
            if waited is not None:
                self.recorder.spanned(WAIT_EMPTY, waited, self.env.now, self.sm, cta, tile, stage)  # type: ignore[union-attr]
            self._pending.append((copy, barrier, cta, tile, stage))
        else:
            self._start(copy, barrier, cta, tile, stage, waited)

    def loader(self) -> Callable[..., None]:
        """:meth:`load`, or where no cap can hold a copy back, what it calls (one call fewer a copy)."""
        return self.load if self.max_copies or self.max_bytes else self._start

    def store(self, copy: Copy, done: Target, cta: int, tile: int, stage: int = STORE_STAGE) -> None:
        """Write ``copy``'s bytes from shared memory back to global memory (a TMA store); with
        ``stage`` WORKSPACE_WRITE or WORKSPACE_READ, move a split tile's partial to or from its
        reduction workspace, calling ``done`` when the bytes landed."""
        if (self.max_copies or self.max_bytes) and self._full(copy):
            self._pending.append((copy, done, cta, tile, stage))
        else:
            self._start(copy, done, cta, tile, stage)

    def _full(self, copy: Copy) -> bool:
        return bool((self.max_copies and self.in_flight >= self.max_copies)
                    or (self.max_bytes and self.in_flight and self.bytes_in_flight + copy.smem_bytes > self.max_bytes))

    def _start(self, copy: Copy, done: Target, cta: int, tile: int, stage: int, waited: float | None = None) -> None:
        self.in_flight += 1
        self.bytes_in_flight += copy.smem_bytes
        now = self.env._now  # the unit takes the request when it is free, and holds it `issue` ps
        accepted = self._accept_free if self._accept_free > now else now
        self._accept_free = accepted + self.issue
        if waited is not None:  # records: the producer's wait and this issue, one record
            self.recorder.wait_issue(waited, now, accepted, self.sm, cta, tile, stage, self._code)  # type: ignore[union-attr]
        elif self.recorder is not None and stage >= STORE_STAGE:  # the workspace's moves: the CTA records them
            self.recorder.instant(ISSUE if stage >= 0 else STORE, accepted, self.sm, cta, self._code, tile, stage)
        latency = copy.latency if self.latency_noise is None else self.latency_noise(copy.latency)
        if self.latency_per_kib_in_flight:  # as GpuSpec.in_flight_latency, inlined (a hot path)
            latency += round(self.latency_per_kib_in_flight * self.bytes_in_flight / 1024)
        ready = accepted + self.issue + latency
        if copy.busy >= 0:  # a fixed busy time: FIFO transfers, all times known now, one event per copy
            start = ready if ready > self._transfer_free else self._transfer_free
            end = start + copy.busy
            self._transfer_free = end
            self.busy_ps += copy.busy
            landed = timeout(self.env, end - now)
            landed.callbacks.append(lambda _: self._land(copy, done, start, cta, tile, stage))
        else:
            self._requests += 1  # a unique, increasing tie-breaker: equal ready times keep issue order
            heapq.heappush(self._ready, (ready, self._requests, copy, done, cta, tile, stage))
            self._pump()

    def _pump(self) -> None:
        """If a lane is free, stream the copy that became ready first; if that copy is still
        in its latency, wake up when it is ready. A copy that becomes ready while the engine is
        busy costs no event of its own."""
        if self._transferring >= self.lanes or not self._ready:
            return
        ready = self._ready[0][0]
        now = self.env._now
        if ready <= now:
            _, _, copy, done, cta, tile, stage = heapq.heappop(self._ready)
            self._flow(copy, done, cta, tile, stage)
        elif ready < self._wake_at:
            self._wake_at = ready
            self.env.timeout(ready - now).callbacks.append(self._on_wake)

    def _on_wake(self, _: simpy.Event) -> None:
        if self.env.now >= self._wake_at:
            self._wake_at = math.inf
        self._pump()

    def _flow(self, copy: Copy, done: Target, cta: int, tile: int, stage: int) -> None:
        """Stream a ready copy's bytes through the fabric (a lane is free)."""
        assert self.routes is not None, "a flow copy needs the fabric"
        start = self.env._now
        if not self._transferring:
            self._busy_since = start
        self._transferring += 1
        ports = done.ports if type(done) is Multicast else None
        cap = None
        if copy.requests and self.request_time and copy.memory_bytes:
            # The unit passes the copy's requests one after another: the flow is no faster than that.
            cap = copy.memory_bytes / (copy.requests * self.request_time)
        hbm = copy.hbm_fraction * self._hbm_cost(copy) if copy.hbm_fraction else 0.0
        route = self._route(hbm, stage < 0 and stage != WORKSPACE_READ, ports, copy.l2_fraction)
        flow = self.routes.fabric.start_flow(route, copy.memory_bytes, cap=cap)
        flow.done.callbacks.append(lambda _: self._land(copy, done, start, cta, tile, stage))

    def _hbm_cost(self, copy: Copy) -> float:
        """HBM capacity per byte of the copy, relative to 128-byte requests (what the presets'
        HBM bandwidth was measured with): each request costs ``request_overhead`` bytes beyond
        its own, so narrow rows cost more per byte."""
        if not (self.request_overhead and copy.requests and copy.memory_bytes):
            return 1.0
        return (1 + self.request_overhead * copy.requests / copy.memory_bytes) / (1 + self.request_overhead / 128)

    def _route(self, hbm_fraction: float, is_store: bool, ports: tuple[Link, ...] | None = None,
               l2_fraction: float = 1.0) -> tuple[tuple[Link, float], ...]:
        key = (hbm_fraction, ports or is_store, l2_fraction)
        route = self._route_cache.get(key)
        if route is None:
            assert self.routes is not None
            r, m = self.routes, float(self.multiplicity)
            hops = [] if is_store else [(port, 1.0) for port in ports or (r.port,)]  # stores: egress, not modeled
            hops.append((r.l2, m * l2_fraction))
            if hbm_fraction > 0:
                hops.append((r.hbm, m * hbm_fraction))
            route = self._route_cache[key] = tuple(hops)
        return route

    def _land(self, copy: Copy, done: Target, start: float, cta: int, tile: int, stage: int) -> None:
        now = self.env._now
        if copy.busy < 0:
            self._transferring -= 1
            if not self._transferring:
                self.busy_ps += now - self._busy_since
        self.in_flight -= 1
        self.bytes_in_flight -= copy.smem_bytes
        multicast = type(done) is Multicast
        if stage >= 0:
            self.bytes += copy.smem_bytes * (len(done.barriers) if multicast else 1)  # type: ignore[union-attr]
            self.memory_bytes += copy.memory_bytes
            self.l2_bytes += copy.memory_bytes * copy.l2_fraction
            self.hbm_bytes += copy.memory_bytes * copy.hbm_fraction
            self.copies += 1
        elif stage == STORE_STAGE:
            self.store_bytes += copy.memory_bytes
        else:
            self.workspace_bytes += copy.memory_bytes
            self.workspace_hbm_bytes += copy.memory_bytes * copy.hbm_fraction
        rec = self.recorder
        if rec is not None and stage >= 0 and not multicast and done.landing_recorded:  # type: ignore[union-attr]
            # The barrier's flip hook records this copy (its transfer span and landed event) with
            # the fill it completes, in one record; if the phase does not complete, it is recorded
            # here, as it would have been before (nothing is recorded in between).
            done.landing = (start, now, self.sm, cta, tile, stage, copy.memory_bytes, self._code)  # type: ignore[union-attr]
            try:
                done.complete_tx(copy.smem_bytes, self.name)  # type: ignore[union-attr]
            finally:
                if done.landing is not None:  # type: ignore[union-attr]
                    rec.copy(*done.landing)  # type: ignore[union-attr]
                    done.landing = None  # type: ignore[union-attr]
        else:
            if rec is not None:  # a load: its transfer span and landed event in one record
                if stage >= 0:
                    rec.copy(start, now, self.sm, cta, tile, stage, copy.memory_bytes, self._code)
                elif stage == STORE_STAGE:
                    rec.spanned(STORE_SPAN, start, now, self.sm, cta, tile, stage, copy.memory_bytes)
                if multicast:  # one record per receiver: where the bytes went (and from whom)
                    for sm, receiver in done.ctas:  # type: ignore[union-attr]
                        rec.event(now, sm, receiver, "multicast", f"sm{self.sm}.cta{cta}", tile, stage)
            if stage >= 0:
                done.complete_tx(copy.smem_bytes, self.name)  # type: ignore[union-attr]
            else:
                done(now)  # type: ignore[operator]
        if copy.busy < 0:
            self._pump()
        while self._pending and not self._full(self._pending[0][0]):
            self._start(*self._pending.popleft())

    def utilization_busy(self) -> float:
        """Time with at least one transfer under way (serial: the engine's busy time)."""
        busy = self.busy_ps
        if self._transferring:
            busy += self.env.now - self._busy_since
        return busy
