"""Inputs read strictly, one case per input: the command line's one- or two-line error (exit 2,
naming the field, the value and the rule) and the Python API's tmasim error, never a traceback,
a silent default or a run of something else."""

from __future__ import annotations

import dataclasses

import pytest

from tmasim.cli import main
from tmasim.errors import ResourceError, ScenarioError, TmasimError
from tmasim.fields import Distribution
from tmasim.scenario import load
from tmasim.sweep import run_sweep


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> str:
    assert main(argv) == code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and 1 <= len(lines) <= 2 and lines[0].startswith("tmasim: error: "), err
    return err


# ------------------------------------------------------------------------------ the Python API


@pytest.mark.parametrize(("option", "value"), [("zip_", "no"), ("progress", "no"), ("allow_large", "no"),
                                               ("allow_large", 1), ("zip_", None)])
def test_run_sweep_switches_take_booleans_only(option, value):
    also = ", or a list of the fields to pair" if option == "zip_" else ""
    with pytest.raises(TmasimError, match=rf"^run_sweep: {option}={str(value)!r} must be True or False{also}$"):
        run_sweep("reference", [], ["pipeline.stages=1,2"], **{"progress": False, option: value})


@pytest.mark.parametrize(("option", "value"), [("max_points", "10"), ("max_seconds", -1.0),
                                               ("max_points", float("nan")), ("max_seconds", True)])
def test_run_sweep_limits_are_numbers_or_none(option, value):
    with pytest.raises(TmasimError, match=rf"^run_sweep: {option}=.* must be a number >= 0, or None for no limit$"):
        run_sweep("reference", [], ["pipeline.stages=1,2"], progress=False, **{option: value})


def test_run_sweep_applies_the_command_lines_point_limit_by_default():
    with pytest.raises(ResourceError, match=r"^sweep: 10,001 points to run, over 10,000: "):
        run_sweep("reference", [], {"run.seed": range(10_001)}, progress=False)


@pytest.mark.parametrize(("vary", "message"), [
    ([None], "--vary: None must be a string like FIELD=V1,V2"),
    ([3], "--vary: 3 must be a string like FIELD=V1,V2"),
    ({None: [1, 2]}, "--vary: None is not a field name like pipeline.stages"),
])
def test_run_sweep_vary_of_the_wrong_type_is_a_scenario_error(vary, message):
    with pytest.raises(ScenarioError) as err:
        run_sweep("reference", [], vary, progress=False)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(("kind", "params", "message"), [
    ("normal", None, "workload: None must give mean, std for dist = 'normal'"),
    ("normal", [("mean", 1), ("std", 1)], "workload: [('mean', 1), ('std', 1)] must give mean, std"),
    ("normal", (("mean",),), "workload: (('mean',),) must give mean, std"),
    (["normal"], (("mean", 1), ("std", 1)), "workload.dist: ['normal'] must be one of normal, lognormal"),
    ("normal", (("mean", -5), ("std", 1)), "workload.mean: -5"),
])
def test_a_distribution_of_bad_parts_is_a_scenario_error(kind, params, message):
    with pytest.raises(ScenarioError) as err:
        Distribution(kind, params)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("l2_bandwidth", 1e-30, "gpu.l2_bandwidth: '1e-30 TB/s' must be at least 1 B/s"),
    ("hbm_bandwidth", 5e-13, "gpu.hbm_bandwidth: '5e-13 TB/s' must be at least 1 B/s"),
    ("sm_port_bandwidth", float("nan"), "gpu.sm_port_bandwidth: nan"),
])
def test_replace_on_a_gpu_refuses_what_set_refuses(field, value, message):
    gpu = load("gemm-h100").gpu
    with pytest.raises(ScenarioError) as err:
        dataclasses.replace(gpu, **{field: value})
    assert str(err.value).startswith(message)


def test_the_same_slow_bandwidth_is_one_line_on_the_command_line(capsys):
    err = one_line_error(capsys, ["run", "gemm-h100", "--set", "gpu.l2_bandwidth=1e-30 TB/s"])
    assert "gpu.l2_bandwidth: '1e-30 TB/s' must be at least 1 B/s (1e-12 TB/s)" in err


# ------------------------------------------------------------------------------ limits before work


def test_report_is_under_the_sweeps_point_limit_and_writes_nothing(capsys, tmp_path):
    seeds = ",".join(map(str, range(10_001)))
    err = one_line_error(capsys, ["report", "reference", "--vary", f"run.seed={seeds}", "--out", str(tmp_path / "r")])
    assert "sweep: 10,001 points to run, over 10,000: " in err
    assert err.strip().endswith("add --yes (or pass max_points=None from Python) to run them")
    assert not (tmp_path / "r").exists()


