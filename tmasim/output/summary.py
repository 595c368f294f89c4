"""The human summary of a run: a header made from the effective scenario, then what it took and why.

The header never repeats what a ``--set`` made untrue: its first line is generated from the
scenario as it ran, the overrides are listed (``changed: pipeline.stages 2 → 1``), and the
file's description is shown as it stands only when nothing changed; otherwise it is labelled
as the file's. A GPU preset's fields that the scenario overrides are listed with the preset's
value beside the new one (``gpu.copy_latency 520 → 624 cycles``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tmasim.values import format as fmt
from tmasim.workloads.summary_rows import plural, t

if TYPE_CHECKING:
    from tmasim.inputs.scenario import Scenario


@dataclass(frozen=True)
class Change:
    """One field whose value differs from where it came from.

    Old and new are written in the same form: quantities through :mod:`tmasim.format` in one
    unit (``workload.load 3 µs → 4 µs``), or each in its own where one is under one of the
    other's unit (``3 µs → 1 s``, never ``0 s → 1 s``), a value in cycles also as a time at the GPU's clock
    when the other side is a time (``450 cycles (229 ns) → 0 ns``), tables as tables."""

    field: str
    before: Any  # None: the field was not set (its default applied)
    after: Any
    source: str  # "set" (a --set override) or "file" (the scenario file overrides its GPU preset)
    clock_hz: float | None = None  # the GPU's clock, to read a value in cycles as a time

    def text(self, unicode: bool | None = None) -> str:
        arrow = fmt.arrow(unicode)
        if self.before is None:
            return f"{self.field} (default) {arrow} {value_text(self.after, unicode)}"
        before, after = _pair(self.before, self.after, self.clock_hz, unicode)
        if self.field == "gpu.clock" and self.after == "power-limited" and self.clock_hz:
            after += f" ({self.clock_hz / 1e9:.4g} GHz)"  # the keyword, and the clock it gave
        return f"{self.field} {before} {arrow} {after}"


def value_text(value: Any, unicode: bool | None = None) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {value_text(v, unicode)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(value_text(v, unicode) for v in value) + "]"
    quantity = _quantity(value, None)
    if quantity is not None:
        return _in_unit(quantity[1], quantity[0], _unit(quantity[0], abs(quantity[1])), unicode, _digits(value))
    text = str(value)
    return text if text.isprintable() else repr(value)  # the changed: line stays one line


# A quantity's kind as tmasim.units reads it -> (tmasim.format's kind, factor to its base unit).
_KINDS = {"time": ("time", 1.0), "size": ("size", 1.0), "bandwidth": ("rate", 1e12),
          "flop_rate": ("flop_rate", 1e12)}
_DIGITS = 6  # at most: a value shows the digits it was written with (189.88 ns), at least 4


def _quantity(value: Any, clock_hz: float | None) -> tuple[str, float, str] | None:
    """(format kind, value in its base unit, note) of a string with a unit, or None."""
    from tmasim.errors import TmasimError
    from tmasim.values import units

    if not isinstance(value, str) or units.QUANTITY.fullmatch(value) is None:
        return None
    for kind, (shown, factor) in _KINDS.items():
        try:
            return shown, units.parse(value, kind, "value") * factor, ""
        except TmasimError:
            continue
    if clock_hz:
        try:
            cycles = units.parse(value, "cycles", "value")
        except TmasimError:
            return None
        return "time", cycles / clock_hz * units.PS_PER_S, f" ({_number(cycles)} cycles)"
    return None


def _pair(before: Any, after: Any, clock_hz: float | None, unicode: bool | None) -> tuple[str, str]:
    """Old and new in one form: two quantities of a kind in the unit of the larger."""
    if isinstance(before, str) and isinstance(after, str) and "cycle" in before and "cycle" in after:
        return before, after  # both counted in cycles: the same unit already
    a, b = _quantity(before, clock_hz), _quantity(after, clock_hz)
    if a is None or b is None or a[0] != b[0] or not all(math.isfinite(q[1]) for q in (a, b)):
        return value_text(before, unicode), value_text(after, unicode)
    unit = _unit(a[0], max(abs(a[1]), abs(b[1])))
    digits = max(_digits(before), _digits(after))
    if any(0 < abs(q[1]) < unit[0] for q in (a, b)):  # under one of the larger's unit: each in its own
        return (_in_unit(a[1], a[0], _unit(a[0], abs(a[1])), unicode, digits) + a[2],
                _in_unit(b[1], b[0], _unit(b[0], abs(b[1])), unicode, digits) + b[2])
    return (_in_unit(a[1], a[0], unit, unicode, digits) + a[2], _in_unit(b[1], b[0], unit, unicode, digits) + b[2])


def _unit(kind: str, magnitude: float) -> tuple[float, str]:
    if not math.isfinite(magnitude):
        return 1.0, ""
    _, unit = fmt.scaled(magnitude, kind, _DIGITS)
    return next((scale, u) for scale, u in fmt.UNITS[kind] if u == unit)


def _in_unit(value: float, kind: str, unit: tuple[float, str], unicode: bool | None, digits: int) -> str:
    if not math.isfinite(value):
        return "unlimited" if value > 0 else "-unlimited"
    scale, name = unit
    name = f"{fmt.micro(unicode)}s" if name == "µs" else name
    return f"{_number(value / scale, digits)} {name}"


def _digits(text: Any) -> int:
    """The significant digits a quantity was written with, between 4 and :data:`_DIGITS`."""
    from tmasim.values import units

    match = units.QUANTITY.fullmatch(text) if isinstance(text, str) else None
    if match is None or "cycle" in text:
        return fmt.DIGITS
    mantissa = re.split(r"[eE]", match["number"])[0].lstrip("+-").replace(".", "").lstrip("0")
    return min(_DIGITS, max(fmt.DIGITS, len(mantissa)))


def _number(x: float, digits: int = fmt.DIGITS) -> str:
    text = f"{x:.{digits}g}"
    return f"{x:.0f}" if "e" in text else ("0" if text == "-0" else text)


# ---------------------------------------------------------------------------- what changed


def changes(scenario: Scenario) -> list[Change]:
    """The ``--set`` overrides that changed something, then the file's own GPU-preset overrides."""
    origin, effective = dict(scenario.origin), dict(scenario.raw)
    if not origin:
        return []
    before, after = dict(_flat(_gpu_as_table(origin))), dict(_flat(_gpu_as_table(effective)))
    preset = _preset_values(after.get("gpu.preset") or before.get("gpu.preset"))
    clock = scenario.gpu.clock_hz
    found = []
    for key, value in after.items():
        if before.get(key, _UNSET) != value:
            old = before.get(key)
            if old is None and key.startswith("gpu."):
                old = preset.get(key.removeprefix("gpu."))
            found.append(Change(key, old, value, "set", clock))
    found += [Change(key, preset.get(key.removeprefix("gpu.")), value, "file", clock) for key, value in before.items()
              if key.startswith("gpu.") and key != "gpu.preset" and after.get(key) == value]
    return found


