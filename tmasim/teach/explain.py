"""``tmasim explain``: a narrated account of one run, generated from the run's own numbers.

Nothing here is canned: the formulas are printed with this scenario's numbers substituted, the
binding stage and the stalls are read from the summary, and every "what if" is a variant of the
scenario that was simulated here. A run whose synchronization was broken on purpose is labelled
INVALID on its first line, and its time is never presented as a result.
"""

from __future__ import annotations

import copy
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmasim import format as fmt
from tmasim import names
from tmasim import scenario as scenarios
from tmasim.errors import ModelError, ScenarioError
from tmasim.format import PS_PER_S
from tmasim.results import Result
from tmasim.scenario import Scenario

WIDTH = 100


def validity(stats: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether a run's time is a valid result, and why not (issue 8's keys where present)."""
    if "valid" in stats:
        return bool(stats["valid"]), stats.get("invalid_reason")
    races = int(stats.get("races") or 0)
    if races:
        return False, (f"{races} read(s) of a slot before its copy landed (races): the consumer "
                       "computed on data that was not there yet")
    return True, None


# A number and its unit stay on one line: the space between them is held while wrapping.
_QUANTITY = re.compile(r"(\d) (ps|ns|us|µs|ms|s|B|KiB|MiB|GiB|TB/s|GB/s|MB/s|TFLOP/s)(?=[\s,.;:)]|$)")


def paragraph(text: str, indent: str = "", first: str | None = None) -> str:
    held = _QUANTITY.sub("\\1\u00a0\\2", text)
    filled = textwrap.fill(held, WIDTH, initial_indent=indent if first is None else first,
                           subsequent_indent=indent, break_on_hyphens=False)
    return filled.replace("\u00a0", " ")


def bullet(text: str) -> str:
    return paragraph(text, "    ", first="  - ")


@dataclass(frozen=True)
class WhatIf:
    """One variant of a scenario, simulated: what changed and what it did to the time."""

    label: str
    overrides: dict[str, Any]
    makespan_ps: int | None
    error: str | None = None


def variant(scenario: Scenario, changes: dict[str, Any], base_dir: Path | None = None) -> Scenario:
    """The scenario with dotted fields set to Python values (not parsed strings)."""
    raw = copy.deepcopy(dict(scenario.raw))
    for dotted, value in changes.items():
        scenarios.set_field(raw, dotted, value)
    return scenarios.from_dict(raw, base_dir)


def run_what_if(scenario: Scenario, label: str, changes: dict[str, Any],
                base_dir: Path | None = None) -> WhatIf:
    from tmasim.simulation import simulate

    try:
        changed = variant(scenario, {**changes, "run.records": False}, base_dir)
        result = simulate(changed)
    except (ScenarioError, ModelError) as err:
        return WhatIf(label, changes, None, str(err))
    return WhatIf(label, changes, result.makespan_ps)


def what_if_line(base_ps: int, w: WhatIf, unchanged: str) -> str:
    if w.makespan_ps is None:
        return f"{w.label}: cannot run ({w.error})"
    delta = base_ps - w.makespan_ps
    t = fmt.time(w.makespan_ps, 4)
    if delta == 0:
        return f"{w.label}: {t}, no change: {unchanged}"
    verb = "saves" if delta > 0 else "costs"
    return f"{w.label}: {t}, {verb} {fmt.time(abs(delta), 4)} ({abs(delta) / base_ps:.0%})"


def explain(scenario: Scenario, *, base_dir: Path | None = None, what_ifs: bool = True,
            overrides: Sequence[str] = ()) -> str:
    """The narrative for one scenario: simulate it, then explain the run (or why it cannot run).
    ``overrides`` (the --set settings) are named under the header, since the description does
    not know them."""
    from tmasim.simulation import simulate

    try:
        result = simulate(scenario)
    except ModelError as err:
        return explain_failure(scenario, err)
    text = explain_result(result, base_dir=base_dir, what_ifs=what_ifs)
    if overrides and not text.startswith("INVALID"):
        header, rest = text.split("\n\n", 1)
        text = f"{header}\n{paragraph('with --set ' + ', --set '.join(overrides))}\n\n{rest}"
    return text


def explain_result(result: Result, *, base_dir: Path | None = None, what_ifs: bool = True) -> str:
    scenario, stats = result.scenario, result.stats
    valid, reason = validity(stats)
    if not valid:
        return explain_invalid(result, reason or "its synchronization was broken", base_dir)
    header = paragraph(f"{scenario.name}: {scenario.description}" if scenario.description else scenario.name)
    if stats["workload"] == "tiles":
        body = _tiles_story(result)
        ifs = _tiles_what_ifs(result, base_dir) if what_ifs else []
    else:
        body = _chip_story(result)
        ifs = _chip_what_ifs(result, base_dir) if what_ifs else []
    lines = [header, ""] + body
    short = _in_short(stats)
    if short:
        lines += ["", paragraph(f"In short: {short}")]
    if ifs:
        lines += ["", "What if (each one simulated just now):"] + [bullet(x) for x in ifs]
    return "\n".join(lines)


def _in_short(stats: dict[str, Any]) -> str:
    """The workload's own one-sentence account of what binds (the workload protocol's explain,
    the sentence the report and the sweep answer give too)."""
    from tmasim.review.report import explain as binding_sentence

    return binding_sentence(stats)


# ------------------------------------------------------------------------------ broken runs


def explain_invalid(result: Result, reason: str, base_dir: Path | None) -> str:
    from tmasim.simulation import simulate

    scenario, stats = result.scenario, result.stats
    why = " (races: reads before the data landed)" if stats.get("races") else ""
    lines = [paragraph(f"INVALID{why}: this run's time is not a valid result: {reason}."), ""]
    shown = fmt.time(stats["makespan_ps"], 4)
    text = (f"The run ended at {shown}, but that is the time of a program that reads shared memory "
            "before the TMA has written it: the numbers it computed would be wrong, so its time is "
            "not comparable with anything.")
    if not scenario.pipeline.consumer_waits_full:
        fixed = simulate(variant(scenario, {"pipeline.consumer_waits_full": True, "run.records": False},
                                 base_dir))
        text += (f" With the full-barrier wait put back (pipeline.consumer_waits_full = true) the "
                 f"same scenario takes {fmt.time(fixed.makespan_ps, 4)}: that is the valid time.")
    lines.append(paragraph(text))
    if result.races:
        lines += ["", "The reads before the data landed:"]
        for race in result.races[:6]:
            landed = ("before its copy was even issued" if race.landed_ps is None
                      else f"{fmt.time(race.landed_ps - race.read_ps, 4)} before it landed "
                           f"at {fmt.time(race.landed_ps, 4)}")
            lines.append(f"  tile {race.tile} in slot {race.stage}: read at {fmt.time(race.read_ps, 4)}, "
                         f"{landed}")
        if len(result.races) > 6:
            lines.append(f"  and {len(result.races) - 6} more")
    lines += ["", paragraph("Why: issuing a copy does not make its destination ready. Only the full "
                            "barrier's phase flip, when every byte the producer announced with "
                            "expect_tx has landed, says the slot is safe to read.")]
    return "\n".join(lines)


def explain_failure(scenario: Scenario, err: ModelError) -> str:
    """A model that cannot finish: the error, and what it means."""
    from tmasim.errors import DeadlockError

    kind = "deadlock" if isinstance(err, DeadlockError) else "mbarrier misuse"
    lines = [f"INVALID: this run cannot finish ({kind}), so it has no time at all.", "",
             paragraph(str(err)), ""]
    p = scenario.pipeline
    if isinstance(err, DeadlockError):
        why = ("Each waiter above waits for a barrier phase that nothing left in the program can "
               "complete. ")
        if p.empty_arrivals is not None and p.empty_arrivals != p.consumers:
            why += (f"Here the empty barriers expect {p.empty_arrivals} arrivals per phase but "
                    f"{p.consumers} consumer warpgroup(s) arrive, so a slot is never released and "
                    "the producer waits forever.")
        elif p.expect_tx is not None:
            why += (f"Here the producer announced {fmt.size(p.expect_tx)} with expect_tx, more "
                    "than the copy delivers, so the full barrier's byte count never returns to zero "
                    "and the consumer waits forever.")
    else:
        why = "The hardware's rules for mbarriers were broken; the simulator stops at the first misuse. "
        if p.expect_tx is not None:
            why += (f"Here the producer announced {fmt.size(p.expect_tx)} with expect_tx, fewer "
                    "bytes than the copy delivers, so the byte count would go below zero.")
    lines.append(paragraph(why))
    return "\n".join(lines)


# ------------------------------------------------------------------------------ tiles workload


def unit_of(ps: float) -> tuple[int, str]:
    for scale, name in ((PS_PER_S, "s"), (10**9, "ms"), (10**6, f"{fmt.micro()}s"), (10**3, "ns")):
        if ps >= scale:
            return scale, name
    return 1, "ps"


def num(ps: float, scale: int) -> str:
    return f"{ps / scale:.4g}"


def tile_times(scenario: Scenario) -> dict[str, list[int]]:
    from tmasim.workloads import tiles

    assert isinstance(scenario.workload, tiles.TilesConfig)
    return tiles.times(scenario.workload, scenario.run.seed)


def _tiles_story(result: Result) -> list[str]:
    scenario, stats = result.scenario, result.stats
    t = tile_times(scenario)
    n, stages = len(t["load"]), stats["stages"]
    equal = len(set(t["load"])) == 1 and len(set(t["compute"])) == 1
    load, comp = sum(t["load"]) / n, sum(t["compute"]) / n
    scale, unit = unit_of(max(load, comp))
    makespan = stats["makespan_ps"]
    mean = "" if equal else " on average"
    lines = [paragraph(
        f"What ran: N = {n} tiles. Each tile's copy keeps the TMA copy engine busy l = {num(load, scale)} "
        f"{unit}{mean} (its load time) and its compute takes c = {num(comp, scale)} {unit}{mean} on the "
        f"tensor core. The ring has S = {stages} shared-memory slot(s) (stages).")]
    lines += ["", _serial_text(stats, t, scale, unit, equal)]
    lines += ["", _pipelined_text(stats, t, scale, unit, equal)]
    lines += ["", paragraph(_cadence_text(stats, scale, unit))]
    fill = makespan - n * stats["interval_bound_ns"] * 1000
    if stages > 1 and fill > 0:
        lines += ["", paragraph(
            f"Fill and drain: {n} tiles at one per {num(stats['interval_bound_ns'] * 1000, scale)} {unit} "
            f"would take {num(n * stats['interval_bound_ns'] * 1000, scale)} {unit}; the other "
            f"{num(fill, scale)} {unit} ({fill / makespan:.0%} of the run) is filling the pipe (nothing "
            "to compute until the first copy lands) and draining it (no copy left to hide under the "
            f"last compute). More tiles spread that cost: the efficiency tends to max(l, c) / (l + c) "
            f"of the serial time = {max(load, comp) / (load + comp):.0%} here.")]
    lines += ["", paragraph(_stall_text(stats, scale, unit))]
    return lines


def formula_block(intro: str, formula: str, rest: str = "") -> str:
    """A sentence, the formula with this run's numbers on a line of its own, then the rest."""
    parts = [paragraph(intro), f"    {formula}"]
    if rest:
        parts.append(paragraph(rest))
    return "\n".join(parts)


