"""The budget knows what fast-forward will skip: forecast from the plan's runs of identical
steps, on the low side, and off wherever the run will not skip (jitter, drift, the switch)."""

from __future__ import annotations

import pytest
import simpy

from tmasim import budget
from tmasim.engine.chip import Chip
from tmasim.engine.program import Repeat, TimedProgram
from tmasim.scenario import load
from tmasim.simulation import _sync, estimate, plan_scenario, simulate
from tmasim.skip_forecast import TRANSIENT_PERIODS, lanes_of, paced_skipped_steps, runs, skipped_steps

WINDOW = TRANSIENT_PERIODS * 2  # steps simulated per stretch of identical steps, at 2 stages


def equal_tiles(count: int) -> TimedProgram:
    return TimedProgram(Repeat(3_000_000, count), Repeat(5_000_000, count), Repeat(0, count), 1024)


def test_the_10m_tile_anchor_is_estimated_with_its_skip_and_not_refused():
    predicted = estimate(load("reference", ["workload.tiles=10000000", "run.records=true"]))
    assert predicted.steps == 10_000_000 and predicted.skipped == 10_000_000 - WINDOW
    assert predicted.events == WINDOW * budget.EVENTS_PER_STEP["timed"]
    # records of skipped periods are regenerated, so they cost their memory all the same
    assert predicted.records == 10_000_000 * budget.RECORDS_PER_STEP["timed"]
    assert not predicted.too_large and predicted.seconds < 60
    assert f"{10_000_000 - WINDOW:,} of them skipped by fast-forward" in predicted.text()
    budget.check(predicted, budget.Limits())  # does not raise


@pytest.mark.parametrize("sets", [
    ["workload.tiles=1000000", "run.fast_forward=false"],
    ['run.drift={start="200 ns", latency_cv=0.05}', "workload.tiles=1000"],
])
def test_a_run_that_will_not_skip_is_estimated_in_full(sets):
    predicted = estimate(load("reference", sets))
    assert predicted.skipped == 0
    assert predicted.events == predicted.steps * budget.EVENTS_PER_STEP["timed"]


def test_a_jittered_run_is_estimated_in_full():
    jittered = estimate(load("jitter", ["workload.tiles=100000"]))
    assert (jittered.steps, jittered.skipped, jittered.events) == (100_000, 0, 400_000)
    equal = estimate(load("reference", ["workload.tiles=100000"]))
    assert equal.skipped == 100_000 - WINDOW and jittered.seconds > 10 * equal.seconds


def test_the_forecast_cuts_at_every_lanes_run_boundary():
    # lanes of 60 and 100 equal steps: [0, 60) has both, [60, 100) one; each keeps a window
    assert skipped_steps([[equal_tiles(60)], [equal_tiles(100)]], 2, units_matter=False) == \
        2 * (60 - WINDOW) + (40 - WINDOW)
    # one lane running two CTAs one after another: a cut where the second starts
    assert skipped_steps([[equal_tiles(30), equal_tiles(50)]], 2, units_matter=False) == \
        (30 - WINDOW) + (50 - WINDOW)
    jittered = TimedProgram([3, 4, 3], Repeat(5, 3), Repeat(0, 3), 1024)
    assert list(runs(jittered, False)) == [1, 1, 1]
    assert skipped_steps([[jittered]], 2, units_matter=False) == 0


def plan_lanes(name: str, sets: list[str]) -> tuple[list[list[object]], int]:
    """The lanes of a scenario's simulated CTAs, as the budget sees them before the run."""
    scenario = load(name, [*sets, "run.records=false"])
    plan, _ = plan_scenario(scenario)
    chip = Chip(simpy.Environment(), scenario.gpu, plan, _sync(scenario), None, aggregate=True)
    return lanes_of(chip.planned.programs, chip.sms, 1 if plan.persistent else plan.ctas_per_sm), \
        scenario.pipeline.stages


def test_a_gemm_unit_is_a_run_then_its_epilogue_step():
    lanes, stages = plan_lanes("gemm-ideal", ["workload.m=1024", "workload.n=1024", "workload.k=4096"])
    units = sum(len(program.units) for lane in lanes for program in lane)
    assert all(list(runs(program, False)) == [63, 1] * len(program.units) for lane in lanes for program in lane)
    assert skipped_steps(lanes, stages, units_matter=False) == units * (63 - TRANSIENT_PERIODS * stages)


