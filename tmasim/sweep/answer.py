"""The answer a sweep was run for: the best point, the *knee*, what binds there (its ``binding``), and what the
next step costs.

The knee is :data:`tmasim.names.TERMS` ``["knee"]``: the cheapest point within
:data:`~tmasim.names.KNEE_TOLERANCE` (1%) of the best time, fewest stages first, then least
shared memory per CTA (then the faster). Cheaper matters because stages and shared memory are
what a kernel pays with: residency (CTAs per SM), room for other buffers, register pressure.
The next step is the cheapest point beyond the knee (one more stage, or the next bigger tile)
whose gain over the knee exceeds the knee's tolerance: what it would buy and what it would cost.
A step that gains less is noise against the rule that chose the knee, so it is never proposed:
the answer says the best is reached within the tolerance at the knee instead. (Since the knee is
itself within the tolerance of the best, no point of the same problem can gain more than that
over it; the rule is what keeps the answer from chasing fractions of a percent.) Only points that
ran and are valid count; a run whose barriers were broken (races: reads before data landed) has
no time to compare, and a point a search pruned (``--search``, :mod:`tmasim.sweep.search`) has
only a lower bound, above the best × (1 + tolerance).

Like is compared with like (:mod:`tmasim.field_roles`): fields that change the work (the
*problem*: ``workload.m/n/k``, ``workload.tiles``...) split the sweep into problems, each with
its own best, knee and next step; the next step moves only along *design* fields (what a kernel
pays with); points that differ only in *noise* (``run.seed``...) are replicates, averaged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tmasim import names
from tmasim.inputs import field_roles
from tmasim.output.trust import trust_for_row
from tmasim.values import format as fmt

if TYPE_CHECKING:
    import pandas as pd

KNEE_TOLERANCE = names.KNEE_TOLERANCE
TABLE_ROWS = 12


@dataclass(frozen=True)
class Answer:
    """The answer for one problem: its best point, knee and next step along ``fields`` (the
    varied design fields)."""

    best: dict[str, Any]
    knee: dict[str, Any]
    next_step: dict[str, Any] | None
    fields: tuple[str, ...]
    spread: float  # (slowest - fastest) / fastest over the valid points
    valid: int
    problem: tuple[tuple[str, Any], ...] = ()  # the problem fields' values, where the sweep varies them
    noise: tuple[str, ...] = ()  # the varied noise fields each point's time is averaged over


def valid_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The points that ran to a time that means something."""
    rows = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    if "valid" in rows.columns:
        rows = rows[rows["valid"].fillna(False).astype(bool)]
    elif "races" in rows.columns:
        rows = rows[rows["races"].fillna(0) == 0]
    if "makespan_ns" not in rows.columns:  # no point ran (all invalid or error): no time column at all
        return rows.iloc[0:0]
    return rows[rows["makespan_ns"].notna()]


def _cost(row: dict[str, Any]) -> tuple[float, float, float]:
    smem = row.get("smem_per_cta_bytes")
    return (float(row.get("stages") or 0), float(smem) if smem is not None and not fmt.missing(smem) else 0.0,
            float(row["makespan_ns"]))


def roles(frame: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """The sweep's varied fields (tmasim.review.columns.varied_fields) by role: problem, design, noise."""
    kinds = frame["workload"].dropna().unique().tolist() if "workload" in frame.columns else []
    kind = str(kinds[0]) if len(kinds) == 1 else None
    fields = varied_fields(frame)
    try:
        return field_roles.split(fields, kind)
    except KeyError:  # a column that is no scenario field (a hand-made table): treat it as design
        return {**field_roles.split([], kind), field_roles.DESIGN: tuple(fields)}


def find_all(frame: pd.DataFrame) -> list[Answer]:
    """One answer per problem (in the table's order); none when no point has a valid time."""
    rows = valid_rows(frame)
    if rows.empty:
        return []
    by_role = roles(frame)
    problem, design, noise = (by_role[r] for r in field_roles.ROLES)
    records = rows.to_dict("records")
    if noise:
        records = _averaged(records, problem + design)
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(_value(record[f]) for f in problem), []).append(record)
    floors = _pruned_floors(frame, problem)
    return [_answer(group, design, tuple((f, group[0][f]) for f in problem), noise, floors.get(key, 0.0))
            for key, group in groups.items()]


