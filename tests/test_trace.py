"""Chrome trace export: format rules on real runs, layout, flows, counters, time precision."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.errors import TmasimError
from tmasim.results import Result
from tmasim.review.trace import _dur_us, _us, chrome_trace, validate, write_chrome_trace
from tmasim.review.trace_format import ns_rounded, ns_truncated
from tmasim.scenario import load
from tmasim.simulation import simulate

BUNDLED = ("reference", "latency-hidden", "bug-missing-wait", "jitter")
US = 10**6


@cache
def run(name: str, *overrides: str) -> Result:
    return simulate(load(name, overrides))


def trace_of(result: Result, **kwargs: Any) -> dict[str, Any]:
    return chrome_trace(result.spans, result.events, stats=result.stats, scenario=result.scenario.to_dict(), **kwargs)


def of(trace: dict[str, Any], ph: str, prefix: str = "") -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == ph and e["name"].startswith(prefix)]


def thread_names(trace: dict[str, Any]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in of(trace, "M", "thread_name")}


def process_names(trace: dict[str, Any]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in of(trace, "M", "process_name")}


def thread_of(trace: dict[str, Any], event: dict[str, Any]) -> str:
    return thread_names(trace)[(event["pid"], event["tid"])]


def flows(trace: dict[str, Any]) -> dict[int, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """bind_id -> (source slice, destination slices)."""
    found: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for e in trace["traceEvents"]:
        if e.get("flow_out"):
            found[e["bind_id"]] = (e, found.get(e["bind_id"], (None, []))[1])
    for e in trace["traceEvents"]:
        if e.get("flow_in"):
            found[e["bind_id"]][1].append(e)
    return found


def spans_table(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    columns = ["start_ps", "end_ps", "sm", "cta", "lane", "kind", "tile", "stage", "bytes"]
    return pd.DataFrame(rows, columns=columns)


NO_EVENTS = pd.DataFrame(columns=["time_ps", "sm", "cta", "kind", "name", "tile", "stage", "phase"])


# --- the format's rules, on every bundled scenario ---------------------------------------------

@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_scenarios_make_valid_traces(name: str) -> None:
    trace = trace_of(run(name))
    assert validate(trace) == []
    assert json.loads(json.dumps(trace, allow_nan=False)) == trace
    assert trace["displayTimeUnit"] == "ns"
    assert trace["metadata"]["scenario"]["name"] == name
    assert trace["metadata"]["stats"]["makespan_ps"] == run(name).makespan_ps


@pytest.mark.parametrize("name", BUNDLED)
def test_every_span_is_a_complete_event_and_every_flip_an_instant(name: str) -> None:
    result = run(name)
    trace = trace_of(result)
    assert len(of(trace, "X")) == len(result.spans)
    flips = result.events["kind"].str.startswith("flip_").sum()
    races = (result.events["kind"] == "race").sum()
    assert len(of(trace, "i")) == flips + races
    assert all(e["s"] == "t" for e in of(trace, "i"))


# --- the reference run -----------------------------------------------------------------------

def test_reference_counts() -> None:
    trace = trace_of(run("reference"))
    assert len(of(trace, "X", "compute")) == 4
    assert len(of(trace, "X", "transfer")) == 4
    assert len([e for e in of(trace, "i") if e["name"].endswith("flip")]) == 8
    assert len([e for e in of(trace, "i") if e["name"].startswith("full")]) == 4
    assert len(flows(trace)) == 4 == run("reference").stats["tiles"]


def test_reference_times_are_microseconds() -> None:
    trace = trace_of(run("reference"))
    last = max(of(trace, "X", "compute"), key=lambda e: e["ts"])
    assert last["ts"] + last["dur"] == 23.0
    assert last["args"] == {"tile": 3, "stage": 1, "start_ps": 18 * US, "end_ps": 23 * US}
    transfer = of(trace, "X", "transfer 0")[0]
    assert (transfer["ts"], transfer["dur"], transfer["args"]["bytes"]) == (0.0, 3.0, 16384)


def test_reference_layout_one_process_threads_in_pipeline_order() -> None:
    trace = trace_of(run("reference"))
    assert process_names(trace) == {1: "SM 0"}
    names = [name for _, name in sorted(thread_names(trace).items(), key=lambda kv: kv[0][1])]
    assert names == ["cta0 producer", "cta0 copy engine", "cta0 slot 0", "cta0 slot 1", "cta0 consumer"]
    sort_index = {e["tid"]: e["args"]["sort_index"] for e in of(trace, "M", "thread_sort_index")}
    assert sorted(sort_index, key=sort_index.get) == sorted(sort_index)
    assert {thread_of(trace, e) for e in of(trace, "X", "transfer")} == {"cta0 copy engine"}
    assert {thread_of(trace, e) for e in of(trace, "X", "wait_full")} == {"cta0 consumer"}
    assert {thread_of(trace, e) for e in of(trace, "i")} == {"cta0 slot 0", "cta0 slot 1"}


def test_flows_run_from_a_copy_landing_to_the_compute_it_released() -> None:
    trace = trace_of(run("reference"))
    waits = {e["args"]["tile"]: e for e in of(trace, "X", "wait_full")}
    for source, destinations in flows(trace).values():
        assert source["name"].startswith("transfer") and len(destinations) == 1
        compute = destinations[0]
        assert compute["name"] == f"compute {source['args']['tile']}"
        assert compute["args"]["start_ps"] >= source["args"]["end_ps"]  # the arrow points forward
        wait = waits.get(compute["args"]["tile"])
        if wait is not None:  # the consumer waited: the compute starts as the wait ends
            assert wait["args"]["end_ps"] == compute["args"]["start_ps"] == source["args"]["end_ps"]
    assert set(waits) == {0}


def test_slots_in_use_counter() -> None:
    trace = trace_of(run("reference"))
    samples = [(e["ts"], e["args"]["in use"]) for e in of(trace, "C", "cta0 slots")]
    assert samples == [(0.0, 2), (18.0, 1), (23.0, 0)]
    assert {thread_of(trace, e) for e in of(trace, "C")} == {"cta0 producer"}  # no empty thread for it


def test_slots_in_use_never_exceeds_the_stages() -> None:
    trace = trace_of(run("latency-hidden"))
    values = [e["args"]["in use"] for e in of(trace, "C", "cta0 slots")]
    assert max(values) == 6 and values[-1] == 0


# --- races, overlaps -------------------------------------------------------------------------

def test_races_are_instants_on_the_consumer_and_get_no_flow() -> None:
    result = run("bug-missing-wait")
    trace = trace_of(result)
    races = of(trace, "i", "race")
    assert len(races) == len(result.races) == 2
    assert {thread_of(trace, e) for e in races} == {"cta0 consumer"}
    raced = {e["args"]["tile"] for e in races}
    flowed = {dest["args"]["tile"] for _, dests in flows(trace).values() for dest in dests}
    assert raced == {0, 1} and flowed == {2, 3}


def test_overlapping_spans_of_a_role_spill_to_extra_threads() -> None:
    trace = trace_of(run("reference", "pipeline.consumers=2"))
    assert validate(trace) == []
    assert "cta0 consumer #2" in thread_names(trace).values()
    per_flow = [len(dests) for _, dests in flows(trace).values()]
    assert per_flow == [2, 2, 2, 2]  # one arrow per consumer warpgroup


def test_a_racy_read_overlapping_the_fill_spills_too() -> None:
    trace = trace_of(run("bug-missing-wait"))
    assert "cta0 slot 0 #2" in thread_names(trace).values()


# --- many SMs and CTAs; unknown lanes --------------------------------------------------------

def test_two_sms_two_ctas_make_two_processes_with_distinct_threads() -> None:
    rows = [(0, 3 * US, sm, cta, "tma", "transfer", 0, 0, 1024) for sm in (0, 1) for cta in (0, 1)]
    rows += [(3 * US, 5 * US, sm, cta, "consumer", "compute", 0, 0, 0) for sm in (0, 1) for cta in (0, 1)]
    trace = chrome_trace(spans_table(rows), NO_EVENTS)
    assert validate(trace) == []
    assert process_names(trace) == {1: "SM 0", 2: "SM 1"}
    threads = thread_names(trace)
    assert len({tid for _, tid in threads}) == len(threads) == 8
    for pid in (1, 2):
        names = sorted(name for (p, _), name in threads.items() if p == pid)
        assert names == ["cta0 consumer", "cta0 copy engine", "cta1 consumer", "cta1 copy engine"]
    assert len(flows(trace)) == 4
    for source, (dest,) in flows(trace).values():
        assert (source["pid"], thread_of(trace, source)[:4]) == (dest["pid"], thread_of(trace, dest)[:4])


def test_unknown_lanes_and_event_kinds_get_threads_named_after_them() -> None:
    spans = spans_table([(0, 2 * US, 0, 0, "epilogue", "store", 0, -1, 4096),
                         (1 * US, 2 * US, 0, 0, "link", "busy", -1, -1, 0)])
    events = pd.DataFrame([(US, 0, 0, "retire", "sm0.cta0.store", 0, -1, -1)], columns=NO_EVENTS.columns)
    trace = chrome_trace(spans, events)
    assert validate(trace) == []
    assert sorted(thread_names(trace).values()) == ["cta0 epilogue", "cta0 events", "cta0 link"]
    assert [e["name"] for e in of(trace, "X")] == ["store 0", "busy"]
    assert of(trace, "i")[0]["name"] == "retire"


def test_empty_tables_make_an_empty_but_valid_trace() -> None:
    trace = chrome_trace(spans_table([]), NO_EVENTS)
    assert validate(trace) == [] and trace["traceEvents"] == []


def test_missing_columns_are_named() -> None:
    with pytest.raises(ValueError, match="lacks column"):
        chrome_trace(pd.DataFrame({"start_ps": [0]}), NO_EVENTS)


# --- counters from outside -------------------------------------------------------------------

def test_external_counters_one_track_per_name() -> None:
    counters = pd.DataFrame({"time_ps": [0, US, 2 * US, 0, US, 3 * US],
                             "name": ["nvlink0 GB/s"] * 3 + ["hbm GB/s"] * 3,
                             "value": [0.0, 450.5, float("nan"), 10, 3350.0, 0.0]})
    trace = trace_of(run("reference"), counters=counters)
    assert validate(trace) == []
    link = of(trace, "C", "nvlink0")
    assert [(e["ts"], e["args"]) for e in link] == [(0.0, {"value": 0.0}), (1.0, {"value": 450.5})]  # NaN left out
    assert len(of(trace, "C", "hbm")) == 3
    assert process_names(trace)[link[0]["pid"]] == "GPU"
    assert thread_of(trace, link[0]) == "counters"


def test_external_counters_with_an_sm_go_to_that_sm() -> None:
    counters = pd.DataFrame({"time_ps": [0, US], "name": ["smem GB/s"] * 2, "value": [1.0, 2.0], "sm": [0, 0]})
    trace = trace_of(run("reference"), counters=counters)
    assert validate(trace) == []
    assert {process_names(trace)[e["pid"]] for e in of(trace, "C", "smem")} == {"SM 0"}
    assert "GPU" not in process_names(trace).values()


# --- time: picoseconds survive, and so do Perfetto's nanoseconds ------------------------------

def test_one_picosecond_apart_stays_apart() -> None:
    spans = spans_table([(1, 2, 0, 0, "tma", "transfer", 0, 0, 0), (2, 3, 0, 0, "tma", "transfer", 1, 0, 0)])
    first, second = of(chrome_trace(spans, NO_EVENTS), "X")
    assert first["ts"] != second["ts"]
    assert (round(first["ts"] * US), round(second["ts"] * US), round(second["dur"] * US)) == (1, 2, 1)


def test_sub_nanosecond_boundaries_do_not_overlap_in_perfetto() -> None:
    # Perfetto rounds ts and dur to ns one by one: 1.6 + 1.6 -> 2 + 2 = 4 ns, past 3.2 ns -> 3 ns,
    # which would make it drop the next slice. The export shortens such a dur; a naive one is caught.
    rows = [(1600, 3200, 0, 0, "consumer", "wait_full", 0, 0, 0), (3200, 9000, 0, 0, "consumer", "compute", 0, 0, 0)]
    trace = chrome_trace(spans_table(rows), NO_EVENTS)
    assert validate(trace) == []
    wait, compute = of(trace, "X")
    assert wait["args"] == {"tile": 0, "stage": 0, "start_ps": 1600, "end_ps": 3200}  # exact figures kept
    assert 3200 - 1600 - 1000 < round(wait["dur"] * US) <= 3200 - 1600
    wait["dur"] = (3200 - 1600) / US
    assert any("overlap without nesting (ns, rounded)" in p for p in validate(trace))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 10**13), min_size=1, max_size=50))
def test_microseconds_keep_every_picosecond(values: list[int]) -> None:
    ps = np.array(values, dtype=np.int64)
    us = _us(ps)
    assert (np.rint(us * US).astype(np.int64) == ps).all()
    assert (ns_truncated(us) == ps // 1000).all()  # no whole ns read 1 ns early by truncating importers


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 10**7), min_size=2, max_size=40), st.integers(0, 10**12))
def test_touching_spans_never_overlap_in_any_viewer(gaps: list[int], offset: int) -> None:
    edges = offset + np.cumsum(np.array(gaps, dtype=np.int64))
    start, end = edges[:-1], edges[1:]
    ts, end_us = _us(start), _us(end)
    dur = _dur_us(start, end, ts, end_us)
    assert (ts + dur <= end_us).all()
    assert (np.abs(dur * US - (end - start)) < 1000).all()
    for to_ns in (ns_rounded, ns_truncated):
        assert (to_ns(ts[:-1]) + to_ns(dur[:-1]) <= to_ns(ts[1:])).all()


# --- the validator itself ----------------------------------------------------------------------

def _named(*events: dict[str, Any]) -> dict[str, Any]:
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 1, "ts": 0, "args": {"name": "p"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": 0, "args": {"name": "t"}}]
    return {"traceEvents": meta + list(events), "displayTimeUnit": "ns"}


@pytest.mark.parametrize(("event", "problem"), [
    ({"ph": "B", "name": "a", "ts": 0}, "has no E"),
    ({"ph": "E", "name": "a", "ts": 0}, "has no B"),
    ({"ph": "X", "name": "a", "ts": 0, "dur": -1}, "non-negative dur"),
    ({"ph": "X", "name": "a", "ts": 0}, "non-negative dur"),
    ({"ph": "i", "name": "a", "ts": 0}, "scope"),
    ({"ph": "C", "name": "a", "ts": 0, "args": {"v": "7"}}, "numeric"),
    ({"ph": "s", "name": "a", "cat": "c", "id": 1, "ts": 0}, "never finishes"),
    ({"ph": "f", "name": "a", "cat": "c", "id": 1, "ts": 0, "bp": "e"}, "without a start"),
    ({"ph": "X", "name": "a", "ts": 0, "dur": 1, "bind_id": 1, "flow_out": True}, "no destination"),
    ({"ph": "X", "name": "a", "ts": 0, "dur": 1, "bind_id": 1, "flow_in": True}, "0 sources"),
    ({"ph": "X", "name": "a", "ts": 0, "dur": 1, "tid": 2}, "no thread_name"),
    ({"ph": "X", "name": "a", "ts": 0, "dur": 1, "tid": 0}, "positive integer"),
    ({"ph": "X", "name": "a", "ts": float("nan"), "dur": 1}, "not plain JSON"),
    ({"ph": "Q", "name": "a", "ts": 0}, "unknown phase"),
])
def test_validator_reports_broken_events(event: dict[str, Any], problem: str) -> None:
    event = {"pid": 1, "tid": 1, **event}
    problems = validate(_named(event))
    assert any(problem in p for p in problems), problems


def test_validator_checks_flow_order_and_partial_overlaps() -> None:
    source = {"ph": "X", "name": "out", "pid": 1, "tid": 1, "ts": 5, "dur": 1, "bind_id": 1, "flow_out": True}
    early = {"ph": "X", "name": "in", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "bind_id": 1, "flow_in": True}
    assert any("starts before its source" in p for p in validate(_named(source, early)))
    a = {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 2}
    b = {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    assert any("overlap without nesting (µs)" in p for p in validate(_named(a, b)))
    nested = {"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 0.5, "dur": 1}
    assert validate(_named(a, nested)) == []


def test_validator_flags_a_tid_shared_by_two_processes() -> None:
    trace = _named({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1})
    trace["traceEvents"] += [
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 1, "ts": 0, "args": {"name": "q"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 1, "ts": 0, "args": {"name": "u"}},
    ]
    assert any("several processes" in p for p in validate(trace))


# --- files -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["run.json", "run.json.gz"])
def test_write_chrome_trace(tmp_path, name: str) -> None:
    path = write_chrome_trace(run("reference"), tmp_path / name)
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as stream:
        trace = json.load(stream)
    assert validate(trace) == []
    assert trace == json.loads(json.dumps(trace_of(run("reference"))))


def test_write_chrome_trace_needs_records(tmp_path) -> None:
    with pytest.raises(TmasimError, match="run.records"):
        write_chrome_trace(run("reference", "run.records=false"), tmp_path / "t.json")


def test_the_checker_stands_alone():
    """trace_check needs nothing from the writer: no import circle between them."""
    code = ("import sys, tmasim.review.trace_check as c; "
            "assert 'tmasim.review.trace' not in sys.modules; print(c.validate({'traceEvents': 1}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "traceEvents is missing or not a list" in out
