"""Figures that go on a slide as they are: titles name the scenario and the zoom, legends list
only what is drawn, numbers carry units, a flat heat map says it is flat."""

from __future__ import annotations

import pandas as pd
import pytest

from tmasim.review import plots
from tmasim.scenario import load
from tmasim.simulation import simulate


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _grid(times):
    return pd.DataFrame({"point": range(4), "pipeline.stages": [2, 3, 2, 3], "run.seed": [0, 0, 1, 1],
                         "status": ["ok"] * 4, "scenario": ["demo"] * 4, "makespan_ns": times})


def test_a_flat_heat_map_says_so_instead_of_colouring_noise():
    fig = plots.heatmap(_grid([1000.0, 1000.2, 1000.1, 1000.0]), "pipeline.stages", "run.seed")
    assert len(fig.axes) == 1  # no colour bar over 0.0002 µs
    title = fig.axes[0].get_title()
    assert title.startswith("demo: time to finish (")
    assert "all points within 0.02% of each other" in title
    varied = plots.heatmap(_grid([1000.0, 2000.0, 1500.0, 1200.0]), "pipeline.stages", "run.seed")
    assert len(varied.axes) == 2 and "within" not in varied.axes[0].get_title()


def test_stall_bars_print_their_time_with_a_unit():
    table = simulate(load("reference")).summary
    texts = [t.get_text().strip() for t in plots.stall_breakdown(table).axes[0].texts]
    assert "23 µs" in texts
    assert plots.stall_breakdown(table).axes[0].get_title().startswith("reference: ")


@pytest.fixture(scope="module")
def gemm():
    return simulate(load("gemm-h100", ["workload.m=1024", "workload.n=1024", "workload.k=2048",
                                       "workload.tile=[128,128,64]", "run.records=true"]))


def test_chip_gantt_states_its_zoom_and_what_its_rows_stand_for(gemm):
    note = plots.representatives_note(gemm.stats)
    assert note.startswith("each row stands for a class of identical SMs (")
    fig = plots.gantt(gemm.spans, gemm.events, title="gemm", tiles=4, note=note, layout="chip")
    title = fig.axes[0].get_title()
    assert "zoomed to the first 4 k-steps of each CTA: 0 to " in title and note in title  # a GEMM's steps
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "copy transfer (TMA)" in legend
    assert all(s not in " ".join(legend) for s in ("race",))  # nothing drawn that is not there


def test_single_cta_legend_lists_only_what_is_drawn():
    run = simulate(load("compute-bound", ["pipeline.stages=1"]))
    fig = plots.gantt(run.spans, run.events, title="x")
    legend = {t.get_text() for t in fig.axes[0].get_legend().get_texts()}
    kinds = set(run.spans["kind"])
    assert ("wait: empty barrier" in legend) == ("wait_empty" in kinds)
    assert ("epilogue / TMA store" in legend) == bool(kinds & {"epilogue", "store"})
    assert plots.representatives_note(run.stats) == ""
