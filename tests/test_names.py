"""One name per bound and one number per quantity, in every output (tmasim.names).

Every output of a scenario is rendered (run summary, JSON, explain, sweep table and answer,
report page, figures' texts, a lesson, the glossary) and searched for the names that were
used for the same things before; the traffic figures are then cross-checked between the
summary, the JSON, explain and the report for the GEMM, cluster, 2-SM and stream scenarios.
"""

from __future__ import annotations

import json
import re

import matplotlib
import pytest

from tmasim import format as fmt
from tmasim import names
from tmasim.review import report
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.summary import describe
from tmasim.sweep import answer, run_sweep
from tmasim.teach import explain, lessons
from tmasim.teach.glossary import glossary

matplotlib.use("Agg")

# A small GEMM whose stage sweep binds on the round trip (1 stage) and on L2 (more stages).
GEMM = ["workload.m=4096", "workload.n=4096", "workload.k=1024", "run.records=false"]


def stale_names(text: str) -> list[str]:
    """The old aliases of a canonical name found in ``text`` (none is the goal)."""
    found = [alias for alias in names.STALE if alias in text]
    found += [f"{m.group(0)!r} (lower-case L2)" for m in re.finditer(r"(?<![\w.])l2(?![\w.])", text)]
    found += [f"{m.group(1)!r} (a table's binds cell)" for m in re.finditer(r" {2}(latency|l2|port)$", text, re.M)]
    return found


def figure_texts(fig) -> str:  # type: ignore[no-untyped-def]
    texts = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *(t.get_text() for t in ax.texts)]
        texts += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
    return "\n".join(texts)


@pytest.fixture(scope="module")
def sweep_table():  # type: ignore[no-untyped-def]
    table = run_sweep("gemm-h100", GEMM, ["pipeline.stages=1,2,4"], progress=False)
    assert set(table["binding"]) >= {"round trip", "TMA requests"}, "the sweep must show two bounds"
    return table


def test_every_output_uses_only_the_canonical_names(sweep_table, tmp_path):  # type: ignore[no-untyped-def]
    from tmasim.review import plots
    from tmasim.review.plot_cli import build_report

    outputs: dict[str, str] = {}
    for stages in (1, 4):
        scenario = load("gemm-h100", [*GEMM, f"pipeline.stages={stages}"])
        result = simulate(scenario)
        outputs[f"run {stages}"] = describe(result.stats, scenario)
        outputs[f"explain {stages}"] = explain.explain_result(result, what_ifs=False)
        outputs[f"report rows {stages}"] = "\n".join(f"{k}: {v}" for k, v in report.summary_rows(result.stats))
        outputs[f"report verdict {stages}"] = report.explain(result.stats)
    outputs["sweep"] = answer.summary(sweep_table)
    outputs["report sweep table"] = "\n".join(" ".join(r) for r in report.sweep_table(sweep_table).rows)
    page = build_report("reference", ["pipeline.stages=1"], ["pipeline.stages=1,2"], tmp_path / "r")
    outputs["report page"] = page.read_text(encoding="utf-8")
    for name, fig in (("stage sweep", plots.stage_sweep(sweep_table)),
                      ("stall breakdown", plots.stall_breakdown(sweep_table))):
        outputs[f"figure {name}"] = figure_texts(fig)
    tiles = load("latency-hidden", ["pipeline.stages=2"])
    outputs["run tiles"] = describe(simulate(tiles).stats, tiles)
    outputs["explain tiles"] = explain.explain(tiles, what_ifs=False)
    outputs["lesson 4"] = lessons.teach(4, None)[0]
    outputs["glossary"] = glossary()
    found = {name: stale_names(text) for name, text in outputs.items()}
    assert {name: aliases for name, aliases in found.items() if aliases} == {}
    assert "round trip" in outputs["run 1"] and "binding: round trip" in outputs["run 1"]
    assert "round trip binds" in outputs["figure stage sweep"]
    assert "round trip" in outputs["sweep"] and "TMA requests" in outputs["sweep"]
    assert not any("SM port/TMA" in text for text in outputs.values())  # two mechanisms, two names


