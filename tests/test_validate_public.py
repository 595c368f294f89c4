"""The validation harness over public whole-pipeline tables, and its ratchet: the model's figures
on them may improve (and the new baseline be committed), never silently worsen."""

import json

import pytest

from tmasim.validation import pipelines, wholechip
from tmasim.validation.public_command import regressions


@pytest.fixture(scope="module")
def results():
    found = {t.name: pipelines.validate(t, jobs=2) for t in pipelines.TABLES}
    found.update(wholechip.validate(jobs=2, ci_only=True))
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


def test_the_stage_answer_is_the_fewest_stages_within_two_percent_of_the_best():
    assert pipelines.stage_answer({2: 10.0, 3: 6.0, 4: 5.05, 5: 5.0}) == 4
    assert pipelines.stage_answer({2: 10.0, 3: 5.2, 4: 5.0}) == 4
    assert pipelines.stage_answer({2: 5.0, 3: 5.0}) == 2
    assert pipelines.stage_answer({2: 5.15, 3: 5.0}) == 3  # 3% slower: outside the 2%


def test_the_fa3_row_is_a_check_of_shape_in_the_baseline(results):
    assert [r["measured"] for r in results["fa3-d128"]["rows"]] == [467.0, 565.0, 625.0, 638.0, 646.0, 648.0]
    assert "fa3-d128" in pipelines.baseline()


def test_a_worse_shape_check_is_a_regression():
    assert regressions({"s": {"mean_error": 0.3}}, {"s": {"mean_error": 0.2}}) == ["s: mean error 30.00% > 20.00%"]


def test_a_worse_figure_is_a_regression():
    base = {"t": {"split": "", "fitted": {"knee_right": 10, "knee_within_one": 20, "mean_error": 0.05}}}  # old keys
    worse = {"t": {"split": "", "fitted": {"stage_answer_right": 9, "stage_answer_within_one": 20,
                                           "mean_error": 0.06}}}
    found = regressions(worse, base)
    assert len(found) == 2 and "stage_answer_right 9 < 10" in found[0] and "mean error" in found[1]
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


