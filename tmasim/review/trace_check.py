"""Checks a Chrome trace against the trace event format's rules and what Perfetto's JSON
importer would drop or misdraw: one line per problem, none for a sound trace. Used by the
tests and available to anyone who writes traces by other means.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tmasim.review.trace_format import Event, ns_rounded, ns_truncated

_KNOWN_PHASES = frozenset("BEXiICMsftbenPOND")
_METADATA_NAMES = frozenset({"process_name", "thread_name", "process_sort_index", "thread_sort_index",
                             "process_labels"})


def validate(trace: Mapping[str, Any]) -> list[str]:
    """What in ``trace`` breaks the trace event format's rules, or would be dropped or misdrawn
    by Perfetto's importer: one line per problem, none for a sound trace."""
    problems = _check_top(trace)
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        return problems
    checks: list[Callable[[list[Event]], list[str]]] = [
        _check_fields, _check_names, _check_begin_end, _check_flows_v1, _check_flows_v2, _check_nesting]
    for check in checks:
        problems += check(events)
    return problems


def _check_top(trace: Mapping[str, Any]) -> list[str]:
    problems = []
    if not isinstance(trace.get("traceEvents"), list):
        problems.append("traceEvents is missing or not a list")
    unit = trace.get("displayTimeUnit", "ms")
    if unit not in ("ms", "ns"):
        problems.append(f"displayTimeUnit {unit!r} is neither 'ms' nor 'ns'")
    try:
        json.dumps(trace, allow_nan=False)
    except (TypeError, ValueError) as err:
        problems.append(f"not plain JSON: {err}")
    return problems


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_fields(events: list[Event]) -> list[str]:
    """Per event: a known phase, ids, a time, and what its phase requires."""
    problems = []
    for n, e in enumerate(events):
        ph = e.get("ph")
        where = f"event {n} ({ph} {e.get('name')!r})"
        if ph not in _KNOWN_PHASES:
            problems.append(f"{where}: unknown phase")
            continue
        for field in ("pid", "tid"):
            if not isinstance(e.get(field), int) or e[field] <= 0:
                problems.append(f"{where}: {field} must be a positive integer (Perfetto reserves 0)")
        if ph != "M" and not (_is_number(e.get("ts")) and e["ts"] >= 0):
            problems.append(f"{where}: ts must be a non-negative number of µs")
        problems += [f"{where}: {p}" for p in _phase_rules(ph, e)]
    return problems


def _phase_rules(ph: str, e: Event) -> list[str]:
    if ph == "X" and not (_is_number(e.get("dur")) and e["dur"] >= 0):
        return ["a complete event needs a non-negative dur"]
    if ph in "iI" and e.get("s") not in ("t", "p", "g"):
        return ["an instant event needs a scope s of 't', 'p' or 'g'"]
    if ph == "C":
        args = e.get("args")
        if not isinstance(args, dict) or not args or not all(_is_number(v) for v in args.values()):
            return ["a counter needs args with numeric values"]
    if ph == "M":
        if e.get("name") not in _METADATA_NAMES:
            return [f"unknown metadata name {e.get('name')!r}"]
        if e["name"].endswith("_name") and not isinstance((e.get("args") or {}).get("name"), str):
            return ["a name metadata event needs args.name"]
    return []


