"""``simulate(scenario) -> Result``: plan the work, build the chip, run the events, summarize.

Data flows one way: scenario -> workload plan -> engine components -> counters and records ->
Result. The summary has the figures every run has (time, stalls, bytes, utilization,
residency) and the references that apply to the workload (closed forms, bounds).
"""

from __future__ import annotations

from typing import Any

import simpy

from tmasim import analytic
from tmasim.engine.chip import Chip, Plan
from tmasim.engine.cta import Cta, Sync
from tmasim.engine.recorder import Recorder
from tmasim.errors import BarrierError, DeadlockError
from tmasim.residency import Residency
from tmasim.results import Result
from tmasim.scenario import Scenario
from tmasim.units import PS_PER_S, format_time
from tmasim.workloads import gemm, stream, tiles


def simulate(scenario: Scenario, *, record_bandwidth: bool = False) -> Result:
    """Run one scenario. ``record_bandwidth`` keeps each link's load over time (for plots)."""
    env = simpy.Environment()
    recorder = Recorder() if scenario.run.records else None
    plan, res = plan_scenario(scenario)
    chip = Chip(env, scenario.gpu, plan, _sync(scenario), recorder, aggregate=scenario.run.aggregate,
                record_bandwidth=record_bandwidth)
    _run_events(env, scenario, chip.ctas)
    _check_finished(chip.ctas, env.now)
    races = [race for cta in chip.ctas for race in cta.races()]
    makespan = int(max(cta.finished_at or 0 for cta in chip.ctas))
    stats = {**_common_stats(scenario, chip, res, makespan), **_workload_stats(scenario, chip, res, makespan)}
    stats["races"] = len(races)
    links = chip.fabric.link_stats() if chip.fabric is not None else {}
    for name in ("L2", "HBM"):
        if name in links:
            stats[f"{name.lower()}_carried_bytes"] = links[name].bytes_carried
    bandwidth = _bandwidth_table(links) if record_bandwidth else None
    return Result(scenario, stats, races, recorder, bandwidth)


def _bandwidth_table(links: dict[str, Any]) -> list[tuple[int, str, float, float]]:
    """Each link's load over time: (time_ps, link, bytes per ps, capacity), change points only."""
    rows = []
    for name, link in links.items():
        for time, load in link.series or ():
            rows.append((time, name, load, link.capacity))
    return rows


def plan_scenario(scenario: Scenario) -> tuple[Plan, Residency]:
    w, gpu, p = scenario.workload, scenario.gpu, scenario.pipeline
    if isinstance(w, tiles.TilesConfig):
        return tiles.plan(w, gpu, p.stages, p.consumers, scenario.run.seed)
    if isinstance(w, stream.StreamConfig):
        return stream.plan(w, gpu, p.stages, p.consumers)
    return gemm.plan(w, gpu, p.stages, p.consumers, p.cluster, p.mma_cta_group)


def _run_events(env: simpy.Environment, scenario: Scenario, ctas: list[Cta]) -> None:
    try:
        env.run()
    except BarrierError as err:
        if scenario.pipeline.consumer_waits_full:
            raise
        reads = sum(len(cta.races()) for cta in ctas)
        raise BarrierError(f"{err} [consumers skip the full-barrier wait (pipeline.consumer_waits_full = false); "
                           f"{reads} read(s) before data landed by then]") from None


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
        raise DeadlockError(f"deadlock at {format_time(now)}: nothing left to run but {shown}")


