"""Fields a workload does not read are refused (tmasim.inputs.field_use): for every workload
kind, every ``[pipeline]`` and ``[gpu]`` field it ignores, given a value other than its default
(or the preset's), is a one-line ScenarioError naming the field and the value; every field it
reads loads."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from tmasim.cli import main
from tmasim.errors import ScenarioError
from tmasim.inputs import field_use
from tmasim.inputs.scenario import load
from tmasim.machine import hardware
from tmasim.workloads import WORKLOADS

# A small scenario of each kind; gemm and attention on Hopper (registers, wgmma) and on
# Blackwell (the 2-SM pair, TMEM), so every field a kind reads has a base where it loads.
BASES: dict[str, list[tuple[str, list[str]]]] = {
    "tiles": [("reference", [])],
    "stream": [("stream-h100", ["workload.shape=[512,512]"])],
    "gemm": [("gemm-h100", ["workload.m=256", "workload.n=256", "workload.k=128"]),
             ("gemm-b200", ["workload.m=256", "workload.n=256", "workload.k=128"])],
    "attention": [("attention-h100", ["workload.batch=1", "workload.heads=1", "workload.seqlen_q=256"]),
                  ("attention-b200-2sm", ["workload.batch=1", "workload.heads=1", "workload.seqlen_q=512"])],
}
PIPELINE_VALUES: dict[str, list[str]] = {
    "stages": ["3"], "consumers": ["2"], "consumer_mode": ['"pingpong"', '"cooperative"'],
    "consumer_waits_full": ["false"], "full_arrivals": ["2"], "empty_arrivals": ["3"], "expect_tx": ['"4 KiB"'],
    "cluster": ["[2, 1]"], "mma_cta_group": ["2"], "registers": ["{producer = 40}", "{producer = 24}"],
    "warp_specialized": ["false"],
}


def gpu_values(key: str, gpu: hardware.GpuSpec) -> list[str]:
    """Values of ``gpu.key`` other than the preset's, written as a scenario writes them."""
    value = getattr(gpu, "clock_hz" if key == "clock" else key, None)
    kind = hardware._FIELDS[key][0] if key in hardware._FIELDS else "mma"
    if kind == "int":
        low, high = hardware._INT_LIMITS[key]
        if key == "max_cluster_size":  # at most max_cluster_size_opt_in
            return ["1", "2"]
        if key == "max_cluster_size_opt_in":  # at least max_cluster_size
            return [str(value + 1), str(value + 2)]
        return [str(v) for v in (value + 1, value - 1) if low <= v <= high]
    if kind in ("size", "time"):
        if kind == "time":
            return [f'"{(value or 0) // 2000 + 1} ns"']  # half the preset's, or a little
        if key == "smem_per_cta":  # at most smem_per_sm
            return [f'"{value // 2048} KiB"']
        return [f'"{(value or 0) // 1024 + 1} KiB"']  # a KiB more
    if kind == "bandwidth":
        return ['"1.234 TB/s"' if value is None or math.isinf(value) else '"unlimited"']
    if kind == "frequency":
        return ['"1.234 GHz"']
    if kind == "bool":
        return ["false" if value else "true"]
    if key == "convert_pipe":
        return ['"xu"' if value == "alu" else '"alu"']
    if kind == "text":
        return ['"something else"']
    if kind == "int_list":
        return [f"[{gpu.sms - 1}, 1]"]
    if kind == "flop_rates":
        return ['{bf16 = "123 TFLOP/s"}']
    if kind == "shares":
        return ["{bf16 = 0.5}"]
    if kind == "cluster_counts":
        return ["{4 = 30}"]
    table = hardware.raw_preset("b200" if gpu.mma is None or gpu.mma.instruction == "wgmma" else "h100-sxm")
    return [_toml(table["mma"])]


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _cases(ignored: bool) -> list[tuple[str, str]]:
    cases = []
    for kind in field_use.READS:
        skipped = field_use.ignored(kind)
        for table, fields in (("pipeline", field_use.PIPELINE_FIELDS), ("gpu", field_use.GPU_FIELDS)):
            cases += [(kind, f"{table}.{f}") for f in fields if (f in skipped[table]) == ignored]
    return cases


# A flat tensor-core rate is set on a preset without an MMA table only (and attention there
# needs its softmax off: the ideal preset states no exponential rate).
PRESET_FOR = {"gpu.tensor_flops": ["gpu=ideal", "workload.softmax_scale=0"]}


def _base_sets(kind: str, field: str, sets: list[str]) -> list[str]:
    extra = PRESET_FOR.get(field, [])
    return [s for s in extra if kind == "attention" or not s.startswith("workload.")] + sets


def _settings(field: str, base: str, sets: list[str]) -> list[str]:
    table, _, name = field.partition(".")
    if table == "pipeline":
        return PIPELINE_VALUES[name]
    return gpu_values(name, load(base, sets).gpu)