def test_binding_is_one_field_whose_value_is_the_printed_name_everywhere():
    """The API's stats, the JSON and the summary say what binds with the same field and words."""
    printed = {name.text for name in names.BOUNDS.values()}
    for name in ("gemm-h100", "stream-h100", "latency-hidden", "attention-h100-causal"):
        attention = name.startswith("attention")
        smaller = ["workload.batch=1", "workload.heads=2", "workload.kv_heads=2"] if attention else []
        scenario = load(name, ["run.records=false", *smaller])
        result = simulate(scenario)
        stats = json.loads(result.to_json())
        assert stats["binding"] == result.stats["binding"] in printed, (name, stats["binding"])
        assert "littles_law_binding" not in stats, "one field name: binding"
        assert f"binding: {stats['binding']}" in describe(result.stats, scenario), name
        assert names.bound(stats["binding"]) == stats["binding"]
        bounds = {k.removesuffix("_bound_ns") for k in stats if k.endswith("_bound_ns") and k != "interval_bound_ns"}
        assert bounds <= set(names.BOUNDS), bounds
        if bounds:  # the value leads back to its figure's key
            assert f"{names.bound_key(stats['binding'])}_bound_ns" in stats


def test_a_sweep_table_says_binding_in_its_header_rows_and_answer(sweep_table):
    text = answer.summary(sweep_table)
    header = text.splitlines()[0].split()
    assert "binding" in header and "binds" not in header
    assert any(line.startswith("binding there: ") for line in text.splitlines())
    assert "what binds" not in text and "bound by" not in text


def test_bound_names_read_old_tables():
    assert names.bound_key("round trip") == "latency" and names.bound_key("TMA requests") == "tma"
    assert names.bound_key("L2") == "l2" and names.bound_key("latency") == "latency"
    assert names.bound("latency") == "round trip"
    assert names.bound("bytes in flight") == "round trip"  # a stream table written before the keys
    assert names.bound("SM ports") == "SM port" and names.bound("tma") == "TMA requests"
    assert names.bound("L2") == "L2" and names.bound("l2") == "L2"


# ------------------------------------------------------------------- one number per quantity


def _traffic(text: str) -> tuple[str, str]:
    match = re.search(r"traffic +L2 ([\d.]+ [kMGT]?B) .*HBM ([\d.]+ [kMGT]?B)", text)
    assert match, text
    return match.group(1), match.group(2)


@pytest.mark.parametrize("name", ["gemm-h100", "gemm-h100-cluster", "gemm-b200-2sm", "stream-h100", "mma-b200",
                                  "attention-h100"])
def test_summary_json_explain_and_report_print_the_same_traffic(name):
    scenario = load(name, ["run.records=false"])
    result = simulate(scenario)
    stats = json.loads(result.to_json())
    l2, hbm = fmt.amount(stats["l2_bytes"]), fmt.amount(stats["hbm_bytes"])
    if scenario.gpu.cluster_l2_coalescing or scenario.gpu.l2_merge_bytes:  # same loads merged before L2 (B200)
        assert stats["l2_bytes"] <= stats["memory_bytes"] + stats["store_bytes"]
    else:
        assert stats["l2_bytes"] == stats["memory_bytes"] + stats["store_bytes"]
    assert stats["hbm_bytes"] <= stats["l2_bytes"]  # HBM is reached through L2: never more bytes
    assert _traffic(describe(result.stats, scenario)) == (l2, hbm)
    rows = dict(report.summary_rows(result.stats))
    assert (rows["L2 traffic"], rows["HBM traffic"]) == (l2, hbm)
    text = explain.explain_result(result, what_ifs=False)
    limited = {"L2": math_finite(scenario.gpu.l2_bandwidth), "HBM": math_finite(scenario.gpu.hbm_bandwidth)}
    for link, amount in (("L2", l2), ("HBM", hbm)):
        if limited[link]:
            assert re.search(rf"^  {link} +\S+ \S+ +{re.escape(amount)} at ", text, re.M), (link, amount, text)
    if stats.get("l2_utilization") is not None:  # the busy share is of the same bytes
        seconds = stats["makespan_ns"] * 1e-9
        assert stats["l2_utilization"] == pytest.approx(
            stats["l2_bytes"] / (scenario.gpu.l2_bandwidth * 1e12 * seconds), rel=1e-9)
        assert stats["hbm_utilization"] == pytest.approx(
            stats["hbm_bytes"] / (scenario.gpu.hbm_bandwidth * 1e12 * seconds), rel=1e-9)
    for link, key in (("l2", "l2_bytes"), ("hbm", "hbm_bytes")):  # a workload's bound counts the same bytes
        capacity = getattr(scenario.gpu, f"{link}_bandwidth")
        if stats.get(f"{link}_bound_ns") and math_finite(capacity):
            assert stats[f"{link}_bound_ns"] == pytest.approx(stats[key] / capacity / 1000, rel=1e-9), link
    assert not any(key.startswith("model_") for key in stats), "one figure per quantity: no model_* duplicates"


