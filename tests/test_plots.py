"""Figures from real small results: the axes, labels, marks and numbers a reader relies on; and
``tmasim plot`` through its parser and (once wired) through ``python -m tmasim.cli``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from tmasim import names
from tmasim.errors import TmasimError
from tmasim.results import Result
from tmasim.review import plots
from tmasim.review.columns import knee, measure
from tmasim.review.plot_tables import decompose, knee_x
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.sweep import answer, run_sweep

REPO = Path(__file__).resolve().parents[1]
US = 10**6
# 256 CTAs of a small GEMM, two per SM on 132 SMs, every SM simulated on its own: a multi-CTA
# timeline in well under a second.
CHIP = ["run.records=true", "run.aggregate=false", "workload.m=2048", "workload.n=2048", "workload.k=256",
        "workload.tile=[128, 128, 64]", "pipeline.stages=3",
        "pipeline.registers={producer = 40, consumer = 104}"]  # setmaxnreg so that two CTAs fit an SM


@pytest.fixture(scope="module")
def reference() -> Result:
    return simulate(load("reference"))


@pytest.fixture(scope="module")
def chip() -> Result:
    return simulate(load("gemm-h100", CHIP), record_bandwidth=True)


@pytest.fixture(scope="module")
def stages_table() -> pd.DataFrame:
    """latency-hidden over 1..8 stages: the round trip binds below 6 stages, compute from 6 on."""
    return run_sweep("latency-hidden", [], ["pipeline.stages=1,2,3,4,5,6,7,8"], progress=False)


@pytest.fixture(scope="module")
def grid_table() -> pd.DataFrame:
    """A small GEMM over stages x tile shapes; 5 stages of 128x256x64 do not fit in shared memory.
    L2 is held at 7.2 TB/s (the pre-calibration estimate) so that some rows are L2-bound."""
    return run_sweep("gemm-h100", ["workload.m=1024", "workload.n=1024", "workload.k=512", "gpu.l2_bandwidth=7.2 TB/s"],
                     ["pipeline.stages=2,3,4,5", "workload.tile=[128,128,64],[128,256,64]"], progress=False)


def lines_with(ax: Any, **props: Any) -> list[Line2D]:
    return [ln for ln in ax.get_lines() if all(getattr(ln, f"get_{k}")() == v for k, v in props.items())]


# --------------------------------------------------------------------------- stage sweep


def test_stage_sweep_labels_units_and_rings_the_knee(stages_table):
    fig = plots.stage_sweep(stages_table)
    top, bottom, right = fig.axes
    assert top.get_ylabel() == "time to finish (µs)"
    assert bottom.get_xlabel() == "pipeline stages"
    assert "SMEM per CTA" in bottom.get_ylabel() and "CTAs per SM" in right.get_ylabel()
    assert top.get_title() == "latency-hidden: time to finish against pipeline stages"
    simulated = lines_with(top, linestyle="-", marker="o")
    assert [list(ln.get_xdata()) for ln in simulated if len(ln.get_xdata()) > 1] == [[1, 2, 3, 4, 5, 6, 7, 8]]
    rings = lines_with(top, markersize=17)
    assert [list(r.get_xdata()) for r in rings] == [[6.0]]
    assert knee_x(stages_table) == {"": 6}
    assert len(lines_with(top, linestyle="--")) == 1  # the steady-state bound, tiles x interval
    assert {t.get_text() for t in top.texts} >= {"round trip binds", "compute binds"}


def test_stage_sweep_bound_is_tiles_times_interval(stages_table):
    fig = plots.stage_sweep(stages_table)
    bound = lines_with(fig.axes[0], linestyle="--")[0]
    expected = stages_table["interval_bound_ns"] * stages_table["tiles"] / 1000  # in µs
    assert np.allclose(bound.get_ydata(), expected)
    assert bound.get_ydata()[0] == pytest.approx(272.0)  # 32 tiles x 8.5 µs with one slot


def test_stage_sweep_one_line_per_tile_shape_and_marks_rows_that_do_not_fit(grid_table):
    fig = plots.stage_sweep(grid_table)
    top = fig.axes[0]
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert sum(text.startswith("tile 128×128×64") for text in legend) == 1
    assert sum(text.startswith("tile 128×256×64") for text in legend) == 1
    failed = grid_table[grid_table["status"] != "ok"]
    assert len(failed) >= 1
    crosses = [ln for ln in lines_with(top, marker="X") if len(ln.get_xdata())]
    assert len(crosses) == len(failed)
    assert sorted(float(c.get_xdata()[0]) for c in crosses) == pytest.approx(sorted(failed["pipeline.stages"]),
                                                                              abs=0.2)
    assert any(t.get_text() == "does not fit (SMEM)" for t in top.texts)


def test_stage_sweep_of_a_throughput_has_its_unit_and_an_upper_bound(grid_table):
    fig = plots.stage_sweep(grid_table, y="achieved_flops_per_s")
    top = fig.axes[0]
    assert top.get_ylabel() == "achieved throughput (TFLOP/s)"
    assert "upper bound" in [t.get_text() for t in top.get_legend().get_texts()]
    ok = grid_table[grid_table["status"] == "ok"]
    bound = ok["achieved_flops_per_s"] * ok["makespan_ns"] / ok["bound_ns"]
    assert (bound >= ok["achieved_flops_per_s"]).all()


def test_stage_sweep_names_a_missing_column(stages_table):
    with pytest.raises(KeyError, match="no column 'nope'"):
        plots.stage_sweep(stages_table, y="nope")


@pytest.mark.parametrize(("ys", "higher", "expected"), [
    ([10, 6, 5.04, 5.0], False, 2),   # 5.04 is within 1% of 5.0, 6 is not
    ([10, 5.0, 5.0, 5.0], False, 1),
    ([1, 2, 2.99, 3.0], True, 2),
    ([3, 2, 1], True, 0),
    ([float("nan"), 4, 4], False, 1),
])
def test_knee_is_the_first_point_within_one_percent_of_the_best(ys, higher, expected):
    assert knee(list(range(len(ys))), ys, higher_is_better=higher) == expected


@pytest.mark.parametrize(("column", "values", "expected"), [
    ("makespan_ns", [23_000.0], (1e3, "time to finish (µs)")),
    ("makespan_ns", [1.8e6], (1e3, "time to finish (µs)")),  # 1800 µs: a unit changes at 2 of the next
    ("makespan_ns", [2.5e6], (1e6, "time to finish (ms)")),
    ("achieved_bytes_per_s", [3.2e12], (1e12, "achieved bandwidth into the SMs (TB/s)")),
    ("smem_per_cta_bytes", [32_800], (1024, "SMEM per CTA (KiB)")),
    ("compute_utilization", [0.87], (0.01, "tensor cores busy (%)")),
])
def test_measure_names_the_column_and_scales_its_unit(column, values, expected):
    assert measure(column, values) == expected


# ----------------------------------------------------------------------- stall breakdown


def test_decompose_reference_exactly():
    table = run_sweep("reference", [], ["pipeline.stages=1,2"], progress=False)
    one, two = (decompose(row) for _, row in table.iterrows())
    assert one == {"compute": 20_000.0, "tail": 0.0, "latency": 12_000.0, "waits": 0.0}  # 4 x (3 + 5) µs
    assert two == {"compute": 20_000.0, "tail": 0.0, "waits": 3_000.0}  # compute binds; the first load shows


def test_decompose_adds_up_to_each_makespan(grid_table, stages_table):
    for table in (grid_table, stages_table):
        for _, row in table[table["status"] == "ok"].iterrows():
            parts = decompose(row)
            assert all(v >= 0 for v in parts.values())
            assert sum(parts.values()) == pytest.approx(row["makespan_ns"])


def test_stall_breakdown_has_one_bar_per_part_and_lists_rows_that_did_not_run(grid_table):
    fig = plots.stall_breakdown(grid_table)
    ax = fig.axes[0]
    ok = grid_table[grid_table["status"] == "ok"]
    expected_bars = sum(sum(v > 0 for v in decompose(row).values()) for _, row in ok.iterrows())
    assert len(ax.patches) == expected_bars
    assert len(ax.get_yticklabels()) == len(grid_table)
    assert ax.get_xlabel() == "time (µs)"
    assert sum(t.get_text() == "does not fit (SMEM)" for t in ax.texts) == len(grid_table) - len(ok)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "TMA requests bound (TMA unit)" in legend and legend[0].startswith("compute")  # the TMA unit's requests bind


def test_stall_breakdown_in_shares_ends_every_bar_at_100(stages_table):
    ax = plots.stall_breakdown(stages_table, shares=True).axes[0]
    ends: dict[float, float] = {}
    for bar in ax.patches:
        y = round(bar.get_y() + bar.get_height() / 2)
        ends[y] = max(ends.get(y, 0.0), bar.get_x() + bar.get_width())
    assert len(ends) == len(stages_table) and all(v == pytest.approx(100) for v in ends.values())


def test_stall_breakdown_of_a_run_summary(reference):
    ax = plots.stall_breakdown(reference.summary).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["reference, 2 stages"]


# ------------------------------------------------------------------------------- heatmap


def test_heatmap_cells_colorbar_and_best_cell(grid_table):
    fig = plots.heatmap(grid_table, "pipeline.stages", "workload.tile")
    ax, bar = fig.axes
    image = ax.get_images()[0].get_array()
    assert image.shape == (2, 4)
    assert int(np.ma.count_masked(image)) == int((grid_table["status"] != "ok").sum())
    assert bar.get_ylabel() == "time to finish (µs)\n(lower is better)"
    best = grid_table.loc[grid_table["makespan_ns"].idxmin()]
    outline = [p for p in ax.patches if p.get_edgecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=0.01)]
    assert [p.get_linestyle() for p in outline] == ["solid", "dashed"]  # the answer's best, then its knee
    i = [(128, 128, 64), (128, 256, 64)].index(tuple(best["workload.tile"]))  # a list column: tuples
    j = [2, 3, 4, 5].index(best["pipeline.stages"])
    assert outline[0].get_xy() == pytest.approx((j - 0.47, i - 0.47))
    found = answer.find(grid_table)
    ki = [(128, 128, 64), (128, 256, 64)].index(tuple(found.knee["workload.tile"]))
    kj = [2, 3, 4, 5].index(found.knee["pipeline.stages"])
    assert outline[1].get_xy() == pytest.approx((kj - 0.40, ki - 0.40))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["best", names.term("knee")]
    assert ax.get_xlabel() == "pipeline stages" and ax.get_ylabel() == "tile (M×N×K)"


def _heat_rows(spec: dict[tuple[int, int], float], x: str, y: str) -> pd.DataFrame:
    return pd.DataFrame([{x: a, y: b, "makespan_ns": t, "status": "ok", "workload": "gemm",
                          "smem_per_cta_bytes": 1024 * (a if x == "pipeline.stages" else b)}
                         for (a, b), t in spec.items()])


def _outlined(fig: Figure) -> list[tuple[float, float]]:
    ax = fig.axes[0]
    return [tuple(p.get_xy()) for p in ax.patches if p.get_edgecolor()[:3] == pytest.approx((0.839, 0.153, 0.157),
                                                                                            abs=0.01)]


def test_a_heatmap_over_problem_fields_outlines_nothing_as_the_answer_chooses_nothing():
    """seqlen x batch (or m x n): the answer says nothing is chosen, and the figure outlines no best."""
    table = _heat_rows({(1024, 1): 5.0, (1024, 2): 9.0, (2048, 1): 8.0, (2048, 2): 15.0},
                       "workload.m", "workload.n")
    assert all(not found.fields for found in answer.find_all(table))
    fig = plots.heatmap(table, "workload.m", "workload.n")
    assert _outlined(fig) == [] and fig.axes[0].get_legend() is None
    assert "nothing to choose" in " ".join(fig.axes[0].get_title().split())


def test_a_heatmap_over_a_problem_and_a_design_field_outlines_each_problems_answer():
    """k (the work) x stages (a design choice): one best and one knee per k, as the answer names."""
    times = {(1, 512): 20.0, (2, 512): 10.0, (4, 512): 9.95, (1, 1024): 40.0, (2, 1024): 30.0, (4, 1024): 20.0}
    table = _heat_rows(times, "pipeline.stages", "workload.k")
    fig = plots.heatmap(table, "pipeline.stages", "workload.k")
    from tmasim.review.plot_tables import answer_cells

    assert answer_cells(table, "pipeline.stages", "workload.k") == {
        "best": [("4", "512"), ("4", "1024")], "knee": [("2", "512"), ("4", "1024")]}
    assert sorted(_outlined(fig)) == sorted([(2 - 0.47, 0 - 0.47), (1 - 0.40, 0 - 0.40),  # k = 512: best 4, knee 2
                                             (2 - 0.47, 1 - 0.47), (2 - 0.40, 1 - 0.40)])  # k = 1024: both 4


# --------------------------------------------------------------------------------- Gantt


def test_single_cta_gantt_keeps_the_teaching_layout(reference):
    fig = plots.gantt(reference.spans, reference.events, title="reference")
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == ["TMA transfers", "slot 0", "slot 1", "tensor core", "consumer waits\n(full barrier)",
                    "producer waits\n(empty barrier)"]
    assert ax.get_xlabel() == "time (µs)"
    assert ax.get_xlim()[1] == pytest.approx(23 * 1.01)
    flips = [ln for ln in lines_with(ax, marker="v") if len(ln.get_xdata())]
    assert sum(len(ln.get_xdata()) for ln in flips) == 8  # 4 full + 4 empty phase flips


def test_first_tiles_window_ends_with_the_nth_compute(reference):
    assert plots.first_tiles_window(reference.spans, 2) == (0.0, 13 * US)  # tile 1 computes 8..13 µs
    ax = plots.gantt(reference.spans, reference.events, tiles=2).axes[0]
    assert ax.get_xlim()[1] == pytest.approx(13 * 1.01)


def test_chip_gantt_has_a_row_per_cta_and_says_what_it_left_out(chip):
    keys = plots.cta_keys(chip.spans)
    assert len(keys) == 256 and keys[:4] == [(0, 0), (0, 132), (1, 1), (1, 133)]  # two CTAs per SM
    fig = plots.gantt(chip.spans, chip.events, title="chip", max_ctas=4)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"SM {sm} · CTA {cta}" for sm, cta in keys[:4]]
    assert ax.get_title() == "chip\nfirst 4 of 256 CTAs"
    assert ax.get_xlabel() == "time (µs)"
    bars = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bars) >= 4 * 3  # copies, compute and waits in every row


def test_suggested_tiles_zooms_only_long_runs(reference, chip):
    assert plots.suggested_tiles(reference.spans) is None and plots.suggested_tiles(chip.spans) is None
    assert plots.suggested_tiles(simulate(load("jitter")).spans) == 16  # 64 tiles in one CTA


def test_chip_gantt_window_zooms(chip):
    ax = plots.gantt(chip.spans, chip.events, window=(0, 2 * US)).axes[0]
    assert ax.get_xlim() == pytest.approx((0, 2.02))


# ---------------------------------------------------------------------- slot occupancy


def test_slot_intervals_of_the_reference(reference):
    slots = plots.slot_intervals(reference.spans).sort_values("tile")
    assert slots[["tile", "stage", "issued_ps", "landed_ps", "released_ps"]].values.tolist() == [
        [0, 0, 0, 3 * US, 8 * US], [1, 1, 0, 6 * US, 13 * US], [2, 0, 8 * US, 11 * US, 18 * US],
        [3, 1, 13 * US, 16 * US, 23 * US]]


def test_slot_occupancy_never_exceeds_the_stages(reference):
    fig = plots.slot_occupancy(reference.spans)
    ax = fig.axes[0]
    capacity = lines_with(ax, linestyle="--")
    assert [list(ln.get_ydata()) for ln in capacity] == [[2, 2]]
    top = max(float(np.max(p.get_paths()[0].vertices[:, 1])) for p in ax.collections)
    assert top == 2
    assert ax.get_xlabel() == "time (µs)" and ax.get_ylabel() == "slots in use"


def test_slot_occupancy_of_many_ctas_sums_per_sm(chip):
    fig = plots.slot_occupancy(chip.spans, max_panels=4)
    assert len(fig.axes) == 4
    assert [ax.get_ylabel() for ax in fig.axes] == ["SM 0", "SM 1", "SM 2", "SM 3"]
    assert [lines_with(ax, linestyle="--")[0].get_ydata()[0] for ax in fig.axes] == [6, 6, 6, 6]  # 2 CTAs x 3


# ----------------------------------------------------------------------------- bandwidth


def test_bandwidth_against_capacity(chip):
    fig = plots.bandwidth(chip.bandwidth, title="chip")
    shared, ports = fig.axes
    assert shared.get_ylabel() == "bandwidth (TB/s)" and ports.get_ylabel() == "bandwidth per SM (GB/s)"
    assert ports.get_xlabel() == "time (µs)"
    caps = {ln.get_label(): ln.get_ydata()[0] for ln in lines_with(shared, linestyle="--")}
    assert caps == {"L2 capacity": pytest.approx(9.855), "HBM capacity": pytest.approx(3.35)}
    assert lines_with(ports, linestyle="--")[0].get_ydata()[0] == pytest.approx(117.12)
    loads = [ln for ln in shared.get_lines() if ln.get_linestyle() == "-"]
    assert max(float(np.max(ln.get_ydata())) for ln in loads) <= 9.855 + 1e-9


def test_binned_mean_of_a_step_function():
    times, values = np.array([0.0, 10.0]), np.array([2.0, 4.0])
    assert list(plots.binned_mean(times, values, np.array([0.0, 5.0, 10.0, 20.0]))) == [2.0, 2.0, 4.0]
    assert list(plots.binned_mean(times, values, np.array([0.0, 20.0]))) == [3.0]


def test_save_writes_png_and_svg(reference, tmp_path):
    written = plots.save(plots.slot_occupancy(reference.spans), tmp_path / "f.png", svg=True)
    assert [p.name for p in written] == ["f.png", "f.svg"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in written[1].read_bytes()[:400]


def test_figures_leave_matplotlib_settings_alone(reference):
    import matplotlib

    before = matplotlib.rcParams["font.size"]
    assert isinstance(plots.gantt(reference.spans, reference.events), Figure)
    assert matplotlib.rcParams["font.size"] == before


# ------------------------------------------------------------------------------ tmasim plot


def plot_command(*argv: str) -> tuple[int, str]:
    """``tmasim plot ...`` through the parser that ``register`` builds, as cli.main runs it."""
    from tmasim.review.plot_cli import register

    parser = argparse.ArgumentParser(prog="tmasim")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["plot", *argv])
    try:
        return int(args.handler(args)), ""
    except TmasimError as err:
        return err.exit_code, str(err)


@pytest.fixture(scope="module")
def files(tmp_path_factory, reference, chip, stages_table, grid_table) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("results")
    reference.save(root / "run")
    chip.save(root / "chip")
    simulate(load("reference", ["run.records=false"])).save(root / "bare")
    stages_table.to_csv(root / "sweep.csv", index=False)
    grid_table.to_parquet(root / "grid.parquet")
    return {"run": root / "run", "chip": root / "chip", "bare": root / "bare", "sweep": root / "sweep.csv",
            "grid": root / "grid.parquet"}


def test_plot_stage_sweep_writes_beside_the_sweep_file(files):
    code, message = plot_command(str(files["sweep"]), "--kind", "stage-sweep", "--svg")
    assert (code, message) == (0, "")
    out = files["sweep"].with_name("sweep-stage-sweep.png")
    assert out.read_bytes()[:4] == b"\x89PNG" and out.with_suffix(".svg").exists()


@pytest.mark.parametrize(("result", "kind"), [("run", "gantt"), ("run", "slots"), ("run", "stalls"),
                                              ("chip", "gantt"), ("chip", "bandwidth"), ("grid", "heatmap"),
                                              ("grid", "stalls")])
def test_plot_kinds(files, result, kind, tmp_path):
    assert plot_command(str(files[result]), "--kind", kind, "--out", str(tmp_path / f"{kind}.png")) == (0, "")
    assert (tmp_path / f"{kind}.png").stat().st_size > 10_000


def test_plot_defaults_to_a_file_named_by_kind_in_the_run_folder(files):
    assert plot_command(str(files["chip"]), "--kind", "slots") == (0, "")
    assert (files["chip"] / "slots.png").exists()


def test_plot_gantt_window_with_units(files, tmp_path):
    assert plot_command(str(files["run"]), "--kind", "gantt", "--window", "0 us..5 us",
                        "--out", str(tmp_path / "g.svg")) == (0, "")
    assert (tmp_path / "g.svg").read_text().startswith("<?xml")
    assert plot_command(str(files["run"]), "--kind", "gantt", "--from", "1 us", "--to", "5 us",
                        "--out", str(tmp_path / "h.png")) == (0, "")


def test_window_cannot_be_misread():
    from tmasim.review.plot_cli import parse_window

    assert parse_window("0 us..5 us") == (0.0, 5_000_000.0)
    assert parse_window("0..2 ns") == (0.0, 2000.0)
    with pytest.raises(TmasimError, match="needs a unit"):
        parse_window("1..5 us")


@pytest.mark.parametrize(("result", "argv", "message"), [
    ("sweep", ["--kind", "gantt"], "--kind gantt needs a `tmasim run --out` folder; RESULT is a sweep table"),
    ("run", ["--kind", "stage-sweep"], "--kind stage-sweep needs a sweep file"),
    ("bare", ["--kind", "gantt"], "has no per-event records; run it again with --set run.records=true"),
    ("run", ["--kind", "bandwidth"], "has no bandwidth.csv"),
    ("sweep", ["--kind", "stage-sweep", "--y", "nope"], "--kind stage-sweep: no column 'nope' in the table"),
    ("sweep", ["--kind", "heatmap"], "--kind heatmap needs two varied fields; this sweep varies pipeline.stages"),
    ("run", ["--kind", "gantt", "--window", "5 us..1 us"], "--window: '5 us' to '1 us' must have 0 <= START < END"),
    ("run", ["--kind", "gantt", "--window", "0..5 GB"], "is not a time"),
    ("run", ["--kind", "gantt", "--window", "0,5 us"], "must be START..END with units"),
    ("run", ["--kind", "gantt", "--from", "1 us"], "--to END is needed"),
])
def test_plot_refuses_what_the_result_cannot_give_in_one_line(files, result, argv, message):
    code, text = plot_command(str(files[result]), *argv)
    assert code == 2 and message in text and "\n" not in text


def test_plot_refuses_a_missing_result(tmp_path):
    assert plot_command(str(tmp_path / "nothing.parquet"), "--kind", "stalls") == (
        2, f"RESULT: {str(tmp_path / 'nothing.parquet')!r} does not exist")


def test_plot_through_the_tmasim_command(files, tmp_path):
    def tmasim(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tmasim.cli", *args], capture_output=True, text=True, cwd=REPO,
                              timeout=120)

    ok = tmasim("plot", str(files["run"]), "--kind", "gantt", "--out", str(tmp_path / "g.png"))
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    bad = tmasim("plot", str(files["sweep"]), "--kind", "gantt")
    assert bad.returncode == 2 and bad.stderr.startswith("tmasim: error: --kind gantt needs")
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(("result", "kind"), [("run", "gantt"), ("bare", "stalls"), ("sweep", "stage-sweep"),
                                              ("grid", "heatmap")])
def test_plot_without_kind_draws_the_natural_figure(files, result, kind, tmp_path, capsys):
    """No --kind: a run folder's Gantt (its stalls without records), a one-field sweep's curve,
    a two-field sweep's heatmap; stderr says which and lists the others."""
    assert plot_command(str(files[result]), "--out", str(tmp_path / "f.png")) == (0, "")
    assert (tmp_path / "f.png").stat().st_size > 10_000
    err = capsys.readouterr().err
    assert f"no --kind: drawing {kind}, the default for" in err and "(others: --kind" in err


