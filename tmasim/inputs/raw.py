"""A scenario's table (``Scenario.raw``, what result files carry and what-ifs re-read) kept true
when the scenario is edited in Python with ``dataclasses.replace``.

The table is what the scenario was read from; each replaced field is written back into it as
the first of a few spellings that reads back as the same value (``5``, ``"3000000 ps"``,
``"1.5 TB/s"`` for bytes per picosecond, ``"1.98e9 Hz"``), checked by reading the table again.
A value no spelling reproduces is written as plain data, the closest the table can say: an
object the reader does not build from text, or a GPU clock replaced alone (the dataclass keeps
the preset's values in cycles at the old clock; the table, read again, converts them at the new
one, which is what changing ``gpu.clock`` means in a scenario file).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

PARTS = ("name", "description", "gpu", "workload", "pipeline", "run")
_GPU_NAMES = {"clock_hz": "clock"}  # the dataclass's attribute -> the table's key


def parts(scenario: Any) -> tuple[Any, ...]:
    return tuple(getattr(scenario, part) for part in PARTS)


def updated(raw: Mapping[str, Any], before: tuple[Any, ...], scenario: Any,
            read_back: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """``raw`` with every field that differs between ``before`` (what it was read into) and the
    scenario now written back; ``read_back`` reads a table into a scenario."""
    table = copy.deepcopy(dict(raw))
    for part, old, new in zip(PARTS, before, parts(scenario), strict=True):
        if old == new and _same_kind(old, new):
            continue
        if part in ("name", "description"):
            table[part] = new
            continue
        for name in _changed(old, new):
            _write_back(table, part, name, getattr(new, name), read_back)
    return table


def _same_kind(old: Any, new: Any) -> bool:
    return type(old) is type(new)


def _changed(old: Any, new: Any) -> list[str]:
    names = [f.name for f in dataclasses.fields(new) if f.init and f.compare]
    if type(old) is not type(new):  # another workload: every field of the new one
        return names
    return [n for n in names if getattr(old, n) != getattr(new, n)]


def _write_back(table: dict[str, Any], part: str, name: str, value: Any,
                read_back: Callable[[dict[str, Any]], Any]) -> None:
    key = _GPU_NAMES.get(name, name) if part == "gpu" else name
    if part == "gpu" and not isinstance(table.get("gpu", "ideal"), Mapping):
        table["gpu"] = {"preset": table.get("gpu", "ideal")}
    section = table.setdefault(part, {})
    if part == "workload" and name == "kind":
        section.clear()  # another workload: its own fields only
    if value is None:  # the field's default: not in the table
        section.pop(key, None)
        return
    for spelling in _spellings(value):
        section[key] = spelling
        try:
            if getattr(getattr(read_back(table), part), name) == value:
                return
        except Exception:  # noqa: BLE001 (a spelling the reader refuses: try the next)
            continue
    section[key] = _plain(value)


def _spellings(value: Any) -> list[Any]:
    if isinstance(value, (bool, str)):
        return [value]
    if isinstance(value, int):
        return [value, f"{value} ps", f"{value} B"]
    if isinstance(value, float):
        return [value, f"{value!r} TB/s", f"{value!r} Hz", f"{value!r} TFLOP/s", f"{value!r} ps"]
    if isinstance(value, (tuple, list)):
        return [_plain(value)]
    if isinstance(value, Mapping):
        return [{k: f"{v!r} TFLOP/s" if isinstance(v, float) else _plain(v) for k, v in value.items()}, _plain(value)]
    return [_plain(value)]


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value
