"""Every field a scenario accepts can be varied: two valid values of it give a sweep file with
one column per name and the right answer, in Parquet and CSV, and a report.

The fields are discovered, not listed: each section's known fields come from the loader's own
refusal of an unknown one, and a field's choices from its refusal of a bogus value, so a field
added later is varied here too. Values come from a pool of quantities of every kind; the first
two that load (on a tiny scenario) are the two values.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

from tmasim import scenario as scenarios
from tmasim.errors import ScenarioError, TmasimError
from tmasim.hardware import preset_names
from tmasim.sweep.runner import run_sweep

BASES = {
    "tiles": ("reference", {}),
    "gemm": ("gemm-h100-cluster", {"workload.m": 256, "workload.n": 512, "workload.k": 128}),
    "stream": ("stream-h100", {"workload.shape": [512, 512]}),
    "gemm-2sm": ("gemm-b200-2sm", {"workload.m": 512, "workload.n": 512, "workload.k": 128}),
    "attention": ("attention-h100", {"workload.batch": 1, "workload.heads": 1, "workload.seqlen_q": 512}),
    # a flat tensor-core rate (gpu.tensor_flops) is read by GEMMs on a preset without an MMA table
    "gemm-ideal": ("gemm-ideal", {"workload.m": 256, "workload.n": 512, "workload.k": 128}),
}
POOL: list[Any] = [
    2, 1, 3, 4, 8, 64, 128, 256, 0, 0.5, 0.25, True, False, "3 us", "2 us", "1 ns", "100 ns", "1 KiB", "2 KiB",
    "64 KiB", "128 KiB", "1 TB/s", "2 TB/s", "1 GHz", "2 GHz", "1 MiB", "4 MiB", "x", "y", [2, 1], [1, 1], [1, 2],
    [128, 128, 64], [128, 256, 64], [256, 256], [64, 64], [66, 66], [132], {"start": "100 ns"}, {"start": "200 ns"},
    {"producer": 40}, {"producer": 48}, {"bf16": "100 TFLOP/s"}, {"bf16": "200 TFLOP/s"}, {"fp8": 0.9}, {"fp8": 0.8},
    {"4": 32}, {"4": 30},
    {"dist": "normal", "mean": "3 us", "std": "1 us"}, ["3 us", "4 us", "3 us", "6 us"], *preset_names(),
]
SECTIONS = ("", "workload", "pipeline", "run", "gpu")


def known_fields(raw: dict[str, Any], section: str) -> list[str]:
    """The loader's own list of a section's fields (from its refusal of an unknown one)."""
    name = f"{section}.zz_unknown" if section else "zz_unknown"
    try:
        scenarios.from_dict(scenarios.apply_overrides(raw, {name: 1}))
    except ScenarioError as err:
        known = re.search(r"\(known: ([^)]*)\)", err.rule)
        assert known, err
        return [f"{section}.{k}" if section else k for k in known.group(1).split(", ")]
    raise AssertionError(f"{name} was accepted")


def loads(raw: dict[str, Any], field: str, value: Any) -> bool:
    try:
        scenarios.from_dict(scenarios.apply_overrides(raw, {field: value}))
    except TmasimError:
        return False
    return True


def choices(raw: dict[str, Any], field: str) -> list[Any]:
    """A field's choices, from its refusal of a bogus value (``must be one of a, b``)."""
    try:
        scenarios.from_dict(scenarios.apply_overrides(raw, {field: "zz-bogus"}))
    except ScenarioError as err:
        found = re.search(r"one of ([^;(]*)", err.rule)
        if found:
            return [c.strip() for c in found.group(1).split(",") if c.strip()]
    return []


def two_values(raw: dict[str, Any], field: str) -> list[Any]:
    found: list[Any] = []
    for value in [*choices(raw, field), *POOL]:
        if value not in found and loads(raw, field, value):
            found.append(value)
            if len(found) == 2:
                return found
    return found


