"""The human summary of a run: a header made from the effective scenario, then what it took and why.

The header never repeats what a ``--set`` made untrue: its first line is generated from the
scenario as it ran, the overrides are listed (``changed: pipeline.stages 2 → 1``), and the
file's description is shown as it stands only when nothing changed; otherwise it is labelled
as the file's. A GPU preset's fields that the scenario overrides are listed with the preset's
value beside the new one (``gpu.copy_latency 520 → 624 cycles``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tmasim import format as fmt
from tmasim.summary_rows import plural, t

if TYPE_CHECKING:
    from tmasim.scenario import Scenario


@dataclass(frozen=True)
class Change:
    """One field whose value differs from where it came from."""

    field: str
    before: Any  # None: the field was not set (its default applied)
    after: Any
    source: str  # "set" (a --set override) or "file" (the scenario file overrides its GPU preset)

    def text(self, unicode: bool | None = None) -> str:
        arrow = fmt.arrow(unicode)
        after = value_text(self.after)
        if self.before is None:
            return f"{self.field} (default) {arrow} {after}"
        before = value_text(self.before)
        unit_b, unit_a = _unit_of(before), _unit_of(after)
        if unit_b and unit_b == unit_a:  # 520 cycles -> 624 cycles: say the unit once
            before = before[: -len(unit_b)].rstrip()
        return f"{self.field} {before} {arrow} {after}"


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    return str(value)


def _unit_of(text: str) -> str:
    match = re.fullmatch(r"[-+0-9.eE]+\s*([^\d\s].*)", text)
    return match.group(1) if match else ""


# ---------------------------------------------------------------------------- what changed


def changes(scenario: Scenario) -> list[Change]:
    """The ``--set`` overrides that changed something, then the file's own GPU-preset overrides."""
    origin, effective = dict(scenario.origin), dict(scenario.raw)
    if not origin:
        return []
    before, after = dict(_flat(_gpu_as_table(origin))), dict(_flat(_gpu_as_table(effective)))
    preset = _preset_values(after.get("gpu.preset") or before.get("gpu.preset"))
    found = []
    for key, value in after.items():
        if before.get(key, _UNSET) != value:
            old = before.get(key)
            if old is None and key.startswith("gpu."):
                old = preset.get(key.removeprefix("gpu."))
            found.append(Change(key, old, value, "set"))
    found += [Change(key, preset.get(key.removeprefix("gpu.")), value, "file") for key, value in before.items()
              if key.startswith("gpu.") and key != "gpu.preset" and after.get(key) == value]
    return found


_UNSET = object()


def _gpu_as_table(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``gpu = "h100-sxm"`` and ``gpu = {preset = "h100-sxm"}`` say the same: compare them alike."""
    gpu = raw.get("gpu", "ideal")
    return {**raw, "gpu": {"preset": gpu} if isinstance(gpu, str) else {"preset": "ideal", **gpu}}


def _flat(raw: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        is_distribution = isinstance(value, Mapping) and "dist" in value
        if isinstance(value, Mapping) and value and not is_distribution and dotted != "gpu.tensor_flops":
            yield from _flat(value, f"{dotted}.")
        else:
            yield dotted, value


def _preset_values(name: Any) -> dict[str, Any]:
    """A preset's values as its file writes them (``520 cycles``); none for a preset not found."""
    from tmasim import hardware
    from tmasim.errors import TmasimError

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
    rows = workload_of(scenario.workload).summary_rows(stats, scenario) + stall_rows(stats) + skip_rows(stats)
    width = max(len(name) for name, _ in rows)
    return "\n".join([*header(scenario), *(f"  {name:<{width}}  {value}" for name, value in rows)])


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
        rows.append(("races", f"{stats['races']} read(s) before data landed"))
    return rows


def skip_rows(stats: Mapping[str, Any]) -> list[tuple[str, str]]:
    """How the run was simulated, where fast-forward skipped repeated periods (exact)."""
    skipped = stats.get("fast_forward_skipped_steps")
    if not skipped:
        return []
    return [("fast-forward", f"{skipped:,} of {stats['simulated_steps']:,} ring steps skipped over repeated "
                             "periods, exactly (run.fast_forward = false simulates every one)")]


def _stall(ns: float, what: str) -> str:
    return "none" if not ns else f"{t(ns)} {what}"


