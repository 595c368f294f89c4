"""What a sweep is: a base scenario, the varied fields (axes), and the points they span.

Everything here is checked before any point runs, so that a typo costs a one-line error, not a
half-written result file: the ``--vary`` syntax, empty value lists, ``--zip`` lengths, and
whether the varied fields exist at all (see :func:`check_some_point_builds`).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmasim.errors import ScenarioError, TmasimError
from tmasim.inputs import scenario as scenarios
from tmasim.values import fields as read

VARY_EXAMPLE = "FIELD=V1,V2,... (e.g. pipeline.stages=1,2,4)"
IN_MEMORY = "(in memory)"
_CLOSERS = {"[": "]", "{": "}"}


@dataclass(frozen=True)
class Axis:
    """One varied field and its values, already parsed as ``--set`` would parse them."""

    field: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Point:
    """One scenario of the sweep: its id (grid order, from 0) and the value of each varied field."""

    id: int
    values: tuple[tuple[str, Any], ...]


# How a sweep pairs its axes: False, a grid; True, every axis paired (``--zip``); field names,
# those axes paired and the pairs crossed with the rest (``--zip A,B``).
Zip = bool | tuple[str, ...]


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep: the base scenario as raw TOML data, its axes and every point, in order."""

    source: str
    base_raw: dict[str, Any]
    base_dir: Path | None
    axes: tuple[Axis, ...]
    zipped: Zip
    points: tuple[Point, ...]

    @property
    def name(self) -> str:
        return scenario_name(self.source, self.base_raw)

    def fingerprint(self) -> dict[str, Any]:
        """What makes two sweeps the same sweep (a result file can only resume its own)."""
        return {"scenario": self.base_raw, "vary": [[a.field, list(a.values)] for a in self.axes],
                "zip": zip_json(self.zipped)}


def zip_json(zipped: Zip) -> bool | list[str]:
    """How a result file's metadata writes ``zipped``: True/False as before, or the paired fields."""
    return zipped if isinstance(zipped, bool) else list(zipped)


MAX_GRID = 10_000_000  # points a sweep can hold at all (its plan, its table), --yes or not
EARLY = 100_000  # past this many points, a grid over max_points is refused before it is built (no estimate)


def plan_sweep(base: str | Path | Mapping[str, Any] | None, overrides: Iterable[str],
               vary: Sequence[str] | Mapping[str, Iterable[Any]], zipped: bool | Sequence[str] = False, *,
               max_points: int | None = None) -> SweepPlan:
    """Read the base, parse the axes, expand the points and check that the sweep can run. The
    point count is checked from the axes' lengths before the grid is built: over ``max_points``
    (when given, for a grid of over :data:`EARLY` points: a smaller one is built and refused with
    its time estimate) or :data:`MAX_GRID`, it is refused without a point made. ``zipped``: False
    (a grid), True (every axis paired) or the fields to pair, crossed with the others."""
    axes = parse_axes(vary, zipped)
    zipped = zip_fields(zipped, axes)
    check_point_count(axes, zipped, max_points)
    points = expand(axes, zipped)
    source, raw, base_dir = read_base(base)
    raw = scenarios.apply_overrides(raw, overrides)
    records_off(raw)
    plan = SweepPlan(source, raw, base_dir, axes, zipped, points)
    check_some_point_builds(plan)
    return plan


def read_base(base: str | Path | Mapping[str, Any] | None) -> tuple[str, dict[str, Any], Path | None]:
    """The base scenario's raw data, where it came from, and the folder its paths are relative to."""
    if isinstance(base, Mapping):
        return IN_MEMORY, copy.deepcopy(dict(base)), None
    raw, base_dir = scenarios.read_raw(base)
    return str(base if base is not None else scenarios.REFERENCE), raw, base_dir


def scenario_name(source: str, raw: Mapping[str, Any]) -> str:
    """The scenario's ``name``; else its file's stem, as a file name says what it holds."""
    name = raw.get("name")
    if isinstance(name, str) and name:
        return name
    return "unnamed" if source == IN_MEMORY else Path(source).stem


def zip_fields(zipped: bool | Sequence[str], axes: Sequence[Axis]) -> Zip:
    """``zipped`` checked against the axes: True, False, or the paired fields in the axes' order.
    Naming every varied field is ``--zip`` alone (True); a field that does not vary, or fewer
    than two, is refused."""
    if isinstance(zipped, bool):
        return zipped
    fields = [axis.field for axis in axes]
    names = list(dict.fromkeys(zipped))
    for name in names:
        if name not in fields:
            raise ScenarioError("--zip", name, f"is not a --vary field (this sweep varies {', '.join(fields)})")
    if len(names) < 2:
        raise ScenarioError("--zip", ",".join(names),
                            "names one field; pair two or more (or --zip alone: every --vary)")
    return True if len(names) == len(fields) else tuple(f for f in fields if f in names)