def test_cli_prints_each_table_and_json(results, monkeypatch, capsys):
    """The command end to end, its tables' figures taken from the module's run of them (the same
    calls the command makes: computing them twice would double the file's time)."""
    from tmasim.cli import main

    monkeypatch.setattr(pipelines, "validate", lambda table, jobs=1: results[table.name])
    monkeypatch.setattr(wholechip, "validate", lambda jobs=1, ci_only=False: {
        name: result for name, result in results.items() if name == ("b200-wholechip-ci" if ci_only else "")})
    monkeypatch.setattr(pipelines, "shape_checks", lambda: {
        name: result for name, result in results.items() if name.startswith("fa")})
    assert main(["validate", "public", "--json", "--ci-subset", "--jobs", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["b200-mainloop"]["all"]["sweeps"] == 46
    assert data["b200-wholechip-ci"]["all"]["points"] == 288 and "b200-wholechip" not in data
    text = wholechip.text(data["b200-wholechip-ci"])
    assert "held-out" in text and "cluster choice right on" in text


def test_the_readme_quotes_the_committed_figures():
    """The README's trust section says what the committed baseline says (regenerate both together)."""
    from pathlib import Path

    readme = " ".join((Path(pipelines.REPO) / "README.md").read_text().split())  # wrapped lines read as one
    base = pipelines.baseline()["b200-mainloop"]
    quoted = (f"mean error {base['all']['mean_error']:.1%}", f"fitted tiles {base['fitted']['mean_error']:.1%}",
              f"held-out tiles {base['held_out']['mean_error']:.1%}",
              f"right on {base['all']['stage_answer_right']} of 46 tiles and within one stage on "
              f"{base['all']['stage_answer_within_one']}")
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


def test_the_whole_chip_table_holds_out_whole_families():
    table = wholechip.rows()
    families = {r.family for r in table}
    out = wholechip.held_out([r.family for r in table])
    assert len(table) == 576 and len(families) == 6 and len(out) == 2
    assert wholechip.family((4096, 7168, 512)) == wholechip.family((7168, 512, 4096)) == "512x7168"
    assert out == wholechip.held_out(sorted(families, reverse=True))


def test_the_whole_chip_mapping_is_the_kernels():
    """A (2,2) run: the 2-SM MMA, a k-step of 4 MMAs (128 B of K), A multicast across the two pairs,
    the example's stage rule, M-first cluster order, 1.3 GHz, fp8 out for fp8."""
    row = wholechip.Row((4096, 7168, 512), "fp8", (128, 256), (2, 2), 30e-6)
    sets = set(wholechip.overrides(row))
    assert {"pipeline.mma_cta_group=2", "workload.tile=[128,256,128]", "workload.multicast=a",
            "pipeline.stages=auto", "workload.raster=column", "gpu.clock=1.3 GHz", "workload.out_dtype=fp8",
            "pipeline.cluster=[2,2]"} <= sets
    assert wholechip.padded(100, "fp16") == 104 and wholechip.padded(100, "fp8") == 112


def test_whole_chip_figures_count_best_configs_and_cluster_pairs():
    def row(tile, cluster, measured, predicted):
        return wholechip.Row((4096, 4096, 4096), "fp16", tile, cluster, measured, predicted)

    runs = [row((128, 128), (2, 1), 10.0, 9.0), row((128, 128), (2, 2), 11.0, 8.0),  # pair differs 10%: wrong pick
            row((64, 64), (2, 1), 20.0, 20.0), row((64, 64), (2, 2), 20.1, 21.0)]  # within 2%: not a pair
    f = wholechip.figures(runs)
    assert f["cluster_pairs"] == 1 and f["cluster_right"] == 0
    assert f["best_right"] == 0 and f["best_missed"][0]["picked"] == "128x128 (2,2)"
    assert abs(f["mean_error"] - (0.1 + 3 / 11 + 0 + 0.9 / 20.1) / 4) < 1e-12


def test_a_whole_chip_b200_run_quotes_its_nearest_cases():
    from tmasim.scenario import load
    from tmasim.validation.trust import trust_for

    line = trust_for(load("gemm-b200-2sm", ["workload.m=4096", "workload.n=4096", "workload.k=192"]))
    assert line.startswith("B200 whole-chip GEMMs at 1.3 GHz") and "short shapes, 128x256 tiles, cluster (2,1)" in line
    base = pipelines.baseline()["b200-wholechip"]["cases"]["short 128x256 (2,1)"]
    assert f"{base['mean_error']:.0%} over {base['runs']} runs" in line


def test_the_readme_quotes_the_whole_chip_figures():
    from pathlib import Path

    readme = " ".join((Path(pipelines.REPO) / "README.md").read_text().split())
    base = pipelines.baseline()["b200-wholechip"]["all"]
    dtypes = base["by_dtype"]
    quoted = (f"mean error {base['mean_error']:.1%} (fp16 {dtypes['fp16']['mean_error']:.1%}, "
              f"fp8 {dtypes['fp8']['mean_error']:.1%})",
              f"picked on {base['cluster_right']} of {base['cluster_pairs']} tile pairs",
              f"within 1% of the measured best on {base['best_right']} of {base['problems']} shapes")
    for text in quoted:
        assert text in readme, text


def test_a_whole_chip_b200_sweep_row_quotes_the_whole_table():
    from tmasim.validation.trust import trust_for_row

    line = trust_for_row({"gpu": "b200", "workload": "gemm", "tiles": 2048})
    whole = pipelines.baseline()["b200-wholechip"]["all"]
    assert line == (f"B200 whole-chip GEMMs at 1.3 GHz (2-SM pairs): mean error {whole['mean_error']:.0%} over "
                    f"{whole['points']} runs (tmasim validate public names the nearest cases)")


def test_a_result_carries_its_validated_line():
    from tmasim import load_scenario, simulate
    from tmasim.summary import describe

    result = simulate(load_scenario("gemm-b200-2sm", ["workload.m=1024", "workload.n=1024", "workload.k=512"]))
    assert result.validated.startswith("B200 whole-chip GEMMs at 1.3 GHz (2-SM pairs), nearest cases")
    assert f"  validated        {result.validated}" in describe(result.stats, result.scenario)
