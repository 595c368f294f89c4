"""``tmasim validate cutlass-profiler FILE.csv``: the CUTLASS profiler's own measurements
(``cutlass_profiler --output=FILE``) against the simulator, row by row.

The CSV's columns are ``tools/profiler/src/performance_report.cpp``'s (``print_csv_header_``):
any ``--tags`` columns, then ``Problem,Provider,OperationKind,Operation,Disposition,Status``, the
operation's arguments (for a GEMM ``gemm_kind,m,n,k,A,B,C,D,...,cta_m,cta_n,cta_k,cluster_m,
cluster_n,cluster_k,stages,...``), then ``Bytes,Flops,Flops/Byte,Runtime`` (milliseconds) and
``GB/s,GFLOPs``. Each CUTLASS GEMM row's ``Operation`` is a kernel name, read as ``cutlass:NAME``
(:mod:`tmasim.cutlass_names`), with the row's m, n, k and, where the name says 0 (CUTLASS chose),
the stage count the profiler reports. Rows of other providers (cuBLAS) or that did not run are
left out, with a note.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tmasim.errors import TmasimError
from tmasim.values import format as fmt

REQUIRED = ("Provider", "OperationKind", "Operation", "Status", "m", "n", "k")
RUNTIME_COLUMNS = ("Runtime", "Runtime (ms)")  # performance_report.cpp writes "Runtime", in ms


@dataclass(frozen=True)
class Row:
    """One profiled kernel: where it is in the file, what ran, how long it took."""

    line: int  # the file's line number
    kernel: str
    shape: tuple[int, int, int]
    stages: int  # the profiler's reported count; 0 where the file does not say
    measured_ms: float
    cells: dict[str, str]
    predicted_ms: float | None = None
    split_k: int = 1  # the profiler's split_k_slices (serial split-K); 1 where the file does not say

    @property
    def error(self) -> float:
        assert self.predicted_ms is not None
        return (self.predicted_ms - self.measured_ms) / self.measured_ms


def read(path: str | Path) -> tuple[list[Row], list[str]]:
    """The file's CUTLASS GEMM rows, and a note per kind of row left out."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            lines = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError) as err:
        raise TmasimError(f"validate cutlass-profiler: cannot read {str(path)!r} ({err})") from None
    numbered = [(i, cells) for i, cells in enumerate(lines, start=1)
                if any(c.strip() for c in cells) and not cells[0].lstrip().startswith("#")]  # '#': a comment
    if not numbered:
        raise TmasimError(f"validate cutlass-profiler: {str(path)!r} is empty (expected the profiler's CSV header)")
    header_line, header = numbered[0][0], [h.strip() for h in numbered[0][1]]
    _check_header(header_line, header)
    rows: list[Any] = []
    skipped: dict[str, int] = {}
    for number, cells in numbered[1:]:
        row, why = _row(number, header, cells)
        if row is None:
            skipped[why] = skipped.get(why, 0) + 1
        else:
            rows.append(row)
    if not rows:
        raise TmasimError(f"validate cutlass-profiler: no CUTLASS GEMM row that ran in {str(path)!r}")
    return rows, [f"left out {fmt.plural(count, 'row')}: {why}" for why, count in skipped.items()]


def _check_header(line: int, header: list[str]) -> None:
    missing = [c for c in REQUIRED if c not in header]
    if not any(c in header for c in RUNTIME_COLUMNS):
        missing.append("Runtime")
    if missing:
        raise TmasimError(f"validate cutlass-profiler: line {line}: the header lacks {', '.join(missing)} (the columns "
                          "of cutlass_profiler --output, tools/profiler/src/performance_report.cpp)")


def _row(number: int, header: list[str], cells: list[str]) -> tuple[Row | None, str]:
    if len(cells) != len(header):
        raise TmasimError(f"validate cutlass-profiler: row at line {number}: {len(cells)} cells, the header has "
                          f"{len(header)}")
    cell = {h: c.strip() for h, c in zip(header, cells, strict=True)}
    if cell["Provider"].lower() != "cutlass":
        return None, f"provider {cell['Provider']} (only CUTLASS rows name a kernel)"
    if cell["OperationKind"] != "gemm":
        return None, f"operation kind {cell['OperationKind']} (GEMMs only)"
    if cell["Status"].lower() != "success":
        return None, f"status {cell['Status']} (no runtime)"
    runtime = cell.get("Runtime", cell.get("Runtime (ms)", ""))
    shape = tuple(_number(number, d, cell[d], int) for d in ("m", "n", "k"))
    measured = _number(number, "Runtime", runtime, float)
    stages = _number(number, "stages", cell["stages"], int) if cell.get("stages") else 0
    split_k = _number(number, "split_k_slices", cell["split_k_slices"], int) if cell.get("split_k_slices") else 1
    if split_k > 1 and cell.get("split_k_mode", "serial").lower() == "parallel":
        return None, "parallel split-K (a separate reduction kernel, which tmasim does not model)"
    if measured <= 0 or min(shape) <= 0 or stages < 0 or split_k < 1:
        raise TmasimError(f"validate cutlass-profiler: row at line {number}: m, n, k and Runtime must be positive "
                          f"(m={cell['m']}, n={cell['n']}, k={cell['k']}, Runtime={runtime}), split_k_slices at "
                          f"least 1")
    return Row(number, cell["Operation"], (shape[0], shape[1], shape[2]), stages, measured, cell, split_k=split_k), ""


