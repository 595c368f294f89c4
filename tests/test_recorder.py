"""Records as compact columns: what goes in comes out, whatever the values' size."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tmasim.engine import recorder as rec
from tmasim.engine.program import Repeat, TimedProgram
from tmasim.engine.recorder import Recorder
from tmasim.errors import TmasimError


def spans_in(recorder: Recorder, rows: list[tuple]) -> None:
    for row in rows:
        recorder.span(*row)


def test_spans_and_events_come_back_as_they_went_in():
    recorder = Recorder()
    rows = [(t * 10, t * 10 + 7, 0, 1, "slot" if t % 2 else "tma", "fill", t, t % 2, 16384) for t in range(8)]
    spans_in(recorder, rows)
    for t in range(7):
        recorder.event(t * 5, 0, 1, "flip_full", f"sm0.cta1.full[{t % 2}]", t, t % 2, t // 2)
    spans = recorder.span_columns()
    assert [tuple(spans[c][i] for c in rec.SPAN_COLUMNS) for i in range(8)] == rows
    events = recorder.event_columns()
    assert events["name"].tolist() == [f"sm0.cta1.full[{t % 2}]" for t in range(7)]
    assert events["phase"].tolist() == [t // 2 for t in range(7)]
    assert (recorder.span_count, recorder.event_count) == (8, 7)


def test_a_record_with_a_value_too_wide_for_its_field_is_kept_whole_and_comes_back_exactly():
    recorder = Recorder()
    big = 2**40
    rows = [(0, 5, 0, 0, "tma", "transfer", 0, 0, 1),
            (5, big, 70_000, 40_000, "tma", "transfer", 3_000_000_000, -1, 2**33),  # every narrow field overflows
            (big, big + 1, 1, 1, "slot", "use", 1, 1, 0),  # a 64-bit time fits the buffer
            (big - 10, big + 2, 1, 1, "slot", "use", 2, 200, 0),  # a stage over 127
            (0, 2**32 + 3, 2, 2, "producer", "wait_empty", 3, 0, 0)]  # a span over 4.3 ms
    spans_in(recorder, rows)
    spans = recorder.span_columns()
    assert [tuple(spans[c][i] for c in rec.SPAN_COLUMNS) for i in range(len(rows))] == rows
    assert list(recorder._whole_at) == [1, 3, 4] and recorder.count == 5  # placeholders hold their places
    transfer = recorder.rows(0, 1)[0, 5]  # the form code of the first record: a tma transfer span
    assert recorder.rows(1, 2)[0].tolist() == [big, big - 5, 0, 70_000, 40_000, transfer, 3_000_000_000, -1, 2**33, 0]
    assert (recorder.span_count, recorder.event_count) == (5, 0)


def test_a_time_beyond_64_bits_is_an_error_not_a_wrapped_number():
    recorder = Recorder()
    with pytest.raises(TmasimError, match="run.records: a time or count beyond 64 bits"):  # as it is recorded
        recorder.event(2**64, 0, 0, "issue", "sm0.tma")
    recorder.event(2**63 - 1, 0, 0, "issue", "sm0.tma")  # the largest that fits comes back as it went in
    assert list(recorder.event_columns()["time_ps"]) == [2**63 - 1]


def test_repeat_is_a_sequence_of_one_value():
    r = Repeat(7, 4)
    assert len(r) == 4 and list(r) == [7, 7, 7, 7] and r[3] == 7 and r[-4] == 7 and r == [7] * 4
    assert list(r[1:3]) == [7, 7] and r != [7, 7, 7] and r != [7, 7, 7, 8]
    with pytest.raises(IndexError):
        r[4]


def test_a_timed_program_of_equal_tiles_shares_one_copy():
    program = TimedProgram(Repeat(3, 5), Repeat(5, 5), Repeat(0, 5), 128)
    assert program.copies(0) is program.copies(4) and program.compute(2) == 5
    varied = TimedProgram([1, 2], Repeat(5, 2), Repeat(0, 2), 128)
    assert [c[0].busy for c in map(varied.copies, range(2))] == [1, 2]


def test_numpy_columns_are_int64_for_the_tables():
    recorder = Recorder()
    recorder.span(0, 3, 0, 0, "tma", "transfer", 0, 0, 16)
    assert all(v.dtype == np.int64 for k, v in recorder.span_columns().items() if k not in ("lane", "kind"))


def test_a_float_number_is_cut_to_its_integer_part_field_by_field():
    recorder = Recorder()
    recorder.event(12.7, 0, 0, "issue", "sm0.tma")
    recorder.copy(1.5, 9.9, 0, 0, 3, 1, 100, recorder.name("sm0.tma"))  # end 9, duration 8.4 -> 8: start 1
    assert recorder.event_columns()["time_ps"].tolist() == [12, 9]
    spans = recorder.span_columns()
    assert (spans["start_ps"].tolist(), spans["end_ps"].tolist()) == ([1], [9])


def test_a_full_barriers_hook_records_the_slots_fill_and_the_flip():
    """The hook a CTA's full barrier calls at each flip packs the record ``fill`` would: the
    fill span from the producer's arrival to the flip, with the bytes of the CTA's own copies,
    and the flip event (step = phase x stages + slot)."""
    recorder = Recorder()
    issued, filled = [1_000, 2_000], [64, 128]
    hook = recorder.fill_hook(0, 3, 1, 2, recorder.name("sm0.cta3.full[1]"), issued, filled)
    hook(SimpleNamespace(flipped_at=7_500, landing=None), 4)
    hook(SimpleNamespace(flipped_at=9_000.9, landing=None), 5)  # a float time: cut to its integer part, as fill() does
    spans, events = recorder.span_columns(), recorder.event_columns()
    assert spans["start_ps"].tolist() == [2_000, 2_000] and spans["end_ps"].tolist() == [7_500, 9_000]
    assert (spans["lane"].tolist(), spans["kind"].tolist()) == (["slot", "slot"], ["fill", "fill"])
    assert (spans["tile"].tolist(), spans["stage"].tolist(), spans["bytes"].tolist()) == ([9, 11], [1, 1], [128, 128])
    assert events["time_ps"].tolist() == [7_500, 9_000] and events["kind"].tolist() == ["flip_full"] * 2
    assert (events["name"].tolist(), events["phase"].tolist()) == (["sm0.cta3.full[1]"] * 2, [4, 5])
    same = Recorder()
    same.fill(2_000, 7_500, 0, 3, 9, 1, 128, 4, same.name("sm0.cta3.full[1]"))
    assert recorder.rows(0, 1).tolist() == same.rows(0, 1).tolist()


def test_a_copy_that_completes_the_phase_is_packed_with_the_fill_as_the_two_records_would_be():
    """A copy engine leaves a landing copy's record values on the barrier; the flip hook packs
    that copy's record and the fill's at once, the same two rows as copy() then fill(), and
    clears the barrier's ``landing``; a float time takes the slow path for both."""
    recorder = Recorder()
    full, engine = recorder.name("sm0.cta3.full[1]"), recorder.name("sm0.tma")
    hook = recorder.fill_hook(0, 3, 1, 2, full, [1_000, 2_000], [64, 128])
    barrier = SimpleNamespace(flipped_at=7_500, landing=(4_000, 7_500, 0, 3, 9, 1, 128, engine))
    hook(barrier, 4)
    assert barrier.landing is None
    barrier = SimpleNamespace(flipped_at=9_000, landing=(5_000.5, 9_000.7, 1, 2, 11, 1, 96, engine))
    hook(barrier, 5)
    same = Recorder()
    assert same.name("sm0.cta3.full[1]") == full and same.name("sm0.tma") == engine
    same.copy(4_000, 7_500, 0, 3, 9, 1, 128, engine)
    same.fill(2_000, 7_500, 0, 3, 9, 1, 128, 4, full)
    same.copy(5_000, 9_000, 1, 2, 11, 1, 96, engine)
    same.fill(2_000, 9_000, 0, 3, 11, 1, 128, 5, full)
    assert recorder.rows(0, 4).tolist() == same.rows(0, 4).tolist()
    assert recorder.span_columns()["kind"].tolist() == ["transfer", "fill"] * 2


