"""A study: measured points, the base scenario, and how each point becomes a scenario.

Shared by ``validate`` and ``calibrate``: both read the same table the same way, and both
turn point i (with, for calibration, trial GPU parameters) into the override list
:meth:`Study.overrides` returns, which the runner applies to the base scenario.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import ScenarioError, TmasimError, UnitError
from tmasim.inputs import scenario as scenarios
from tmasim.machine.hardware import GpuSpec, load_gpu
from tmasim.validation import measured as tables
from tmasim.validation.mapping import (
    BACKEND_KEYS,
    BACKEND_UNITS,
    DEFAULT_PS_PER_ITER_BYTE,
    BackendMap,
    ColumnMap,
    Override,
    conversion,
    parse_map,
    parse_measure,
    preset_for_device,
)

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_PREDICT = "makespan_ns"
BACKEND_MEASURE = "kernel_ns"


@dataclass(frozen=True)
class Options:
    """What the command line (or a caller) says about the mapping; see ``tmasim validate -h``."""

    scenario: str | Path | None = None
    maps: Sequence[str] = ()
    measure: str | None = None
    predict: str = DEFAULT_PREDICT
    overrides: Sequence[str] = ()
    where: Sequence[str] = ()
    backend: bool | None = None
    ps_per_iter_byte: float = DEFAULT_PS_PER_ITER_BYTE


@dataclass(frozen=True)
class Study:
    """Measured points and everything needed to simulate each of them."""

    table: tables.MeasuredTable
    points: pd.DataFrame
    keys: tuple[str, ...]
    base_raw: dict[str, Any]
    base_dir: Path | None
    maps: tuple[ColumnMap, ...]
    backend: BackendMap | None
    measure: str
    measure_unit: str | None
    predict: str
    options: Options = field(repr=False, default_factory=Options)

    @property
    def gpu(self) -> GpuSpec:
        """The base scenario's GPU (after ``--set``): where calibration starts."""
        return load_gpu(self.base_raw.get("gpu", "ideal"), self.base_dir)

    def overrides(self, index: int, gpu: Mapping[str, str] | None = None,
                  ps_per_iter_byte: float | None = None) -> tuple[Override, ...]:
        """Point ``index`` as overrides of the base: the backend's map, then ``--map``s, then
        trial GPU fields (``{"copy_latency": "700 ns"}``)."""
        row = self.points.iloc[index]
        result: list[Override] = []
        if self.backend is not None:
            backend = self.backend if ps_per_iter_byte is None else replace(self.backend,
                                                                            ps_per_iter_byte=ps_per_iter_byte)
            result += backend.overrides(row)
        result += [(m.field, m.value(row[m.column])) for m in self.maps]
        result += [(f"gpu.{name}", value) for name, value in (gpu or {}).items()]
        return tuple(result)

    def describe_mapping(self) -> list[str]:
        lines = []
        if self.backend is not None:
            lines.append(f"backend map: stream workload, ps_per_iter_byte = {self.backend.ps_per_iter_byte:.6g} ps")
        lines += [f"--map {m.text()}" for m in self.maps]
        return lines


def prepare(path: str | Path, options: Options) -> Study:
    """Read the table, build the base scenario and the mapping, check that some point builds."""
    maps = tuple(parse_map(text) for text in options.maps)
    _check_maps_distinct(maps)
    table = tables.load(path, backend=options.backend, where=options.where)
    for m in maps:
        tables.check_column(table.frame, m.column, table.path, f"--map {m.column}")
    measure, unit = _measure(options.measure, table)
    tables.check_column(table.frame, measure, table.path, f"--measure {measure}")
    note = tables.unusable_note(table.frame, measure)
    if note is not None:
        table = replace(table, notes=(*table.notes, note))
    factor = conversion(measure, unit, options.predict)
    keys = _keys(table, maps)
    points = tables.group_points(table.frame, keys, measure, factor)
    base_raw, base_dir = _base(table, options)
    backend = BackendMap(_gpu_of(base_raw, base_dir, table).sms, options.ps_per_iter_byte) if table.backend else None
    study = Study(table, points, keys, base_raw, base_dir, maps, backend, measure, unit, options.predict, options)
    check_some_point_builds(study)
    return study