def test_report_refuses_a_base_run_past_the_limits_before_its_sweep(capsys, tmp_path, monkeypatch):
    from tmasim.sweep import runner

    monkeypatch.setattr(runner, "plan_sweep", lambda *a, **k: pytest.fail("the sweep was planned"))
    err = one_line_error(capsys, ["report", "gemm-h100", "--set", "workload.k=524288", "--set", "run.aggregate=false",
                                  "--set", "run.fast_forward=false", "--vary", "pipeline.stages=2,3",
                                  "--out", str(tmp_path / "r")])
    assert err.startswith("tmasim: error: report: ") and "over the limit of 5.0 min" in err and "add --yes" in err
    assert not (tmp_path / "r").exists()


LONG = ["workload.tiles=10000000", "workload.load=1 s", "workload.compute=1 s"]
TOO_LONG = ("workload.tiles: 10000000 makes the run take at least 1e+07 s of simulated time (one CTA's work, one "
            "step after another): must be at most 9.22e+06 s (about 106 days; the engine counts picoseconds in "
            "64 bits)")


def test_a_run_past_the_engines_picosecond_range_is_refused_at_plan_time(capsys):
    err = one_line_error(capsys, ["run", "reference", *(f"--set={s}" for s in LONG)])
    assert TOO_LONG in err


def test_the_same_point_in_a_sweep_is_an_invalid_row_with_the_same_message(tmp_path):
    frame = run_sweep("reference", LONG[1:], ["workload.tiles=10000000,4"], progress=False)
    assert frame["status"].tolist() == ["invalid", "ok"]
    assert frame["error"][0].startswith(TOO_LONG)


def test_the_floor_is_the_copy_engines_work_when_loads_are_the_longer():
    from tmasim.simulation import simulate

    with pytest.raises(ScenarioError, match=r"^workload.tiles: 9300000 makes the run take at least 9.3e\+06 s"):
        simulate(load("reference", ["workload.tiles=9300000", "workload.load=1 s", "workload.compute=1 ns",
                                    "run.records=false"]))


# ------------------------------------------------------------------------------ what the user wrote


@pytest.mark.parametrize(("setting", "line"), [
    ("workload.load=1 s", "  changed: workload.load 3 µs → 1 s"),
    ("workload.load=3 ns", "  changed: workload.load 3 µs → 3 ns"),
    ("workload.load=3 ms", "  changed: workload.load 3 µs → 3 ms"),
    ("workload.load=2 us", "  changed: workload.load 3 µs → 2 µs"),
])
def test_the_changed_line_shows_the_old_value_in_a_unit_it_reads_in(setting, line):
    from tmasim.summary import header

    assert header(load("reference", [setting]), unicode=True)[1] == line


@pytest.mark.parametrize(("setting", "message"), [
    ("workload.box=[257,64]", "workload.box[0]: 257 must be between 1 and 256 elements (a TMA box's rule)"),
    ("workload.box=[64,257]", "workload.box[1]: 257 must be between 1 and 256 elements (a TMA box's rule)"),
    ("workload.box=[64,1]", "workload.box[1]: 1 × 2 bytes (bf16) = 2 bytes must be a multiple of 16"),
    ("workload.shape=[1,1]", "workload.shape: [1, 1] makes a stride of 2 bytes between the rows of shape[1:] "
                             "(1 × 2 bytes, bf16): a TMA tensor's strides must be a multiple of 16 bytes"),
])
def test_box_and_shape_errors_name_the_scenarios_field_and_index(capsys, setting, message):
    err = one_line_error(capsys, ["run", "stream-h100", "--set", setting])
    assert err.strip() == f"tmasim: error: {message}" or message in err
    assert "box_dims" not in err and "global_strides_bytes" not in err


def test_a_stride_of_a_3d_shape_names_the_inner_extents(capsys):
    err = one_line_error(capsys, ["run", "stream-h100", "--set", "workload.shape=[4,4,4]", "--set",
                                  "workload.box=[4,4,4]"])
    assert "workload.shape: [4, 4, 4] makes a stride of 8 bytes between the rows of shape[2:] (4 × 2 bytes" in err


@pytest.mark.parametrize(("name", "setting", "field"), [
    ("gemm-h100", "gpu.copy_latency_per_kib=0.5 s",
     "gpu.copy_latency_per_kib: '0.5 s' makes a copy's latency take 8 s"),
    ("stream-h100", "gpu.copy_latency_per_kib=0.5 s", "gpu.copy_latency_per_kib: '0.5 s' makes a copy's latency"),
    ("gemm-h100", "gpu.copy_latency=1 s", "gpu.copy_latency: '1 s' makes a copy's latency take"),
])
def test_a_latency_out_of_range_names_the_field_that_makes_it(capsys, name, setting, field):
    assert field in one_line_error(capsys, ["run", name, "--set", setting])


