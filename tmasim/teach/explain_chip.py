"""The story of a chip-wide run (stream, GEMM): the resources it needs, each as the time it alone
would take, the one that binds, and what-ifs along it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmasim import names
from tmasim.output.result import Result
from tmasim.teach.prose import ordinal, paragraph
from tmasim.teach.what_if import run_what_if, what_if_line
from tmasim.values import format as fmt
from tmasim.values.format import PS_PER_S


@dataclass(frozen=True)
class Resource:
    """A resource the run needs: its time at full capacity, and (for links) demand vs capacity."""

    name: str
    time_ps: float
    nbytes: float = 0.0
    capacity: float = 0.0     # bytes per second


def chip_resources(result: Result) -> list[Resource]:
    """Compute, the shared links and the latency term, each as the time it alone would take."""
    stats, gpu = result.stats, result.scenario.gpu
    sms = max(1, stats["sms_used"])
    per_s = PS_PER_S
    port = gpu.sm_port_bandwidth * per_s  # one SM's: the port row is the busiest SM's
    loads = stats["memory_bytes"] / sms
    links = [Resource(names.bound("hbm"), stats["hbm_bytes"] / gpu.hbm_bandwidth, stats["hbm_bytes"],
                      gpu.hbm_bandwidth * per_s),
             Resource(names.bound("l2"), stats["l2_bytes"] / gpu.l2_bandwidth, stats["l2_bytes"],
                      gpu.l2_bandwidth * per_s),
             Resource(names.bound("port"), loads / port * per_s, loads, port)]
    if "compute_bound_ns" in stats:   # gemm: the busiest SM's bounds, wave quantization included
        compute = stats["compute_bound_ns"] * 1000
        latency = stats["latency_bound_ns"] * 1000
        bounds = [stats[f"{key}_bound_ns"] * 1000 for key in ("hbm", "l2", "port")]
        links = [Resource(r.name, t, t * r.capacity / per_s if math.isfinite(r.capacity) else 0.0, r.capacity)
                 for r, t in zip(links, bounds, strict=True)]
        if stats.get("tma_bound_ns"):  # the busiest SM's row requests through its TMA unit (no bytes/s)
            links.append(Resource(names.bound("tma"), stats["tma_bound_ns"] * 1000))
        if "smem_bound_ns" in stats:  # the busiest SM's shared memory: MMA operand reads + TMA writes
            smem = stats["smem_bound_ns"] * 1000
            if gpu.smem_write_bandwidth is None:
                links.append(Resource(names.bound("smem"), smem, smem * gpu.smem_bandwidth,
                                      gpu.smem_bandwidth * per_s))
            else:  # MMAs, then the TMA's writes: a time, not bytes at one rate (tmasim.operands)
                links.append(Resource(names.bound("smem"), smem))
    else:
        compute = stats["compute_busy_ns"] * 1000 / sms
        per_sm = stats["memory_bytes"] / sms
        rate = stats["bytes_in_flight_per_sm"] / (stats["round_trip_ns"] * 1000)
        latency = per_sm / rate if rate else 0.0
    links = [r for r in links if math.isfinite(r.capacity)]   # the ideal machine's links are unlimited
    return [Resource(names.bound("compute"), compute), *links, Resource(names.bound("latency"), latency)]


def chip_story(result: Result) -> list[str]:
    stats, scenario = result.stats, result.scenario
    resources = chip_resources(result)
    binding = max(resources, key=lambda r: r.time_ps)
    makespan = stats["makespan_ps"]
    compute = resources[0]
    lines = [paragraph(
        f"What ran: {stats['tiles']} work units on {stats['sms_used']} SMs of the {scenario.gpu.name} preset "
        f"({stats['ctas']} CTAs, {stats['ctas_per_sm']} per SM, {stats['stages']} stages of shared memory "
        f"each). The run takes {fmt.time(makespan, 4)}.")]
    busiest = {names.bound("port"): " (the busiest SM)", names.bound("tma"): " (the busiest SM's TMA unit)",
               names.bound("compute"): " (the busiest SM's tensor cores)",
               names.bound("latency"): " (bytes in flight over a slot's round trip)"}
    if scenario.gpu.smem_write_bandwidth is not None:
        busiest[names.bound("smem")] = (" (the busiest SM's MMAs, then its TMA writes at "
                                        f"{fmt.rate(scenario.gpu.smem_write_bandwidth * PS_PER_S)})")
    rows = [f"  {r.name:<13} {fmt.time(r.time_ps, 4, zero='none'):>10}" + (
        f"   {fmt.amount(r.nbytes)} at {fmt.rate(r.capacity)}" if r.capacity else "") + busiest.get(r.name, "")
        for r in resources]
    lines += ["", "Each bound alone would need (the run cannot beat the longest):", *rows]
    text = (f"{binding.name[0].upper()}{binding.name[1:]} {names.binds(binding.name)}: "
            f"{fmt.time(binding.time_ps, 4)}, and the run "
            f"reaches {binding.time_ps / makespan:.0%} of that bound.")
    if binding.capacity and compute.time_ps:
        demand = binding.nbytes / compute.time_ps * PS_PER_S
        text += (f" To keep the tensor cores busy ({fmt.time(compute.time_ps, 4)} of MMA work) the SMs "
                 f"would have to pull {fmt.amount(binding.nbytes)} through {binding.name} at "
                 f"{fmt.rate(demand)}; its capacity is {fmt.rate(binding.capacity)} "
                 f"({demand / binding.capacity:.1f}x over), so the copies set the pace and the compute "
                 "hides under them.")
    elif binding.capacity:
        text += (f" There is no compute to hide the copies under: the time is {fmt.amount(binding.nbytes)} "
                 f"over {binding.name}'s {fmt.rate(binding.capacity)}.")
    elif binding is compute:
        links = [r for r in resources if r.capacity]
        if links:
            heaviest = max(links, key=lambda r: r.time_ps)
            text += (f" The links keep up: the busiest, {heaviest.name}, would need "
                     f"{heaviest.time_ps / compute.time_ps:.0%} of the compute time, so the copies hide "
                     "under the MMAs.")
        else:
            text += " This machine's links are unlimited, so only the compute and the latency count."
    elif binding.name == names.bound("latency"):
        text += (" Too few bytes are in flight: each SM's stages x box over a copy's round trip is "
                 "below what the links could carry (Little's law); more stages or bigger boxes help.")
    lines += ["", paragraph(text)]
    if stats.get("tma_boxes_per_k_step"):
        lines += ["", paragraph(
            f"TMA: each k-step is {stats['tma_boxes_per_k_step']} TMA instructions (boxes of A {stats['tma_a_box']}, "
            f"B {stats['tma_b_box']}, rows x elements; {stats['swizzle']} swizzle), each with its issue cost, and "
            f"{stats['tma_requests_per_k_step']} row requests through the TMA unit (one per box row of at most "
            "128 B); --set workload.swizzle=none|32B|64B|128B compares box shapes.")]
    if stats.get("decomposition"):
        lines += ["", paragraph(_split_story(stats))]
    lines += ["", paragraph(
        f"Residency: {fmt.size(stats['smem_per_cta_bytes'])} of shared memory per CTA, "
        f"{fmt.plural(stats['ctas_per_sm'], 'CTA')} per SM (limited by {stats['residency_limit']}). Stalls: consumers "
        f"waited {fmt.time(stats['consumer_wait_full_ns'] * 1000, 4, zero='no time')} on full barriers and producers "
        f"{fmt.time(stats['producer_wait_empty_ns'] * 1000, 4, zero='no time')} on empty ones, on average.")]
    return lines


def _split_story(stats: dict[str, Any]) -> str:
    """Split-K or stream-K, from the run's numbers (tmasim.workloads.gemm_split)."""
    if stats["decomposition"] == "split-K":
        how = (f"Split-K: {stats['work_units']} work units share the k-loops of {stats['tiles']} output tiles, so "
               f"{stats['sms_used']} SMs get work")
    else:
        how = (f"Stream-K: the k-iterations of {fmt.plural(stats['stream_k_tiles'], 'output tile')} are spread "
               f"evenly over "
               f"{stats['stream_k_units']} CTAs and {fmt.plural(stats['data_parallel_tiles'], 'tile')} run whole, so "
               f"{stats['sms_used']} SMs get work")
    if "cluster" in stats:  # CUTLASS decides each unit's k-range per cluster
        how += f" (the CTAs of each {stats['cluster']} cluster take the same k-range of their own tiles)"
    return (f"{how}. The price is the fix-up: each split tile's partial sums (fp32) go to a "
            f"{fmt.size(stats['workspace_bytes'])} workspace and back, {fmt.amount(stats['workspace_traffic_bytes'])} "
            f"through L2, and a CTA that adds to a tile waits for the peers before it in K: consumers waited "
            f"{fmt.time(stats['fixup_wait_ns'] * 1000, 4, zero='no time')} on average (those of one CTA at most "
            f"{fmt.time(stats['fixup_wait_max_ns'] * 1000, 4, zero='no time')}).")