def _serial_text(stats: dict[str, Any], t: dict[str, list[int]], scale: int, unit: str, equal: bool) -> str:
    n, serial = len(t["load"]), stats["serial_ns"] * 1000
    if equal and stats["closed_form_ns"] is not None:
        ld, c = t["load"][0], t["compute"][0]
        return formula_block("Serial (no overlap, one slot): each tile's copy, then its compute:",
                             f"T = N x (l + c) = {n} x ({num(ld, scale)} + {num(c, scale)}) = "
                             f"{num(serial, scale)} {unit}")
    return paragraph("Serial (no overlap, one slot): every copy, its latency and its costs, then its compute, "
                     f"one after another: {num(serial, scale)} {unit}.")


def _pipelined_text(stats: dict[str, Any], t: dict[str, list[int]], scale: int, unit: str, equal: bool) -> str:
    n, stages, makespan = len(t["load"]), stats["stages"], stats["makespan_ps"]
    got = f"{num(makespan, scale)} {unit}"
    speedup = f" Speedup over serial: {stats['speedup']:.2f}x."
    if stats["closed_form_ns"] is not None and stages >= 2:
        ld, c = t["load"][0], t["compute"][0]
        agree = "exactly: to the picosecond" if stats["closed_form_ns"] * 1000 == makespan else "not exactly"
        return formula_block(
            "Pipelined (S >= 2 slots, the anchor formula): the first tile's copy and compute, then one slower "
            "stage per remaining tile:",
            f"T = l + c + (N - 1) x max(l, c) = {num(ld, scale)} + {num(c, scale)} + {n - 1} x "
            f"max({num(ld, scale)}, {num(c, scale)}) = {num(stats['closed_form_ns'] * 1000, scale)} {unit}",
            f"The simulation gives {got}, which agrees {agree}.{speedup}")
    if stats["closed_form_ns"] is not None:
        return paragraph(f"With one slot nothing overlaps, so the run takes the serial time: {got}.{speedup}")
    text = (f"The anchor formula does not apply here (tiles differ, or there is latency or an issue or "
            f"barrier cost). The simulation gives {got}")
    if stats.get("maxplus_ns") is not None:
        text += (f"; the max-plus recurrence (each tile waits for its slot, the copy engine and "
                 f"the tensor core) gives {num(stats['maxplus_ns'] * 1000, scale)} {unit}")
    return paragraph(text + "." + speedup)