def _paired(axes: Sequence[Axis], zipped: Zip) -> list[Axis]:
    """The axes ``zipped`` pairs (all for True, none for False)."""
    return [a for a in axes if zipped is True or (not isinstance(zipped, bool) and a.field in zipped)]


def parse_axes(vary: Sequence[str] | Mapping[str, Iterable[Any]],
               zipped: bool | Sequence[str] = False) -> tuple[Axis, ...]:
    """``["FIELD=V1,V2", ...]`` (command line) or ``{FIELD: [V1, V2]}`` (Python) as axes. A value
    given twice in one axis is refused (it would run one point twice); zipped, the same holds
    for the points (an axis may repeat a value that another axis's values tell apart)."""
    if isinstance(vary, Mapping):
        axes = tuple(_axis_from_values(name, values) for name, values in vary.items())
    elif isinstance(vary, str):
        raise TypeError("vary must be a list of 'FIELD=V1,V2' strings or a mapping, not one string")
    else:
        axes = tuple(parse_vary(item) for item in vary)
    if not axes:
        raise TmasimError(f"sweep: nothing varies; give at least one --vary {VARY_EXAMPLE}")
    seen: set[str] = set()
    for axis in axes:
        if axis.field in seen:
            raise ScenarioError(f"--vary {axis.field}", "", "is given twice; list all its values in one --vary")
        seen.add(axis.field)
    paired = _paired(axes, zip_fields(zipped, axes))
    if paired and len({len(a.values) for a in paired}) == 1:
        _refuse_duplicates("+".join(a.field for a in paired), list(zip(*(a.values for a in paired), strict=True)))
    for axis in axes:
        if all(axis.field != a.field for a in paired):
            _refuse_duplicates(axis.field, axis.values)
    return axes


def parse_vary(item: str) -> Axis:
    """``FIELD=V1,V2,...``: values split on top-level commas, each read like a ``--set`` value."""
    if not isinstance(item, str):
        raise ScenarioError("--vary", item, f"must be a string like {VARY_EXAMPLE}")
    name, sep, text = item.partition("=")
    name = name.strip()
    if not sep or not _is_dotted_name(name):
        raise ScenarioError("--vary", item, f"must look like {VARY_EXAMPLE}")
    pieces = split_values(text, f"--vary {name}")
    return _axis_from_values(name, [scenarios.parse_value(piece) for piece in pieces])


def _axis_from_values(name: str, values: Iterable[Any]) -> Axis:
    if not isinstance(name, str) or not _is_dotted_name(name):
        raise ScenarioError("--vary", name, "is not a field name like pipeline.stages")
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise ScenarioError(f"--vary {name}", values, "must be a list of values")
    plain = tuple(v.item() if hasattr(v, "item") else v for v in values)  # numpy numbers as Python ones
    if not plain:
        raise ScenarioError(f"--vary {name}", "", f"has no values; give at least one: {VARY_EXAMPLE}")
    return Axis(name, plain)


def _refuse_duplicates(name: str, values: Sequence[Any]) -> None:
    """A value given twice (``1,1,2``; ``3 us,3000 ns``) would run one point twice and count it as two."""
    seen: dict[Any, int] = {}
    for position, value in enumerate(values, start=1):
        key = _same_value_key(value)
        if key in seen:
            first = values[seen[key] - 1]
            also = "" if first == value else f" (the same as {first!r})"
            raise ScenarioError(f"--vary {name}", value, f"is given twice, at positions {seen[key]} and "
                                f"{position}{also}; give each value once")
        seen[key] = position


def _same_value_key(value: Any) -> Any:
    """Values that make the same scenario compare equal: 3 and 3.0, '3 us' and '3000 ns'."""
    import json

    from tmasim.values import units

    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, str) and units.QUANTITY.fullmatch(value):
        for kind in ("time", "size", "bandwidth", "frequency", "flops", "flop_rate", "cycles"):
            try:
                amount = units.parse(value, kind, "--vary")
            except TmasimError:
                continue
            return ("quantity", kind, float(f"{amount:.12g}"))
    return ("other", json.dumps(value, sort_keys=True, default=str))


def _is_dotted_name(name: str) -> bool:
    return all(part and not any(c.isspace() for c in part) for part in name.split("."))


def split_values(text: str, where: str = "--vary") -> list[str]:
    """Split on commas outside brackets, braces and quotes; refuse empty and unbalanced values.

    ``'["3 us","4 us"],["5 us","6 us"]'`` is two values and ``'10 ns,20 ns'`` is two, so a
    list, a table or a quoted string can be one value of a sweep.
    """
    pieces, current, openers, quote = [], [], [], ""
    chars = iter(text)
    for char in chars:
        current.append(char)
        if quote:
            if char == "\\" and quote == '"':  # an escaped character, a quote included
                current.append(next(chars, ""))
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in _CLOSERS:
            openers.append(char)
        elif char in _CLOSERS.values():
            if not openers or _CLOSERS[openers.pop()] != char:
                raise ScenarioError(where, text, f"has an unmatched {char!r}")
        elif char == "," and not openers:
            pieces.append("".join(current[:-1]))
            current = []
    if quote or openers:
        raise ScenarioError(where, text, f"has an unclosed {quote or openers[-1]!r}")
    pieces.append("".join(current))
    return _non_empty(pieces, text, where)