def math_finite(value: float) -> bool:
    return value != float("inf")


def test_fabric_carries_exactly_the_l2_and_hbm_traffic():
    """The flow model's links, integrated over time, carry the bytes the summary reports."""
    result = simulate(load("gemm-h100-cluster", ["workload.m=2048", "workload.n=2048", "workload.k=1024",
                                                 "run.records=false"]), record_bandwidth=True)
    bw = result.bandwidth
    for link, key in (("L2", "l2_bytes"), ("HBM", "hbm_bytes")):
        rows = bw[bw["link"] == link].sort_values("time_ps")
        times = [*rows["time_ps"], result.stats["makespan_ps"]]
        per_ps = rows["gbytes_per_s"] / 1000  # bytes per picosecond
        carried = sum(load * (t1 - t0) for load, t0, t1 in zip(per_ps, times, times[1:], strict=False))
        assert carried == pytest.approx(result.stats[key], rel=1e-6), link


def test_design_doc_documents_every_name():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text(encoding="utf-8")
    for key, name in names.BOUNDS.items():
        assert f'| `"{key}"` | {name.text} | {name.meaning} |' in doc
    for key, name in names.TRAFFIC.items():
        assert f"| `{key}` | {name.text} | {name.meaning} |" in doc
    for name in names.RESOURCES.values():
        assert f"| {name.text} | {name.meaning} |" in doc


# ------------------------------------------------------------------- one meaning per answer term


def _texts() -> dict[str, str]:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [root / "README.md", root / "validation" / "public" / "README.md", *root.glob("docs/**/*.md"),
             *root.glob("tmasim/**/*.py"), *root.glob("tmasim/**/*.toml")]
    return {str(p.relative_to(root)): " ".join(p.read_text(encoding="utf-8").split()) for p in files}


def test_every_knee_and_stage_answer_is_stated_by_its_one_rule():
    """The knee is the cheapest point within 1% of the best; the validation's stage answer the
    fewest stages within 2%. No text (docs, code, presets) gives either word another tolerance."""
    knee, stage = names.TERMS["knee"], names.TERMS["stage answer"]
    assert (names.KNEE_TOLERANCE, names.STAGE_ANSWER_TOLERANCE) == (0.01, 0.02)
    assert names.term("knee") == "knee (the cheapest point within 1% of the best)"
    wrong = []
    for name, text in _texts().items():
        for m in re.finditer(r"knees?\b[^.;]{0,60}?within (\d+)%", text, re.I):
            if m.group(1) != "1":
                wrong.append((name, m.group(0)))
        for m in re.finditer(r"stage answers?\b[^.;]{0,60}?within (\d+)%", text, re.I):
            if m.group(1) != "2":
                wrong.append((name, m.group(0)))
        for m in re.finditer(r"knee \((the [^)]*)\)", text):  # a definition in words: the rule itself
            if "within" in m.group(1) and not m.group(1).startswith(knee.rule):
                wrong.append((name, m.group(0)))
        for m in re.finditer(r"stage answer \((the [^)]*)\)", text):
            if "within" in m.group(1) and not m.group(1).startswith(stage.rule):
                wrong.append((name, m.group(0)))
    assert wrong == []
    code = {n: t for n, t in _texts().items() if n.endswith(".py") and n != "tmasim/names.py"}
    assert not [n for n, t in code.items() if re.search(r"KNEE_TOLERANCE = 0\.|STAGE_ANSWER_TOLERANCE = 0\.", t)]


def test_the_glossary_defines_the_answers_terms():
    text = " ".join(glossary().split())
    for term in names.TERMS.values():
        assert f"{term.text} {term.rule}: " in text