_WHY = {
    "compute": "the tensor core is the slower stage: once the pipe is full a tile finishes every c, "
               "and the copy engine idles part of every interval",
    "copy": "the copy engine is the slower stage: once the pipe is full a tile lands every l, and "
            "the tensor core idles part of every interval",
    "issue": "the copy engine's cost of taking each request binds",
    "latency": "each slot's round trip (latency + l + c + barrier costs) is longer than S times the "
               "slower stage: the slots, not the stages, run out; more stages would hide more of it",
}


def _cadence_text(stats: dict[str, Any], scale: int, unit: str) -> str:
    terms = {k: stats[f"{k}_term_ns"] * 1000 for k in ("copy", "compute", "issue", "latency")}
    binding = stats["binding"]
    term = {k: names.bound(k) + (" / S" if k == "latency" else "") for k in terms}
    shown = ", ".join(f"{term[k]} {num(v, scale)}" for k, v in terms.items() if v or k != "issue")
    text = (f"Cadence: the steady-state interval per tile is at least max({', '.join(term.values())}) "
            f"= max({shown}) = {num(stats['interval_bound_ns'] * 1000, scale)} {unit}; {names.bound(binding)} binds: "
            f"{_WHY[binding]}.")
    if stats["stages"] == 1:
        text = ("Cadence: with one slot the copy of the next tile cannot start until this tile's compute "
                "has released the slot, so every tile costs l + c (plus costs): nothing overlaps.")
    text += (f" Busy: copy engine {stats['copy_utilization']:.0%}, tensor core "
             f"{stats['compute_utilization']:.0%} of the run.")
    return text