def _check_names(events: list[Event]) -> list[str]:
    """Every pid and (pid, tid) used is named, and a tid belongs to one process only."""
    named_pids = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    named_tids = {(e.get("pid"), e.get("tid")) for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    used = {(e.get("pid"), e.get("tid")) for e in events if e.get("ph") != "M"}
    problems = [f"pid {pid} has no process_name" for pid in sorted({p for p, _ in used} - named_pids, key=str)]
    problems += [f"pid {pid} tid {tid} has no thread_name" for pid, tid in sorted(used - named_tids, key=str)]
    owners: dict[Any, set[Any]] = defaultdict(set)
    for pid, tid in used | named_tids:
        owners[tid].add(pid)
    problems += [f"tid {tid} is used in several processes {sorted(p, key=str)} (Perfetto names threads by tid)"
                 for tid, p in owners.items() if len(p) > 1]
    return problems


def _timed(events: list[Event], phases: tuple[str, ...]) -> list[Event]:
    """Events of these phases that have a usable ts, in time order (the rest are reported by
    :func:`_check_fields`)."""
    return sorted((e for e in events if e.get("ph") in phases and _is_number(e.get("ts"))), key=lambda e: e["ts"])


def _check_begin_end(events: list[Event]) -> list[str]:
    """Every B has an E on the same thread, in time order, properly nested."""
    problems = []
    open_: dict[tuple[Any, Any], list[Event]] = defaultdict(list)
    for e in _timed(events, ("B", "E")):
        stack = open_[(e.get("pid"), e.get("tid"))]
        if e["ph"] == "B":
            stack.append(e)
        elif not stack:
            problems.append(f"E {e.get('name')!r} at {e['ts']} µs has no B")
        else:
            begin = stack.pop()
            if e.get("name") not in (None, begin.get("name")):
                problems.append(f"E {e.get('name')!r} closes B {begin.get('name')!r}")
    problems += [f"B {b.get('name')!r} at {b['ts']} µs has no E" for stack in open_.values() for b in stack]
    return problems


def _check_flows_v1(events: list[Event]) -> list[str]:
    """Each s has an f with the same cat and id, not before it."""
    starts: dict[tuple[Any, Any], Event] = {}
    problems = []
    for e in _timed(events, ("s", "t", "f")):
        key = (e.get("cat"), e.get("id"))
        if e["ph"] == "s":
            if key in starts:
                problems.append(f"flow {key} starts twice")
            starts[key] = e
        elif key not in starts:
            problems.append(f"flow {key}: {e['ph']} without a start")
        elif e["ph"] == "f":
            del starts[key]
    problems += [f"flow {key} starts at {e['ts']} µs and never finishes" for key, e in starts.items()]
    return problems


def _check_flows_v2(events: list[Event]) -> list[str]:
    """Each bind_id has one source slice and at least one destination, which does not start
    before the source does (Perfetto reads in time order and drops an unmatched destination)."""
    sources: dict[Any, list[Event]] = defaultdict(list)
    sinks: dict[Any, list[Event]] = defaultdict(list)
    problems = []
    for e in events:
        if "bind_id" not in e or not _is_number(e.get("ts")):
            continue
        if e.get("ph") not in ("X", "B"):
            problems.append(f"bind_id {e['bind_id']} on a {e.get('ph')} event (only slices bind flows)")
        if e.get("flow_out"):
            sources[e["bind_id"]].append(e)
        if e.get("flow_in"):
            sinks[e["bind_id"]].append(e)
        if not (e.get("flow_out") or e.get("flow_in")):
            problems.append(f"bind_id {e['bind_id']} without flow_in or flow_out")
    for bind_id in sources.keys() | sinks.keys():
        out, into = sources.get(bind_id, []), sinks.get(bind_id, [])
        if len(out) != 1:
            problems.append(f"flow {bind_id} has {len(out)} sources")
        if not into:
            problems.append(f"flow {bind_id} has no destination")
        if len(out) == 1:
            problems += [f"flow {bind_id}: destination at {d['ts']} µs starts before its source at {out[0]['ts']} µs"
                         for d in into if d["ts"] < out[0]["ts"]]
    return problems


def _check_nesting(events: list[Event]) -> list[str]:
    """Complete events of one thread nest or are disjoint, in µs and as Perfetto reads them in
    ns (each of ts and dur rounded, or truncated by older releases): a partial overlap is dropped."""
    by_thread: dict[tuple[Any, Any], list[Event]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and _is_number(e.get("ts")) and _is_number(e.get("dur")):
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    problems = []
    for (pid, tid), items in by_thread.items():
        ts = np.array([e["ts"] for e in items])
        dur = np.array([e["dur"] for e in items])
        models = {"µs": (ts, ts + dur)}
        for label, to_ns in (("ns, rounded", ns_rounded), ("ns, truncated", ns_truncated)):
            start = to_ns(ts)
            models[label] = (start, start + to_ns(dur))
        for label, (start, end) in models.items():
            bad = _first_partial_overlap(start.tolist(), end.tolist())
            if bad is not None:
                a, b = items[bad[0]], items[bad[1]]
                problems.append(f"pid {pid} tid {tid}: {a.get('name')!r} and {b.get('name')!r} overlap "
                                f"without nesting ({label})")
    return problems


def _first_partial_overlap(start: list[float], end: list[float]) -> tuple[int, int] | None:
    """The first pair of intervals that overlap without one containing the other, if any."""
    order = sorted(range(len(start)), key=lambda i: (start[i], -end[i]))
    stack: list[int] = []
    for i in order:
        while stack and end[stack[-1]] <= start[i]:
            stack.pop()
        if stack and end[i] > end[stack[-1]]:
            return stack[-1], i
        stack.append(i)
    return None
