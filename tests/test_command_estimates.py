"""The commands around ``run`` are estimated before their work and held to the same limits: what
``run --trace`` and ``--out`` write, a report's figures, a plot of a run folder (from its files'
sizes, before reading them), an animation's frames, a sweep's points (tiny ones, and ones whose
fields hold long per-tile lists). Each is refused in one line past the limits, before any event
runs or any file is read or written, and ``--yes`` lifts it. The costs are made huge here so that
small runs cross the line; the costs themselves are measured by ``benchmarks/bench_estimates.py``."""

from __future__ import annotations

import pytest

from tmasim import budget, simulation
from tmasim.cli import main
from tmasim.review import plot_cli
from tmasim.scenario import load
from tmasim.sweep import estimate as sweep_estimate
from tmasim.sweep.spec import plan_sweep


class Ran(Exception):
    """Raised where the work would begin: the estimate let it through."""


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused_before_work(code: int, err: str, *fragments: str) -> None:
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("tmasim: error: ") and "over the limit of 5.0 min or 4 GiB" in err and "--yes" in err
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture
def no_events(monkeypatch):
    """The run's events never start: a refusal must come before them."""
    def fail(*args, **kwargs):
        raise Ran("the run's events started")
    monkeypatch.setattr(simulation, "_run_events", fail)


@pytest.mark.parametrize(("option", "cost", "counted"), [
    ("--trace", "TRACE_SECONDS_PER_RECORD", "writing its trace included"),
    ("--out", "OUT_SECONDS_PER_RECORD", "writing its tables and Gantt chart included"),
])
def test_what_run_writes_is_estimated_before_the_run_and_yes_lifts_it(capsys, tmp_path, monkeypatch, no_events,
                                                                       option, cost, counted):
    monkeypatch.setattr(budget, cost, 100.0)  # 100 s a record: 4 tiles' records are far past 5 min
    target = str(tmp_path / ("t.json" if option == "--trace" else "out"))
    code, out, err = run_cli(capsys, "run", "--set", "run.records=true", option, target)
    refused_before_work(code, err, counted, "records")
    assert out == "" and list(tmp_path.iterdir()) == []
    with pytest.raises(Ran):
        main(["run", "--set", "run.records=true", option, target, "--yes"])


def test_a_run_without_outputs_does_not_count_them(capsys, monkeypatch):
    monkeypatch.setattr(budget, "TRACE_SECONDS_PER_RECORD", 100.0)
    monkeypatch.setattr(budget, "OUT_SECONDS_PER_RECORD", 100.0)
    code, out, err = run_cli(capsys, "run", "--set", "run.records=true")
    assert code == 0 and err == "" and "23 µs" in out


def test_the_output_costs_grow_with_the_records_and_the_trace_holds_its_events():
    scenario = load("reference", ["workload.tiles=10000", "run.records=true"])
    plain = simulation.estimate(scenario)
    traced = simulation.estimate(scenario, limits=budget.Limits(**budget.after_run(trace=True)))
    out = simulation.estimate(scenario, limits=budget.Limits(**budget.after_run(out=True)))
    per_record = budget.FRAME_BYTES_PER_RECORD + budget.TRACE_BYTES_PER_RECORD
    assert traced.memory - plain.memory == plain.records * per_record
    assert traced.seconds - plain.seconds == pytest.approx(
        plain.records * (budget.FRAME_SECONDS_PER_RECORD + budget.TRACE_SECONDS_PER_RECORD))
    assert out.seconds - plain.seconds == pytest.approx(
        plain.records * (budget.FRAME_SECONDS_PER_RECORD + budget.OUT_SECONDS_PER_RECORD) + budget.FIGURE_SECONDS)
    assert out.memory - plain.memory == (plain.records * (budget.FRAME_BYTES_PER_RECORD + budget.OUT_BYTES_PER_RECORD)
                                         + budget.FIGURE_BYTES)