@pytest.mark.parametrize("shape", [(1, 1), (2, 1), (1, 2), (4, 1), (1, 4)])
@pytest.mark.parametrize("multicast", ["a", "b", "both"])
def test_a_multicast_suggestion_is_one_that_passes(shape, multicast):
    import re

    from tmasim.cluster import check_multicast

    try:
        check_multicast(multicast, shape)
    except ScenarioError as err:
        suggested = re.search(r"\(use '(\w+)'", str(err))
        assert suggested is not None and suggested[1] != multicast, err
        check_multicast(suggested[1], shape)


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "reference", "--set", "name=a\x1b[31mb"],
     r"name: 'a\x1b[31mb' must not contain control characters (it has '\x1b' at position 1)"),
    (["run", "reference", "--set", "description=ring\x07"], r"description: 'ring\x07' must not contain"),
    (["run", "reference", "--set", "work\x1bload.tiles=3"], r"'work\x1bload': {'tiles': 3} is not a known field"),
    (["run", "ref\x1b"], r"scenario: 'ref\x1b' is not a file or a bundled scenario"),
])
def test_control_characters_are_shown_escaped_never_printed(capsys, argv, message):
    err = one_line_error(capsys, argv)
    assert message in err and "\x1b" not in err and "\x07" not in err


# ------------------------------------------------------------------------------ values read strictly


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("sweep") / "s.csv"
    run_sweep("reference", [], ["pipeline.stages=1,2"], out=out, progress=False)
    return out


@pytest.mark.parametrize(("title", "near"), [("$x^$", "'x^'"), ("$\\undefinedcmd$ and $y$", "'\\\\undefinedcmd'")])
def test_a_plot_title_with_math_text_matplotlib_cannot_parse_is_one_line(capsys, small_sweep, tmp_path, title, near):
    err = one_line_error(capsys, ["plot", str(small_sweep), "--title", title, "--out", str(tmp_path / "p.png")])
    assert f"--title: {title!r} has math text matplotlib cannot draw (at {near})" in err
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("title", ["cost in $", "a $x^2$ b", "price \\$5 and \\$6"])
def test_a_plot_title_that_parses_is_drawn(capsys, small_sweep, tmp_path, title):
    assert main(["plot", str(small_sweep), "--title", title, "--out", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 0


def test_a_scenario_name_that_is_not_math_text_is_drawn_as_written(capsys, tmp_path):
    assert main(["run", "reference", "--set", "name=$x^$", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "gantt.png").stat().st_size > 0


@pytest.mark.parametrize(("cells", "counts"), [
    (["nan", "nan"], "2 rows: 2 empty or not a number, 0 infinite, 0 zero or negative"),
    (["inf", "-inf"], "2 rows: 0 empty or not a number, 2 infinite, 0 zero or negative"),
    (["-5", "0"], "2 rows: 0 empty or not a number, 0 infinite, 2 zero or negative"),
    (["nan", "inf", "-5"], "3 rows: 1 empty or not a number, 1 infinite, 1 zero or negative"),
])
def test_validate_with_no_usable_measured_cell_says_so_in_one_line(capsys, tmp_path, cells, counts):
    table = tmp_path / "m.csv"
    table.write_text("stages,kernel_ns\n" + "".join(f"{i + 1},{c}\n" for i, c in enumerate(cells)))
    err = one_line_error(capsys, ["validate", str(table), "--map", "stages=pipeline.stages", "--measure",
                                  "kernel_ns", "--out", str(tmp_path / "v")])
    assert f"--measure kernel_ns: no row has a finite positive number in that column ({counts})" in err
    assert not (tmp_path / "v").exists()


def test_validate_leaves_out_an_infinite_cell_and_compares_the_rest(capsys, tmp_path):
    table = tmp_path / "m.csv"
    table.write_text("stages,kernel_ns\n1,inf\n2,20000\n")
    assert main(["validate", str(table), "--map", "stages=pipeline.stages", "--measure", "kernel_ns",
                 "--out", str(tmp_path / "v")]) == 0
    assert "MAPE 15.00% over 1 points" in capsys.readouterr().out


def test_the_apis_default_point_limit_is_the_command_lines():
    from tmasim.sweep import command, runner

    assert runner.MAX_POINTS == command.BIG_SWEEP == 10_000
