"""The Python API is as strict as the command line: every field's rule and every cross-field rule
holds for a scenario however it was built (``load_scenario``, ``dataclasses.replace``), and a
wrong argument is a TypeError that says what to pass."""

from __future__ import annotations

import dataclasses
import math

import pytest

import tmasim
from tmasim.cli import main
from tmasim.errors import ScenarioError, TmasimError
from tmasim.hardware import load_gpu
from tmasim.scenario import load
from tmasim.simulation import simulate

SMALL_GEMM = ["workload.m=512", "workload.n=1024", "workload.k=256", "run.records=false"]


def refused_by_the_api(scenario, part: str, **changes) -> ScenarioError:
    """``changes`` to one part of ``scenario``, through dataclasses.replace, then simulate."""
    with pytest.raises(ScenarioError) as info:
        edited = dataclasses.replace(getattr(scenario, part), **changes)
        simulate(dataclasses.replace(scenario, **{part: edited}))
    return info.value


def test_simulate_of_a_name_says_to_load_it_first():
    with pytest.raises(TypeError, match=r"simulate\(\) takes a Scenario, not str 'reference' .*load_scenario"):
        tmasim.simulate("reference")
    with pytest.raises(TypeError, match="takes a Scenario, not dict"):
        simulate({"workload": {"tiles": 4}})
    with pytest.raises(ScenarioError, match="overrides"):
        tmasim.load_scenario("reference", "pipeline.stages=3")
    with pytest.raises(TypeError, match="vary must be"):
        tmasim.run_sweep("reference", vary="pipeline.stages=1,2", progress=False)


# (scenario, --set the command line refuses, part, field, the same value as the dataclass holds it)
CLI_REFUSES = [
    ("gemm-h100-cluster", "workload.multicast=bogus", "workload", "multicast", "bogus"),
    ("gemm-h100-cluster", "workload.multicast=a", "workload", "multicast", "a"),
    ("gemm-h100", "gpu.gpc_sms=[200]", "gpu", "gpc_sms", (200,)),
    ("gemm-h100", "pipeline.mma_cta_group=2", "pipeline", "mma_cta_group", 2),
    ("gemm-b200-2sm", "pipeline.cluster=[1,1]", "pipeline", "cluster", (1, 1)),
    ("reference", "pipeline.cluster=[2,1]", "pipeline", "cluster", (2, 1)),
    ("reference", "pipeline.stages=0", "pipeline", "stages", 0),
    ("reference", "pipeline.consumer_mode=zigzag", "pipeline", "consumer_mode", "zigzag"),
    ("reference", "pipeline.registers={consumer=300}", "pipeline", "registers", (None, 300)),
    ("reference", "workload.tiles=0", "workload", "tiles", 0),
    ("reference", "run.seed=-1", "run", "seed", -1),
    ("gemm-h100", "workload.tile=[128,256]", "workload", "tile", (128, 256)),
    ("gemm-h100", "workload.raster=spiral", "workload", "raster", "spiral"),
    ("gemm-h100", "gpu.max_cluster_size_opt_in=4", "gpu", "max_cluster_size_opt_in", 4),
    ("stream-h100", "workload.data_set=0", "workload", "data_set", 0),
]


@pytest.mark.parametrize(("name", "setting", "part", "field", "value"), CLI_REFUSES)
def test_what_the_command_line_refuses_the_api_refuses_through_dataclasses_replace(capsys, name, setting, part,
                                                                                 field, value):
    assert main(["run", name, "--set", setting]) == 2
    cli = capsys.readouterr().err
    err = refused_by_the_api(load(name, ["run.records=false"]), part, **{field: value})
    assert err.field.split("[")[0].split(".")[:2] == cli.removeprefix("tmasim: error: ").split(":")[0].split("[")[0] \
        .split(".")[:2] or err.field in cli


def test_the_issue_examples_never_run_as_something_else():
    cluster = load("gemm-h100-cluster", SMALL_GEMM)
    assert "multicast" in str(refused_by_the_api(cluster, "workload", multicast="bogus"))
    err = refused_by_the_api(cluster, "gpu", gpc_sms=(200,))
    assert err.field == "gpu.gpc_sms" and "132" in err.rule
    gpu = load_gpu("h100-sxm")
    with pytest.raises(ScenarioError, match="gpu.gpc_sms"):
        dataclasses.replace(gpu, sms=100)   # the GPCs no longer add up


BAD_VALUES = [-1, 0, 2, 200, 2**70, 1.5, math.nan, math.inf, 1e-30, True, None, "bogus", (), (0,), (2, 1), (200,),
              (1, 1, 1), {"a": 1}]
BASES = [("reference", []), ("gemm-b200-2sm", SMALL_GEMM), ("stream-h100", ["workload.shape=[1024, 1024]"])]


@pytest.mark.parametrize(("name", "sets"), BASES)
def test_any_value_of_any_field_through_replace_is_a_run_or_a_scenario_error(name, sets):
    """Every field of every part, driven by the dataclasses' own fields (new fields are covered
    as they come): only a run, a ScenarioError (or another TmasimError) or a TypeError."""
    scenario = load(name, [*sets, "run.records=false"])
    for part in ("gpu", "workload", "pipeline", "run"):
        config = getattr(scenario, part)
        for field in dataclasses.fields(config):
            if field.name in ("kind", "sources"):
                continue
            for value in BAD_VALUES:
                try:
                    edited = dataclasses.replace(scenario, **{part: dataclasses.replace(config, **{field.name: value})})
                    stats = simulate(edited).stats
                except (TmasimError, TypeError):
                    continue
                assert stats["sms_used"] <= edited.gpu.sms and stats["makespan_ps"] > 0, (part, field.name, value)