def test_a_persistent_stream_is_forecast_to_skip_its_identical_units_whole():
    """stream-h100: each CTA's 248 units are one box each, all alike: skipped whole but the first few."""
    scenario = load("stream-h100", ["run.records=false"])
    predicted = estimate(scenario)
    stats = simulate(scenario).stats
    assert "work units of CTAs whole" in stats["fast_forward"]
    assert stats["fast_forward_skipped_steps"] <= predicted.skipped <= 1.1 * stats["fast_forward_skipped_steps"]


@pytest.mark.parametrize(("name", "sets"), [("gemm-h100", []), ("gemm-h100", ["workload.launch=grid"])])
def test_runs_whose_copies_flow_through_the_fabric_are_estimated_with_the_lanes_forecast(name, sets):
    """Whether their state repeats depends on the flows' rates; the lanes' forecast is 88-97 % of
    what GEMM runs skip on the estimates' grid (a 2x1-cluster point of the sweep, skipping 5 %
    where it says 48 %, is the known exception)."""
    scenario = load(name, [*sets, "run.records=false"])
    predicted = estimate(scenario)
    plan, _ = plan_scenario(scenario)
    chip = Chip(simpy.Environment(), scenario.gpu, plan, _sync(scenario), None, aggregate=True)
    lanes = lanes_of(chip.planned.programs, chip.sms, 1 if plan.persistent else plan.ctas_per_sm)
    assert 0 < predicted.skipped == skipped_steps(lanes, scenario.pipeline.stages, units_matter=False)
    assert predicted.events == (predicted.steps - predicted.skipped) * budget.EVENTS_PER_STEP["flow"]


@pytest.mark.parametrize("sets", [["workload.tiles=5000"], ["workload.tiles=5000", "pipeline.stages=4"],
                                  ["workload.tiles=3000", 'workload.latency="2 us"']])
def test_the_forecast_never_skips_more_than_the_run_does(sets):
    scenario = load("reference", [*sets, "run.records=false"])
    ran = simulate(scenario).stats["fast_forward_skipped_steps"]
    assert 0 < estimate(scenario).skipped <= ran


def test_ragged_tiles_are_not_in_lockstep_and_skip_nothing_in_the_forecast():
    lanes, stages = plan_lanes("gemm-h100", ["workload.tile=[128,192,64]"])
    assert skipped_steps(lanes, stages, units_matter=False) == 0
    lanes, stages = plan_lanes("gemm-h100", [])  # every unit does the same work: in lockstep
    assert skipped_steps(lanes, stages, units_matter=False) > 0


@pytest.mark.parametrize("sets", [[], ["workload.k=4096"], ["pipeline.cluster=[2,1]", "workload.multicast=b"]])
def test_lanes_in_step_laid_out_in_time_are_forecast_as_on_the_step_axis(sets):
    """Equal paces: the cuts fall where the step axis puts them, stretch for stretch."""
    lanes, stages = plan_lanes("gemm-h100", sets)
    gpu = load("gemm-h100", sets).gpu
    on_steps = skipped_steps(lanes, stages, units_matter=False)
    assert on_steps > 0
    assert paced_skipped_steps(lanes, stages, gpu, units_matter=False) == on_steps


def test_lanes_out_of_step_are_forecast_below_what_they_skip():
    """Edge tiles at another pace: no skip on the step axis, but each lane laid out in time skips
    what its stretches leave; below the run's own skip, on an H100 and on B200's (2,2) clusters
    with a long k-loop (units of 2,000 steps, where nothing forecast made the estimate over 60x the run)."""
    from tmasim.estimates import skip_forecast

    for name, sets in (("gemm-h100", ["workload.tile=[128,192,64]"]),
                       ("gemm-b200", ["workload.m=4096", "workload.n=7168", "workload.k=128000",
                                      "workload.dtype=fp16", "workload.tile=[128,256,64]", "pipeline.mma_cta_group=2",
                                      "pipeline.cluster=[2,2]", "workload.multicast=a", "pipeline.consumers=1",
                                      "workload.raster=column", "workload.launch=persistent", "gpu.clock=1.3 GHz"])):
        lanes, stages = plan_lanes(name, sets)
        assert skipped_steps(lanes, stages, units_matter=False) == 0  # not in lockstep
        forecast = estimate(load(name, sets)).skipped
        ran = simulate(load(name, [*sets, "run.records=false"])).stats["fast_forward_skipped_steps"]
        assert 0.3 * ran < forecast <= ran, (name, forecast, ran)
    assert skip_forecast.PACED_TRANSIENT_FACTOR > 1