def chip_what_ifs(result: Result, base_dir: Path | None) -> list[str]:
    scenario, stats = result.scenario, result.stats
    gpu, base = scenario.gpu, stats["makespan_ps"]
    resources = chip_resources(result)
    binding = max(resources, key=lambda r: r.time_ps)
    smem_key = "smem" if gpu.smem_write_bandwidth is None else "smem_write"  # what sets the SMEM bound
    field = {names.bound(key): f"{gpu_key}_bandwidth"
             for key, gpu_key in (("hbm", "hbm"), ("l2", "l2"), ("port", "sm_port"), ("smem", smem_key))}
    plans: list[tuple[str, dict[str, Any], str]] = [
        (f"{ordinal(stats['stages'] + 1)} stage", {"pipeline.stages": stats["stages"] + 1},
         f"{binding.name} {names.binds(binding.name)}, not the number of slots")]
    name = binding.name if binding.name in field else names.bound("hbm")
    rate = getattr(gpu, field[name]) * 2 * PS_PER_S
    if binding.name == names.bound("tma") and gpu.tma_request_time > 0:
        plans.append(("twice the TMA request rate", {"gpu.tma_request_time": f"{gpu.tma_request_time / 2} ps"},
                      f"the {binding.name} are not what binds"))
    elif math.isfinite(rate):
        plans.append((f"twice the {name} bandwidth", {f"gpu.{field[name]}": f"{rate:.6g} B/s"},
                      f"{name} is not what binds"))
    if binding.name == names.bound("tma") and stats.get("swizzle") not in (None, "none"):
        plans.append(("16-byte boxes (no swizzle)", {"workload.swizzle": "none"},
                      "the boxes' shape is not what binds"))
    if gpu.copy_latency > 1:
        plans.append(("halving the copy latency", {"gpu.copy_latency": f"{gpu.copy_latency // 2} ps"},
                      "the latency is already hidden"))
    if stats["stages"] > 1:
        plans.append((f"{fmt.plural(stats['stages'] - 1, 'stage')} instead of {stats['stages']}",
                      {"pipeline.stages": stats["stages"] - 1}, "the extra slot was not used"))
    return [what_if_line(base, run_what_if(scenario, label, changes, base_dir), why)
            for label, changes, why in plans[:3]]
