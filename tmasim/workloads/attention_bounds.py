"""Attention's bounds, summary rows and the sentence on what binds.

Bounds a run cannot beat, from the plan alone: ``compute`` (the busiest SM's tensor-core time,
both GEMMs), ``exponentials`` (the softmax and the rescale of O: the busiest SM's busiest vector
pipe, its multi-function unit, FP32 pipe, ALU or issue slots: :mod:`.attention_softmax`),
``smem`` (the MMA operands read from shared memory by the busiest SM at its shared-memory
bandwidth: per block Q once and, for each warpgroup, all of K and V), ``l2`` and
``hbm`` (all bytes over each link), ``port`` (the busiest SM's bytes through its ingest port),
``tma`` (the busiest SM's row requests through its TMA unit, at the unit's request rate),
``latency`` (per CTA, the uses of its busiest K or V slot one after another, each at least a
round trip: the issue, the copy's latency and transfer (port or TMA requests), the full barrier's
wake-up, the MMAs that read the slot (S = Q·Kᵀ of every consumer for K, P·V for V) on the one
FIFO of tensor cores and the last one's completion, the empty barrier's wake-up), ``chain``
(per CTA, one consumer's own steps, each waited for before the next: see :func:`consumer_chain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from tmasim import names
from tmasim.engine.attention.program import AttentionProgram, AttentionSchedule, AttentionUnit
from tmasim.workloads.attention_config import ELEMENT_BYTES, AttentionConfig
from tmasim.workloads.bound_figures import bound_figures, busiest_sm, transfer_ps

if TYPE_CHECKING:
    from tmasim.engine.chip import Plan
    from tmasim.machine.hardware import GpuSpec
    from tmasim.machine.residency import Residency
    from tmasim.settings.parts import ScenarioParts

BOUND_NAMES = tuple((key, names.bound(key)) for key in ("compute", "exponentials", "smem", "l2", "hbm", "port",
                                                          "tma", "latency", "chain"))


def breakdown(config: AttentionConfig, gpu: GpuSpec, plan: Plan, stages: int) -> dict[str, Any]:
    sms = plan.sms
    ctas = len(plan.programs)
    tensor, smem, port, requests = ([0.0] * ctas for _ in range(4))  # per CTA, see busiest_sm
    pipes = [[0.0] * ctas for _ in range(4)]  # per vector pipe (xu, fma, alu, issue), per CTA
    serial = [0.0] * sms
    hbm = l2 = latency = chain = 0.0
    e = ELEMENT_BYTES[config.dtype]
    bm, bn = config.tile
    readers = plan.info.get("warpgroups", 2)  # each warpgroup (Blackwell: each Q tile's MMA) reads all of K and V
    halves = plan.info.get("mma_cta_group", 1)  # a 2-SM pair: each SM's shared memory holds half of K and V
    assert isinstance(readers, int) and isinstance(halves, int)  # placement facts are objects to the summary
    operands = (bm * config.head_dim + readers * bn * (config.head_dim + config.d_v) // halves) * e
    # Units share their Q copy, runs and epilogue (the plan builds each kind once): each kind's
    # figures are worked out once, and each kind's slot round trips once per ring position.
    loads: dict[tuple[int, Any, Any, int], _UnitLoad] = {}
    rings: dict[tuple[int, Any, Any, int, int], tuple[float, ...]] = {}
    chains: dict[tuple[int, int], float] = {}  # consumer_chain's per-unit figure
    for g, program in enumerate(plan.programs):
        assert isinstance(program, AttentionProgram)
        sm, procs = g % sms, program.schedule.consumers
        trips = [0.0] * stages
        step = 0
        for unit in program.units:
            key = (id(unit.runs), unit.q, unit.epilogue, procs)
            load = loads.get(key)
            if load is None:
                load = loads[key] = _unit_load(gpu, unit, procs, operands)
            tensor[g] += load.tensor
            for pipe, busy in zip(pipes, load.pipes, strict=True):
                pipe[g] += busy
            smem[g] += load.smem
            port[g] += load.port
            requests[g] += load.requests
            l2 += load.l2
            hbm += load.hbm
            serial[sm] += load.serial
            if load.steps:
                at = (*key, step % stages)
                ring = rings.get(at)
                if ring is None:
                    slots, at_step = [0.0] * stages, step
                    for count, trip in load.trips:
                        _ring_add(slots, at_step, count, trip)
                        at_step += count
                    ring = rings[at] = tuple(slots)
                for slot, trip in enumerate(ring):
                    trips[slot] += trip
                step += load.steps
        latency = max(latency, max(trips) - gpu.barrier_wake if step else 0.0)
        chain = max(chain, consumer_chain(program, chains))
    bounds = {
        "compute": busiest_sm(tensor, plan),
        "exponentials": max(busiest_sm(pipe, plan) for pipe in pipes),
        "smem": busiest_sm(smem, plan) / gpu.smem_bandwidth,
        "l2": l2 / gpu.l2_bandwidth,
        "hbm": hbm / gpu.hbm_bandwidth,
        "port": busiest_sm(port, plan),
        "tma": busiest_sm(requests, plan),
        "latency": latency,
        "chain": chain,
    }
    return bound_figures(bounds, max(serial), config.useful_flops)


class _UnitLoad(NamedTuple):
    """One unit's part of each of :func:`breakdown`'s sums (``trips``: per run of blocks, its
    count and one slot use's least round trip)."""

    tensor: float
    pipes: tuple[float, float, float, float]
    smem: float
    port: float
    requests: float
    l2: float
    hbm: float
    serial: float
    steps: int
    trips: tuple[tuple[int, float], ...]


def _unit_load(gpu: GpuSpec, unit: AttentionUnit, procs: int, operands: int) -> _UnitLoad:
    q = unit.q
    port = q.memory_bytes / gpu.sm_port_bandwidth
    requests = q.requests * gpu.tma_request_time / gpu.tma_transfer_lanes
    l2 = float(q.memory_bytes)
    hbm = q.memory_bytes * q.hbm_fraction
    serial = float(procs * unit.epilogue.duration)
    if unit.epilogue.store is not None:
        hbm += unit.epilogue.store.memory_bytes
        l2 += unit.epilogue.store.memory_bytes
    tensor = smem = 0.0
    pipes = [0.0] * 4
    steps = 0
    trips = []
    for block, count in unit.runs:
        nbytes = block.k.memory_bytes + block.v.memory_bytes
        tensor += count * procs * (block.qk.occupancy + block.pv.occupancy)
        for i, busy in enumerate((block.softmax + block.correction).pipes):
            pipes[i] += count * procs * busy
        smem += count * operands
        port += count * nbytes / gpu.sm_port_bandwidth
        requests += count * (block.k.requests + block.v.requests) * gpu.tma_request_time / gpu.tma_transfer_lanes
        l2 += count * nbytes
        hbm += count * (block.k.memory_bytes * block.k.hbm_fraction + block.v.memory_bytes * block.v.hbm_fraction)
        serial += count * no_overlap(gpu, block, procs)
        trips.append((count, round_trip(gpu, block, procs)))
        steps += count
    return _UnitLoad(tensor, (pipes[0], pipes[1], pipes[2], pipes[3]), smem, port, requests, l2, hbm, serial, steps,
                     tuple(trips))


def consumer_chain(program: AttentionProgram, memo: dict[tuple[int, int], float] | None = None) -> float:
    """The least time one consumer process of ``program`` takes, its steps one after another
    (:mod:`tmasim.engine.attention.cta`): each GEMM it waits for at least its occupancy and its
    completion tail from its issue, each softmax or rescale at least its lead and its slowest pipe
    (shared pipes only slow it), each unit's epilogue its duration. What it waits for besides
    (data, the other consumers' GEMMs ahead on the FIFO, its turn) only adds. Without
    ``overlap``: per block S, the softmax and the rescale, then P·V; with it, per unit S_0 and
    its softmax, then per later block S_j (after P·V_{j-1} where ``pv_first``), its softmax,
    P·V_{j-1}'s completion and the conversion and rescale, and the last P·V. A 2-SM pair's
    consumers wait on the peer besides: 0 there (no chain is claimed). ``memo`` keeps each unit's
    figure by its runs (units share them), for the programs of one plan (one schedule)."""
    schedule = program.schedule
    if schedule.pair:
        return 0.0
    total = 0.0
    for unit in program.units:
        if memo is None:
            total += _unit_chain(unit, schedule)
            continue
        key = (id(unit.runs), unit.epilogue.duration)
        figure = memo.get(key)
        if figure is None:
            figure = memo[key] = _unit_chain(unit, schedule)
        total += figure
    return total


def _unit_chain(unit: AttentionUnit, schedule: AttentionSchedule) -> float:
    """One unit's part of :func:`consumer_chain` (whole ps: every figure in it is, so the sums are exact)."""
    apart = schedule.correction_apart
    total = float(unit.epilogue.duration)
    blocks = [(block, count) for block, count in unit.runs if count]
    if not blocks:
        return total
    if not schedule.overlap:
        for block, count in blocks:
            vector = (max(block.softmax.time, max(block.correction.pipes)) if apart
                      else (block.softmax + block.correction).time)
            total += count * (block.qk.occupancy + block.qk.tail + vector + block.pv.occupancy + block.pv.tail)
        return total
    first, _ = blocks[0]
    total += first.qk.occupancy + first.qk.tail + first.softmax.time
    previous = first
    later = [(first, blocks[0][1] - 1), *blocks[1:]]
    for block, count in later:  # a run's first block follows another; the rest repeat it
        if count:
            total += (_overlapped_step(block, previous, schedule.pv_first, apart)
                      + (count - 1) * _overlapped_step(block, block, schedule.pv_first, apart))
            previous = block
    return total + previous.pv.occupancy + previous.pv.tail


def _ring_add(trips: list[float], step: int, count: int, trip: float) -> None:
    """Add ``trip`` to the ``count`` ring slots from ``step`` on (slot = step mod len(trips)):
    each slot as often as the steps land on it, in one addition."""
    stages = len(trips)
    laps, rest = divmod(count, stages)
    first = step % stages
    for offset in range(min(count, stages)):
        trips[(first + offset) % stages] += (laps + (offset < rest)) * trip


def _overlapped_step(block: Any, previous: Any, pv_first: bool, apart: bool) -> float:
    """One block after a unit's first, with ``overlap``: from issuing S_j to issuing S_{j+1}."""
    if pv_first:
        s_done = previous.pv.occupancy + block.qk.occupancy + block.qk.tail
        pv_done = previous.pv.occupancy + previous.pv.tail
    else:
        s_done = block.qk.occupancy + block.qk.tail
        pv_done = block.qk.occupancy + previous.pv.occupancy + previous.pv.tail
    softmax = block.softmax if block.early is None else block.early
    after = max(s_done + softmax.time, pv_done)
    if apart:
        return after + block.convert.time + max(block.correction.pipes)
    return after + (block.convert + block.correction).time


def round_trip(gpu: GpuSpec, block: Any, consumers: int = 1) -> float:
    """The least time one use of a K/V slot takes (see the module doc): the longer of K's and V's."""

    def trip(copy: Any, mma: Any) -> float:
        return (gpu.tma_issue + copy.latency + gpu.in_flight_latency(copy.smem_bytes) + transfer_ps(gpu, copy)
                + gpu.barrier_wake
                + consumers * mma.occupancy + mma.tail + gpu.barrier_wake)

    return max(trip(block.k, block.qk), trip(block.v, block.pv))


def no_overlap(gpu: GpuSpec, block: Any, consumers: int) -> float:
    """A block with nothing overlapped: K and V land, then each consumer's S, softmax, rescale, P·V."""
    landing = (gpu.tma_issue + max(block.k.latency, block.v.latency)
               + transfer_ps(gpu, block.k) + transfer_ps(gpu, block.v))
    work = (block.qk.occupancy + block.qk.tail + (block.softmax + block.correction).time + block.pv.occupancy
            + block.pv.tail)
    return landing + consumers * work


# Where O waits for its TMA store, as the summary's pipeline row says it.
O_STAGING = {"v": ", O staged over V (the next unit's V waits for O's store)",
             "q": ", O staged in Q's buffer (the next unit's Q waits for O's store)"}


def stats(config: AttentionConfig, scenario: ScenarioParts, plan: Plan, res: Residency,
          makespan: int) -> dict[str, Any]:
    extra = breakdown(config, scenario.gpu, plan, scenario.pipeline.stages)
    extra["efficiency"] = extra["bound_ns"] * 1000 / makespan if makespan else None
    extra["useful_flops_per_s"] = config.useful_flops / (makespan * 1e-12) if makespan else None
    extra["o_staged_over"] = plan.info.get("o_over") or None
    extra["units_max_blocks"] = plan.info.get("max_blocks")
    extra["units_mean_blocks"] = plan.info.get("mean_blocks")
    extra["causal"], extra["head_dim"] = config.causal, config.head_dim  # which validated check applies
    return extra


def summary_rows(stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
    from tmasim.values import format as fmt
    from tmasim.workloads.summary_rows import chip_rows, cluster_rows, reach_without_launch, share_of_peak, t

    config = scenario.workload
    assert isinstance(config, AttentionConfig)
    used = int(stats.get("sms_used") or scenario.gpu.sms)
    rate = stats["useful_flops_per_s"]
    bounds = ", ".join(f"{name} {t(stats[f'{key}_bound_ns'], zero='none')}" for key, name in BOUND_NAMES)
    binding = names.bound(stats["binding"])
    p = scenario.pipeline
    mode = f"{p.consumers} ping-pong" if p.consumer_mode == "pingpong" and p.consumers >= 2 else \
        f"{p.consumers} cooperative (lockstep)" if p.consumers >= 2 else "1"
    rows = [
        ("predicted time", f"{t(stats['makespan_ns'])}   ({fmt.flop_rate(rate)}, "
                           f"{share_of_peak(rate, scenario, config.dtype, used)}; FLOPs 4·Sq·Skv·d·h·b"
                           + (" over the unmasked pairs, bottom-right causal mask)" if config.causal else ")")),
        ("bound", f"{t(stats['bound_ns'])}, binding: {binding}   (the run reaches "
                  f"{fmt.percent(stats['efficiency'])} of it{reach_without_launch(stats)})"),
        ("bounds", bounds),
        ("pipeline", f"consumers {mode}, softmax overlap {'on' if config.softmax_overlap else 'off'}, "
                     f"{'warp-specialized' if p.warp_specialized else 'no producer warpgroup'}, "
                     f"{p.stages} K/V stages" + O_STAGING.get(stats.get("o_staged_over") or "", "")),
        ("no-overlap time", f"{t(stats['serial_ns'])} on the busiest SM"),
        *chip_rows(stats, scenario),
        *(cluster_rows(stats, "a 2-SM MMA pair: each CTA loads its own Q rows and half of every K and V block, "
                              "the leader's MMA reads both halves", scenario.gpu) if stats.get("cluster") else []),
    ]
    at = [name for name, _ in rows].index("residency") + 1 if "residency" in [n for n, _ in rows] else len(rows)
    rows[at:at] = _storage_rows(stats, scenario)
    if stats.get("sm_finish_mean_ns"):
        busiest, mean = stats["sm_finish_max_ns"], stats["sm_finish_mean_ns"]
        rows.append(("load balance", f"busiest SM {t(busiest)}, mean {t(mean)} ({fmt.percent(busiest / mean - 1)} "
                                     f"over); units of {stats['units_mean_blocks']:.4g} K/V blocks on average, "
                                     f"at most {stats['units_max_blocks']}"))
    return rows


def _storage_rows(stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
    """Where S, P and O live: registers per consumer thread (Hopper) or TMEM columns (Blackwell)."""
    from tmasim.values import format as fmt

    mma = scenario.gpu.mma
    if mma is None:
        return []
    if stats.get("registers_per_cta"):
        return [("registers", f"{stats['registers_per_consumer_thread']} per consumer thread (needs "
                              f"{stats['registers_needed_per_thread']} for O, S and P), "
                              f"{stats['registers_per_producer_thread']} per producer thread: "
                              f"{stats['registers_per_cta']} of {mma.registers_per_sm} per SM")]
    if stats.get("tmem_columns_per_cta"):
        columns = stats["tmem_columns_per_cta"]
        return [("TMEM", f"{columns} columns ({fmt.size(columns * mma.tmem_lanes * 4)}) per CTA for S and O, of "
                         f"{mma.tmem_columns} per SM")]
    return []


def explain(stats: Mapping[str, Any]) -> str:
    from tmasim.workloads.summary_rows import t

    s = stats
    binding = names.bound_key(s["binding"])
    compute, vector = t(s["compute_bound_ns"]), t(s["exponentials_bound_ns"])
    if binding == "compute":
        return (f"Compute binds: the busiest SM needs {compute} of tensor-core time for both GEMMs, more than its "
                f"softmax needs on its vector pipes ({vector}: exponentials, FP32, ALU, issue) or any memory path.")
    if binding == "exponentials":
        return (f"The softmax binds: the busiest SM needs {vector} on its busiest vector pipe, more than its "
                f"{compute} of tensor-core time; a larger head dim (more MMA per exponential) or faster exponentials "
                "would help.")
    if binding == "chain":
        return (f"One consumer's own chain binds: its steps one after another (each block's S GEMM waited for, its "
                f"softmax and rescale, its P·V) take at least {t(s['chain_bound_ns'])}, more than the {compute} of "
                "tensor-core time: the tensor cores wait while a consumer's softmax runs between its GEMMs. "
                "Overlapping more of it (the softmax overlap, ping-pong consumers) or a cheaper softmax shortens "
                "the chain.")
    name = dict(BOUND_NAMES)[binding]
    return (f"{name} binds: at least {t(s[f'{binding}_bound_ns'])}, more than the {compute} of tensor-core time and "
            f"the {vector} of softmax.")
