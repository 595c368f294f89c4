"""Every figure a run, report, plot or lesson writes carries the run's trust line in small print."""

from __future__ import annotations

from pathlib import Path

import pytest

from tmasim.review import plots


def test_the_footnote_is_the_validated_line_wrapped_to_the_figure(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    ax.plot([0, 1], [0, 1])
    line = "B200 one-CTA mainloop: stage answer right on 45 of 46 tiles " * 3
    plots.footnote(fig, line)
    text = fig._supxlabel.get_text()  # type: ignore[attr-defined]
    assert text.replace("\n", " ").startswith("validated: B200 one-CTA mainloop")
    assert max(len(part) for part in text.splitlines()) <= 6 * 17
    assert fig._supxlabel.get_fontsize() == 6  # type: ignore[attr-defined]
    plt.close(fig)


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    trusts: list[str | None] = []
    real = plots.save

    def spy(fig, path, *, svg=False, trust=None):
        trusts.append(trust)
        return real(fig, path, svg=svg, trust=trust)

    monkeypatch.setattr(plots, "save", spy)
    return trusts


def test_run_report_and_plot_figures_carry_the_runs_line(tmp_path: Path, saved: list[str | None]) -> None:
    from tmasim.cli import main
    from tmasim.scenario import load
    from tmasim.simulation import simulate

    small = ["--set", "workload.m=512", "--set", "workload.n=512", "--set", "workload.k=256"]
    line = simulate(load("gemm-b200", ["workload.m=512", "workload.n=512", "workload.k=256"])).validated
    assert main(["run", "gemm-b200", *small, "--set", "run.records=true", "--out", str(tmp_path / "run")]) == 0
    assert saved == [line]
    assert main(["sweep", "gemm-b200", *small, "--vary", "pipeline.stages=2,3", "--out", str(tmp_path / "s.csv"),
                 "--quiet"]) == 0
    saved.clear()
    assert main(["plot", str(tmp_path / "s.csv"), "--kind", "stage-sweep", "--out", str(tmp_path / "p.png")]) == 0
    assert saved == [line]  # from the table's validated column
    saved.clear()
    assert main(["report", "gemm-b200", *small, "--vary", "pipeline.stages=2,3", "--out",
                 str(tmp_path / "report")]) == 0
    assert saved and all(trust == line for trust in saved)


def test_coinciding_ctas_per_sm_lines_are_dodged_so_none_hides_another() -> None:
    import matplotlib.pyplot as plt

    from tmasim.sweep import run_sweep

    table = run_sweep("gemm-h100", ["workload.m=512", "workload.n=512", "workload.k=256"],
                      ["pipeline.stages=2,3", "workload.tile=[128,128,64],[128,256,64]"], progress=False)
    fig = plots.stage_sweep(table, x="pipeline.stages")
    triangles = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() == "^"]
    assert len(triangles) == 2
    first, second = (list(line.get_xdata()) for line in triangles)
    assert [list(line.get_ydata()) for line in triangles][0] == [list(line.get_ydata()) for line in triangles][1]
    assert all(a < b for a, b in zip(first, second, strict=True))  # same heights, side by side
    plt.close(fig)


def test_a_tables_lines_say_a_clause_they_share_once() -> None:
    import pandas as pd

    from tmasim.review.plot_cli import table_trust

    short = "B200 whole-chip GEMMs, nearest cases (short shapes): mean error 5% over 12 runs; all 576 runs 6%"
    large = "B200 whole-chip GEMMs, nearest cases (large shapes): mean error 5% over 24 runs; all 576 runs 6%"
    table = pd.DataFrame({"status": ["ok", "ok", "ok"], "validated": [short, large, short]})
    assert table_trust(table) == ("B200 whole-chip GEMMs, nearest cases (short shapes): mean error 5% over 12 runs; "
                                  "B200 whole-chip GEMMs, nearest cases (large shapes): mean error 5% over 24 runs; "
                                  "all 576 runs 6%")
    other = "h100-sxm whole-chip GEMM: not validated"
    assert table_trust(pd.DataFrame({"validated": [short, other]})) == f"{short}; {other}"  # nothing shared
    assert table_trust(pd.DataFrame({"validated": [short]})) == short
