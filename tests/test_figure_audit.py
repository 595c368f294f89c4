"""Figures hide no series and clip no legend: lines that coincide are drawn so each still shows
(the one underneath wider) and the legend says so; the heat map's legend fits its figure; the
committed figures carry their trust line."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from tmasim.review import plots  # noqa: E402
from tmasim.review.plot_usage import coincide  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _bandwidth(hbm: list[float], ports: tuple[list[float], list[float]]) -> pd.DataFrame:
    times = [0, 400_000, 720_000]
    rows = [(t, "L2", v, 9855.0) for t, v in zip(times, [0.0, 3350.0, 3350.0], strict=True)]
    rows += [(t, "HBM", v, 3350.0) for t, v in zip(times, hbm, strict=True)]
    for sm, values in enumerate(ports):
        rows += [(t, f"sm{sm}.port", v, 117.0) for t, v in zip(times, values, strict=True)]
    return pd.DataFrame(rows, columns=["time_ps", "link", "gbytes_per_s", "capacity_gbytes_per_s"])


def _lines(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_coinciding_step_functions_are_found_and_apart_ones_are_not():
    assert coincide([0, 10], [0, 10], [0.0, 5.0], [0.0, 5.0])
    assert coincide([0, 10], [0, 5, 10], [0.0, 5.0], [0.0, 1.0, 5.0])  # equal from 10 on
    assert not coincide([0, 10], [0, 10], [0.0, 5.0], [0.0, 4.0])
    assert not coincide([0], [0], [0.0], [0.0])  # both idle: nothing drawn to hide


def test_bandwidth_lines_that_coincide_show_both_and_say_so():
    fig = plots.bandwidth(_bandwidth([0.0, 3350.0, 3350.0], ([0.0, 25.0, 13.0], [0.0, 25.0, 27.0])))
    top, bottom = fig.axes
    l2 = next(line for label, line in _lines(top).items() if label.startswith("L2 "))
    assert l2.get_label() == "L2 (wide: under HBM where equal)"
    assert l2.get_linewidth() > _lines(top)["HBM"].get_linewidth()
    mean = next(line for label, line in _lines(bottom).items() if label.startswith("mean"))
    assert "under the busiest where equal" in mean.get_label()
    assert mean.get_linewidth() > _lines(bottom)["busiest SM port"].get_linewidth()
    apart = plots.bandwidth(_bandwidth([0.0, 1000.0, 2000.0], ([0.0, 20.0, 20.0], [0.0, 25.0, 27.0])))
    assert {"L2", "HBM"} <= set(_lines(apart.axes[0])) and "mean over SM ports" in _lines(apart.axes[1])


def test_a_stage_sweeps_earlier_lines_are_wider_so_a_plateau_hides_none():
    rows = [{"point": i, "pipeline.stages": s, "workload.box": box, "status": "ok", "makespan_ns": 100.0,
             "smem_per_cta_bytes": 1024 * s, "ctas_per_sm": 1, "workload": "stream"}
            for i, (s, box) in enumerate((s, box) for box in ("[32, 64]", "[64, 64]", "[128, 64]") for s in (2, 4))]
    fig = plots.stage_sweep(pd.DataFrame(rows))
    widths = [line.get_linewidth() for line in fig.axes[0].get_lines() if line.get_label().startswith("workload.box")
              or line.get_label().startswith("box")]
    assert len(widths) == 3 and widths[0] > widths[1] > widths[2], widths


def test_the_heatmap_legend_fits_inside_its_figure():
    rows = [{"point": i, "workload.load": load, "pipeline.stages": s, "status": "ok", "makespan_ns": t,
             "stages": s, "smem_per_cta_bytes": 1024 * s, "ctas_per_sm": 1, "workload": "tiles"}
            for i, (load, s, t) in enumerate([("1 us", 1, 24e3), ("1 us", 2, 21e3), ("3 us", 1, 32e3),
                                              ("3 us", 2, 23e3)])]
    fig = plots.heatmap(pd.DataFrame(rows), "workload.load", "pipeline.stages")
    fig.canvas.draw()
    legend = fig.axes[0].get_legend()
    box, page = legend.get_window_extent(), fig.bbox
    assert box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1, (box, page)


def test_every_committed_figure_is_saved_with_its_trust_line():
    source = (REPO / "plots" / "make_readme_figures.py").read_text(encoding="utf-8")
    saves = re.findall(r"plots\.save\(([^\n]*)\)", source)
    assert len(saves) >= 9 and all("trust=" in call for call in saves), saves


def test_the_achieved_bandwidth_says_which_link():
    """A stream's achieved bandwidth is the bytes its TMA loads brought into the SMs per second:
    the summary row and the figures' axis say so."""
    from tmasim.review.columns import figure_label
    from tmasim.scenario import load
    from tmasim.simulation import simulate
    from tmasim.workloads import stream

    scenario = load("stream-h100", ["workload.shape=[1024, 1024]"])
    rows = dict(stream.summary_rows(simulate(scenario).stats, scenario))
    assert " into the SMs   (TMA loads; Little's law: " in rows["achieved bandwidth"]
    assert figure_label("achieved_bytes_per_s").startswith("achieved bandwidth into the SMs")


def test_an_aggregated_attention_gantt_says_which_sm_its_one_cta_is():
    """The attention Gantt draws one CTA lane by lane: its title names the SM and says the CTA
    stands for its class, not that "each row" does."""
    from tmasim.scenario import load
    from tmasim.simulation import simulate

    result = simulate(load("attention-h100", ["workload.batch=1", "workload.heads=4", "workload.seqlen_q=1024",
                                              "run.records=true"]))
    note = plots.representatives_note(result.stats)
    assert note.startswith("each row stands for a class of identical SMs")
    fig = plots.gantt(result.spans, result.events, "attention", note=note)
    title = fig._suptitle.get_text() if fig._suptitle is not None else fig.axes[0].get_title()
    assert "of one CTA (SM 0):" in title and "the CTA drawn (SM 0) stands for its class of identical SMs" in title
    assert "each row stands for" not in title