def test_a_report_is_estimated_with_its_figures_before_its_run_and_yes_lifts_it(capsys, tmp_path, monkeypatch,
                                                                              no_events):
    from tmasim.review import report

    monkeypatch.setattr(budget, "REPORT_SECONDS_PER_RECORD", 100.0)
    code, out, err = run_cli(capsys, "report", "reference", "--out", str(tmp_path / "r"))
    refused_before_work(code, err, "report: about ", "the report's tables and figures included")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(report, "write_report", lambda *a, **k: pytest.fail("drawn before the run"))
    with pytest.raises(Ran):
        main(["report", "reference", "--out", str(tmp_path / "r"), "--yes"])


def test_a_report_with_a_sweep_checks_its_run_before_the_sweep(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(budget, "REPORT_FIGURE_SECONDS", 1000.0)
    monkeypatch.setattr(sweep_estimate, "_sample", lambda *a, **k: pytest.fail("the sweep was estimated first"))
    code, _, err = run_cli(capsys, "report", "reference", "--vary", "pipeline.stages=1,2", "--out",
                           str(tmp_path / "r"))
    refused_before_work(code, err, "report: about ")


def run_folder(tmp_path, rows: int):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "summary.csv").write_text("scenario,makespan_ns\nreference,23000\n")
    (folder / "spans.csv").write_bytes(b"x" * (rows * budget.CSV_ROW_BYTES))
    return folder


def test_a_plot_of_a_run_folder_is_estimated_from_its_files_before_reading_them(capsys, tmp_path, monkeypatch):
    def read(path):
        raise Ran("the folder was read")
    monkeypatch.setattr(plot_cli, "load_result", read)
    folder = run_folder(tmp_path, 100_000)
    monkeypatch.setattr(budget, "CSV_ROW_SECONDS", 0.01)  # 1,000 s for 100,000 rows
    code, out, err = run_cli(capsys, "plot", str(folder), "--kind", "slots")
    refused_before_work(code, err, "plot: about ", "(spans.csv: about 100,000 rows)")
    with pytest.raises(Ran):
        main(["plot", str(folder), "--kind", "slots", "--yes"])
    assert capsys.readouterr().err.startswith("tmasim: note: a large plot: about 16.7 min")  # lifted, still said
    monkeypatch.setattr(budget, "CSV_ROW_SECONDS", 0.001)  # 100 s: noted, then read
    monkeypatch.setattr(budget, "NOTE_SECONDS", 60.0)
    with pytest.raises(Ran):
        main(["plot", str(folder), "--kind", "slots"])
    assert capsys.readouterr().err.startswith("tmasim: note: a large plot: about 1.")


def test_a_plots_estimate_is_its_rows_reading_and_drawing():
    small = budget.plot_estimate(1000, "slots", files="spans.csv")
    big = budget.plot_estimate(3_000_000, "slots", files="spans.csv")
    per_row = budget.CSV_ROW_SECONDS + budget.PLOT_ROW_SECONDS["slots"]
    assert big.seconds - small.seconds == pytest.approx(2_999_000 * per_row)
    assert big.memory - small.memory == 2_999_000 * budget.CSV_ROW_MEMORY
    assert not small.large and "(spans.csv: about 3,000,000 rows)" in big.text()


def test_an_animation_counts_its_frames_and_yes_lifts_it(capsys, tmp_path, monkeypatch, no_events):
    monkeypatch.setattr(budget, "ANIMATION_SECONDS", 1000.0)
    code, out, err = run_cli(capsys, "animate", "--out", str(tmp_path / "a.gif"))
    refused_before_work(code, err, "animation: about ", "the animation's frames included")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(Ran):
        main(["animate", "--out", str(tmp_path / "a.gif"), "--yes"])