def _stall_text(stats: dict[str, Any], scale: int, unit: str) -> str:
    full, empty = stats["consumer_wait_full_ns"] * 1000, stats["producer_wait_empty_ns"] * 1000
    who = "the consumer" if stats["consumers"] == 1 else f"each of the {stats['consumers']} consumer warpgroups"
    mean = "" if stats["consumers"] == 1 else " on average"
    text = (f"Stalls: {who} waited {num(full, scale)} {unit} on full barriers{mean} (its slot's copy "
            f"had not landed yet) and the producer {num(empty, scale)} {unit} on empty barriers (every "
            "slot was still taken: filling or in use). ")
    binding = stats["binding"]
    if stats["stages"] == 1:
        text += "With one slot both sides wait in turn: that is the missing overlap."
    elif binding == "compute":
        text += ("The consumer's waits are the fill (the first copy); after that the tensor core never "
                 "waits, and the producer's waits are the copy engine being ahead of it.")
    elif binding == "copy":
        text += ("The consumer's waits are the tensor core starving: tiles land slower than it "
                 "computes them.")
    else:
        text += ("The consumer's waits are latency the slots did not hide: each slot spends most of "
                 "its round trip waiting for its copy.")
    return text


def halved(spec: Any) -> Any:
    """A tiles time spec at half its value (a per-tile list halves each entry); None for a
    distribution."""
    if isinstance(spec, int):
        return f"{max(1, round(spec / 2))} ps"
    if isinstance(spec, tuple):
        return [f"{max(1, round(v / 2))} ps" for v in spec]
    return None


