"""``tmasim report``: the HTML is self-contained and says what binds; where chromium is
installed, the page renders its images in a headless browser (skipped elsewhere)."""

from __future__ import annotations

import argparse
import base64
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tmasim.errors import TmasimError
from tmasim.review.plot_cli import build_report
from tmasim.review.report import explain, scenario_toml
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.sweep import run_sweep

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("review")
    return build_report("reference", [], ["pipeline.stages=1,2,3,4"], out)


@pytest.fixture(scope="module")
def page(report) -> str:
    return report.read_text(encoding="utf-8")


def test_report_embeds_every_figure_as_base64_png(page):
    images = re.findall(r'<img alt="[^"]+" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', page)
    assert len(images) == len(re.findall(r"<img ", page)) == 4  # sweep, where the time went, Gantt, slots
    assert all(base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n" for data in images)


def test_report_loads_nothing_from_elsewhere(page):
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert set(re.findall(r'href="([^"]+)"', page)) == {"summary.csv", "sweep.csv"}  # files written beside it


def test_report_explains_the_binding_term(page):
    assert ("The base scenario: takes 23 µs. The tensor core binds: each tile computes in 5 µs and loads in 3 µs "
            "(means), so the pipeline delivers at best one tile every 5 µs, a bound more stages cannot lower.") in page


def test_report_headlines_the_best_and_knee_points_and_draws_the_knee(page):
    assert ('id="explanation">\n<p>Best point: pipeline.stages = 2, 23 µs; it is also the knee (the cheapest point '
            "within 1% of the best).") in page
    assert "Timeline of the knee point, also the best (pipeline.stages = 2)" in page
    assert "Timeline of the base scenario" not in page


def test_the_knee_is_labelled_apart_from_the_best():
    from tmasim.review.report import chosen_point

    table = run_sweep("latency-hidden", [], ["pipeline.stages=5,6,7"], progress=False)
    label, changes = chosen_point(table)
    assert changes == ["pipeline.stages=6"]
    assert label.startswith("the knee point")


def test_report_answers_first(page):
    """The first paragraph says what the sweep found: the best point, the knee and the next step."""
    answer = re.search(r'<ul class="answer">(.*?)</ul>', page, re.S).group(1)
    assert "<li>best: pipeline.stages = 2: 23 µs</li>" in answer
    assert "knee (the cheapest point within 1% of the best): the best point itself" in answer
    assert "next step: none: the knee is the best point; no further step is worth its cost" in answer


def test_report_escapes_what_the_scenario_says(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('name = "x"\ndescription = "<script>alert(1)</script> & more"\n'
                    '[workload]\nkind = "tiles"\ntiles = 2\nload = "1 us"\ncompute = "1 us"\n')
    page = build_report(str(path), [], [], tmp_path / "r").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page


def test_report_has_the_scenario_summary_and_sweep_tables(page, report):
    text = html.unescape(page)  # autoescape writes quotes as &#34;
    assert 'name = "reference"' in text and "[pipeline]" in page and "stages = 2" in page
    assert "<th scope=\"row\">time to finish</th><td>23 µs</td>" in page
    rows = re.search(r'<table class="sweep">.*?</table>', page, re.S)
    assert rows is not None and rows.group(0).count("<tr class=\"ok\">") == 4
    sweep = pd.read_csv(report.parent / "sweep.csv")
    assert sweep["pipeline.stages"].tolist() == [1, 2, 3, 4]
    assert sweep["makespan_ns"].tolist() == [32_000.0, 23_000.0, 23_000.0, 23_000.0]
    assert sorted(p.name for p in (report.parent / "figures").iterdir()) == ["gantt.png", "slots.png", "stalls.png",
                                                                              "sweep.png"]


def test_report_of_a_chip_workload_has_bandwidth_and_zooms_its_gantt(tmp_path):
    index = build_report("stream-h100", [], [], tmp_path)  # about 250 boxes per CTA
    page = index.read_text(encoding="utf-8")
    assert (tmp_path / "figures" / "bandwidth.png").exists()
    assert "Gantt chart (zoomed to the first 16 tiles of each CTA" in page
    assert "HBM bandwidth binds: 132 SMs x 32 KiB in flight" in page


def test_report_refuses_a_file_as_its_folder(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(TmasimError, match="exists and is not a directory"):
        build_report("reference", [], [], tmp_path / "f")


def test_scenario_toml_reads_back_as_the_same_scenario():
    import tomllib

    raw = load("gemm-h100").to_dict()
    assert tomllib.loads(scenario_toml(raw)) == raw


# --------------------------------------------------------------------------------- explain


def stats(name: str, *overrides: str) -> dict:
    return simulate(load(name, ["run.records=false", *overrides])).stats


def test_explain_latency_bound_tiles_says_how_many_stages_hide_it():
    assert explain(stats("latency-hidden", "pipeline.stages=2")) == (
        "The round trip binds: one slot cycles in 8.5 µs (copy latency, load, compute and barrier overheads), "
        "so 2 stages deliver at best one tile every 4.25 µs; about 6 stages would hide it.")


def test_explain_copy_bound_tiles():
    assert explain(stats("load-bound")).startswith("The copy engine binds: each tile takes 6 µs to load and 2 µs")


def test_explain_gemm_l2_bound_in_rates():
    s = {"workload": "gemm", "binding": "l2", "compute_bound_ns": 1000.0, "l2_bound_ns": 2000.0,
         "l2_bytes": 14.4e6}
    assert explain(s) == ("L2 bandwidth binds: to keep the tensor cores busy the SMs together would ask for "
                          "14.4 TB/s of L2 traffic, and L2 supplies 7.2 TB/s, so moving 14.4 MB takes at least 2 µs.")


@pytest.mark.parametrize(("overrides", "start"), [
    (["workload.m=1024", "workload.n=1024", "workload.k=1024"], "The TMA requests bind: the busiest SM's TMA unit"),
    (["workload.m=1024", "workload.n=1024", "workload.k=1024", "pipeline.cluster=[2,1]"],
     "Compute binds: the busiest SM needs"),  # B multicast in halves: 256 requests a k-step, not 384
    (["workload.k=1024", "gpu.l2_bandwidth=4 TB/s"], "L2 bandwidth binds"),  # a slower L2 than the TMA units
    (["workload.k=64", "workload.m=16384"], "HBM bandwidth binds"),
])
def test_explain_gemm_names_each_binding_term(overrides, start):
    assert explain(stats("gemm-h100", *overrides)).startswith(start)


def test_explain_stream_uses_littles_law():
    text = explain(stats("stream-h100", "pipeline.stages=1", "workload.shape=[2048, 4096]"))
    assert text.startswith("Little's law binds: 132 SMs x 8 KiB in flight over a ")
    saturated = explain(stats("stream-h100", "workload.shape=[2048, 4096]"))
    assert saturated.startswith("HBM bandwidth binds:") and "HBM supplies 3.35 TB/s" in saturated


# ------------------------------------------------------------------------- command line


def test_report_through_its_parser(tmp_path):
    from tmasim.review.plot_cli import register

    parser = argparse.ArgumentParser(prog="tmasim")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", "one-stage", "--set", "workload.tiles=3", "--out", str(tmp_path / "r")])
    assert args.handler(args) == 0
    assert "Takes 24 µs." in (tmp_path / "r" / "index.html").read_text(encoding="utf-8")  # 3 x (3 + 5) µs


def test_report_through_the_tmasim_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tmasim.cli", "report", "reference", "--vary",
                           "pipeline.stages=1,2", "--out", str(tmp_path / "r")], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r" / "index.html").exists()


# --------------------------------------------------------------------------- in a browser


def chromium(report: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}"]
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *flags, *args, report.as_uri()], capture_output=True, text=True, timeout=90)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_report_renders_its_images_in_a_headless_browser(report, tmp_path):
    dom = chromium(report, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<img ") == 4 and 'id="explanation"' in dom.stdout
    shot = tmp_path / "page.png"
    done = chromium(report, tmp_path, "--hide-scrollbars", "--window-size=1280,4800", f"--screenshot={shot}")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    colourful = (pixels.max(axis=2) - pixels.min(axis=2)) > 0.25  # bars and lines, not text on white
    assert colourful.mean() > 0.02, "the screenshot shows no figures"


def test_report_shows_the_scenario_file_as_written(page):
    """Its comments kept: the bundled reference file, not a rewrite of its fields."""
    from tmasim.scenario import bundled_text

    first_comment = next(line for line in bundled_text("reference").splitlines() if line.startswith("#"))
    assert html.escape(first_comment, quote=True) in page
