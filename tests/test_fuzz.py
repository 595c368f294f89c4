"""Fuzzing the loader and the CLI, in-process: the only outcomes are a result or a one-line error.

Hypothesis draws unit strings, field values and whole TOML documents. Any exception other
than a :class:`~tmasim.errors.TmasimError` fails the test (``main`` lets nothing else
through), as does an error message of more than one line. CI draws a fixed set of examples
(the ``deterministic`` profile in conftest.py); ``TMASIM_FUZZ_EXAMPLES=2000`` draws more, and
``TMASIM_HYPOTHESIS_RANDOM=1`` new ones.
"""

from __future__ import annotations

import math
import os
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tmasim import units
from tmasim.cli import main
from tmasim.errors import TmasimError, UnitError
from tmasim.scenario import from_dict, load, set_field
from tmasim.sweep.table import toml_text

EXAMPLES = int(os.environ.get("TMASIM_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

UNIT_WORDS = ["us", "µs", "ns", "ps", "ms", "s", "B", "KiB", "MB", "GB/s", "TB/s", "GHz", "Hz", "cycles", "FLOP",
              "TFLOP/s", "uss", "nan", "inf", "e", "**", "*", "+", "/", "(", ")", "\"", " ", "1e400", "-", "."]
numbers = st.one_of(st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.sampled_from(["1e400", "-0", ".5", "5.", "1e-30", "2**10", "0x10", "1_000"]))
unit_texts = st.one_of(
    st.builds(lambda n, sp, u: f"{n}{sp}{u}", numbers, st.sampled_from(["", " ", "  ", "\t"]),
              st.sampled_from(UNIT_WORDS)),
    st.lists(st.sampled_from(UNIT_WORDS + ["3", "4.5"]), max_size=6).map("".join),
    st.text(max_size=12),
)
KINDS = ("time", "size", "bandwidth", "frequency", "flops", "flop_rate", "cycles")


@FUZZ
@given(unit_texts, st.sampled_from(KINDS))
@example("3 us", "time")
@example("nan us", "time")
@example("1e300 s", "time")
def test_a_quantity_is_a_finite_number_or_a_one_line_unit_error(text, kind):
    try:
        value = units.parse(text, kind, "f")
    except UnitError as err:
        assert "\n" not in str(err) and str(err).startswith("f: ")
    else:
        assert math.isfinite(value)


scalars = st.one_of(
    st.booleans(), st.integers(-3, 70), st.sampled_from([0, -1, 2**31, 2**63 - 1, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True), unit_texts,
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from(["dist", "mean", "std", "low", "high", "seed", "x"]), inner,
                                        max_size=4), max_leaves=6)
FIELDS = ["workload.load", "workload.compute", "workload.latency", "workload.tiles", "workload.tile_bytes",
          "workload.kind", "pipeline.stages", "pipeline.consumers", "pipeline.consumer_mode",
          "pipeline.consumer_waits_full", "pipeline.full_arrivals", "pipeline.empty_arrivals", "pipeline.expect_tx",
          "run.seed", "run.records", "run.aggregate", "gpu", "gpu.hbm_bandwidth", "gpu.sms", "gpu.clock",
          "gpu.copy_latency", "gpu.smem_per_sm", "gpu.smem_per_cta", "gpu.tma_issue", "gpu.barrier_wake",
          "gpu.tensor_flops", "gpu.tma_max_bytes_in_flight", "name", "description", "workload.x", "x"]


def small_enough(scenario: Any) -> bool:
    """Simulate only what runs in milliseconds (the loader is what is fuzzed)."""
    return getattr(scenario.workload, "tiles", 10**9) <= 64


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(FIELDS), values), min_size=1, max_size=3))
@example([("workload.load", "nan us")])
@example([("pipeline.stages", 1.5)])
@example([("gpu.smem_per_sm", "10 KiB")])
def test_any_field_value_loads_and_runs_or_is_a_one_line_error(settings_):
    from tmasim.simulation import simulate

    raw = dict(load().raw)
    try:
        for name, value in settings_:
            set_field(raw, name, value)
        scenario = from_dict(raw)
        if small_enough(scenario):
            result = simulate(scenario)
            assert result.stats["valid"] in (True, False)
    except TmasimError as err:
        assert "\n" not in str(err)


keys = st.sampled_from(["name", "description", "gpu", "workload", "pipeline", "run", "kind", "tiles", "load",
                        "compute", "latency", "stages", "consumers", "seed", "records", "preset", "sms", "ë", ""])
documents = st.recursive(st.dictionaries(keys, scalars, max_size=4),
                         lambda inner: st.dictionaries(keys, inner | scalars, max_size=4), max_leaves=12)


def base_document() -> dict[str, Any]:
    return {"name": "fuzz", "workload": {"kind": "tiles", "tiles": 3, "load": "3 us", "compute": "5 us"}}


