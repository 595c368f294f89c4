"""The chip: SMs (each a TMA copy engine and tensor cores), the fabric, and CTA placement.

Placement follows the hardware's block scheduler. A *persistent* plan puts its CTAs on SMs
round-robin (CTA g on SM g mod #SMs) and each walks its own list of work units. A *grid* plan
has one CTA per work unit; each SM runs up to ``ctas_per_sm`` at once and takes the next
unlaunched CTA as soon as one of its CTAs exits, so the grid runs in waves.

Aggregation: SMs that run identical work under fair sharing stay identical, so one
representative per class of identical SMs, weighing the class's size on the shared links,
gives the same times as simulating them all (docs/design.md §3, aggregation). Classes come from the static
round-robin assignment. A persistent plan has no other; a grid plan's block scheduler hands
out CTAs as SMs free up, which matches round robin only if every SM frees up at the same
time: so a grid plan is aggregated only when every CTA before the last wave does the same
work, and otherwise every SM is simulated (exact, slower).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field

import simpy

from tmasim.engine.attention.cta import AttentionCta
from tmasim.engine.attention.pair import AttentionPairCta
from tmasim.engine.attention.program import AttentionProgram
from tmasim.engine.drift import latency_noise, start_skews
from tmasim.engine.pipeline.cta import Cta, Sync
from tmasim.engine.pipeline.workspace import Workspace
from tmasim.engine.program import Program
from tmasim.engine.recorder import Recorder
from tmasim.engine.sm.copy_engine import CopyEngine, Routes
from tmasim.engine.sm.tensor_core import TensorCore
from tmasim.engine.sm.vector_units import VectorUnits
from tmasim.machine.hardware import GpuSpec
from tmasim.settings.drift import NO_DRIFT, Drift

CtaProgram = Program | AttentionProgram  # what a CTA runs: ring steps, or attention's K/V blocks


@dataclass(frozen=True)
class Plan:
    """What runs: one program per CTA (in launch order), and how CTAs are placed."""

    programs: Sequence[CtaProgram]
    persistent: bool
    ctas_per_sm: int
    sms: int
    flow: bool  # copies flow through the fabric (False: fixed busy times, no fabric)
    units: int = 1  # work units (output tiles) across all programs
    cluster: int = 1  # CTAs per thread-block cluster: programs g, g+1, ... g+cluster-1 form one
    cluster_slots: int = 0  # clusters resident at once (grid launch: each slot runs clusters in turn)
    info: Mapping[str, object] = field(default_factory=dict)  # placement facts for the summary
    fixups: bool = False  # split tiles reduced through a workspace: CTAs wait on each other's partials


@dataclass
class Sm:
    index: int
    multiplicity: int
    copy_engine: CopyEngine
    tensor_core: TensorCore
    queue: deque[tuple[int, CtaProgram]]
    vector_units: VectorUnits | None = None  # FP32 and multi-function units (attention's softmax)


class Chip:
    def __init__(self, env: simpy.Environment, gpu: GpuSpec, plan: Plan, sync: Sync,
                 recorder: Recorder | None, *, aggregate: bool, record_bandwidth: bool = False,
                 drift: Drift = NO_DRIFT, seed: int = 0) -> None:
        self.env = env
        self.gpu = gpu
        self.plan = plan
        self.sync = sync
        self.recorder = recorder
        self.ctas: list[Cta] = []
        self.on_cta: Callable[[Cta], None] | None = None  # told of each CTA as it starts (fast-forward)
        self.drift, self.seed = drift, seed
        self.fabric = None
        if plan.flow:
            from tmasim.engine.fabric.model import Fabric

            self.fabric = Fabric(env, record_series=record_bandwidth)
            self.l2 = self.fabric.add_link("L2", gpu.l2_bandwidth)
            self.hbm = self.fabric.add_link("HBM", gpu.hbm_bandwidth)
        self.aggregation_note = ""
        # Split tiles' peers wait on each other's partials: every CTA is its own (no aggregation).
        self.workspace = Workspace(env) if plan.fixups else None
        aggregate = aggregate and not plan.fixups
        if plan.cluster > 1:
            self._place_clusters(aggregate)
            return
        assignment = _round_robin(plan)
        exact = plan.persistent or _uniform_before_last_wave(plan)
        classes = _classes(assignment) if aggregate and exact else [[s] for s in range(plan.sms)]
        self.sms = [self._make_sm(members[0], len(members), assignment[members[0]]) for members in classes]
        self.aggregated = len(self.sms) < plan.sms
        shared: deque[tuple[int, CtaProgram]] = deque(enumerate(plan.programs))
        skews = start_skews(drift, plan.sms, seed)
        own = plan.persistent or self.aggregated
        self.planned = _count([program for sm in self.sms for _, program in sm.queue] if own else plan.programs)
        for _ in range(plan.ctas_per_sm if not plan.persistent else 1):
            for sm in self.sms:
                queue = sm.queue if own else shared
                env.process(self._slot(sm, queue, skews[sm.index]))

    def _make_sm(self, index: int, multiplicity: int, work: list[tuple[int, CtaProgram]]) -> Sm:
        routes = None
        if self.fabric is not None:
            port = self.fabric.add_link(f"sm{index}.port", self.gpu.sm_port_bandwidth)
            routes = Routes(self.fabric, port, self.l2, self.hbm)
        engine = CopyEngine(self.env, f"sm{index}.tma", index, self.gpu.tma_issue, self.recorder, routes=routes,
                            multiplicity=multiplicity, max_copies=self.gpu.tma_max_in_flight,
                            max_bytes=self.gpu.tma_max_bytes_in_flight,
                            latency_noise=latency_noise(self.drift, index, self.seed),
                            request_time=self.gpu.tma_request_time,
                            request_overhead=self.gpu.hbm_request_overhead, lanes=self.gpu.tma_transfer_lanes,
                            latency_per_kib_in_flight=self.gpu.copy_latency_per_kib_in_flight)
        return Sm(index, multiplicity, engine, TensorCore(self.env, f"sm{index}.tensor"), deque(work),
                  VectorUnits(self.env, f"sm{index}.vector"))

    def _slot(self, sm: Sm, queue: deque[tuple[int, CtaProgram]],
              skew: int = 0) -> Generator[simpy.Event, object, None]:
        """One CTA slot of an SM. Persistent: start all the SM's CTAs now. Grid: run CTAs one
        after another, taking the next unlaunched one when the previous exits. With drift, the
        SM starts ``skew`` ps late."""
        if skew:
            yield self.env.timeout(skew)
        if self.plan.persistent:
            while queue:
                self._start(sm, *queue.popleft())
            return
        while queue:
            cta = self._start(sm, *queue.popleft())
            yield cta.finished

    def _start(self, sm: Sm, cta_index: int, program: CtaProgram) -> Cta:
        if isinstance(program, AttentionProgram):
            assert sm.vector_units is not None
            kind = AttentionPairCta if program.schedule.pair else AttentionCta
            fused = kind(self.env, sm.index, cta_index, program, self.sync, sm.copy_engine, sm.tensor_core,
                         sm.vector_units, self.recorder)
            fused.multiplicity = sm.multiplicity
            self.ctas.append(fused)  # type: ignore[arg-type]
            if self.on_cta is not None:
                self.on_cta(fused)  # type: ignore[arg-type]
            return fused  # type: ignore[return-value]
        cta = Cta(self.env, sm.index, cta_index, program, self.sync, sm.copy_engine, sm.tensor_core, self.recorder)
        cta.multiplicity = sm.multiplicity
        cta.workspace = self.workspace
        self.ctas.append(cta)
        if self.on_cta is not None:
            self.on_cta(cta)
        return cta

    # ---- clusters -----------------------------------------------------------------------------

    def _place_clusters(self, aggregate: bool) -> None:
        """Clusters of ``plan.cluster`` CTAs in ``plan.cluster_slots`` resident slots. Slot q's
        CTA r sits on SM (q·C + r) mod #SMs, so a cluster's CTAs are on distinct SMs. A grid
        launch runs a slot's clusters one after another, the next when all CTAs of the last exit.

        Aggregation is by cluster: slots whose clusters do identical work stay identical, so one
        representative slot per class stands for the others, exactly as for single SMs. With
        several CTAs per SM (a persistent launch, C dividing #SMs), slot q sits on block q mod
        #SMs/C of C SMs, the slots of a block sharing exactly its SMs: one block stands for each
        class of identical blocks. A grid with several CTAs per SM simulates every SM."""
        plan, size, slots = self.plan, self.plan.cluster, self.plan.cluster_slots
        clusters = [list(range(j * size, (j + 1) * size)) for j in range(len(plan.programs) // size)]
        per_slot = [clusters[q::slots] for q in range(slots)]
        exclusive = plan.ctas_per_sm == 1 and slots * size <= plan.sms
        # Several CTAs per SM: slot q's CTAs sit on block q mod B of ``size`` SMs (B = #SMs / size,
        # when size divides it), so the slots sharing a block share exactly its SMs and nothing
        # else; blocks whose slots do identical work are identical, one stands for the others.
        blocks = plan.sms // size if (plan.persistent and plan.sms % size == 0
                                        and slots * size <= plan.ctas_per_sm * plan.sms) else 0
        signatures = [tuple(_signature(plan.programs[g]) for g in cluster) for cluster in clusters]
        exact = plan.persistent or len(set(signatures[: (len(clusters) - 1) // slots * slots])) <= 1
        if aggregate and exact and (exclusive or blocks):
            width = plan.sms if exclusive else blocks  # slots q and q + width share SMs (never, exclusive)
            groups: dict[tuple[object, ...], list[int]] = {}
            for b in range(min(width, slots)):
                groups.setdefault(tuple(tuple(signatures[q::slots]) for q in range(b, slots, width)), []).append(b)
            classes = list(groups.values())  # of blocks (of slots, exclusive)
        else:
            width = slots
            classes = [[q] for q in range(slots)]
            self.aggregation_note = _aggregation_off(plan, exclusive or bool(blocks), exact, self.drift.on)
        # each class's representative: its first block's slots, in launch order
        chosen = sorted((q, len(members)) for members in classes for q in range(members[0], slots, width))
        self.cluster_classes = len(classes)
        sms: dict[int, Sm] = {}
        for q, count in chosen:
            for r in range(size):
                index = (q * size + r) % plan.sms
                if index not in sms:
                    sms[index] = self._make_sm(index, count, [])
        self.sms = [sms[i] for i in sorted(sms)]
        self.aggregated = len(chosen) < slots
        shared = deque(clusters)
        skews = start_skews(self.drift, plan.sms, self.seed)
        own = plan.persistent or self.aggregated
        run = [g for q, _ in chosen for cluster in per_slot[q] for g in cluster] if own else range(len(plan.programs))
        self.planned = _count([plan.programs[g] for g in run])
        for q, _ in chosen:
            slot_sms = [sms[(q * size + r) % plan.sms] for r in range(size)]
            queue = deque(per_slot[q]) if (plan.persistent or self.aggregated) else shared
            self.env.process(self._cluster_slot(slot_sms, queue, skews[slot_sms[0].index]))

    def _cluster_slot(self, slot_sms: list[Sm], queue: deque[list[int]],
                      skew: int = 0) -> Generator[simpy.Event, object, None]:
        """One resident cluster slot; with drift, its clusters (launched whole) start ``skew``
        ps late (the skew of the slot's first SM)."""
        if skew:
            yield self.env.timeout(skew)
        while queue:
            cluster = queue.popleft()
            ctas = [self._start(sm, g, self.plan.programs[g]) for sm, g in zip(slot_sms, cluster, strict=True)]
            index = cluster[0] // self.plan.cluster
            for rank, cta in enumerate(ctas):
                cta.join_cluster(index, rank, ctas, self.gpu.cluster_arrive_latency)
            if not self.plan.persistent:
                yield self.env.all_of([cta.finished for cta in ctas])

    def waves(self) -> int:
        """Work units over resident CTA slots, rounded up: a grid's waves, or how many units
        the busiest persistent CTA walks."""
        return -(-self.plan.units // (self.plan.sms * self.plan.ctas_per_sm))


@dataclass(frozen=True)
class Planned:
    """What the engine is about to simulate (before it runs): the CTAs and their ring steps,
    counting one representative per aggregated class (tmasim.budget estimates from this)."""

    ctas: int
    steps: int
    programs: tuple[CtaProgram, ...] = ()  # the simulated CTAs' programs, in launch order (tmasim.skip_forecast)


def _count(programs: Sequence[CtaProgram]) -> Planned:
    return Planned(len(programs), sum(program.steps for program in programs), tuple(programs))


def static_sms(plan: Plan) -> list[int] | None:
    """The SM each CTA runs on where placement is fixed before the run (a persistent plan: round
    robin, or a cluster's slot as :meth:`Chip._place_clusters` places it); ``None`` for a grid,
    whose block scheduler hands CTAs to whichever SM frees up first."""
    if not plan.persistent:
        return None
    if plan.cluster <= 1:
        return [g % plan.sms for g in range(len(plan.programs))]
    size, slots = plan.cluster, plan.cluster_slots
    return [(((g // size) % slots) * size + g % size) % plan.sms for g in range(len(plan.programs))]


def _aggregation_off(plan: Plan, placeable: bool, exact: bool, drift: bool) -> str:
    """Why a clustered run simulates every cluster slot."""
    return ("off: split tiles' peers wait on each other's partials" if plan.fixups
            else "off: several CTAs per SM share SMs across clusters" if not placeable
            else "off: the grid's clusters differ before its last wave" if not exact
            else "off: SM drift (drifting SMs are not identical)" if drift
            else "off (run.aggregate = false)")


def _round_robin(plan: Plan) -> list[list[tuple[int, CtaProgram]]]:
    """The static assignment: CTA g on SM g mod #SMs, in launch order."""
    per_sm: list[list[tuple[int, CtaProgram]]] = [[] for _ in range(plan.sms)]
    for g, program in enumerate(plan.programs):
        per_sm[g % plan.sms].append((g, program))
    return per_sm


def _uniform_before_last_wave(plan: Plan) -> bool:
    """Whether every CTA launched before the grid's last wave does the same work."""
    slots = plan.sms * plan.ctas_per_sm
    full_waves = (len(plan.programs) - 1) // slots  # waves before the last (partial or full) one
    head = plan.programs[: full_waves * slots]
    return len({_signature(program) for program in head}) <= 1


def _classes(assignment: list[list[tuple[int, CtaProgram]]]) -> list[list[int]]:
    """SMs grouped by identical work (same programs in the same order)."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for sm, work in enumerate(assignment):
        key = tuple(_signature(program) for _, program in work)
        groups.setdefault(key, []).append(sm)
    return list(groups.values())


def _signature(program: CtaProgram) -> object:
    signature = getattr(program, "signature", None)
    return signature() if signature is not None else id(program)


def launch_cost(gpu: GpuSpec, plan: Plan) -> int:
    """Ps a kernel costs outside its CTAs' work: ``gpu.launch_overhead``, and ``launch_per_sm``
    for each SM it uses after the first (added to the makespan: tmasim.simulation)."""
    return gpu.launch_overhead + gpu.launch_per_sm * max(plan.sms - 1, 0)
