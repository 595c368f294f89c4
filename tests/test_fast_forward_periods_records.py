"""Known periods with records (tmasim/engine/fast_forward/periods.py, record_shift.py): a
period jumped over keeps where its records are in the stream, and a later cut in its state
jumps at once, its skipped records replayed from the kept ones, moved in time and steps. The
spans, events and links' loads are the full run's (``run.fast_forward = false``), row for row,
and the run skips within units as much as without records (without, it may skip whole units
too: their records would name units)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both as stats_both
from test_fast_forward_periods import gemm
from test_record_shift import both
from test_record_shift import both as records_both

from tmasim.engine import recorder as rec
from tmasim.engine.fabric.flows import Link
from tmasim.engine.fast_forward.jump import FastForward
from tmasim.engine.fast_forward.periods import Periods
from tmasim.engine.fast_forward.record_shift import RecordShift
from tmasim.scenario import from_dict, load
from tmasim.simulation import simulate


def recalled(summary: str) -> int:
    """Jumps made from a known period, as the run's summary counts them."""
    found = re.search(r", (\d+) from periods seen before", summary)
    return int(found.group(1)) if found else 0


def without_records(raw: dict[str, Any]) -> dict[str, Any]:
    return simulate(from_dict({**raw, "run": {**raw.get("run", {}), "records": False}})).stats


def test_units_after_the_first_replay_the_kept_periods_records():
    """4 SMs, 8 units of 32 k-steps each: every unit after the first recalls its predecessor's
    period, and the tables are the full run's; without records the run skips more (whole units)."""
    raw = gemm(4, 8, 4, 32)
    fast, full = both(raw, bandwidth=True)
    assert full.stats["simulated_steps"] == 8 * 32
    assert recalled(fast.stats["fast_forward"]) >= 6
    plain = without_records(raw)
    assert plain["fast_forward_skipped_steps"] > fast.stats["fast_forward_skipped_steps"]
    assert plain["makespan_ns"] == fast.stats["makespan_ns"] == full.stats["makespan_ns"]
    computes = fast.spans[fast.spans["kind"] == "compute"]
    assert len(computes) == len(full.spans[full.spans["kind"] == "compute"]) == 2 * 8 * 32  # 2 warpgroups


def test_known_periods_skip_more_with_records(monkeypatch):
    """Without the recall, each unit simulates one more period to see the repeat."""
    raw = {**gemm(4, 8, 4, 32), "run": {"records": True}}
    known = simulate(from_dict(raw)).stats
    monkeypatch.setattr(Periods, "recall", lambda self, *args: None)
    unknown = simulate(from_dict(raw)).stats
    assert recalled(known["fast_forward"]) > 0 == recalled(unknown["fast_forward"])
    assert known["fast_forward_skipped_steps"] > unknown["fast_forward_skipped_steps"]
    assert known["makespan_ps"] == unknown["makespan_ps"]


def test_the_8192_gemm_in_row_raster_keeps_the_full_runs_records_and_skips_as_much_within_units():
    raw = dict(load("gemm-h100").raw)
    raw = {**raw, "workload": {**raw["workload"], "raster": "row"}}
    fast, full = both(raw)
    assert full.stats["simulated_steps"] == 3968
    assert recalled(fast.stats["fast_forward"]) > 10
    plain = without_records(raw)
    assert plain["fast_forward_skipped_steps"] >= fast.stats["fast_forward_skipped_steps"] > 3400
    assert plain["makespan_ns"] == fast.stats["makespan_ns"] == full.stats["makespan_ns"]


def test_cluster_peers_records_replay_with_known_periods():
    """2x1 clusters (peers' remote arrivals move by phase) across several units."""
    raw = gemm(4, 8, 4, 24)
    raw["pipeline"] = {**raw["pipeline"], "cluster": [2, 1]}
    fast, _ = both(raw)
    assert recalled(fast.stats["fast_forward"]) > 0
    plain = without_records(raw)
    assert plain["fast_forward_skipped_steps"] >= fast.stats["fast_forward_skipped_steps"]
    assert plain["makespan_ns"] == fast.stats["makespan_ns"]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sms=st.integers(2, 5), rows=st.integers(2, 5), columns=st.integers(2, 4), k=st.integers(12, 30),
       stages=st.integers(2, 4))
def test_random_multi_unit_gemms_keep_the_full_runs_records(sms, rows, columns, k, stages):
    both(gemm(sms, rows, columns, k, stages))


# --- the replay itself, on hand-made records -------------------------------------------------