def test_a_sweep_is_estimated_with_the_same_skip():
    from tmasim.sweep import estimate as sweep_estimate
    from tmasim.sweep.spec import plan_sweep

    skipping = plan_sweep("reference", [], ["workload.tiles=6000000,8000000"])
    full = plan_sweep("reference", ["run.fast_forward=false"], ["workload.tiles=6000000,8000000"])
    fast, _ = sweep_estimate.sweep_seconds(skipping, skipping.points, 1)
    slow, _ = sweep_estimate.sweep_seconds(full, full.points, 1)
    assert slow > 60 > 10 * fast  # the full run says so on its first line; the skipping one has no need


def test_the_estimate_says_why_ragged_tiles_skip_little_and_names_their_classes():
    ragged = estimate(load("gemm-h100", ["workload.tile=[128,192,64]"]))
    # 43 columns of tiles, the last 128 wide: the classes that walk an edge unit
    assert ragged.obstacle.startswith("12 of its 14 SM classes run work units unlike the others'")
    assert estimate(load("gemm-h100", [])).obstacle == ""  # every unit alike: nothing in the way
    assert "run.fast_forward = false" in estimate(load("gemm-h100", ["run.fast_forward=false"])).obstacle


def test_the_estimate_says_when_every_sm_is_simulated_and_when_blocks_stand_for_them():
    # 3 stages fit two CTAs per SM: the 2-SM pairs' clusters share SMs
    grid = estimate(load("gemm-b200-2sm", ["pipeline.stages=3", "workload.launch=grid"]))
    assert grid.obstacle == ("every one of its 148 SMs is simulated (aggregation off: several CTAs per SM share "
                             "SMs across clusters)")
    persistent = estimate(load("gemm-b200-2sm", ["pipeline.stages=3"]))
    assert persistent.obstacle == "" and persistent.seconds < grid.seconds / 10  # one block per class


def test_a_sweeps_estimate_line_names_its_slowest_unskippable_point_and_why():
    from tmasim.errors import ResourceError
    from tmasim.sweep import estimate as sweep_estimate
    from tmasim.sweep.spec import plan_sweep

    # M = 16384: the ragged tiles' classes cut each other's runs often enough to stay over a second
    plan = plan_sweep("gemm-h100", ["workload.m=16384"], {"workload.tile": [[128, 256, 64], [128, 192, 64]]}, False)
    with pytest.raises(ResourceError) as refused:
        sweep_estimate.check(plan, plan.points, 1, max_points=None, max_seconds=0.1, notify=None)
    assert "the slowest (workload.tile=[128, 192, 64]: about" in str(refused.value)
    assert "21 of its 23 SM classes run work units unlike the others'" in str(refused.value)
    regular = plan_sweep("gemm-h100", [], {"pipeline.stages": [3, 4]}, False)
    with pytest.raises(ResourceError) as refused:
        sweep_estimate.check(regular, regular.points, 1, max_points=None, max_seconds=0.01, notify=None)
    assert "slowest" not in str(refused.value)


SMALL_CHIP = ["gpu.sms=6", "gpu.gpc_sms=[6]", "workload.batch=1", "workload.heads=2"]


@pytest.mark.parametrize(("name", "sets"), [
    ("attention-h100", ["workload.seqlen_q=4096"]),
    ("attention-h100-causal", ["workload.seqlen_q=8192"]),  # units of 1-64 blocks: every block at one pace
    ("attention-b200-2sm", ["workload.seqlen_q=4352"]),
])
def test_attention_is_forecast_within_a_fifth_under_what_it_skips(name, sets):
    """A unit's first and last blocks alone, its runs between, 4 periods a stretch: a little under
    what the run skips, pairs and a causal launch's units of many lengths included."""
    scenario = load(name, [*SMALL_CHIP, *sets])
    ran = simulate(scenario).stats["fast_forward_skipped_steps"]
    assert 0.8 * ran <= estimate(scenario).skipped <= ran


def test_the_estimate_says_why_a_causal_launch_skips_less():
    scenario = load("attention-h100-causal", [*SMALL_CHIP, "workload.seqlen_q=8192"])
    assert "run units of different lengths (a causal launch's)" in estimate(scenario).obstacle
    assert estimate(load("attention-h100", [*SMALL_CHIP, "workload.seqlen_q=4096"])).obstacle == ""
