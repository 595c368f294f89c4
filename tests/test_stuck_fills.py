"""A run stopped by an expect_tx mistake shows its slots: the fills whose full barrier never
flipped are recorded up to the stop, and the Gantt chart draws and labels them."""

from __future__ import annotations

import pytest

from tmasim.errors import BarrierError, DeadlockError, ModelError
from tmasim.results import Result
from tmasim.review import plots
from tmasim.scenario import load
from tmasim.simulation import simulate

US = 1_000_000
KIB16 = 16 * 1024


def stopped(change: str, error: type[ModelError]) -> Result:
    scenario = load("lessons/07-sync", [change])
    with pytest.raises(error) as info:
        simulate(scenario)
    return Result(scenario, {"scenario": scenario.name, "stages": 2}, [], info.value.records)


def fills(result: Result) -> list[tuple[int, int, int, int, int]]:
    spans = result.spans[(result.spans["lane"] == "slot") & (result.spans["kind"] == "fill")]
    return sorted(zip(spans["stage"], spans["tile"], spans["start_ps"], spans["end_ps"], spans["bytes"], strict=True))


def test_an_expect_tx_that_never_completes_leaves_both_slots_filling_to_the_stop():
    """32 KiB announced, 16 KiB copied: both copies land (3 and 6 µs), neither full barrier flips;
    the run stops at 6 µs with both slots issued at 0 and still filling."""
    result = stopped("pipeline.expect_tx=32 KiB", DeadlockError)
    assert fills(result) == [(0, 0, 0, 6 * US, KIB16), (1, 1, 0, 6 * US, KIB16)]
    assert (result.events["kind"] == "flip_full").sum() == 0


def test_an_underflow_records_its_open_waits_and_fills_at_the_failure():
    result = stopped("pipeline.expect_tx=8 KiB", BarrierError)
    assert fills(result) == [(0, 0, 0, 3 * US, KIB16), (1, 1, 0, 3 * US, KIB16)]
    stuck = result.events[result.events["kind"] == "stuck"]
    assert sorted(stuck["name"]) == ["sm0.cta0.empty[0]", "sm0.cta0.full[0]"] and set(stuck["time_ps"]) == {3 * US}


def test_a_deadlock_after_the_fills_flipped_records_no_fill_left_open():
    result = stopped("pipeline.empty_arrivals=2", DeadlockError)
    assert all(end <= 6 * US for *_, end, _ in fills(result))  # the two fills of 0-3 and 0-6 µs only


def test_the_gantt_labels_each_slot_that_never_became_ready():
    result = stopped("pipeline.expect_tx=32 KiB", DeadlockError)
    fig = plots.gantt(result.spans, result.events, title="expect_tx 32 KiB")
    try:
        texts = {t.get_text() for t in fig.axes[0].texts}
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    assert {"never ready: full[0] never flipped", "never ready: full[1] never flipped"} <= texts
    assert [label.get_text() for label in fig.axes[0].get_yticklabels()][1:3] == ["slot 0", "slot 1"]