def _tiles_what_ifs(result: Result, base_dir: Path | None) -> list[str]:
    scenario, stats = result.scenario, result.stats
    w, stages = scenario.workload, stats["stages"]
    base, binding = stats["makespan_ps"], stats["binding"]
    plans: list[tuple[str, dict[str, Any], str]] = [
        (f"{_ordinal(stages + 1)} stage", {"pipeline.stages": stages + 1},
         f"{binding} binds, not the number of slots" if stages > 1 else "")]
    for name, label in (("compute", "halving the compute time"), ("load", "halving the load time"),
                        ("latency", "halving the copy latency")):
        spec = getattr(w, name)
        if name == "latency" and not spec:
            continue
        value = halved(spec)
        if value is not None:
            other = "copy" if name == "compute" else "compute"
            plans.append((label, {f"workload.{name}": value}, f"{other} binds; this stage was not the slower one"))
    if stages > 1:
        plans.append((f"{'one stage' if stages == 2 else f'{stages - 1} stages'} instead of {stages}",
                      {"pipeline.stages": stages - 1}, "the extra slot was not used"))
    order = {"compute": 1, "copy": 2, "latency": 3}
    first = [p for i, p in enumerate(plans) if i == 0 or _matches(p[0], binding, order)]
    rest = [p for p in plans if p not in first]
    chosen = (first + rest)[:3]
    return [what_if_line(base, run_what_if(scenario, label, changes, base_dir), why)
            for label, changes, why in chosen]


def _matches(label: str, binding: str, order: dict[str, int]) -> bool:
    word = {"compute": "compute", "copy": "load", "latency": "latency"}.get(binding, "")
    return bool(word) and word in label


def _ordinal(n: int) -> str:
    names = {2: "a second", 3: "a third", 4: "a fourth", 5: "a fifth", 6: "a sixth", 7: "a seventh",
             8: "an eighth"}
    return names.get(n, f"stage {n} (one more)")


# ------------------------------------------------------------------------------ chip workloads


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
    else:
        compute = stats["compute_busy_ns"] * 1000 / sms
        per_sm = stats["memory_bytes"] / sms
        rate = stats["bytes_in_flight_per_sm"] / (stats["round_trip_ns"] * 1000)
        latency = per_sm / rate if rate else 0.0
    links = [r for r in links if math.isfinite(r.capacity)]   # the ideal machine's links are unlimited
    return [Resource(names.bound("compute"), compute), *links, Resource(names.bound("latency"), latency)]


