"""The bounds a GEMM cannot beat, computed from its plan alone (compute, L2, HBM, SM port,
TMA requests, slot round trip, consumer chain), and the one that binds."""

from __future__ import annotations

from tmasim.engine.chip import Plan
from tmasim.engine.program import Copy, Epilogue, Fixup, Segment, UnitProgram
from tmasim.machine.hardware import GpuSpec
from tmasim.machine.operands import staging_ps
from tmasim.workloads.bound_figures import any_placement_bound, bound_figures, busiest_sm, transfer_ps
from tmasim.workloads.gemm_config import GemmConfig


def breakdown(config: GemmConfig, gpu: GpuSpec, plan: Plan, stages: int, consumers: int) -> dict[str, object]:
    """The bounds a GEMM cannot beat, from the plan alone, and the one that binds.

    compute: the busiest SM's tensor-core time (wave quantization included; a grid's CTAs as any
    placement would put them, see :func:`busiest_sm`); smem: the busiest
    SM's shared-memory time, its MMAs' operand reads and the TMA's writes (never less than its
    compute; tmasim.operands); hbm and l2: all
    bytes over each link's bandwidth; port: the busiest SM's bytes over its ingest port; tma:
    the busiest SM's row requests at its TMA unit's request rate (over its transfer lanes);
    a split tile's partials (split-K, stream-K) count on L2, on HBM where they go through it, and
    their reads on the reading SM's port, each consumer warpgroup its share;
    latency: the busiest slot of any CTA, whose uses follow one another, each at least one
    round trip (see :func:`slot_round_trip`); chain: with one consumer warpgroup, the busiest CTA
    slot's consumer, which runs its MMAs and its tiles' epilogues one after another (see
    :func:`consumer_chain`; none with more warpgroups, whose epilogues overlap each other's MMAs).
    ``serial_ns`` is the no-overlap time of the busiest SM: every step's copy, then its compute,
    one after another.
    """
    sms, ctas = plan.sms, len(plan.programs)
    compute, smem, ingest, requests = ([0.0] * ctas for _ in range(4))  # per CTA, see busiest_sm
    serial = [0.0] * sms
    latency = hbm = l2 = 0.0
    chains: list[float] = []  # each CTA's consumer chain (one consumer warpgroup)
    figures = _SegmentFigures(gpu)
    for g, program in enumerate(plan.programs):
        sm = g % sms
        assert isinstance(program, UnitProgram)
        if consumers == 1:
            chains.append(consumer_chain(program, gpu))
        latency = max(latency, _busiest_slot(program, gpu, stages, figures))
        for unit in program.units:
            for seg in unit.segments:
                trip, step_bytes, port_time, request_time, hbm_bytes = figures(seg)
                compute[g] += seg.steps * seg.compute
                smem[g] += seg.steps * (seg.compute + seg.hold)  # MMAs, then the SMEM time they left
                ingest[g] += seg.steps * port_time
                requests[g] += seg.steps * request_time
                serial[sm] += seg.steps * trip
                hbm += seg.steps * hbm_bytes
                l2 += seg.steps * step_bytes
            if unit.epilogue is not None:
                serial[sm] += unit.epilogue.duration
                if unit.epilogue.store is not None:
                    hbm += unit.epilogue.store.memory_bytes
                    l2 += unit.epilogue.store.memory_bytes
                for part in _workspace_moves(unit.epilogue.fixup):
                    l2 += consumers * part.memory_bytes
                    hbm += consumers * part.memory_bytes * part.hbm_fraction
                if unit.epilogue.fixup is not None and unit.epilogue.fixup.read is not None:
                    ingest[g] += consumers * unit.epilogue.fixup.read.memory_bytes / gpu.sm_port_bandwidth
    bounds = {
        "compute": busiest_sm(compute, plan),
        "smem": busiest_sm(smem, plan),
        "hbm": hbm / gpu.hbm_bandwidth,
        "l2": l2 / gpu.l2_bandwidth,
        "port": busiest_sm(ingest, plan),
        "tma": busiest_sm(requests, plan),
        "latency": latency,
        "chain": _busiest_chain(chains, plan) if consumers == 1 else 0.0,
    }
    return bound_figures(bounds, max(serial), config.useful_flops)


