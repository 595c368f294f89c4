"""Write a calibrated preset: the base preset's values, with the fitted ones (and their source)
replaced, in the preset file format ``tmasim.hardware`` reads (``key = { value, source }``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tmasim.machine import hardware
from tmasim.sweep.table import toml_text


def base_entries(gpu: Any, base_dir: Path | None) -> tuple[dict[str, Any], str]:
    """The base preset's raw entries (with a scenario's ``gpu`` table overrides applied) and its name."""
    if isinstance(gpu, Mapping):
        name = str(gpu.get("preset", "ideal"))
        overrides = {k: v if k == hardware.MMA else {"value": v, "source": "scenario override"}
                     for k, v in gpu.items() if k != "preset"}
    else:
        name, overrides = str(gpu), {}
    return {**hardware.raw_preset(_resolved(name, base_dir)), **overrides}, name


def _resolved(name: str, base_dir: Path | None) -> str:
    """A preset path relative to the scenario's folder, as the scenario reads it."""
    looks_like_path = name.endswith(".toml") or "/" in name
    path = Path(name)
    if looks_like_path and base_dir is not None and not path.is_absolute() and not path.exists():
        return str(base_dir / path)
    return name


def calibrated_text(gpu: Any, base_dir: Path | None, *, name: str, fitted: Mapping[str, str], source: str,
                    comments: Sequence[str] = ()) -> str:
    """The preset file's text."""
    entries, base_name = base_entries(gpu, base_dir)
    for key, value in fitted.items():
        entries[key] = {"value": value, "source": source}
    description = f"{_value(entries.get('description', ''))}; calibrated from preset {base_name}".lstrip("; ")
    lines = [f"# {line}" for line in comments]
    lines += [f"# Base preset: {base_name}. Fitted: {', '.join(fitted) or 'nothing'}.", "",
              f"name = {toml_text(name)}", f"description = {toml_text(description)}", ""]
    for key in hardware.field_names():
        if key in ("name", "description") or key not in entries:
            continue
        lines.append(f"{key} = {_entry(entries[key])}")
    if hardware.MMA in entries:  # the MMA instruction table travels with the preset, unfitted
        lines += ["", f"[{hardware.MMA}]"] + [f"{k} = {toml_text(v)}" for k, v in entries[hardware.MMA].items()]
    return "\n".join(lines) + "\n"


def _value(entry: Any) -> Any:
    return entry["value"] if isinstance(entry, Mapping) and "value" in entry else entry


def _entry(entry: Any) -> str:
    if isinstance(entry, Mapping) and "value" in entry:
        source = entry.get("source")
        return (f"{{ value = {toml_text(entry['value'])}"
                + (f", source = {toml_text(str(source))}" if source is not None else "") + " }")
    return toml_text(entry)