def two_steps(recorder: rec.Recorder, start: int, step: int) -> None:
    """One CTA's two ring steps (2 slots), 5,000 ps each, from ``start``: fill and compute+flip."""
    for s in range(2):
        t = start + 5_000 * s
        recorder.fill(t, t + 3_000, sm=0, cta=1, tile=step + s, stage=s, nbytes=64, phase=step // 2,
                      name=recorder.name(f"full[{s}]"))
        recorder.compute_flip(t + 3_000, t + 5_000, t + 5_000, sm=0, cta=1, tile=step + s, stage=s,
                              phase=step // 2, flipped=t + 5_000, name=recorder.name(f"empty[{s}]"))


def test_a_kept_period_replays_where_its_state_recurs_moved_in_time_and_steps():
    """Period of 10,000 ps from cut i (0 ps, step 0) to j (10,000 ps, step 2), jumped 3 times
    (steps 2..7 skipped); later, at 100,000 ps with the CTA at step 20 of the run (26 of the
    full run's), it recurs: 2 periods replayed from there, 60,000 ps and 26 steps after the kept one."""
    recorder = rec.Recorder()
    link = Link("hbm", 1.0)
    link._series[:] = [(0, 1.0), (4_000, 0.5)]
    shift = RecordShift(recorder, [link], stages=2)
    i = shift.mark(0)._replace(records=0, series=((0, None),))
    two_steps(recorder, 0, 0)
    j = shift.mark(10_000)
    kept = shift.jump(i, j, 3, {1: 2}, bases={1: 0})
    assert kept is not None and (kept.start, kept.end, kept.time, kept.steps) == (0, 4, 0, {1: 0})
    assert kept.series == ((None, ((0, 1.0), (4_000, 0.5))),)
    link._series.append((100_000, 0.25))
    c = shift.mark(100_000)
    assert not shift.recall(kept, c, {1: 21}, 2, {1: 2})  # 27 - 0 steps: not whole slot cycles
    assert not shift.recall(kept, c, {1: 20}, 2, {1: 2})  # load in effect: 0.25, the period's none
    c = c._replace(series=((len(link._series), None),))
    before = recorder.count
    assert shift.recall(kept, c, {1: 20}, 2, {1: 2})
    rows = recorder.rows(before, recorder.count)
    # copy m: the kept records (times 3,000..10,000 ps, steps 0, 1) 130,000 + 10,000 m ps later
    # (100,000 now + 30,000 skipped before), 26 + 2 m steps further (20 + 6 skipped before)
    assert rows[:, 0].tolist() == [133_000, 135_000, 138_000, 140_000, 143_000, 145_000, 148_000, 150_000]
    assert rows[:, 6].tolist() == [26, 26, 27, 27, 28, 28, 29, 29]
    assert rows[:, 2].tolist() == [13, 0, 13, 0, 14, 0, 14, 0]  # the fill's phase (step // 2); the use tail
    assert (shift.time_shift, shift.step_shift) == (50_000, {1: 10})
    assert shift.inserts[0][-1] == (3, [(100_000, 1.0), (104_000, 0.5), (110_000, 1.0), (114_000, 0.5)], 20_000)


def test_a_period_with_a_work_units_record_is_not_kept():
    recorder = rec.Recorder()
    shift = RecordShift(recorder, [], stages=2)
    i = shift.mark(0)._replace(records=0)
    two_steps(recorder, 0, 0)
    recorder.spanned(rec.EPILOGUE, 9_000, 9_800, 0, 1, 7, -1)
    assert shift.jump(i, shift.mark(10_000), 1, {1: 2}, bases={1: 0}) is None
    assert recorder.count == 10 and np.array_equal(recorder.rows(5, 10)[:, 0], [13_000, 15_000, 18_000, 20_000,
                                                                                19_800])


# --- a persistent run whose reference CTA's producer is over first ---------------------------

def test_a_running_cta_takes_the_reference_over_when_the_references_work_runs_out(monkeypatch):
    """8 SMs, 64x64 tiles of a ragged 264x456 output (40 tiles): CTA 0's producer is over while
    others still run, and the next CTA to reach a lap cuts the run from there, with the skip on
    and off alike: every figure, span and event is the full run's."""
    raw = {"name": "handover", "gpu": {"preset": "h100-sxm", "sms": 8, "gpc_sms": [8]},
           "workload": {"kind": "gemm", "m": 264, "n": 456, "k": 1664, "dtype": "bf16", "tile": [64, 64, 64],
                        "raster": "grouped", "launch": "persistent"},
           "pipeline": {"stages": 4, "consumers": 2}}
    handovers: list[int] = []
    finish = FastForward.finish

    def counted(self: FastForward) -> None:
        handovers.append(self.handovers)
        finish(self)

    monkeypatch.setattr(FastForward, "finish", counted)
    records_both(raw)
    assert handovers == [1, 1]  # the skipping run and the full one cut alike
    stats_both(raw)