def consumer_chain(program: UnitProgram, gpu: GpuSpec) -> float:
    """The least time a CTA's one consumer warpgroup takes (tmasim.engine.pipeline.cta): per work
    unit, its MMAs one after another, each next one at least the shared-memory time the last
    leaves later (``hold``), then the tile's epilogue, which the warpgroup runs itself before the
    next unit's MMAs. The epilogue's ``duration`` is what it holds the MMAs up (tmasim.workloads.gemm:
    a Tensor Memory drain beyond the next tile's mainloop, or at least C's staging through shared
    memory). Two parts are left out, though the warpgroup waits for them too, so that the chain
    exceeds the MMAs' own bounds only where the epilogues outlast the MMAs (and is named the
    binding bound only then): each epilogue's C staging, which every tile pays, and the last
    unit's epilogue. Leaving out what only adds keeps the chain a lower bound."""
    total, final = 0.0, program.units[-1] if program.units else None
    for unit in program.units:
        hold = last = 0
        for seg in unit.segments:
            if seg.steps:
                total += seg.steps * seg.compute
                hold += seg.steps * seg.hold
                last = seg.hold
        total += hold
        epilogue = unit.epilogue
        if unit is not final and epilogue is not None:
            staging = staging_ps(epilogue.store.smem_bytes, gpu.smem_bandwidth) if epilogue.store is not None else 0
            total += max(0, epilogue.duration - max(last, staging))
    return total


def _busiest_chain(chains: list[float], plan: Plan) -> float:
    """The busiest CTA slot's consumer chains: a persistent CTA holds its slot (CTAs that share an
    SM run side by side, so their chains do not add); a grid's block scheduler fills ``sms x
    ctas_per_sm`` slots in some order, and some slot runs ``ceil(CTAs / slots)`` CTAs one after
    another (:func:`any_placement_bound`)."""
    if not chains:
        return 0.0
    if plan.persistent:
        return max(chains)
    return any_placement_bound(chains, max(1, plan.sms * plan.ctas_per_sm))


def _own_time(program: UnitProgram, gpu: GpuSpec, least_fill: bool = False) -> float:
    """The least time a CTA takes alone: its first step's copies issued and landed and its full
    barrier's wake-up, then every MMA of its steps one after another on the SM's tensor cores,
    then its last step's completion (``tail``) and its last epilogue (:func:`_last_epilogue`)."""
    segments = [seg for unit in program.units for seg in unit.segments if seg.steps]
    if not segments:
        return 0.0
    first, last = segments[0], program.units[-1]
    if least_fill:
        timed = [(float(min(c.latency for c in first.copies)), 0.0)] if first.copies else []
    else:
        timed = [(float(c.latency + gpu.in_flight_latency(c.smem_bytes)), transfer_ps(gpu, c)) for c in first.copies]
    fill = gpu.tma_issue + _landing(timed) + gpu.barrier_wake if timed else 0.0
    drain = segments[-1].tail + (_last_epilogue(last.epilogue) if last.epilogue is not None else 0)
    return fill + sum(seg.steps * seg.compute for seg in segments) + drain


def _last_epilogue(epilogue: Epilogue) -> float:
    """A CTA's last epilogue, until it may exit (its stores landed: a bulk wait): the consumers'
    time, then the store's latency; C's sub-tiles drained from Tensor Memory go out one
    ``store_interval`` after another from ``store_lead``, the last one's latency after that."""
    if epilogue.store_parts:
        drained = epilogue.store_lead + len(epilogue.store_parts) * epilogue.store_interval
        last = drained + min(part.latency for part in epilogue.store_parts)
        return max(epilogue.duration, last)
    return epilogue.duration + (epilogue.store.latency if epilogue.store is not None else 0)