def fields_and_values() -> list[tuple[str, str, list[Any]]]:
    """(base, field, two values) for every field of every section; a shared field on the first
    base where it has two valid values (clusters are modelled for GEMMs only)."""
    raws = {kind: scenarios.apply_overrides(scenarios.read_raw(name)[0], {**sets, "run.records": False})
            for kind, (name, sets) in BASES.items()}
    cases = []
    for section in SECTIONS:
        kinds = list(BASES) if section != "workload" else []
        fields = {field: kinds for field in known_fields(raws["tiles"], section) if field not in SECTIONS}
        if section == "workload":
            fields = {field: [kind] for kind in ("tiles", "gemm", "stream")
                      for field in known_fields(raws[kind], section)}
        for field, where in fields.items():
            tried = [(kind, two_values(raws[kind], field)) for kind in where]
            kind, values = next(((k, v) for k, v in tried if len(v) == 2), tried[0])
            cases.append((kind, field, values))
    return cases


CASES = fields_and_values()


def test_every_field_has_two_valid_values_to_vary():
    missing = [f"{kind}: {field}" for kind, field, values in CASES if len(values) < 2
               and field not in ("gpu.mma", "workload.kind")]
    # gpu.mma is a whole instruction table, varied by varying gpu over presets; workload.kind
    # needs each kind's own fields, varied as whole workload tables
    assert not missing, missing
    assert len(CASES) > 50


@pytest.mark.parametrize(("kind", "field", "values"), [c for c in CASES if len(c[2]) == 2],
                         ids=[f"{c[0]}-{c[1]}" for c in CASES if len(c[2]) == 2])
def test_a_varied_field_is_one_column_with_the_right_answer_in_both_formats(tmp_path, kind, field, values):
    name, sets = BASES[kind]
    for suffix in (".parquet", ".csv"):
        out = tmp_path / f"s{suffix}"
        frame = run_sweep(name, [f"{k}={scenarios_text(v)}" for k, v in sets.items()], {field: values}, out=out,
                          progress=False)
        assert len(set(frame.columns)) == len(frame.columns)
        written = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
        assert list(written.columns) == list(frame.columns) and list(written.columns).count(field) == 1
        ok = frame[frame["status"] == "ok"]
        if len(ok) == 2:
            check_answer(frame, ok, field, kind)
        again = run_sweep(name, [f"{k}={scenarios_text(v)}" for k, v in sets.items()], {field: values}, out=out,
                          progress=False)
        assert again.attrs["sweep"]["resumed"] == 2


def check_answer(frame: pd.DataFrame, ok: pd.DataFrame, field: str, kind: str) -> None:
    """The answer by the field's role (tmasim.field_roles): a design field's best point, a
    problem field's answer per value, a noise field's replicates averaged."""
    from tmasim import field_roles
    from tmasim.sweep import answer

    text = answer.summary(frame)
    role = field_roles.role(field, BASES[kind][0] and frame["workload"].iloc[0])
    if role == field_roles.DESIGN:
        best = ok.loc[ok["makespan_ns"].astype(float).idxmin()]
        assert f"best: {answer.point_text(best.to_dict(), (field,))}" in text, text
    elif role == field_roles.PROBLEM:
        for row in ok.to_dict("records"):
            assert answer.point_text(row, (field,)) in text, text
    else:
        assert "mean of 2 replicates" in text, text


def scenarios_text(value: Any) -> str:
    from tmasim.sweep.table import toml_text

    return toml_text(value)


@pytest.mark.parametrize(("field", "values"), [("gpu", "ideal,h100-sxm"), ("name", "a,b")])
def test_a_report_of_a_top_level_field(tmp_path, capsys, field, values):
    from tmasim.cli import main

    assert main(["report", "reference", "--vary", f"{field}={values}", "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "index.html").exists()
    sweep = pd.read_csv(tmp_path / "r" / "sweep.csv")
    assert list(sweep.columns).count(field) == 1