def test_plot_without_kind_lists_the_kinds_where_none_is_natural(files, tmp_path):
    table = pd.read_csv(files["sweep"]).rename(columns={"pipeline.stages": "pipeline.consumers"})
    table["workload.tiles"] = 4
    table["run.seed"] = range(len(table))
    table.to_csv(tmp_path / "three.csv", index=False)
    code, text = plot_command(str(tmp_path / "three.csv"))
    assert code == 2 and "\n" not in text
    assert "varies 3 fields" in text and "give --kind stage-sweep or stalls or heatmap" in text


def test_gantt_draws_a_split_tiles_reduction():
    """Split-K: the partials' workspace reads and writes with the copies, a peer's wait for the
    partials before it with the consumer's waits, both in the legend, in either layout."""
    split = simulate(load("gemm-h100", ["workload.m=256", "workload.n=512", "workload.k=1024", "workload.split_k=3",
                                        "run.records=true"]))
    wanted = {"split tile's partial: workspace read / write", "wait: peers' partials (split tile)"}
    assert {"workspace_read", "workspace_write", "wait_fixup"} <= set(split.spans["kind"])
    for layout in ("chip", "cta"):
        one = split.spans if layout == "chip" else split.spans[split.spans["cta"] == 8]  # a final peer: it waits
        ax = plots.gantt(one, split.events, layout=layout).axes[0]
        assert wanted <= {t.get_text() for t in ax.get_legend().get_texts()}, layout


def test_a_line_along_a_problem_field_has_no_knee(tmp_path):
    """K changes the work: its points are other problems, none a costlier way to do one, so the
    figure rings no knee and its legend names none (the sweep's answer says the same)."""
    import matplotlib.pyplot as plt

    from tmasim.sweep import run_sweep

    table = run_sweep("gemm-h100", ["workload.m=512", "workload.n=512"], ["workload.k=256,512,1024"], progress=False)
    assert knee_x(table, x="workload.k") == {"": None}
    fig = plots.stage_sweep(table, x="workload.k")
    labels = fig.axes[0].get_legend_handles_labels()[1] + [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert not any("knee" in label for label in labels)
    plt.close(fig)
    stages = run_sweep("gemm-h100", ["workload.m=512", "workload.n=512"], ["pipeline.stages=2,3"], progress=False)
    assert knee_x(stages) != {"": None}  # a design field keeps its knee