@pytest.mark.parametrize(("kind", "field"), _cases(ignored=True), ids=[f"{k}-{f}" for k, f in _cases(True)])
def test_a_field_the_workload_ignores_is_refused(kind, field):
    base, sets = BASES[kind][0]
    sets = _base_sets(kind, field, sets)
    for value in _settings(field, base, sets):
        with pytest.raises(ScenarioError) as err:
            load(base, [*sets, f"{field}={value}"])
        assert err.value.field == field
        assert str(err.value).startswith(f"{field}: ")
        assert f"would be ignored: the {kind} workload does not read it (" in str(err.value)
        assert str(err.value).endswith("; remove it") and "\n" not in str(err.value)


@pytest.mark.parametrize(("kind", "field"), _cases(ignored=False), ids=[f"{k}-{f}" for k, f in _cases(False)])
def test_a_field_the_workload_reads_is_not_refused_as_ignored(kind, field):
    loaded = []
    for base, sets in BASES[kind]:
        sets = _base_sets(kind, field, sets)
        try:
            values = _settings(field, base, sets)
        except ScenarioError:  # the base itself with the preset PRESET_FOR names (a 2-SM pair on ideal)
            continue
        for value in values:
            try:
                load(base, [*sets, f"{field}={value}"])
            except ScenarioError as err:  # another rule (a 2-SM pair on Hopper), never "ignored"
                assert "would be ignored" not in str(err), err
            else:
                loaded.append(value)
    assert loaded or (kind, field) in CONDITIONAL, f"{field} never loads for {kind}"


# Fields a kind reads only on some GPU or with some other field (their own checks refuse the rest).
CONDITIONAL = {("attention", "pipeline.cluster"), ("gemm", "pipeline.mma_cta_group")}


def test_the_table_covers_every_workload_and_names_only_real_fields():
    assert set(field_use.READS) == set(WORKLOADS)
    for reads in field_use.READS.values():
        assert reads.pipeline <= set(field_use.PIPELINE_FIELDS)
        assert reads.gpu <= set(field_use.GPU_FIELDS)
    # the engine path every workload takes reads the ring and the residency fields
    assert all({"stages", "consumers"} <= r.pipeline and "smem_per_sm" in r.gpu for r in field_use.READS.values())


def test_what_the_probe_found_attention_ignores_its_barrier_counts_where_a_gemm_reads_them():
    sets = BASES["attention"][0][1]
    for setting, shown in (("pipeline.full_arrivals=2", "pipeline.full_arrivals: 2 "),
                           ("pipeline.empty_arrivals=3", "pipeline.empty_arrivals: 3 "),
                           ("pipeline.expect_tx=4096", "pipeline.expect_tx: 4096 ")):
        with pytest.raises(ScenarioError, match=f"^{shown}would be ignored: the attention workload does not read "
                                                r"it \(its K, V and Q barriers expect their own copies' bytes"):
            load("attention-h100", [*sets, setting])
        assert load("gemm-h100", [setting]).pipeline is not None  # the GEMM's ring reads it


def test_a_value_equal_to_the_default_or_the_preset_is_not_given():
    gemm = load("gemm-h100")
    assert load("gemm-h100", [f"gpu.exp_per_clock={gemm.gpu.exp_per_clock}"]).gpu == gemm.gpu
    assert load("reference", ["gpu.hbm_bandwidth=unlimited"]).gpu.hbm_bandwidth == math.inf  # ideal's own
    assert load("attention-h100", ["pipeline.consumer_waits_full=true", "workload.batch=1"]) is not None
    assert load("reference", ["pipeline.cluster=[1, 1]", "pipeline.warp_specialized=true"]) is not None


def test_a_field_edited_in_python_is_refused_too():
    attention = load("attention-h100", ["workload.batch=1"])
    with pytest.raises(ScenarioError, match="^pipeline.expect_tx: 4096 would be ignored: the attention"):
        dataclasses.replace(attention, pipeline=dataclasses.replace(attention.pipeline, expect_tx=4096))
    gemm = load("gemm-h100")
    with pytest.raises(ScenarioError, match="^gpu.exp_per_clock: .* would be ignored: the gemm workload"):
        dataclasses.replace(gemm, gpu=dataclasses.replace(gemm.gpu, exp_per_clock=3))


def test_the_command_line_refuses_it_in_one_line(capsys):
    assert main(["run", "attention-h100", "--set", "pipeline.expect_tx=4096"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") <= 1 and "pipeline.expect_tx: 4096 would be ignored" in err, err
    assert main(["run", "reference", "--set", "gpu.hbm_bandwidth=2 TB/s"]) == 2
    assert "gpu.hbm_bandwidth: '2 TB/s' would be ignored: the tiles workload" in capsys.readouterr().err