_UNSET = object()


def _gpu_as_table(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``gpu = "h100-sxm"`` and ``gpu = {preset = "h100-sxm"}`` say the same: compare them alike."""
    gpu = raw.get("gpu", "ideal")
    return {**raw, "gpu": {"preset": gpu} if isinstance(gpu, str) else {"preset": "ideal", **gpu}}


def _flat(raw: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``section.field`` -> value, one level deep: a field whose value is a table (registers, a
    distribution, tensor_flops) is compared and shown as the whole table."""
    for key, value in raw.items():
        if isinstance(value, Mapping):
            yield from ((f"{key}.{field}", v) for field, v in value.items())
        else:
            yield key, value


def _preset_values(name: Any) -> dict[str, Any]:
    """A preset's values as its file writes them (``520 cycles``); none for a preset not found."""
    from tmasim.errors import TmasimError
    from tmasim.machine import hardware

    if not isinstance(name, str):
        return {}
    try:
        raw = hardware.raw_preset(name)
    except TmasimError:
        return {}
    return {k: v["value"] if isinstance(v, Mapping) and "value" in v else v for k, v in raw.items()}


# -------------------------------------------------------------------------------- header


def headline(scenario: Scenario) -> str:
    """What ran, from the effective scenario: ``16 tiles, 1 stage on ideal``."""
    from tmasim.workloads import workload_of

    w, p = scenario.workload, scenario.pipeline
    consumers = f", {p.consumers} consumer warpgroups ({p.consumer_mode})" if p.consumers > 1 else ""
    return f"{workload_of(w).describe(w)}, {plural(p.stages, 'stage')}{consumers} on {scenario.gpu.name}"


def header(scenario: Scenario, unicode: bool | None = None) -> list[str]:
    """The run's first lines: the headline, what changed, and the description where it holds."""
    lines = [f"{scenario.name}: {headline(scenario)}"]
    found = changes(scenario)
    changed = [c.text(unicode) for c in found if c.source == "set"]
    preset = [c.text(unicode) for c in found if c.source == "file"]
    if changed:
        lines.append(f"  changed: {', '.join(changed)}")
    if preset:
        lines.append(f"  GPU preset overridden by the file: {', '.join(preset)}")
    if scenario.description:
        lines.append(f"  {scenario.description}" if not changed
                     else f"  the file's description, before these changes: {scenario.description}")
    return lines


# ---------------------------------------------------------------------------------- summary


def describe(stats: Mapping[str, Any], scenario: Scenario) -> str:
    """The human summary of a run: what ran, how long it took, and why."""
    from tmasim.workloads import workload_of

    if not stats.get("valid", True):
        first, *rest = header(scenario)
        return "\n".join([first, f"  INVALID RUN: {stats['invalid_reason']}", *rest,
                          "  no time is reported: a run with broken barriers is not a kernel's timing"])
    rows = workload_of(scenario.workload).summary_rows(stats, scenario) + launch_rows(stats) + stall_rows(stats) \
        + skip_rows(stats)
    rows.append(("validated", _trust(scenario)))
    width = max(len(name) for name, _ in rows)
    return "\n".join([*header(scenario), *(f"  {name:<{width}}  {value}" for name, value in rows)])


def _trust(scenario: Scenario) -> str:
    from tmasim.output.trust import trust_for

    return trust_for(scenario)


def launch_rows(stats: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the predicted time holds beyond the CTAs' work (gpu.launch_overhead), where it holds any."""
    overhead = stats.get("launch_overhead_ns")
    if not overhead:
        return []
    return [("launch", f"{fmt.time_ns(overhead)} of the predicted time is the kernel's launch, prologue and end, "
                       "outside its CTAs' work (gpu.launch_overhead, and launch_per_sm for each SM it uses "
                       "after the first; 0 us for a launch whose cost is hidden)")]


def stall_rows(stats: Mapping[str, Any]) -> list[tuple[str, str]]:
    several = stats["ctas"] > 1 or stats["consumers"] > 1
    per_cta = " per consumer warpgroup on average" if several else ""
    per_producer = " per producer on average" if stats["ctas"] > 1 else ""
    s = "s" if stats["ctas"] > 1 else ""
    rows = [
        ("consumer stalls", _stall(stats["consumer_wait_full_ns"], f"waiting on full barriers{per_cta}")),
        ("producer stalls", _stall(stats["producer_wait_empty_ns"], f"waiting on empty barriers{per_producer}")),
        ("busy", f"copy engine{s} {fmt.percent(stats['copy_utilization'])}, "
                 f"tensor core{s} {fmt.percent(stats['compute_utilization'])}"),
    ]
    if stats.get("races"):
        rows.append(("races", f"{fmt.plural(stats['races'], 'read')} before data landed"))
    return rows


def skip_rows(stats: Mapping[str, Any]) -> list[tuple[str, str]]:
    """How the run was simulated, where fast-forward skipped repeated periods (exact)."""
    skipped = stats.get("fast_forward_skipped_steps")
    if not skipped:
        return []
    how = stats.get("fast_forward", "")
    kept = next((what for what in ("records", "links' loads over time") if f"their {what} regenerated" in how), None)
    records = f"; their {kept} regenerated by shifting" if kept else ""
    steps = "K/V blocks" if stats.get("workload") == "attention" else "ring steps"  # (attention's steps)
    return [("fast-forward", f"{skipped:,} of {stats['simulated_steps']:,} {steps} skipped over repeated "
                             f"periods, exactly{records} (run.fast_forward = false simulates every one)")]


def _stall(ns: float, what: str) -> str:
    return "none" if not ns else f"{t(ns)} {what}"