def _chip_story(result: Result) -> list[str]:
    stats, scenario = result.stats, result.scenario
    resources = chip_resources(result)
    binding = max(resources, key=lambda r: r.time_ps)
    makespan = stats["makespan_ps"]
    compute = resources[0]
    lines = [paragraph(
        f"What ran: {stats['tiles']} work units on {stats['sms_used']} SMs of the {scenario.gpu.name} preset "
        f"({stats['ctas']} CTAs, {stats['ctas_per_sm']} per SM, {stats['stages']} stages of shared memory "
        f"each). The run takes {fmt.time(makespan, 4)}.")]
    busiest = {names.bound("port"): " (the busiest SM)", names.bound("compute"): " (the busiest SM's tensor cores)",
               names.bound("latency"): " (bytes in flight over a slot's round trip)"}
    rows = [f"  {r.name:<12} {fmt.time(r.time_ps, 4):>10}" + (
        f"   {fmt.amount(r.nbytes)} at {fmt.rate(r.capacity)}" if r.capacity else "") + busiest.get(r.name, "")
        for r in resources]
    lines += ["", "Each bound alone would need (the run cannot beat the longest):", *rows]
    text = (f"{binding.name[0].upper()}{binding.name[1:]} binds: {fmt.time(binding.time_ps, 4)}, and the run "
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
            busiest = max(links, key=lambda r: r.time_ps)
            text += (f" The links keep up: the busiest, {busiest.name}, would need "
                     f"{busiest.time_ps / compute.time_ps:.0%} of the compute time, so the copies hide "
                     "under the MMAs.")
        else:
            text += " This machine's links are unlimited, so only the compute and the latency count."
    elif binding.name == names.bound("latency"):
        text += (" Too few bytes are in flight: each SM's stages x box over a copy's round trip is "
                 "below what the links could carry (Little's law); more stages or bigger boxes help.")
    lines += ["", paragraph(text)]
    lines += ["", paragraph(
        f"Residency: {fmt.size(stats['smem_per_cta_bytes'])} of shared memory per CTA, "
        f"{stats['ctas_per_sm']} CTA(s) per SM (limited by {stats['residency_limit']}). Stalls: consumers "
        f"waited {fmt.time(stats['consumer_wait_full_ns'] * 1000, 4)} on full barriers and producers "
        f"{fmt.time(stats['producer_wait_empty_ns'] * 1000, 4)} on empty ones, on average.")]
    return lines


def _chip_what_ifs(result: Result, base_dir: Path | None) -> list[str]:
    scenario, stats = result.scenario, result.stats
    gpu, base = scenario.gpu, stats["makespan_ps"]
    resources = chip_resources(result)
    binding = max(resources, key=lambda r: r.time_ps)
    field = {names.bound(key): f"{gpu_key}_bandwidth"
             for key, gpu_key in (("hbm", "hbm"), ("l2", "l2"), ("port", "sm_port"))}
    plans: list[tuple[str, dict[str, Any], str]] = [
        (f"{_ordinal(stats['stages'] + 1)} stage", {"pipeline.stages": stats["stages"] + 1},
         f"{binding.name} binds, not the number of slots")]
    name = binding.name if binding.name in field else names.bound("hbm")
    rate = getattr(gpu, field[name]) * 2 * PS_PER_S
    if math.isfinite(rate):
        plans.append((f"twice the {name} bandwidth", {f"gpu.{field[name]}": f"{rate:.6g} B/s"},
                      f"{name} is not what binds"))
    if gpu.copy_latency > 1:
        plans.append(("halving the copy latency", {"gpu.copy_latency": f"{gpu.copy_latency // 2} ps"},
                      "the latency is already hidden"))
    if stats["stages"] > 1:
        plans.append((f"{stats['stages'] - 1} stage(s) instead of {stats['stages']}",
                      {"pipeline.stages": stats["stages"] - 1}, "the extra slot was not used"))
    return [what_if_line(base, run_what_if(scenario, label, changes, base_dir), why)
            for label, changes, why in plans[:3]]