@FUZZ
@given(documents, st.booleans(), st.booleans())
@example({"workload": {"tiles": 10**12}}, True, False)
@example({"pipeline": {"stages": 0}}, True, True)
def test_any_toml_document_through_the_cli_is_a_run_or_one_line(tmp_path_factory, capsys, document, merge, as_json):
    doc = base_document()
    if merge:
        for key, value in document.items():
            doc[key] = ({**doc[key], **value} if isinstance(doc.get(key), dict) and isinstance(value, dict)
                        else value)
    else:
        doc = document
    if isinstance(doc.get("workload"), dict) and isinstance(doc["workload"].get("tiles"), int) \
            and not isinstance(doc["workload"]["tiles"], bool) and 64 < doc["workload"]["tiles"] <= 10**8:
        doc["workload"]["tiles"] = 64  # keep each run short; the limit itself is tested elsewhere
    path = tmp_path_factory.mktemp("fuzz") / "s.toml"
    path.write_text("".join(toml_text({key: value})[1:-1] + "\n" for key, value in doc.items()), encoding="utf-8")
    code = main(["run", str(path), *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    if code == 0:
        assert out
    else:
        assert code in (2, 3)
        assert len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: ")


@FUZZ
@given(st.sampled_from(FIELDS), st.one_of(unit_texts, st.text(max_size=20)))
@example("workload.load", "[[[[")
@example("workload.load", '{dist = "normal", mean = "3 us", std = "inf us"}')
def test_any_set_text_through_the_cli_is_a_run_or_one_line(capsys, field, text):
    code = main(["run", "--set", f"{field}={text}", "--set", "workload.tiles=3"])
    _, err = capsys.readouterr()
    assert code == 0 or (code in (2, 3) and len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: "))


# ---- the API path and the teaching commands ---------------------------------------------------

API_VALUES = st.one_of(st.integers(-3, 300), st.sampled_from([2**70, -(2**70), 0.5, math.nan, math.inf, 1e-30]),
                       st.booleans(), st.none(), st.text(max_size=6),
                       st.lists(st.integers(-1, 300), max_size=3).map(tuple))
PARTS = ("gpu", "workload", "pipeline", "run")
API_BASES = {"reference": [], "gemm-h100-cluster": ["workload.m=256", "workload.n=512", "workload.k=128"]}


@FUZZ
@given(st.sampled_from(sorted(API_BASES)), st.sampled_from(PARTS), st.data())
def test_any_value_through_dataclasses_replace_is_a_run_or_a_checked_error(name, part, data):
    """What the API accepts it simulates correctly; anything else is a ScenarioError or TypeError."""
    import dataclasses

    from tmasim.simulation import simulate

    scenario = load(name, [*API_BASES[name], "run.records=false"])
    config = getattr(scenario, part)
    field = data.draw(st.sampled_from([f.name for f in dataclasses.fields(config) if f.name not in ("kind",
                                                                                                    "sources")]))
    value = data.draw(API_VALUES)
    try:
        edited = dataclasses.replace(scenario, **{part: dataclasses.replace(config, **{field: value})})
        stats = simulate(edited).stats
    except (TmasimError, TypeError) as err:
        assert "\n" not in str(err)
        return
    assert 0 < stats["makespan_ps"] < 2**63 and stats["sms_used"] <= edited.gpu.sms


PREDICTIONS = st.one_of(unit_texts, st.sampled_from(["nan", "inf", "-inf", "1e400", "-5", "-5 us", "150", "-3%",
                                                     "101%", "23", "23 us", "0.023 ms", "2 s", "1e30 us"]))


@settings(max_examples=min(EXAMPLES, 20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([1, 3]), PREDICTIONS)
@example(1, "nan")
@example(3, "150")
def test_any_learn_prediction_is_read_by_the_quantity_rules_or_one_line(capsys, lesson, text):
    capsys.readouterr()
    code = main(["learn", str(lesson), f"--predict={text}"])
    out, err = capsys.readouterr()
    if code == 0:
        assert "You predicted" in out
    else:
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: ")


@settings(max_examples=min(EXAMPLES, 10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(PREDICTIONS.filter(lambda t: "," not in t), min_size=0, max_size=4))
@example(["b", "nan", "1", "2"])
def test_any_quiz_answers_are_graded_or_one_line(capsys, answers):
    capsys.readouterr()
    code = main(["quiz", "--count", "3", f"--answers={','.join(answers)}"])
    out, err = capsys.readouterr()
    assert code == 0 or (code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: "))


@settings(max_examples=min(EXAMPLES, 20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["dir.gif", "file/x.gif", "x.txt", "x\x00.gif", "a" * 300 + ".gif", "file/deeper/x.html",
                        "dir.html", "nul\x00/x.gif"]))
def test_an_animate_out_that_cannot_be_written_is_one_line_before_any_work(tmp_path_factory, capsys, monkeypatch,
                                                                         name):
    import tmasim.simulation

    root = tmp_path_factory.mktemp("anim")
    (root / "dir.gif").mkdir()
    (root / "dir.html").mkdir()
    (root / "file").write_text("x")
    monkeypatch.chdir(root)
    monkeypatch.setattr(tmasim.simulation, "simulate", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    code = main(["animate", "--out", name])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: --out")