def _number(line: int, column: str, text: str, kind: Callable[[str], Any]) -> Any:
    try:
        value = kind(text)
    except ValueError:
        value = math.nan
    if isinstance(value, float) and not math.isfinite(value):
        raise TmasimError(f"validate cutlass-profiler: row at line {line}: {column} {text!r} is not a number")
    return value


def overrides(row: Row, gpu: str | None, sets: Sequence[str]) -> list[str]:
    """The row's scenario: its kernel's, at its shape, on ``gpu``, with ``--set`` last."""
    m, n, k = row.shape
    fields = [f"workload.m={m}", f"workload.n={n}", f"workload.k={k}"]
    if row.stages > 0:
        fields.append(f"pipeline.stages={row.stages}")  # what CUTLASS chose where the name says 0
    if row.split_k > 1:
        fields.append(f"workload.split_k={row.split_k}")  # serial split-K: the profiler's split_k_slices
    return fields + ([f"gpu={gpu}"] if gpu else []) + list(sets)


def simulate_row(row: Row, gpu: str | None, sets: Sequence[str]) -> Row:
    from tmasim.inputs.scenario import load
    from tmasim.simulation import simulate

    try:
        scenario = load(f"cutlass:{row.kernel}", overrides(row, gpu, sets))
        result = simulate(scenario)
    except TmasimError as err:
        raise TmasimError(f"validate cutlass-profiler: row at line {row.line}: {err}") from None
    return replace(row, predicted_ms=float(result.stats["makespan_ns"]) / 1e6)


def picks(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per problem (m, n, k): the profiler's fastest kernel, the simulator's, and whether they agree."""
    problems: dict[tuple[int, int, int], list[Row]] = {}
    for row in rows:
        problems.setdefault(row.shape, []).append(row)
    out = []
    for shape, group in problems.items():
        measured = min(group, key=lambda r: r.measured_ms)
        predicted = min(group, key=lambda r: r.predicted_ms or math.inf)
        out.append({"shape": shape, "kernels": len(group), "measured_best": measured, "predicted_best": predicted,
                    "right": predicted.measured_ms <= measured.measured_ms,
                    "slowdown": predicted.measured_ms / measured.measured_ms - 1})
    return out


def text(rows: Sequence[Row], notes: Sequence[str]) -> str:
    lines = [f"{'line':>4}  {'m x n x k':<17} {'measured':>10} {'predicted':>10} {'error':>7}  kernel"]
    for r in rows:
        lines.append(f"{r.line:>4}  {'x'.join(map(str, r.shape)):<17} {r.measured_ms * 1e3:>7.1f} µs "
                     f"{(r.predicted_ms or 0) * 1e3:>7.1f} µs {r.error:>+7.1%}  {r.kernel}")
    mean = sum(abs(r.error) for r in rows) / len(rows)
    lines += [f"mean error {mean:.1%} over {fmt.plural(len(rows), 'row')} (mean of |predicted - measured| / measured)"]
    for p in picks(rows):
        shape = "x".join(map(str, p["shape"]))
        verdict = ("right" if p["right"] else
                   f"wrong: its pick ran {p['slowdown']:.1%} slower, line {p['predicted_best'].line}")
        lines.append(f"problem {shape}: the profiler's fastest of {p['kernels']} is line "
                     f"{p['measured_best'].line}; the simulator's pick is {verdict}")
    return "\n".join(lines + list(notes))


def write(rows: Sequence[Row], path: Path) -> Path:
    """The profiler's columns joined with predicted_ms and error, written whole or not at all."""
    from tmasim.output.paths import replacing

    columns = [*rows[0].cells, "predicted_ms", "error"]
    with replacing(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for r in rows:
            writer.writerow([*r.cells.values(), f"{r.predicted_ms:.6g}", f"{r.error:.6g}"])
    return path