def test_a_tiny_point_of_a_sweep_costs_what_a_warm_worker_spends_on_it():
    """A sweep's point runs in a warm worker: not a fresh process's first run (budget.RUN_SECONDS)."""
    plan = plan_sweep("reference", [], ["run.seed=0,1,2,3"])
    seconds, sampled = sweep_estimate.sweep_seconds(plan, plan.points, 1)
    one = simulation.estimate(load("reference")).seconds
    assert sampled == 4
    per_point = (seconds - sweep_estimate.SWEEP_SECONDS) / 4
    assert per_point == pytest.approx(one - budget.RUN_SECONDS + sweep_estimate.POINT_SECONDS, rel=0.01)
    assert per_point < budget.RUN_SECONDS


def test_a_sweep_counts_the_entries_its_points_read():
    base = {"name": "listed", "gpu": "ideal", "pipeline": {"stages": 2},
            "workload": {"kind": "tiles", "tiles": 2000, "load": ["3 us", "4 us"] * 1000, "compute": "3 us"}}
    plan = plan_sweep(base, [], ["pipeline.stages=2,3"])
    assert sweep_estimate.list_entries(plan.base_raw) == 2000
    assert sweep_estimate.list_entries({"a": [[1, 2], [3]], "b": {"c": (4,)}}) == 6
    listed, _ = sweep_estimate.sweep_seconds(plan, plan.points, 1)
    plain = plan_sweep({**base, "workload": {**base["workload"], "load": "3 us"}}, [], ["pipeline.stages=2,3"])
    unlisted, _ = sweep_estimate.sweep_seconds(plain, plain.points, 1)
    assert listed - unlisted >= 2 * 2000 * sweep_estimate.ENTRY_SECONDS


def test_a_sweeps_table_shares_its_provenance_with_the_frames_made_from_it():
    """pandas deep-copies a frame's attrs into each row and column it hands out: the provenance,
    whose scenario may hold a million-entry list, is shared instead (a 2-point sweep's summary spent
    a minute copying it)."""
    from tmasim.sweep import run_sweep

    loads = ["3 us", "4 us"] * 500
    base = {"name": "listed", "gpu": "ideal", "pipeline": {"stages": 2},
            "workload": {"kind": "tiles", "tiles": 1000, "load": loads, "compute": "3 us"}}
    frame = run_sweep(base, [], ["pipeline.stages=2,3"], progress=False)
    assert (frame["status"] == "ok").all()
    assert frame.iloc[0:1].attrs["sweep"] is frame.attrs["sweep"]
    assert frame["makespan_ns"].attrs["sweep"] is frame.attrs["sweep"]
    assert frame.attrs["sweep"]["scenario"]["workload"]["load"] == loads


@pytest.fixture(scope="module")
def sixty_tiles():
    return simulation.simulate(load("reference", ["workload.tiles=60", "run.records=true"]))


def test_slots_past_what_can_be_drawn_are_time_averaged_and_the_legend_says_so(sixty_tiles, monkeypatch):
    from tmasim.review import plot_usage, plots

    labels = [t.get_text() for t in plots.slot_occupancy(sixty_tiles.spans).axes[0].get_legend().get_texts()]
    assert labels[0] == "copy in flight (filling)"
    monkeypatch.setattr(plot_usage, "MAX_STEPS", 10)
    monkeypatch.setattr(plot_usage, "OCCUPANCY_BINS", 4)
    ax = plots.slot_occupancy(sixty_tiles.spans).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("copy in flight (filling) (mean per ") and "mean per" in labels[1]
    # the time-average of slots in use never exceeds the stages, and is not zero in a busy ring
    held = ax.collections[1].get_paths()[0].vertices[:, 1]
    assert 0 < held.max() <= 2


def test_a_whole_run_gantt_past_what_can_be_drawn_is_zoomed_and_says_so(sixty_tiles, capsys, monkeypatch):
    assert plot_cli._zoom(sixty_tiles.spans) is None and capsys.readouterr().err == ""
    monkeypatch.setattr(plot_cli, "MAX_GANTT_SPANS", 10)
    assert plot_cli._zoom(sixty_tiles.spans) == 16
    err = capsys.readouterr().err
    assert err.startswith(f"tmasim: note: {len(sixty_tiles.spans):,} spans are too many to draw one by one; "
                          "drawing the first 16 tiles of each CTA")
