"""``simulate(scenario) -> Result``: plan the work, build the chip, run the events, summarize.

Data flows one way: scenario -> workload plan -> engine components -> counters and records ->
Result. The summary has the figures every run has (time, stalls, bytes, utilization,
residency) and the references that apply to the workload (closed forms, bounds).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import simpy

from tmasim.engine.chip import Chip, Plan, launch_cost
from tmasim.engine.event_loop import run_to_end
from tmasim.engine.fast_forward.jump import FastForward
from tmasim.engine.fast_forward.record_shift import Unshiftable
from tmasim.engine.pipeline.cta import Cta, Sync
from tmasim.engine.recorder import Recorder
from tmasim.errors import BarrierError, DeadlockError, ModelError, ScenarioError
from tmasim.estimates import budget, ranges, skip_forecast
from tmasim.inputs.scenario import Scenario, require_scenario, require_switches
from tmasim.machine.residency import Residency
from tmasim.output.result import Result
from tmasim.values import format as fmt
from tmasim.values.units import PS_PER_S
from tmasim.workloads import workload_of


def simulate(scenario: Scenario, *, record_bandwidth: bool = False, allow_large: bool = False,
             limits: budget.Limits | None = None) -> Result:
    """Run one scenario. ``record_bandwidth`` keeps each link's load over time (for plots).

    A run whose estimated time or memory is past :mod:`tmasim.budget`'s limits is refused with
    a :class:`~tmasim.errors.ResourceError` before it starts, unless ``allow_large``; ``limits``
    (the command line's) also says where to note a large run."""
    require_scenario(scenario, "simulate")
    require_switches("simulate", record_bandwidth=record_bandwidth, allow_large=allow_large)
    scenario.validate()
    limits = limits if limits is not None else budget.DEFAULT
    if allow_large:
        limits = dataclasses.replace(limits, allow=True)
    _check_plan_size(scenario, limits)
    env = simpy.Environment()
    recorder = Recorder() if scenario.run.records else None
    plan, res = plan_scenario(scenario)
    _check_plan(scenario, plan)
    _check_used(scenario, res)
    drift = scenario.run.drift
    chip = Chip(env, scenario.gpu, plan, _sync(scenario), recorder, aggregate=scenario.run.aggregate and not drift.on,
                record_bandwidth=record_bandwidth, drift=drift, seed=scenario.run.seed)
    budget.check(_run_estimate(scenario, plan, chip, limits), limits)
    why_not = _no_skip(scenario, plan)
    ff = FastForward(env, chip, scenario.pipeline.stages, skip=not why_not, note=why_not)
    try:
        _run_events(env, scenario, chip.ctas)
        _check_finished(chip.ctas, env.now)
        ff.finish()
    except ModelError as err:
        if ff.jumps:  # say when it failed in the full run's times: run it again without the skip
            return simulate(_unskipped(scenario), record_bandwidth=record_bandwidth)
        _record_open_waits(chip.ctas, env.now)
        err.records = recorder  # what happened up to the failure: a Gantt or trace of the bug
        raise
    except Unshiftable as why:  # a record made after a jump that no rule shifts: never wrong records
        full = simulate(_unskipped(scenario), record_bandwidth=record_bandwidth, allow_large=True)
        full.stats["fast_forward"] = f"off: {why}"
        return full
    races = [race for cta in chip.ctas for race in cta.races()]
    # The kernel's time: its CTAs' simulated work, plus what it costs outside them (launch,
    # prologue, end), which no CTA's timeline shows (gpu.launch_overhead, and launch_per_sm for
    # each SM it uses after the first).
    launch = launch_cost(scenario.gpu, chip.plan)
    makespan = int(max(cta.finished_at or 0 for cta in chip.ctas)) + launch
    workload = workload_of(scenario.workload)
    stats = {**_common_stats(scenario, chip, res, makespan),
             **workload.stats(scenario.workload, scenario, chip.plan, res, makespan)}
    if stats.get("flops") is not None:  # the workload's useful work: never padding, masked or paired-SM copies
        stats["achieved_flops_per_s"] = stats["flops"] / (makespan / PS_PER_S) if makespan else None
    stats["races"] = len(races)
    stats["launch_overhead_ns"] = launch / 1000
    stats["simulated_steps"] += ff.skipped_steps  # the run's ring steps, skipped ones included
    stats["fast_forward"] = ff.summary()
    stats["fast_forward_skipped_steps"] = ff.skipped_steps
    stats["valid"], stats["invalid_reason"] = _validity(scenario, races)
    links = chip.fabric.link_stats() if chip.fabric is not None and record_bandwidth else {}
    bandwidth = _bandwidth_table(links) if record_bandwidth else None
    return Result(scenario, stats, races, recorder, bandwidth)


def _unskipped(scenario: Scenario) -> Scenario:
    return dataclasses.replace(scenario, run=dataclasses.replace(scenario.run, fast_forward=False))


def _no_skip(scenario: Scenario, plan: Plan) -> str:
    """Why repeated periods are not skipped in this run ('' when they may be)."""
    run = scenario.run
    reasons = [(not run.fast_forward, "run.fast_forward = false"),
               (run.drift.on, "SM drift makes durations random"),
               (bool(plan.programs) and not hasattr(plan.programs[0], "run_of"),
                "this workload's CTA program has no runs of identical steps the skip can cut"),
               (not scenario.pipeline.consumer_waits_full,
                "reads are checked step by step (pipeline.consumer_waits_full = false)")]
    return next((why for off, why in reasons if off), "")


def _validity(scenario: Scenario, races: list[Any]) -> tuple[bool, str | None]:
    """A run whose consumers read before the data landed is not a kernel's timing: invalid."""
    if not races:
        return True, None
    skipped = " (pipeline.consumer_waits_full = false)" if not scenario.pipeline.consumer_waits_full else ""
    return False, (f"{fmt.plural(len(races), 'read')} before data landed{skipped}: the barriers were broken, "
                   "so its times are not a kernel's")


def _bandwidth_table(links: dict[str, Any]) -> list[tuple[int, str, float, float]]:
    """Each link's load over time: (time_ps, link, bytes per ps, capacity), change points only."""
    rows = []
    for name, link in links.items():
        for time, load in link.series or ():
            rows.append((time, name, load, link.capacity))
    return rows


def estimate(scenario: Scenario, *, extra_record_bytes: int = 0,
             limits: budget.Limits | None = None) -> budget.Estimate:
    """What running ``scenario`` would cost (time, memory, events), without running it: the plan
    is built (unless building it is what is too large) and the chip laid out, nothing more.
    ``limits`` (a command's) adds what the command does with the run's records after it."""
    scenario.validate()
    before = _plan_size_estimate(scenario)
    if before is not None and before.too_large:
        return before
    plan, _ = plan_scenario(scenario)
    _check_plan(scenario, plan)
    drift = scenario.run.drift
    chip = Chip(simpy.Environment(), scenario.gpu, plan, _sync(scenario), None,
                aggregate=scenario.run.aggregate and not drift.on, drift=drift, seed=scenario.run.seed)
    cost = _run_estimate(scenario, plan, chip, limits or budget.Limits(extra_record_bytes=extra_record_bytes))
    return dataclasses.replace(cost, obstacle=_no_skip(scenario, plan) or skip_forecast.obstacle(chip))


def lower_bound_ns(scenario: Scenario) -> float | None:
    """A proven lower bound on ``simulate(scenario)``'s ``makespan_ns``, from the plan alone (the
    workload's optional ``lower_bound_ns``: tmasim.workloads.base). None where there is none: a
    workload without one, SM drift (random durations, some shorter than the bounds' nominal ones),
    or a plan too large to build (the run would be refused anyway)."""
    scenario.validate()
    bound = getattr(workload_of(scenario.workload), "lower_bound_ns", None)
    if bound is None or scenario.run.drift.on:
        return None
    before = _plan_size_estimate(scenario)
    if before is not None and before.too_large:
        return None
    return float(bound(scenario.workload, scenario))


def quick_lower_bound_ns(scenario: Scenario) -> float | None:
    """A lower bound never above :func:`lower_bound_ns`, cheaper to work out (the workload's optional
    ``quick_lower_bound_ns``; else :func:`lower_bound_ns` itself): what a search orders points by
    before it needs the tighter one (tmasim.sweep.search). Raises what planning the scenario raises."""
    quick = getattr(workload_of(scenario.workload), "quick_lower_bound_ns", None)
    if quick is None:
        return lower_bound_ns(scenario)
    scenario.validate()
    if scenario.run.drift.on:
        return None
    before = _plan_size_estimate(scenario)
    if before is not None and before.too_large:
        return None
    return float(quick(scenario.workload, scenario))


def same_run(scenario: Scenario) -> str | None:
    """Why the scenario runs exactly as a simpler setting of its design does (the workload's
    optional ``same_run``, tmasim.workloads.base), else None."""
    check = getattr(workload_of(scenario.workload), "same_run", None)
    return None if check is None else check(scenario.workload, scenario)


def _plan_size_estimate(scenario: Scenario) -> budget.Estimate | None:
    size = getattr(workload_of(scenario.workload), "plan_size", None)  # optional for a new workload
    if size is None:
        return None
    steps, units, extra = size(scenario.workload, scenario)
    every_sm = not scenario.run.aggregate or scenario.run.drift.on
    simulated = steps if every_sm else steps // max(1, scenario.gpu.sms)
    kind = {"tiles": "timed", "attention": "attention"}.get(scenario.workload.kind, "flow")
    return budget.plan_estimate(steps, units, simulated=simulated, extra_plan_bytes=extra, kind=kind)


def _check_plan_size(scenario: Scenario, limits: budget.Limits) -> None:
    """The plan itself can be too big to build (10^9 ring steps): refused before it is made."""
    before = _plan_size_estimate(scenario)
    if before is not None:
        budget.check(before, limits)


def _run_estimate(scenario: Scenario, plan: Plan, chip: Chip, limits: budget.Limits) -> budget.Estimate:
    size = getattr(workload_of(scenario.workload), "plan_size", None)
    extra = size(scenario.workload, scenario)[2] if size is not None else 0
    skipped = 0 if _no_skip(scenario, plan) else skip_forecast.forecast(chip, scenario.pipeline.stages)
    return budget.run_estimate(chip.planned.steps, sum(p.steps for p in plan.programs), plan.units,
                               chip.planned.ctas, flow=plan.flow, sharers=len(chip.sms), drift=scenario.run.drift.on,
                               records=scenario.run.records, skipped=skipped, extra_plan_bytes=extra,
                               extra_record_bytes=limits.extra_record_bytes,
                               extra_record_seconds=limits.extra_record_seconds,
                               attention=scenario.workload.kind == "attention", cluster=plan.cluster > 1,
                               wide=scenario.run.records and _wide_records(plan),
                               fast_forward=not _no_skip(scenario, plan), extra_seconds=limits.extra_seconds,
                               extra_bytes=limits.extra_bytes, counts=limits.counts)


def _wide_records(plan: Plan) -> bool:
    """Whether the run's records will be kept whole, in the recorder's side table (88 bytes more
    each): where a step's span is longer than a packed record's 32-bit duration holds (4.3 ms:
    tiles given in milliseconds or seconds), or CTA indices pass its 16 bits."""
    if len(plan.programs) > 2**15 - 1:
        return True
    first = plan.programs[0] if plan.programs else None
    longest = getattr(first, "longest_span_ps", None)  # programs with times given directly (tiles)
    return longest is not None and longest() >= budget.WIDE_SPAN_PS  # others: ns to µs a step


def plan_scenario(scenario: Scenario) -> tuple[Plan, Residency]:
    return workload_of(scenario.workload).plan(scenario.workload, scenario)


def _check_plan(scenario: Scenario, plan: Plan) -> None:
    """Rules between the GPU and the work: a per-SM byte cap below one copy would never let
    that copy share the TMA unit, so it is refused rather than silently serialized."""
    cap = scenario.gpu.tma_max_bytes_in_flight
    if cap and plan.programs and plan.programs[0].steps:
        largest = max(c.smem_bytes for c in plan.programs[0].copies(0))
        if largest > cap:
            raise ScenarioError("gpu.tma_max_bytes_in_flight", fmt.size(cap),
                                f"is below one copy ({fmt.size(largest)}): must be 0 (unlimited) or at least "
                                "one copy's bytes")
    field = getattr(workload_of(scenario.workload), "compute_field", None)  # optional for a workload
    ranges.check_plan(plan, scenario, field(scenario.workload, scenario) if field else ranges.compute_field(scenario))
    ranges.check_total(plan, scenario)


def _check_used(scenario: Scenario, res: Residency) -> None:
    """A field the run would ignore is refused, never silently dropped: register counts
    (setmaxnreg) only mean something where the plan used a register model."""
    registers = scenario.pipeline.registers
    acc = res.accumulator
    if any(count is not None for count in registers) and not (acc is not None and acc.registers_per_cta):
        where = "its accumulators live in Tensor Memory" if acc is not None and acc.tmem_columns else \
            "it has no register model"
        shown = {role: count for role, count in zip(("producer", "consumer"), registers, strict=True) if count}
        raise ScenarioError("pipeline.registers", shown, f"would be ignored: this {scenario.workload.kind} run on "
                            f"{scenario.gpu.name} uses no per-thread registers ({where}; setmaxnreg counts apply "
                            "to an accumulator in registers, as a Hopper GEMM's); remove it")


def _run_events(env: simpy.Environment, scenario: Scenario, ctas: list[Cta]) -> None:
    try:
        run_to_end(env)
    except BarrierError as err:
        if scenario.pipeline.consumer_waits_full:
            raise
        reads = sum(len(cta.races()) for cta in ctas)
        raise BarrierError(f"{err} [consumers skip the full-barrier wait (pipeline.consumer_waits_full = false); "
                           f"{fmt.plural(reads, 'read')} before data landed by then]") from None


def _sync(scenario: Scenario) -> Sync:
    p = scenario.pipeline
    pingpong = p.consumer_mode == "pingpong" and p.consumers > 1
    return Sync(
        stages=p.stages,
        consumers=p.consumers,
        waits_full=p.consumer_waits_full,
        full_arrivals=p.full_arrivals if p.full_arrivals is not None else 1,
        empty_arrivals=p.empty_arrivals if p.empty_arrivals is not None else (1 if pingpong else p.consumers),
        expect_tx=p.expect_tx,
        wake=scenario.gpu.barrier_wake,
        mode=p.consumer_mode,
        mma_pair=p.mma_cta_group == 2,
    )


def _check_finished(ctas: list[Cta], now: float) -> None:
    """An empty event queue with a process still waiting is a deadlock, never a silent end."""
    unfinished = [cta for cta in ctas if not cta.done]
    if unfinished:
        stuck = [line for cta in unfinished for line in cta.waiting()]
        stuck = stuck or [f"{cta.scope} never finished" for cta in unfinished]
        shown = "; ".join(stuck[:4]) + (f"; and {len(stuck) - 4} more" if len(stuck) > 4 else "")
        raise DeadlockError(f"deadlock at {fmt.time(now)}: nothing left to run but {shown}")


def _record_open_waits(ctas: list[Cta], now: float) -> None:
    """A run that stopped (deadlock, mbarrier misuse): the waits and fills still open then, recorded
    so that a Gantt chart or trace shows the bug."""
    for cta in ctas:
        record = getattr(cta, "record_open_waits", None)  # attention's CTAs keep none
        if record is not None:
            record(now)


def _vector_stats(chip: Chip, sms_used: int, makespan: int) -> dict[str, Any]:
    """Attention: the share of the run the used SMs' multi-function units were busy with
    exponentials (``exp_utilization``, what Nsight Compute calls the XU pipe's utilization) and
    their warp schedulers issuing vector instructions (``issue_utilization``). (The FP32 pipe is
    not reported: where issue dominates it, the softmax leaves it out: tmasim.workloads.attention_softmax.)"""
    from tmasim.engine.sm.vector_units import PIPES

    units = [(sm.vector_units, sm.multiplicity) for sm in chip.sms if sm.vector_units is not None]
    if not units or not makespan:
        return {}
    return {f"{name}_utilization": sum(u.busy_ps[PIPES.index(pipe)] * m for u, m in units) / (sms_used * makespan)
            for name, pipe in (("exp", "xu"), ("issue", "issue"))}


def _common_stats(scenario: Scenario, chip: Chip, res: Residency, makespan: int) -> dict[str, Any]:
    seconds = makespan / PS_PER_S
    sms_used = chip.plan.sms
    ctas = sum(c.multiplicity for c in chip.ctas)  # CTAs that ran, counting those aggregation stands for
    work = workload_of(scenario.workload).work_units(scenario.workload, chip.plan)

    def total(attr: str, owner: str) -> float:
        return sum(getattr(getattr(sm, owner), attr) * sm.multiplicity for sm in chip.sms)

    copy_busy = sum(sm.copy_engine.utilization_busy() * sm.multiplicity for sm in chip.sms)
    tensor_busy = total("busy_ps", "tensor_core")
    smem_bytes = total("bytes", "copy_engine")
    memory_bytes = total("memory_bytes", "copy_engine")
    l2_loads = total("l2_bytes", "copy_engine")  # less than memory_bytes where a cluster's same loads coalesce
    store_bytes = total("store_bytes", "copy_engine")
    workspace = total("workspace_bytes", "copy_engine")  # split tiles' partials through L2 (workloads.gemm_split)
    hbm_bytes = total("hbm_bytes", "copy_engine") + store_bytes + total("workspace_hbm_bytes", "copy_engine")
    gpu = scenario.gpu
    return {
        "scenario": scenario.name,
        "workload": scenario.workload.kind,
        "gpu": gpu.name,
        "tiles": work,
        "stages": scenario.pipeline.stages,
        "consumers": scenario.pipeline.consumers,
        "seed": scenario.run.seed,
        "makespan_ps": int(makespan),
        "makespan_ns": makespan / 1000,
        # Stalls are means: per consumer warpgroup, and per CTA for its producer.
        "consumer_wait_full_ns": sum(c.wait_full_ps * c.multiplicity for c in chip.ctas) / 1000
        / (ctas * scenario.pipeline.consumers),
        "producer_wait_empty_ns": sum(c.wait_empty_ps * c.multiplicity for c in chip.ctas) / 1000 / ctas,
        "copy_busy_ns": copy_busy / 1000,
        "compute_busy_ns": tensor_busy / 1000,
        "copy_utilization": copy_busy / (sms_used * makespan) if makespan else 0.0,
        "compute_utilization": tensor_busy / (sms_used * makespan) if makespan else 0.0,
        **_vector_stats(chip, sms_used, makespan),
        "hbm_utilization": _utilization(hbm_bytes, gpu.hbm_bandwidth, makespan),
        "l2_utilization": _utilization(l2_loads + store_bytes + workspace, gpu.l2_bandwidth, makespan),
        # The traffic figures (see tmasim.names.TRAFFIC): L2 = loads it served + stores; HBM = misses + stores.
        "bytes": int(smem_bytes),
        "l2_bytes": int(round(l2_loads + store_bytes + workspace)),
        "memory_bytes": int(memory_bytes),
        "store_bytes": int(store_bytes),
        "hbm_bytes": int(round(hbm_bytes)),
        "achieved_bytes_per_s": memory_bytes / seconds if seconds else None,
        "achieved_flops_per_s": total("flops", "tensor_core") / seconds if seconds else None,
        # the tensor cores' own count, each MMA as planned (padded tiles in full); a workload with a
        # FLOP convention reports its useful count as ``flops`` and the achieved rate from that
        "tensor_core_flops": total("flops", "tensor_core"),
        # the peak a run's share of peak is taken against (the SMs it uses; tmasim.hardware)
        "peak_flops_per_s": gpu.peak_flops_per_s(getattr(scenario.workload, "dtype", None), sms_used),
        "tiles_per_s": work / seconds if seconds else None,
        "smem_per_cta_bytes": res.smem_per_cta,
        "ctas_per_sm": res.ctas_per_sm,
        "residency_limit": res.limited_by,
        **_accumulator_stats(res),
        "slot_round_trip_ns": (sum(c.slot_cycle_ps * c.multiplicity for c in chip.ctas)
                               / max(1, sum(c.slot_cycles * c.multiplicity for c in chip.ctas)) / 1000),
        "ctas": len(chip.plan.programs),
        "sms_used": sms_used,
        "waves": chip.waves(),
        "sm_classes": len(chip.sms),
        "clock_hz": scenario.gpu.clock_hz,
        "drift_start_ns": scenario.run.drift.start / 1000,
        "drift_latency_cv": scenario.run.drift.latency_cv,
        "simulated_steps": sum(cta.program.steps for cta in chip.ctas),  # ring steps the engine ran
        **_balance(chip),
        **_cluster_stats(chip),
        **_fixup_stats(chip, workspace, scenario.pipeline.consumers),
    }


def _fixup_stats(chip: Chip, workspace: float, consumers: int) -> dict[str, Any]:
    """Split tiles (split-K, stream-K): the partials' traffic through the workspace, and how long
    consumer warpgroups waited for their peers' partials: the mean per warpgroup, as the stalls,
    and the most one CTA's warpgroups waited (their mean)."""
    if not chip.plan.fixups:
        return {}
    waits = [cta.fixup_wait_ps / consumers for cta in chip.ctas]
    return {"workspace_traffic_bytes": int(workspace),
            "fixup_wait_ns": sum(waits) / max(1, len(waits)) / 1000,
            "fixup_wait_max_ns": max(waits, default=0) / 1000}


def _balance(chip: Chip) -> dict[str, Any]:
    """When each SM's last CTA finished: the busiest against the mean (load imbalance)."""
    last: dict[int, tuple[float, int]] = {}
    for cta in chip.ctas:
        end = cta.finished_at or 0
        if end >= last.get(cta.sm, (0, 0))[0]:
            last[cta.sm] = (end, cta.multiplicity)
    if not last:
        return {}
    weight = sum(m for _, m in last.values())
    return {"sm_finish_max_ns": max(end for end, _ in last.values()) / 1000,
            "sm_finish_mean_ns": sum(end * m for end, m in last.values()) / weight / 1000}


def _accumulator_stats(res: Residency) -> dict[str, Any]:
    """Where the accumulators live: registers (Hopper) or Tensor Memory (Blackwell); None where
    the preset has no MMA table or the workload no accumulator."""
    acc = res.accumulator
    return {
        "registers_per_consumer_thread": acc.consumer if acc and acc.registers_per_cta else None,
        "registers_per_producer_thread": acc.producer if acc and acc.registers_per_cta else None,
        "registers_needed_per_thread": acc.needed if acc and acc.registers_per_cta else None,
        "registers_per_cta": acc.registers_per_cta if acc and acc.registers_per_cta else None,
        "tmem_columns_per_cta": acc.tmem_columns if acc and acc.tmem_columns else None,
    }


def _cluster_stats(chip: Chip) -> dict[str, Any]:
    """Placement of clusters, and whether aggregation stayed on for them (exact) or went off."""
    if chip.plan.cluster == 1:
        return {}
    return {**chip.plan.info, "cluster_classes": chip.cluster_classes,
            "aggregation": "on (exact: one representative per class of identical clusters)" if chip.aggregated
            else (chip.aggregation_note or "on (every cluster differs: none to merge)")}


def _utilization(nbytes: float, bandwidth: float, makespan: float) -> float | None:
    if not makespan or bandwidth == float("inf"):
        return None
    return nbytes / (bandwidth * makespan)
