"""The story of an attention run: what each resource alone would need (both GEMMs, the
softmax's exponentials, shared memory, the links, latency), the one that binds, and the what-ifs
that matter for FlashAttention's design: ping-pong off, the softmax overlap off, one more stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tmasim import names
from tmasim.output.result import Result
from tmasim.teach.prose import paragraph
from tmasim.teach.what_if import WhatIf, run_what_if, variant, what_if_line
from tmasim.values import format as fmt
from tmasim.values.units import PS_PER_S
from tmasim.workloads.attention_bounds import BOUND_NAMES


def attention_story(result: Result) -> list[str]:
    stats, scenario = result.stats, result.scenario
    makespan = stats["makespan_ps"]
    bounds = [(name, stats[f"{key}_bound_ns"] * 1000) for key, name in BOUND_NAMES]
    binding = names.bound(stats["binding"])
    bound = stats["bound_ns"] * 1000
    p = scenario.pipeline
    mode = "in ping-pong" if p.consumer_mode == "pingpong" and p.consumers == 2 else "cooperative (in lockstep)"
    lines = [paragraph(
        f"What ran: {stats['tiles']} work units (a query block of one head each) on {stats['sms_used']} SMs of the "
        f"{scenario.gpu.name} preset, {fmt.plural(p.consumers, 'consumer warpgroup')} {mode}, "
        f"{stats['stages']} stages of K "
        f"and V. The run takes {fmt.time(makespan, 4)}: {fmt.flop_rate(stats['useful_flops_per_s'])} by the "
        "FLOP convention.")]
    width = max(len(name) for name, _ in bounds)
    lines += ["", "Each resource alone would need (the run cannot beat the longest):",
              *[f"  {name:<{width}}  {fmt.time(t, 4):>10}{_carried(key, result)}"
                for (key, _), (name, t) in zip(BOUND_NAMES, bounds, strict=True)]]
    lines += ["", paragraph(
        f"{binding[0].upper()}{binding[1:]} {names.binds(binding)}: {fmt.time(bound, 4)}, and the run reaches "
        f"{bound / makespan:.0%} of that bound. The tensor cores are busy {stats['compute_utilization']:.0%} of "
        f"the time; the softmax needs {fmt.time(stats['exponentials_bound_ns'] * 1000, 4)} on the busiest vector "
        f"pipe (exponentials, FP32, ALU or issue slots) of the busiest SM, "
        f"{stats['exponentials_bound_ns'] / stats['compute_bound_ns']:.0%} of its "
        "tensor-core time, so it costs nothing only while it runs under another warpgroup's GEMMs.")]
    return lines


def _carried(key: str, result: Result) -> str:
    """The bytes a link's bound counts (the summary's ``l2_bytes`` / ``hbm_bytes``) and its rate."""
    if key not in ("l2", "hbm"):
        return ""
    capacity = getattr(result.scenario.gpu, f"{key}_bandwidth") * PS_PER_S
    return f"   {fmt.amount(result.stats[f'{key}_bytes'])} at {fmt.rate(capacity)}" if capacity < float("inf") else ""


def attention_what_ifs(result: Result, base_dir: Path | None) -> list[str]:
    scenario, stats = result.scenario, result.stats
    base, p, config = stats["makespan_ps"], scenario.pipeline, scenario.workload
    lines = []
    if p.consumers == 2 and p.consumer_mode == "pingpong":
        off = run_what_if(scenario, "ping-pong off (cooperative warpgroups in lockstep)",
                          {"pipeline.consumer_mode": "cooperative"}, base_dir)
        lines.append(_idle_line(base, off, stats, "the softmax already hid under the other warpgroup's GEMMs"))
    overlap = bool(getattr(config, "softmax_overlap", False))
    label = "softmax overlap off" if overlap else "softmax overlap on"
    lines.append(what_if_line(base, run_what_if(scenario, label, {"workload.softmax_overlap": not overlap},
                                                base_dir), "ping-pong already hides the softmax"))
    more = run_what_if(scenario, f"{stats['stages'] + 1} stages", {"pipeline.stages": stats["stages"] + 1}, base_dir)
    lines.append(what_if_line(base, more, "the slots are not what binds") + _o_loses_its_buffer(result, more, base_dir))
    return lines


def _o_loses_its_buffer(result: Result, more: WhatIf, base_dir: Path | None) -> str:
    """Why one more stage can be slower on Blackwell: the plan with it no longer fits O beside the
    slots and stages it in Q's buffer (FA4's ``overlap_sO_sQ``), so each unit's Q load waits for
    O's store. (Hopper stages O over V at any stage count, as FA3.)"""
    from tmasim.simulation import plan_scenario

    if (more.makespan_ps is None or more.makespan_ps <= result.stats["makespan_ps"]
            or result.stats.get("o_staged_over") == "q"):
        return ""
    plan, _ = plan_scenario(variant(result.scenario, more.overrides, base_dir))
    if plan.info.get("o_over") != "q":
        return ""
    return ("; O no longer fits beside the slots and is staged in Q's buffer, so each unit's Q load waits for "
            "O's store")


def _idle_line(base: int, w: WhatIf, stats: dict[str, Any], unchanged: str) -> str:
    line = what_if_line(base, w, unchanged)
    if w.makespan_ps is None or w.makespan_ps <= base:
        return line
    busy = stats["compute_utilization"] * base  # tensor-core time per SM: the same work either way
    return (f"{line}; the tensor cores idle {1 - busy / w.makespan_ps:.0%} of the time instead of "
            f"{1 - stats['compute_utilization']:.0%} with ping-pong")
