"""The validation harness over public whole-pipeline tables, and its ratchet: the model's figures
on them may improve (and the new baseline be committed), never silently worsen."""

import json
import subprocess
import sys

import pytest

from tmasim.validation import pipelines
from tmasim.validation.public_command import regressions


@pytest.fixture(scope="module")
def results():
    found = {t.name: pipelines.validate(t, jobs=2) for t in pipelines.TABLES}
    found.update(pipelines.shape_checks())
    return found


def test_no_figure_is_worse_than_the_committed_baseline(results):
    assert regressions(results, pipelines.baseline()) == []


def test_the_baseline_covers_every_table_with_both_parts():
    base = pipelines.baseline()
    for table in pipelines.TABLES:
        assert {"fitted", "held_out", "all"} <= set(base[table.name])


def test_the_split_is_fixed_and_holds_out_a_quarter_of_the_tiles():
    configs = {p.config for p in pipelines.mainloop_points()}
    out = pipelines.held_out(configs)
    assert len(configs) == 46 and len(out) == 12
    assert out == pipelines.held_out(sorted(configs, reverse=True))  # the draw does not depend on order


def test_knee_is_the_fewest_stages_within_two_percent_of_the_best():
    assert pipelines.knee({2: 10.0, 3: 6.0, 4: 5.05, 5: 5.0}) == 4
    assert pipelines.knee({2: 10.0, 3: 5.2, 4: 5.0}) == 4
    assert pipelines.knee({2: 5.0, 3: 5.0}) == 2


def test_the_fa3_row_is_a_check_of_shape_in_the_baseline(results):
    assert [r["measured"] for r in results["fa3-d128"]["rows"]] == [467.0, 565.0, 625.0, 638.0, 646.0, 648.0]
    assert "fa3-d128" in pipelines.baseline()


def test_a_worse_shape_check_is_a_regression():
    assert regressions({"s": {"mean_error": 0.3}}, {"s": {"mean_error": 0.2}}) == ["s: mean error 30.00% > 20.00%"]


def test_a_worse_figure_is_a_regression():
    base = {"t": {"split": "", "fitted": {"knee_right": 10, "knee_within_one": 20, "mean_error": 0.05}}}
    worse = {"t": {"split": "", "fitted": {"knee_right": 9, "knee_within_one": 20, "mean_error": 0.06}}}
    found = regressions(worse, base)
    assert len(found) == 2 and "knee_right 9 < 10" in found[0] and "mean error" in found[1]
    assert regressions(base, base) == []


def test_mainloop_plateau_errors_are_small(results):
    """Where the table shows a plateau (the most stages measured), the model is within 5% on the
    median sweep and 35% on the worst."""
    rows = results["b200-mainloop"]["rows"]
    last = {}
    for r in rows:
        if r["config"] not in last or r["stages"] > last[r["config"]]["stages"]:
            last[r["config"]] = r
    errors = sorted(abs(r["predicted_s"] / r["measured_s"] - 1) for r in last.values())
    assert errors[len(errors) // 2] < 0.05 and errors[-1] < 0.35


def test_bf16_and_fp8_tiles_of_the_same_rows_plateau_alike_where_the_table_does(results):
    """bf16 M x N x K and fp8 M x N x 2K move the same row bytes a k-step. Where the table's
    plateaus per k-step lie within 5% of each other, the model's do too."""
    plateau: dict[str, tuple[float, float]] = {}
    for r in results["b200-mainloop"]["rows"]:
        best = plateau.get(r["config"], (float("inf"), float("inf")))
        plateau[r["config"]] = (min(best[0], r["measured_s"]), min(best[1], r["predicted_s"]))
    pairs = 0
    for config, (measured_bf16, predicted_bf16) in plateau.items():
        dtype, shape = config.split()
        m, n, k = (int(x) for x in shape.split("x"))
        twin = f"fp8 {m}x{n}x{2 * k}"
        if dtype != "bf16" or twin not in plateau:
            continue
        measured_fp8, predicted_fp8 = plateau[twin]
        if abs(measured_bf16 / (2 * measured_fp8) - 1) <= 0.05:  # twice the k-steps in bf16
            pairs += 1
            assert abs(predicted_bf16 / (2 * predicted_fp8) - 1) <= 0.05, config
    assert pairs >= 6


def test_cli_prints_each_table_and_json():
    out = subprocess.run([sys.executable, "-m", "tmasim", "validate", "public", "--json"], capture_output=True,
                         text=True, check=True).stdout
    data = json.loads(out)
    assert data["b200-mainloop"]["all"]["sweeps"] == 46
    text = subprocess.run([sys.executable, "-m", "tmasim", "validate", "public"], capture_output=True, text=True,
                          check=True).stdout
    assert "held-out" in text and "knee right" in text


def test_the_readme_quotes_the_committed_figures():
    """The README's trust section says what the committed baseline says (regenerate both together)."""
    from pathlib import Path

    readme = " ".join((Path(pipelines.REPO) / "README.md").read_text().split())  # wrapped lines read as one
    base = pipelines.baseline()["b200-mainloop"]
    quoted = (f"mean error {base['all']['mean_error']:.1%}", f"fitted tiles {base['fitted']['mean_error']:.1%}",
              f"held-out tiles {base['held_out']['mean_error']:.1%}",
              f"right on {base['all']['knee_right']} of 46 tiles and within one stage on "
              f"{base['all']['knee_within_one']}")
    for text in quoted:
        assert text in readme, text


def test_without_the_repositorys_tables_validate_public_is_a_one_line_error(monkeypatch, tmp_path, capsys) -> None:
    """An installed package has no validation/ folder: say where the tables were looked for."""
    from tmasim.cli import main
    from tmasim.validation import pipelines

    monkeypatch.setattr(pipelines, "PUBLIC", tmp_path / "validation" / "public")
    assert main(["validate", "public"]) == 2
    err = capsys.readouterr().err.strip()
    assert "validate public: the public tables are not at" in err and "run it from a checkout" in err
    assert "\n" not in err
