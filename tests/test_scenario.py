"""Scenario reading: overrides, defaults, and every bad input named precisely."""

from __future__ import annotations

import pytest

from tmasim import scenario
from tmasim.errors import ScenarioError
from tmasim.fields import Distribution

BASE = {"workload": {"kind": "tiles", "tiles": 4, "load": "3 us", "compute": "5 us"}}


def build(**sections):  # type: ignore[no-untyped-def]
    raw = {"workload": dict(BASE["workload"])}
    for name, value in sections.items():
        if name == "workload":
            raw["workload"].update(value)
        else:
            raw[name] = value
    return scenario.from_dict(raw)


def test_quantities_are_rounded_to_the_nearest_picosecond():
    s = build(workload={"load": "3 us", "compute": "5 µs", "latency": "0.1 us"})
    assert (s.workload.load, s.workload.compute, s.workload.latency) == (3_000_000, 5_000_000, 100_000)


def test_defaults():
    s = build()
    assert s.pipeline.stages == 2 and s.pipeline.consumers == 1 and s.pipeline.consumer_waits_full
    assert s.gpu.name == "ideal" and s.run.seed == 0 and s.workload.tile_bytes == 16384


@pytest.mark.parametrize(("override", "check"), [
    ("pipeline.stages=3", lambda s: s.pipeline.stages == 3),
    ('workload.load="4 us"', lambda s: s.workload.load == 4_000_000),
    ("workload.load=4 us", lambda s: s.workload.load == 4_000_000),
    ('workload.load=["3 us", "4 us", "5 us", "6 us"]',
     lambda s: s.workload.load == (3_000_000, 4_000_000, 5_000_000, 6_000_000)),
    ('workload.compute={dist = "normal", mean = "5 us", std = "1 us"}',
     lambda s: s.workload.compute == Distribution("normal", (("mean", 5_000_000), ("std", 1_000_000)))),
    ("gpu=ideal", lambda s: s.gpu.name == "ideal"),
    ('gpu.barrier_wake="10 ns"', lambda s: s.gpu.barrier_wake == 10_000),
    ("gpu.tma_issue=20 cycles", lambda s: s.gpu.tma_issue == round(20 / 1.98e9 * 1e12)),
    ("run.seed=5", lambda s: s.run.seed == 5),
])
def test_overrides(override, check):
    s = scenario.from_dict(scenario.apply_overrides(BASE, [override]))
    assert check(s)


def test_override_does_not_touch_the_original():
    raw = {"workload": dict(BASE["workload"])}
    scenario.apply_overrides(raw, ["workload.tiles=9"])
    assert raw["workload"]["tiles"] == 4


BAD = [
    ({"workload": {"lod": "3 us"}}, "workload.lod: '3 us' is not a known field"),
    ({"pipelin": {"stages": 2}}, "pipelin: "),
    ({"pipeline": {"stage": 2}}, "pipeline.stage: 2 is not a known field"),
    ({"workload": {"compute": "0 us"}}, "workload.compute: '0 us' must be > 0"),
    ({"workload": {"load": "-3 us"}}, "workload.load: '-3 us' must be > 0"),
    ({"workload": {"latency": "-1 ns"}}, "workload.latency: '-1 ns' must be >= 0"),
    ({"pipeline": {"stages": 0}}, "pipeline.stages: 0 must be >= 1"),
    ({"workload": {"tiles": 0}}, "workload.tiles: 0 must be >= 1"),
    ({"workload": {"tiles": 2.5}}, "workload.tiles: 2.5 must be a whole number"),
    ({"workload": {"load": "three us"}}, "workload.load: 'three us' is not a quantity"),
    ({"workload": {"load": "3 GB"}}, "workload.load: '3 GB' is not a time"),
    ({"workload": {"load": 3}}, "workload.load: 3 is not a time: give a string with a unit"),
    ({"workload": {"load": ["3 us", "4 us"]}}, "workload.load: ['3 us', '4 us'] has 2 entries but workload.tiles = 4"),
    ({"workload": {"load": []}}, "workload.load: [] must not be an empty list"),
    ({"workload": {"load": {"dist": "gauss"}}}, "workload.load.dist: 'gauss' must be one of"),
    ({"workload": {"load": {"dist": "normal", "mean": "3 us"}}}, "workload.load.std: '(missing)' is required"),
    ({"workload": {"kind": "matmul"}}, "workload.kind: 'matmul' must be one of"),
    ({"pipeline": {"consumer_waits_full": "no"}}, "pipeline.consumer_waits_full: 'no' must be true or false"),
    ({"gpu": "a100"}, "gpu: 'a100' is not a known GPU preset"),
    ({"gpu": {"preset": "ideal", "hbm_bw": "1 TB/s"}}, "gpu.hbm_bw: '1 TB/s' is not a known field"),
    ({"gpu": {"preset": "ideal", "barrier_wake": "1 GB"}}, "gpu.barrier_wake: '1 GB' is not a time"),
]


@pytest.mark.parametrize(("sections", "message"), BAD, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_input_names_the_field_the_value_and_the_rule(sections, message):
    with pytest.raises(ScenarioError) as err:
        build(**sections)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_required_field():
    with pytest.raises(ScenarioError, match=r"workload.compute: '\(missing\)' is required for kind 'tiles'"):
        scenario.from_dict({"workload": {"tiles": 4, "load": "3 us"}})


def test_missing_and_non_toml_files(tmp_path):
    with pytest.raises(ScenarioError, match="is not a file"):
        scenario.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[workload\nkind = ")
    with pytest.raises(ScenarioError, match="is not valid TOML"):
        scenario.load(bad)


def test_bad_override_syntax():
    with pytest.raises(ScenarioError, match="must look like FIELD=VALUE"):
        scenario.apply_overrides(BASE, ["pipeline.stages"])
    with pytest.raises(ScenarioError, match="is not a table"):
        scenario.apply_overrides(BASE, ["workload.tiles.x=3"])


def test_every_bundled_scenario_loads():
    names = scenario.bundled_names()
    assert "reference" in names
    for name in names:
        assert scenario.load(name).name


def test_fewer_sms_keep_the_per_sm_tensor_rate():
    stream = {"workload": {"kind": "stream", "shape": [512, 512], "box": [64, 64]}}  # a workload that reads gpu.sms
    full = scenario.from_dict({**stream, "gpu": "h100-sxm"}).gpu
    small = scenario.from_dict({**stream, "gpu": {"preset": "h100-sxm", "sms": 4}}).gpu
    assert small.sm_flop_rate("bf16") == pytest.approx(full.sm_flop_rate("bf16"))
    assert small.hbm_bandwidth == full.hbm_bandwidth   # a chip resource, unchanged


def test_a_preset_name_without_its_suffix_suggests_the_preset():
    with pytest.raises(ScenarioError, match=r"'h100' is not a known GPU preset; did you mean 'h100-sxm'\?"):
        scenario.load(None, ["gpu=h100"])
    with pytest.raises(ScenarioError, match=r"did you mean 'b200'\?"):
        scenario.load(None, ["gpu=b20"])