def _check_maps_distinct(maps: Sequence[ColumnMap]) -> None:
    """A column maps onto one field, and a field is set from one column: a second --map naming
    either would be silently overruled (or collide in the result table)."""
    for attr, what in (("column", "column"), ("field", "field")):
        seen: dict[str, ColumnMap] = {}
        for m in maps:
            first = seen.setdefault(getattr(m, attr), m)
            if first is not m:
                raise ScenarioError(f"--map {m.text()}", getattr(m, attr), f"is mapped twice (also --map "
                                    f"{first.text()}); give each {what} one --map")


def _measure(text: str | None, table: tables.MeasuredTable) -> tuple[str, str | None]:
    if text is None:
        if table.backend:
            return BACKEND_MEASURE, BACKEND_UNITS[BACKEND_MEASURE]
        raise TmasimError(f"--measure: say which column of {table.path.name} holds the measured value "
                          f"(columns: {', '.join(map(str, table.frame.columns))})")
    column, unit = parse_measure(text)
    if unit is None and table.backend:
        unit = BACKEND_UNITS.get(column)
    return column, unit


def _keys(table: tables.MeasuredTable, maps: Sequence[ColumnMap]) -> tuple[str, ...]:
    """Columns whose values make a point: the kernel's parameters and every mapped column."""
    keys = [k for k in BACKEND_KEYS if k in table.frame.columns] if table.backend else []
    keys += [m.column for m in maps if m.column not in keys]
    if not keys:
        raise TmasimError("--map: nothing maps the table's columns onto the scenario; give at least one "
                          "--map COLUMN=FIELD[:UNIT] (e.g. --map stages=pipeline.stages)")
    return tuple(keys)


def _base(table: tables.MeasuredTable, options: Options) -> tuple[dict[str, Any], Path | None]:
    """The base scenario (``--scenario``, else the backend's, else the reference), with ``--set``."""
    if options.scenario is not None or not table.backend:
        raw, base_dir = scenarios.read_raw(options.scenario)
    else:
        raw, base_dir = backend_base(table), None
    if table.backend:
        raw["workload"] = {}  # every point sets its whole stream workload
    raw = scenarios.apply_overrides(raw, options.overrides)
    scenarios.set_field(raw, "run.records", False)
    return raw, base_dir


def backend_base(table: tables.MeasuredTable) -> dict[str, Any]:
    """A stream scenario on the preset of the device that measured the table (if one fits)."""
    raw: dict[str, Any] = {
        "name": f"backend-{table.path.stem}",
        "description": f"the tmasim.gpu kernels of {table.path.name} as stream workloads",
        "workload": {},
        "run": {"records": False},
    }
    preset = preset_for_device(table.provenance.device)
    if preset is not None:
        raw["gpu"] = preset
    return raw


def _gpu_of(raw: Mapping[str, Any], base_dir: Path | None, table: tables.MeasuredTable) -> GpuSpec:
    if "gpu" not in raw:
        device = table.provenance.device or "an unknown device"
        raise TmasimError(f"{table.path.name} was measured on {device!r}, which matches no GPU preset: "
                          "say which with --set gpu=h200 (a preset name or a preset file)")
    return load_gpu(raw["gpu"], base_dir)


def point_raw(study: Study, overrides: Sequence[Override]) -> dict[str, Any]:
    raw = copy.deepcopy(study.base_raw)
    for name, value in overrides:
        scenarios.set_field(raw, name, value)
    return raw


def check_some_point_builds(study: Study) -> None:
    """Stop on an error every point makes (an unknown field, a missing unit: a typo); a point
    that alone cannot be simulated is a row of the result with its reason."""
    first: TmasimError | None = None
    for index in range(len(study.points)):
        try:
            scenarios.from_dict(point_raw(study, study.overrides(index)), study.base_dir)
            return
        except TmasimError as err:
            first = first or err
    assert first is not None
    raise _with_hint(first, study.maps)


def _with_hint(err: TmasimError, maps: Sequence[ColumnMap]) -> TmasimError:
    """A unit error on a mapped field without a unit: say how to give the map one."""
    if isinstance(err, UnitError):
        for m in maps:
            if m.unit is None and (err.field == m.field or err.field.startswith(f"{m.field}[")):
                return ScenarioError(err.field, err.value, f"{err.rule}; the column {m.column!r} has no unit: "
                                     f"write --map {m.column}={m.field}:UNIT (e.g. :ns)")
    if isinstance(err, ScenarioError):
        return ScenarioError(err.field, err.value, f"{err.rule} (no measured point builds a valid scenario)")
    return TmasimError(f"{err} (no measured point builds a valid scenario)")