def _non_empty(pieces: list[str], text: str, where: str) -> list[str]:
    pieces = [piece.strip() for piece in pieces]
    if pieces == [""]:
        raise ScenarioError(where, text, f"has no values; give at least one: {VARY_EXAMPLE}")
    for position, piece in enumerate(pieces, start=1):
        if not piece:
            raise ScenarioError(where, text, f"has an empty value at position {position}")
    return pieces


def point_count(axes: Sequence[Axis], zipped: Zip) -> int:
    """The number of points ``expand`` would make, from the axes' lengths alone."""
    paired = {a.field for a in _paired(axes, zipped)}
    pairs = [min(len(a.values) for a in axes if a.field in paired)] if paired else []
    return math.prod([*pairs, *(len(a.values) for a in axes if a.field not in paired)])


def check_point_count(axes: Sequence[Axis], zipped: Zip, max_points: int | None) -> None:
    from tmasim.errors import ResourceError

    count = point_count(axes, zipped)
    shown = " x ".join(f"{len(a.values):,}" for a in axes)
    if count > MAX_GRID:
        raise ResourceError(f"sweep: {count:,} points ({shown} values) is past the {MAX_GRID:,} a sweep can hold, "
                            "--yes or not; split it into several sweeps")
    if max_points is not None and count > max(max_points, EARLY):
        raise ResourceError(f"sweep: {count:,} points to run ({shown} values), over {max_points:,}; add --yes to "
                            "run them")


def expand(axes: Sequence[Axis], zipped: Zip) -> tuple[Point, ...]:
    """Grid order: the first axis changes slowest (as nested loops). ``zipped`` pairs the i-th
    values of its axes (every axis for True), which then act as one axis, where the first of them
    stands, crossed with the others."""
    names = [axis.field for axis in axes]
    paired = _paired(axes, zipped)
    lengths = {axis.field: len(axis.values) for axis in paired}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        every = "every --vary" if zipped is True else "every field it pairs"
        raise TmasimError(f"--zip: {every} needs the same number of values ({shown})")
    if isinstance(zipped, bool):  # a grid, or every axis paired: the combos as they come
        combos: Iterable[tuple[Any, ...]] = (zip(*(axis.values for axis in axes), strict=True) if zipped
                                             else itertools.product(*(axis.values for axis in axes)))
        return tuple(Point(i, tuple(zip(names, combo, strict=True))) for i, combo in enumerate(combos))
    together = {a.field for a in paired}
    loops: list[list[tuple[tuple[str, Any], ...]]] = []
    for axis in axes:
        if axis.field not in together:
            loops.append([((axis.field, v),) for v in axis.values])
        elif axis.field == paired[0].field:
            loops.append([tuple(zip([a.field for a in paired], combo, strict=True))
                          for combo in zip(*(a.values for a in paired), strict=True)])
    points = []
    for i, combo in enumerate(itertools.product(*loops)):
        values = dict(pair for group in combo for pair in group)
        points.append(Point(i, tuple((name, values[name]) for name in names)))
    return tuple(points)


def point_raw(base_raw: Mapping[str, Any], point: Point) -> dict[str, Any]:
    """The base with this point's values set (and records kept off, whatever the point says)."""
    raw = copy.deepcopy(dict(base_raw))
    for name, value in point.values:
        scenarios.set_field(raw, name, value)
    records_off(raw)
    return raw


def records_off(raw: dict[str, Any]) -> None:
    """A sweep never keeps per-event records (one summary row per point is the whole output); a
    ``run.records`` given anyway is checked as ``tmasim run`` checks it (true or false), then off."""
    run = raw.get("run")
    if isinstance(run, Mapping) and "records" in run:
        read.boolean("run.records", run["records"])
    scenarios.set_field(raw, "run.records", False)


def check_some_point_builds(plan: SweepPlan) -> None:
    """Refuse a sweep in which no point is a valid scenario; otherwise bad points are results.

    Every point sets every varied field, so an unknown field or a field whose every value is of
    the wrong kind fails at every point: that is a typo and stops the sweep here. A sweep whose
    range merely starts in the invalid region (``pipeline.stages=0,1,2``) finds a point that
    builds and goes on; the failing points are recorded as ``invalid`` with their message.
    Points are tried in order and the search stops at the first that builds, usually point 0.
    """
    first: TmasimError | None = None
    for point in plan.points:
        try:
            scenarios.from_dict(point_raw(plan.base_raw, point), plan.base_dir)
            return
        except TmasimError as err:
            first = first or err
    if isinstance(first, ScenarioError):
        raise ScenarioError(first.field, first.value, f"{first.rule}; no point of the sweep is a valid scenario")
    raise TmasimError(f"{first}; no point of the sweep is a valid scenario")