def slot_chain_ns(plan: Plan, gpu: GpuSpec, least_fill: bool = False) -> float:
    """A bound a search prunes with, past :func:`breakdown`'s (which a run's summary reports): the
    busiest CTA slot's chain of CTAs, each at least its own time alone (:func:`_own_time`: its
    first fill and last drain, which no other bound counts), over the slots as
    :func:`_busiest_chain` takes them. ``least_fill``: each CTA's first fill only its copies' latency (the
    programs stand for CTAs whose own copies may be smaller: a multicast peer's slice)."""
    chains = [_own_time(program, gpu, least_fill) for program in plan.programs if isinstance(program, UnitProgram)]
    return _busiest_chain(chains, plan) / 1000


def _workspace_moves(fixup: Fixup | None) -> tuple[Copy, ...]:
    """A split tile's partial read and written by one consumer warpgroup (tmasim.workloads.gemm_split)."""
    return () if fixup is None else tuple(c for c in (fixup.read, fixup.write) if c is not None)


class _SegmentFigures:
    """Per segment: its slot round trip, the bytes the L2 serves, the time its copies' bytes take
    through the SM's port (a multicast slice crosses the port of every CTA it lands in), the time
    their row requests take through the TMA unit, and the bytes from HBM.
    Every output tile has its own equal segments, so each distinct one is worked out once."""

    def __init__(self, gpu: GpuSpec) -> None:
        self.gpu = gpu
        self.known: dict[Segment, tuple[float, float, float, float, float]] = {}

    def __call__(self, seg: Segment) -> tuple[float, float, float, float, float]:
        figures = self.known.get(seg)
        if figures is None:
            copies = seg.copies
            figures = self.known[seg] = (
                slot_round_trip(self.gpu, seg), sum(c.memory_bytes * c.l2_fraction for c in copies),
                sum(c.memory_bytes * max(1, c.multicast.bit_count()) / self.gpu.sm_port_bandwidth for c in copies),
                sum(c.requests * self.gpu.tma_request_time for c in copies) / self.gpu.tma_transfer_lanes,
                sum(c.memory_bytes * c.hbm_fraction for c in copies))
        return figures


def slot_round_trip(gpu: GpuSpec, seg: Segment) -> float:
    """The least time one use of a slot takes: the issue, the copies' latency (with their own
    bytes in flight) and transfer at
    the SM port's rate or the TMA unit's request rate, whichever is slower (one after another),
    the full barrier's wake-up, the compute, and the
    empty barrier's wake-up before the producer may refill the slot; with multicast, at least
    the shared slices' landing, a peer's use and its remote arrival before that wake-up."""
    # A copy's latency grows with the bytes its SM has in flight, at least its own.
    timed = [(float(c.latency + gpu.in_flight_latency(c.smem_bytes)), transfer_ps(gpu, c), c.multicast)
             for c in seg.copies]
    use = gpu.barrier_wake + seg.compute + seg.tail
    # A multicast slot is refilled once the peers it feeds released it too, each a remote arrival
    # after its own use, which starts once this CTA's slices landed there (a peer's other copies
    # may land sooner than this CTA's: an edge tile's smaller box).
    shared: list[tuple[float, float]] = [(t, x) for t, x, mask in timed if mask]
    remote = _landing(shared) + use + gpu.cluster_arrive_latency if shared else 0.0
    return gpu.tma_issue + max(_landing([(t, x) for t, x, _ in timed]) + use, remote) + gpu.barrier_wake


def _landing(copies: list[tuple[float, float]]) -> float:
    """When the last of a step's copies (latency, transfer) has landed: they share the SM's port."""
    return max(min(t for t, _ in copies) + sum(x for _, x in copies), max(t + x for t, x in copies))


def _busiest_slot(program: UnitProgram, gpu: GpuSpec, stages: int, figures: _SegmentFigures) -> float:
    """The longest chain of uses of one slot (steps i, i + S, i + 2S, ...) of a CTA; its
    first use waits on no empty barrier."""
    per_slot = [0.0] * stages
    first = 0
    for unit in program.units:
        for seg in unit.segments:
            trip = figures(seg)[0]
            last = first + seg.steps - 1
            for slot in range(stages):
                uses = (last - slot) // stages - (first - 1 - slot) // stages
                per_slot[slot] += uses * trip
            first += seg.steps
    return max(0.0, max(per_slot) - gpu.barrier_wake)
