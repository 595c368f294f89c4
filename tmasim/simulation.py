"""``simulate(scenario) -> Result``: build the components, run the events, check, summarize.

Data flows one way: scenario -> engine components -> counters and records -> Result.
"""

from __future__ import annotations

from typing import Any

import simpy

from tmasim import analytic
from tmasim.engine.copy_engine import CopyEngine
from tmasim.engine.cta import Cta, Sync
from tmasim.engine.recorder import Recorder
from tmasim.engine.tensor_core import TensorCore
from tmasim.errors import BarrierError, DeadlockError
from tmasim.results import Result
from tmasim.scenario import Scenario
from tmasim.units import PS_PER_S, format_time
from tmasim.workloads import tiles


def simulate(scenario: Scenario) -> Result:
    env = simpy.Environment()
    recorder = Recorder() if scenario.run.records else None
    gpu = scenario.gpu
    program = tiles.build(scenario.workload, scenario.run.seed)
    copy_engine = CopyEngine(env, "sm0.tma", 0, gpu.tma_issue, recorder)
    tensor_core = TensorCore(env, "sm0.tensor")
    cta = Cta(env, 0, 0, program, _sync(scenario), copy_engine, tensor_core, recorder)
    _run_events(env, scenario, [cta])
    _check_finished([cta], env.now)
    races = cta.races()
    stats = _tiles_stats(scenario, cta, copy_engine, tensor_core)
    stats["races"] = len(races)
    return Result(scenario, stats, races, recorder)


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
    return Sync(
        stages=p.stages,
        consumers=p.consumers,
        waits_full=p.consumer_waits_full,
        full_arrivals=p.full_arrivals if p.full_arrivals is not None else 1,
        empty_arrivals=p.empty_arrivals if p.empty_arrivals is not None else p.consumers,
        expect_tx=p.expect_tx,
        wake=scenario.gpu.barrier_wake,
    )


def _check_finished(ctas: list[Cta], now: float) -> None:
    """An empty event queue with a process still waiting is a deadlock, never a silent end."""
    stuck = [line for cta in ctas if not cta.done for line in cta.waiting()]
    if stuck:
        shown = "; ".join(stuck[:4]) + (f"; and {len(stuck) - 4} more" if len(stuck) > 4 else "")
        raise DeadlockError(f"deadlock at {format_time(now)}: nothing left to run but {shown}")


def _tiles_stats(scenario: Scenario, cta: Cta, copy_engine: CopyEngine, tensor_core: TensorCore) -> dict[str, Any]:
    config, gpu, stages = scenario.workload, scenario.gpu, scenario.pipeline.stages
    t = tiles.times(config, scenario.run.seed)
    makespan = cta.finished_at or 0
    serial = analytic.serial_time(t["load"], t["compute"], t["latency"], gpu.tma_issue, gpu.barrier_wake)
    n = config.tiles
    bound = analytic.steady_state(sum(t["load"]) / n, sum(t["compute"]) / n, stages,
                                  sum(t["latency"]) / n, gpu.tma_issue, gpu.barrier_wake)
    exact = analytic.applies_anchor(t["load"], t["compute"], t["latency"], gpu.tma_issue, gpu.barrier_wake)
    closed = analytic.anchor_time(n, t["load"][0], t["compute"][0], stages) if exact else None
    standard_sync = _standard_sync(scenario)
    recurrence = (analytic.maxplus_makespan(t["load"], t["compute"], stages, t["latency"], gpu.tma_issue,
                                            gpu.barrier_wake) if standard_sync else None)
    seconds = makespan / PS_PER_S
    return {
        "scenario": scenario.name,
        "workload": config.kind,
        "gpu": gpu.name,
        "tiles": n,
        "stages": stages,
        "consumers": scenario.pipeline.consumers,
        "seed": scenario.run.seed,
        "makespan_ps": makespan,
        "makespan_ns": makespan / 1000,
        "serial_ns": serial / 1000,
        "closed_form_ns": None if closed is None else closed / 1000,
        "maxplus_ns": None if recurrence is None else recurrence / 1000,
        "speedup": serial / makespan if makespan else None,
        "interval_bound_ns": bound.interval / 1000,
        "binding": bound.binding,
        **{f"{term}_term_ns": value / 1000 for term, value in bound.terms.items()},
        "consumer_wait_full_ns": cta.wait_full_ps / 1000,
        "producer_wait_empty_ns": cta.wait_empty_ps / 1000,
        "copy_busy_ns": copy_engine.busy_ps / 1000,
        "compute_busy_ns": tensor_core.busy_ps / 1000,
        "copy_utilization": copy_engine.busy_ps / makespan if makespan else 0.0,
        "compute_utilization": tensor_core.busy_ps / makespan if makespan else 0.0,
        "tiles_per_s": n / seconds if seconds else None,
        "achieved_bytes_per_s": copy_engine.bytes / seconds if seconds else None,
        "bytes": copy_engine.bytes,
    }


def _standard_sync(scenario: Scenario) -> bool:
    p = scenario.pipeline
    return (p.consumer_waits_full and p.full_arrivals in (None, 1)
            and p.empty_arrivals in (None, p.consumers) and p.expect_tx is None)
