"""How a measured row becomes a scenario: column maps, the backend's built-in map, units.

A column map is ``COLUMN=FIELD[:UNIT]``: the row's value in COLUMN is set as scenario field
FIELD (dotted, as ``--set`` names it), with UNIT appended when the field is a quantity
(``latency_ns=workload.latency:ns`` sets ``workload.latency = "250 ns"`` for a cell 250).
A cell without a unit is read as ``--set`` reads a value (a number, a TOML list, else a string).

The backend's map (:class:`BackendMap`) knows the numba.cuda kernels of ``tmasim.gpu``: each
launch is a persistent grid streaming tiles through a stage ring, which is the ``stream``
workload; its consumers' FMA loop becomes ``compute_per_byte`` through one calibratable
constant, ``ps_per_iter_byte``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tmasim.errors import ScenarioError, TmasimError
from tmasim.inputs.scenario import parse_value
from tmasim.values import units

MAP_EXAMPLE = "COLUMN=FIELD[:UNIT] (e.g. latency_ns=workload.latency:ns)"
UNIT_KINDS = ("time", "size", "bandwidth", "frequency", "cycles", "flops", "flop_rate")

Override = tuple[str, Any]

# Columns of tmasim.gpu.driver.RUN_COLUMNS the backend map reads (consumer_warps is optional).
BACKEND_COLUMNS = ("variant", "stages", "tile_bytes", "compute_iters", "ctas", "tiles_per_cta", "kernel_ns")
# What identifies one measured configuration: its repeats share all of these.
BACKEND_KEYS = ("variant", "stages", "tile_bytes", "compute_iters", "ctas", "tiles_per_cta", "consumer_warps",
                "instrumented")
BACKEND_UNITS = {"kernel_ns": "ns", "gbps": "GB/s", "steady_interval_ns": "ns", "full_wait_ns_mean": "ns",
                 "empty_wait_ns_mean": "ns"}
TMA_VARIANTS = ("tma_bulk_1d", "tma_tensor_2d")
ROW_BYTES = 256        # the kernels' 2-D boxes are rows of 64 float32
ROW_ELEMS = 64
KERNEL_CONSUMER_WARPS = 4
# One consumer thread runs a dependent chain of FMAs, about 4 cycles each on Hopper; with
# 4 consumer warps (128 threads) a CTA finishes 128 elements (512 B) per iteration every
# ~4 cycles: 4 / 512 cycles per byte per iteration = 3.95 ps at 1.98 GHz.
DEFAULT_PS_PER_ITER_BYTE = 4 / 512 / 1.98e9 * 1e12


@dataclass(frozen=True)
class ColumnMap:
    """One ``--map``: a measured column, the scenario field it sets and the unit of its cells."""

    column: str
    field: str
    unit: str | None = None

    def value(self, cell: Any) -> Any:
        """The scenario value for one cell: ``"<cell> <unit>"`` or the cell read as TOML."""
        cell = _plain(cell)
        if isinstance(cell, float) and math.isnan(cell):
            raise ScenarioError(f"--map {self.column}", "(empty)", "has no value in this row")
        if isinstance(cell, float) and not math.isfinite(cell):
            raise ScenarioError(f"--map {self.column}", cell, "must be a finite number")
        if self.unit is not None:
            return f"{cell!r} {self.unit}" if isinstance(cell, float) else f"{cell} {self.unit}"
        if isinstance(cell, float) and cell.is_integer():
            return int(cell)
        return parse_value(cell) if isinstance(cell, str) else cell

    def text(self) -> str:
        return f"{self.column}={self.field}" + (f":{self.unit}" if self.unit else "")


def parse_map(text: str) -> ColumnMap:
    """``COLUMN=FIELD[:UNIT]``, with the unit checked now (a typo costs one line, not a run)."""
    column, sep, rest = text.partition("=")
    field, _, unit = rest.partition(":")
    column, field, unit = column.strip(), field.strip(), unit.strip()
    if not sep or not column or not field or not _is_dotted(field) or (":" in rest and not unit):
        raise ScenarioError("--map", text, f"must look like {MAP_EXAMPLE}")
    if unit:
        check_unit(f"--map {column}", unit)
    return ColumnMap(column, field, unit or None)


def check_unit(where: str, unit: str) -> str:
    """The kind of quantity ``unit`` measures (time, size, bandwidth, ...), or a one-line error."""
    for kind in UNIT_KINDS:
        try:
            units.parse(f"1 {unit}", kind, where)
        except ScenarioError:
            continue
        return kind
    raise ScenarioError(where, unit, "is not a unit tmasim knows (e.g. ns, us, B, KiB, GB/s, cycles)")


def _is_dotted(name: str) -> bool:
    return all(part and not any(c.isspace() for c in part) for part in name.split("."))


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class BackendMap:
    """The numba.cuda kernels as ``stream`` scenarios.

    A launch of ``ctas`` CTAs, each streaming ``tiles_per_cta`` tiles of ``tile_bytes`` through
    ``stages`` slots, is a persistent grid of ``ctas`` CTAs (``ceil(ctas / SMs)`` per SM) over a
    float32 tensor of ``ctas x tiles_per_cta`` boxes of ``[tile_bytes / 256, 64]`` elements
    (256-byte rows, as the 2-D kernel's boxes; the 1-D bulk copy moves the same bytes). Its
    consumers spend ``compute_iters x ps_per_iter_byte x 4 / consumer_warps`` per byte.
    """

    sms: int
    ps_per_iter_byte: float = DEFAULT_PS_PER_ITER_BYTE

    def overrides(self, row: Mapping[str, Any]) -> tuple[Override, ...]:
        tile_bytes, ctas = whole(row, "tile_bytes", 1), whole(row, "ctas", 1)
        if tile_bytes % ROW_BYTES:
            raise ScenarioError("tile_bytes", tile_bytes, f"must be a multiple of {ROW_BYTES} (rows of 64 float32)")
        rows = tile_bytes // ROW_BYTES
        workload = {
            "kind": "stream", "dtype": "fp32",
            "shape": [ctas * whole(row, "tiles_per_cta", 1) * rows, ROW_ELEMS], "box": [rows, ROW_ELEMS],
            "compute_per_byte": f"{self.compute_per_byte(row)!r} ps",
            "launch": "persistent", "ctas": ctas, "ctas_per_sm": -(-ctas // self.sms),
        }
        return (("workload", workload), ("pipeline.stages", whole(row, "stages", 1)))

    def compute_per_byte(self, row: Mapping[str, Any]) -> float:
        """Picoseconds per byte: linear in the FMA iterations, inverse in the consumer warps."""
        warps = whole(row, "consumer_warps", 1) if "consumer_warps" in row else KERNEL_CONSUMER_WARPS
        iters = _plain(row["compute_iters"])
        if isinstance(iters, bool) or not isinstance(iters, (int, float)) or not math.isfinite(iters) or iters < 0:
            raise ScenarioError("compute_iters", iters, "must be a finite number >= 0")
        return float(iters) * self.ps_per_iter_byte * KERNEL_CONSUMER_WARPS / warps


def whole(row: Mapping[str, Any], column: str, minimum: int) -> int:
    """A measured cell that must be a whole number: ``1.5`` stages is an error, never 1."""
    value = _plain(row[column])
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(column, value, "must be a whole number")
    if value < minimum:
        raise ScenarioError(column, value, f"must be >= {minimum}")
    return value


def preset_for_device(name: str | None) -> str | None:
    """The bundled preset for a device name from meta.json (``NVIDIA H200`` -> ``h200``)."""
    text = (name or "").upper()
    if "H200" in text:
        return "h200"
    if "H100" in text:
        return "h100-sxm"
    if "B200" in text:
        return "b200"
    return None


# --- units of measured and predicted quantities -------------------------------------------------

_STAT_UNITS = (("_ns", "time", "ns"), ("_ps", "time", "ps"), ("_bytes_per_s", "bandwidth", "B/s"),
               ("_flops_per_s", "flop_rate", "FLOP/s"), ("bytes", "size", "B"))


def stat_unit(stat: str) -> tuple[str, str] | None:
    """(kind, unit) of a summary figure, read from its name's suffix; None if it has none."""
    for suffix, kind, unit in _STAT_UNITS:
        if stat.endswith(suffix):
            return kind, unit
    return None


def conversion(measure: str, measure_unit: str | None, predict: str) -> float:
    """The factor that brings the measured column into the predicted figure's unit."""
    if measure_unit is None:
        return 1.0
    target = stat_unit(predict)
    if target is None:
        raise TmasimError(f"--measure {measure}:{measure_unit}: --predict {predict} has no unit tmasim knows, "
                          "so the measured values cannot be converted; give --measure without a unit")
    kind, unit = target
    given = check_unit(f"--measure {measure}", measure_unit)
    if given != kind:
        raise ScenarioError(f"--measure {measure}", measure_unit,
                            f"is a unit of {given}, but --predict {predict} is a {kind} (in {unit})")
    measured = units.parse(f"1 {measure_unit}", kind, f"--measure {measure}")
    return measured / units.parse(f"1 {unit}", kind, f"--predict {predict}")


def parse_measure(text: str) -> tuple[str, str | None]:
    """``COLUMN[:UNIT]``."""
    column, _, unit = text.partition(":")
    if not column.strip() or (":" in text and not unit.strip()):
        raise ScenarioError("--measure", text, "must look like COLUMN[:UNIT] (e.g. kernel_ns or gbps:GB/s)")
    return column.strip(), unit.strip() or None
