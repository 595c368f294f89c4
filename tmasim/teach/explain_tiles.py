"""The story of a ``tiles`` run (one CTA, the anchor formula's world): the serial and pipelined
times with this run's numbers, the cadence, fill and drain, the stalls, and what-ifs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tmasim import names
from tmasim.inputs.scenario import Scenario
from tmasim.output.result import Result
from tmasim.teach.prose import formula_block, ordinal, paragraph
from tmasim.teach.what_if import run_what_if, what_if_line
from tmasim.values import format as fmt
from tmasim.values.format import PS_PER_S


def unit_of(ps: float) -> tuple[int, str]:
    for scale, name in ((PS_PER_S, "s"), (10**9, "ms"), (10**6, f"{fmt.micro()}s"), (10**3, "ns")):
        if ps >= scale:
            return scale, name
    return 1, "ps"


def num(ps: float, scale: int) -> str:
    return f"{ps / scale:.4g}"


def tile_times(scenario: Scenario) -> dict[str, Sequence[int]]:
    from tmasim.workloads import tiles

    assert isinstance(scenario.workload, tiles.TilesConfig)
    return tiles.times(scenario.workload, scenario.run.seed)


def tiles_story(result: Result) -> list[str]:
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
        f"tensor core. The ring has S = {fmt.plural(stages, 'shared-memory slot')} (stages).")]
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


def _serial_text(stats: dict[str, Any], t: dict[str, Sequence[int]], scale: int, unit: str, equal: bool) -> str:
    n, serial = len(t["load"]), stats["serial_ns"] * 1000
    if equal and stats["closed_form_ns"] is not None:
        ld, c = t["load"][0], t["compute"][0]
        return formula_block("Serial (no overlap, one slot): each tile's copy, then its compute:",
                             f"T = N x (l + c) = {n} x ({num(ld, scale)} + {num(c, scale)}) = "
                             f"{num(serial, scale)} {unit}")
    return paragraph("Serial (no overlap, one slot): every copy, its latency and its costs, then its compute, "
                     f"one after another: {num(serial, scale)} {unit}.")


def _pipelined_text(stats: dict[str, Any], t: dict[str, Sequence[int]], scale: int, unit: str, equal: bool) -> str:
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
    binding = names.bound_key(stats["binding"])
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
    binding = names.bound_key(stats["binding"])
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


def tiles_what_ifs(result: Result, base_dir: Path | None) -> list[str]:
    scenario, stats = result.scenario, result.stats
    w, stages = scenario.workload, stats["stages"]
    base, binding = stats["makespan_ps"], names.bound(stats["binding"])
    plans: list[tuple[str, dict[str, Any], str]] = [
        (f"{ordinal(stages + 1)} stage", {"pipeline.stages": stages + 1},
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