def _common_stats(scenario: Scenario, chip: Chip, res: Residency, makespan: int) -> dict[str, Any]:
    seconds = makespan / PS_PER_S
    sms_used = chip.plan.sms
    ctas = sum(c.multiplicity for c in chip.ctas)  # CTAs that ran, counting those aggregation stands for
    w = scenario.workload
    work = w.tiles if isinstance(w, tiles.TilesConfig) else chip.plan.units  # tiles, or output tiles/boxes

    def total(attr: str, owner: str) -> float:
        return sum(getattr(getattr(sm, owner), attr) * sm.multiplicity for sm in chip.sms)

    copy_busy = sum(sm.copy_engine.utilization_busy() * sm.multiplicity for sm in chip.sms)
    tensor_busy = total("busy_ps", "tensor_core")
    smem_bytes = total("bytes", "copy_engine")
    memory_bytes = total("memory_bytes", "copy_engine")
    hbm_bytes = total("hbm_bytes", "copy_engine") + total("store_bytes", "copy_engine")
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
        "hbm_utilization": _utilization(hbm_bytes, gpu.hbm_bandwidth, makespan),
        "l2_utilization": _utilization(memory_bytes + total("store_bytes", "copy_engine"), gpu.l2_bandwidth, makespan),
        "bytes": int(smem_bytes),
        "memory_bytes": int(memory_bytes),
        "hbm_bytes": int(round(hbm_bytes)),
        "achieved_bytes_per_s": memory_bytes / seconds if seconds else None,
        "achieved_flops_per_s": total("flops", "tensor_core") / seconds if seconds else None,
        "tiles_per_s": work / seconds if seconds else None,
        "smem_per_cta_bytes": res.smem_per_cta,
        "ctas_per_sm": res.ctas_per_sm,
        "residency_limit": res.limited_by,
        "slot_round_trip_ns": (sum(c.slot_cycle_ps * c.multiplicity for c in chip.ctas)
                               / max(1, sum(c.slot_cycles * c.multiplicity for c in chip.ctas)) / 1000),
        "ctas": len(chip.plan.programs),
        "sms_used": sms_used,
        "waves": chip.waves(),
        "sm_classes": len(chip.sms),
        **_cluster_stats(chip),
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


def _workload_stats(scenario: Scenario, chip: Chip, res: Residency, makespan: int) -> dict[str, Any]:
    w = scenario.workload
    if isinstance(w, tiles.TilesConfig):
        return _tiles_stats(scenario, makespan)
    if isinstance(w, stream.StreamConfig):
        law = stream.littles_law(w, scenario.gpu, scenario.pipeline.stages, res.ctas_per_sm, chip.plan.sms)
        return {"serial_ns": None, "closed_form_ns": None, **law}
    extra = gemm.breakdown(w, scenario.gpu, chip.plan, scenario.pipeline.stages)
    extra["efficiency"] = extra["bound_ns"] * 1000 / makespan if makespan else None  # type: ignore[operator]
    return extra


def _tiles_stats(scenario: Scenario, makespan: int) -> dict[str, Any]:
    config, gpu, stages = scenario.workload, scenario.gpu, scenario.pipeline.stages
    assert isinstance(config, tiles.TilesConfig)
    t = tiles.times(config, scenario.run.seed)
    serial = analytic.serial_time(t["load"], t["compute"], t["latency"], gpu.tma_issue, gpu.barrier_wake)
    n = config.tiles
    bound = analytic.steady_state(sum(t["load"]) / n, sum(t["compute"]) / n, stages,
                                  sum(t["latency"]) / n, gpu.tma_issue, gpu.barrier_wake)
    exact = analytic.applies_anchor(t["load"], t["compute"], t["latency"], gpu.tma_issue, gpu.barrier_wake)
    closed = analytic.anchor_time(n, t["load"][0], t["compute"][0], stages) if exact else None
    recurrence = (analytic.maxplus_makespan(t["load"], t["compute"], stages, t["latency"], gpu.tma_issue,
                                            gpu.barrier_wake) if _standard_sync(scenario) else None)
    return {
        "serial_ns": serial / 1000,
        "closed_form_ns": None if closed is None else closed / 1000,
        "maxplus_ns": None if recurrence is None else recurrence / 1000,
        "speedup": serial / makespan if makespan else None,
        "interval_bound_ns": bound.interval / 1000,
        "binding": bound.binding,
        **{f"{term}_term_ns": value / 1000 for term, value in bound.terms.items()},
    }


def _standard_sync(scenario: Scenario) -> bool:
    p = scenario.pipeline
    return (p.consumer_waits_full and p.consumers == 1 and p.full_arrivals in (None, 1)
            and p.empty_arrivals in (None, p.consumers) and p.expect_tx is None)