def test_a_run_whose_spans_outgrow_their_field_records_them_whole_as_the_same_run_a_thousand_times_shorter():
    """The anchor in milliseconds: every compute span (5 ms) is over the 4.3 ms a record's
    duration field holds, so those records are kept whole; the tables are the microsecond
    run's, every time a thousand times longer."""
    from tmasim.scenario import from_dict
    from tmasim.simulation import simulate

    def run(unit: str):  # type: ignore[no-untyped-def]
        return simulate(from_dict({"workload": {"kind": "tiles", "tiles": 4, "load": f"3 {unit}",
                                                "compute": f"5 {unit}"}, "pipeline": {"stages": 2},
                                   "run": {"records": True, "fast_forward": False}}))

    short, long = run("us"), run("ms")
    assert long.makespan_ps == 23 * 10**9 and short.makespan_ps == 23 * 10**6
    assert long.recorder is not None and long.recorder._whole_at and not short.recorder._whole_at
    for table in ("spans", "events"):
        a, b = getattr(short, table), getattr(long, table)
        times = [c for c in a.columns if c.endswith("_ps")]
        a[times] *= 1000
        assert a.equals(b), table
    compute = long.spans[long.spans.kind == "compute"]
    assert compute.duration_ps.tolist() == [5 * 10**9] * 4