def _pruned_floors(frame: pd.DataFrame, problem: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    """Per problem, the largest bound of a point a search pruned (tmasim.sweep.search): a time it
    is known to reach, so that the spread says what the full sweep's would."""
    if "status" not in frame.columns or "bound_ns" not in frame.columns:
        return {}
    floors: dict[tuple[str, ...], float] = {}
    for record in frame[frame["status"] == "pruned"].to_dict("records"):
        key = tuple(_value(record[f]) for f in problem)
        floors[key] = max(floors.get(key, 0.0), float(record["bound_ns"]))
    return floors


def find(frame: pd.DataFrame) -> Answer | None:
    """The answer for the sweep's first problem (its only one, unless it varies the problem:
    :func:`find_all`); None when no point has a valid time."""
    answers = find_all(frame)
    return answers[0] if answers else None


def _averaged(records: list[dict[str, Any]], keep: tuple[str, ...]) -> list[dict[str, Any]]:
    """Points that differ only in noise fields, as one point each: the mean time, with its range."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(_value(record[f]) for f in keep), []).append(record)
    merged = []
    for group in groups.values():
        times = [float(r["makespan_ns"]) for r in group]
        merged.append({**group[0], "makespan_ns": sum(times) / len(times), "replicates": len(times),
                       "makespan_min_ns": min(times), "makespan_max_ns": max(times)})
    return merged


def _answer(records: list[dict[str, Any]], design: tuple[str, ...], problem: tuple[tuple[str, Any], ...],
            noise: tuple[str, ...], floor: float = 0.0) -> Answer:
    best = min(records, key=lambda r: float(r["makespan_ns"]))
    limit = float(best["makespan_ns"]) * (1 + KNEE_TOLERANCE)
    by_cost = sorted(records, key=_cost)
    knee = next(r for r in by_cost if float(r["makespan_ns"]) <= limit)
    knee_time = float(knee["makespan_ns"])
    later = [r for r in by_cost[by_cost.index(knee) + 1:] if worth_a_step(knee_time, float(r["makespan_ns"]))]
    fastest, slowest = float(best["makespan_ns"]), max(floor, *(float(r["makespan_ns"]) for r in records))
    return Answer(best, knee, later[0] if later and design else None, design,
                  (slowest - fastest) / fastest if fastest else 0.0, len(records), problem, noise)


def worth_a_step(knee_ns: float, step_ns: float, tolerance: float = KNEE_TOLERANCE) -> bool:
    """Whether a step from the knee's time to ``step_ns`` gains more than the knee's tolerance
    (the share of the knee's time it saves): the rule for offering it as the next step."""
    return knee_ns > 0 and step_ns < knee_ns * (1 - tolerance)


def varied_fields(frame: pd.DataFrame) -> list[str]:
    from tmasim.review.columns import varied_fields as fields

    return fields(frame)


def point_text(row: dict[str, Any], fields: tuple[str, ...]) -> str:
    """``pipeline.stages = 3, workload.tile = [128, 128, 64]``, or the point number."""
    if not fields:
        return f"point {row.get('point', '?')}"
    return ", ".join(f"{f} = {_value(row[f])}" for f in fields)


def _value(value: Any) -> str:
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0:
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return fmt.escaped(str(value))


def _explain(row: dict[str, Any]) -> str:
    from tmasim.workloads import WORKLOADS

    workload = WORKLOADS.get(str(row.get("workload")))
    try:
        return workload.explain(fmt.as_written(row)) if workload is not None else ""
    except (KeyError, TypeError, ValueError):  # a table from an older tmasim without every figure
        return ""


def _resources(row: dict[str, Any]) -> str:
    ctas = _whole(row.get("ctas_per_sm"))
    per_sm = "" if ctas is None else f", {ctas} CTA{'s' if ctas != 1 else ''} per SM"
    return f"{fmt.size(row.get('smem_per_cta_bytes'))} SMEM per CTA{per_sm}"


def lines(answer: Answer) -> list[str]:
    """The answer for one problem in a few sentences."""
    best, knee, fields = answer.best, answer.knee, answer.fields
    if not fields:   # nothing to choose: the problem's time (the mean over the noise)
        return [f"time: {_time_text(best)}", *([f"binding: {_explain(best)}"] if _explain(best) else [])]
    out = [f"best: {point_text(best, fields)}: {_time_text(best)}"]
    if answer.spread < KNEE_TOLERANCE:
        out[0] += f" (all {answer.valid} valid points within {fmt.percent(answer.spread)} of each other)"
    same = knee is best or point_text(knee, fields) == point_text(best, fields)
    slower = float(knee["makespan_ns"]) / float(best["makespan_ns"]) - 1
    out.append(f"{names.term('knee')}: "
               + ("the best point itself" if same else
                  f"{point_text(knee, fields)}: {fmt.time_ns(knee['makespan_ns'])}, {fmt.percent(slower)} slower")
               + f"; {_resources(knee)}")
    why = _explain(knee)
    if why:
        out.append(f"binding there: {why}")
    out.append(_next_step(knee, answer.next_step, fields, same))
    return out


def answer_lines(frame: pd.DataFrame) -> list[str]:
    """The whole answer: what the varied fields are, then the answer per problem."""
    answers = find_all(frame)
    if not answers:
        return ["no answer: no point ran to a valid time"]
    by_role = roles(frame)
    problem, design, noise = (by_role[r] for r in field_roles.ROLES)
    out = []
    if problem:
        out.append(f"{', '.join(problem)} change{'s' if len(problem) == 1 else ''} the work (problem fields): "
                   "times compare only within one problem, so the answer is per problem"
                   + ("" if design else "; no design field varies, so there is nothing to choose"))
    if noise:
        out.append(f"{', '.join(noise)} only change{'s' if len(noise) == 1 else ''} the draw (noise): points that "
                   "differ only there are replicates, and their mean time is compared")
    for found in answers:
        if found.problem:
            out.append(f"{', '.join(f'{f} = {_value(v)}' for f, v in found.problem)}:")
            out += [f"  {line}" for line in lines(found)]
        else:
            out += lines(found)
    trusts = dict.fromkeys(trust_for_row(found.knee) for found in answers)
    out += [f"validated: {line}" for line in trusts if line]
    return out


def _time_text(row: dict[str, Any]) -> str:
    """A point's time; for replicates, their mean and range."""
    text = fmt.time_ns(row["makespan_ns"])
    if int(row.get("replicates") or 1) > 1:
        text += (f" (mean of {row['replicates']} replicates, {fmt.time_ns(row['makespan_min_ns'])} to "
                 f"{fmt.time_ns(row['makespan_max_ns'])})")
    return text


def _next_step(knee: dict[str, Any], step: dict[str, Any] | None, fields: tuple[str, ...],
               knee_is_best: bool = False) -> str:
    if step is None:
        where = "the knee is the best point" if knee_is_best else \
            f"the best is within {KNEE_TOLERANCE:.0%} at the knee"
        return f"next step: none: {where}; no further step is worth its cost"
    gain = 1 - float(step["makespan_ns"]) / float(knee["makespan_ns"])
    change = f"{fmt.percent(gain)} faster"  # more than the tolerance: worth_a_step
    extra = float(step.get("smem_per_cta_bytes") or 0) - float(knee.get("smem_per_cta_bytes") or 0)
    cost = f"{'+' if extra >= 0 else '-'}{fmt.size(abs(extra))} SMEM per CTA"
    before, after = _whole(knee.get("ctas_per_sm")), _whole(step.get("ctas_per_sm"))
    if before is not None and after is not None and before != after:
        cost += f", CTAs per SM {before} {fmt.arrow()} {after}"
    return f"next step: {point_text(step, fields)}: {change}, at {cost}"


def table_lines(frame: pd.DataFrame) -> list[str]:
    """A short table: the varied fields, time, throughput and its share of peak (where the points
    do tensor-core work), what binds and the resources, best first when long."""
    fields = varied_fields(frame)
    rates = _has_rate(frame)
    if len(frame) <= TABLE_ROWS:
        rows = frame
    elif "makespan_ns" in frame.columns:
        rows = frame.sort_values("makespan_ns").head(TABLE_ROWS - 2)
    else:  # no point ran: the first ones, each with its status
        rows = frame.head(TABLE_ROWS - 2)
    header = [*fields, "time", *(("throughput", "of peak") if rates else ()), "binding", "SMEM/CTA", "CTAs/SM",
              "status"]
    body = [[*(_value(r[f]) for f in fields), _time_cell(r), *(_rate_cells(r) if rates else ()), _binds(r),
             fmt.size(r.get("smem_per_cta_bytes")), _count(r.get("ctas_per_sm")), str(r.get("status", "ok"))]
            for r in rows.to_dict("records")]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    text = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    text += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    if len(rows) < len(frame):
        shown = "the fastest shown" if "makespan_ns" in frame.columns else "the first shown"
        text.append(f"({len(frame) - len(rows)} more points in the file; {shown})")
    return text


def rate(row: Mapping[str, Any]) -> float | None:
    """A point's tensor-core throughput as its summary states it: the useful FLOP/s where the
    workload counts useful work apart (attention), else the achieved FLOP/s; None where it did none."""
    for key in ("useful_flops_per_s", "achieved_flops_per_s"):
        value = row.get(key)
        if not fmt.missing(value) and value:
            return float(value)
    return None


def _has_rate(frame: pd.DataFrame) -> bool:
    return any(rate(r) is not None for r in frame.to_dict("records"))


def _rate_cells(row: dict[str, Any]) -> tuple[str, str]:
    """``737.8 TFLOP/s`` and ``75%`` (of the peak of the SMs it uses, as the run's summary says)."""
    value, peak = rate(row), row.get("peak_flops_per_s")
    if value is None or row.get("status", "ok") != "ok":
        return "-", "-"
    return fmt.flop_rate(value), "-" if fmt.missing(peak) or not peak else fmt.percent(value / float(peak))


def _time_cell(row: dict[str, Any]) -> str:
    return fmt.time_ns(row.get("makespan_ns")) if row.get("status", "ok") == "ok" else "-"


def _binds(row: dict[str, Any]) -> str:
    value = row.get("littles_law_binding") if not fmt.missing(row.get("littles_law_binding")) else row.get("binding")
    return "-" if fmt.missing(value) else names.bound(value)


def _whole(value: Any) -> int | None:
    if value is None or fmt.missing(value) or (isinstance(value, float) and math.isinf(value)):
        return None
    return int(value)


def _count(value: Any) -> str:
    whole = _whole(value)
    return "-" if whole is None else str(whole)


def summary(frame: pd.DataFrame) -> str:
    """The short table, then the answer (or why there is none)."""
    return "\n".join(table_lines(frame) + answer_lines(frame))
