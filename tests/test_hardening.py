"""Bad input anywhere: one line naming the field, the value and the rule, exit 2, no traceback.

Runs the CLI in-process (``main(argv)``) so that dozens of reproducers stay fast.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from tmasim import units
from tmasim.cli import main
from tmasim.errors import ScenarioError, UnitError
from tmasim.scenario import Pipeline, RunOptions, load
from tmasim.simulation import simulate


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tmasim: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("text", [
    "nan us", "inf us", "-inf us", "1e400 us", "us", "3 us 4", "3 us * 2", "3 us + 2 us", "2**1000 us",
    '"4 us', "3 us)", "(3 us)", "3 us us", "3 * us", "3 us / 2", "3e us", "0x10 us", "1_000 us", "",
    "3 us\n", "--3 us", "3.3.3 us",
])
def test_a_time_is_a_finite_number_and_a_unit_nothing_else(text):
    with pytest.raises(UnitError) as caught:
        units.parse(text, "time", "workload.load")
    message = str(caught.value)
    assert message.startswith("workload.load: ") and "\n" not in message


@pytest.mark.parametrize(("text", "ps"), [
    ("3us", 3_000_000), ("3 µs", 3_000_000), ("3 μs", 3_000_000), ("1e3 ns", 1_000_000), ("+2 ns", 2_000),
    (".5 us", 500_000), ("2. ns", 2_000), ("  7 ps ", 7), ("1E-3 ms", 1_000_000),
])
def test_plain_quantities_still_read(text, ps):
    assert units.time_ps(text, "f") == ps


@pytest.mark.parametrize(("text", "kind"), [
    ("nan TB/s", "bandwidth"), ("inf GHz", "frequency"), ("1e400 KiB", "size"), ("2 TB/s/s", "bandwidth"),
    ("989 TFLOP/s * 2", "flop_rate"),
])
def test_every_kind_is_read_the_same_strict_way(text, kind):
    with pytest.raises(UnitError):
        units.parse(text, kind, "f")


def test_a_huge_time_that_overflows_after_conversion_is_refused():
    with pytest.raises(UnitError, match="too large"):
        units.parse("1e300 s", "time", "f")


@pytest.mark.parametrize(("setting", "fragments"), [
    ("workload.load=nan us", ["workload.load: 'nan us'", "finite number and a unit"]),
    ("workload.load=inf us", ["workload.load: 'inf us'"]),
    ("workload.load=-inf us", ["workload.load: '-inf us'"]),
    ("workload.load=1e400 us", ["workload.load: '1e400 us' is not a finite number"]),
    ("workload.load=us", ["workload.load: 'us'"]),
    ("workload.load=3 us 4", ["workload.load: '3 us 4'"]),
    ("workload.load=3 us * 2", ["workload.load: '3 us * 2'"]),
    ("workload.load=3 us + 2 us", ["workload.load: '3 us + 2 us'"]),
    ("workload.load=2**1000 us", ["workload.load: '2**1000 us'"]),
    ('workload.load="4 us', ["workload.load: '\"4 us'"]),
    ("workload.load=2 s", ["workload.load: '2 s' must be at most 1 s"]),
    ("workload.load={dist = \"normal\", mean = \"nan us\", std = \"1 us\"}", ["workload.load.mean: 'nan us'"]),
    ("workload.tile_bytes=inf KiB", ["workload.tile_bytes: 'inf KiB'"]),
    ("gpu.hbm_bandwidth=nan TB/s", ["gpu.hbm_bandwidth: 'nan TB/s'"]),
    ("gpu.clock=inf GHz", ["gpu.clock: 'inf GHz'"]),
    ("gpu.copy_latency=nan cycles", ["gpu.copy_latency: 'nan cycles'"]),
    ("workload.tiles=1000000000000", ["workload.tiles: 1000000000000 must be <= 100,000,000"]),
    ("gpu.smem_per_sm=10 KiB", ["gpu.smem_per_cta", "must be <= gpu.smem_per_sm (10 KiB)"]),
    ("gpu.smem_per_cta=300 KiB", ["gpu.smem_per_cta", "must be <= gpu.smem_per_sm (228 KiB)"]),
    ("gpu.tma_max_bytes_in_flight=1 KiB", ["gpu.tma_max_bytes_in_flight: '1 KiB' is below one copy (16 KiB)"]),
    ("pipeline.stages=1.5", ["pipeline.stages: 1.5 must be a whole number"]),
    ("pipeline.consumers=100", ["pipeline.consumers: 100 must be <= 64"]),
])
def test_bad_tiles_fields_are_one_line_errors(capsys, setting, fragments):
    code, _, err = run_cli(capsys, "run", "--set", setting)
    assert_one_line_error(code, err, *fragments)


@pytest.mark.parametrize(("scenario", "setting", "fragments"), [
    ("stream-h100", "workload.compute_per_byte=-1 ps", ["workload.compute_per_byte: '-1 ps' must be >= 0"]),
    ("stream-h100", "gpu.hbm_bandwidth=nan TB/s", ["gpu.hbm_bandwidth: 'nan TB/s'"]),
    ("stream-h100", "workload.shape=[4294967296, 4294967296]", ["workload.shape", "boxes"]),
    ("gemm-h100", "gpu.tensor_flops={bf16 = \"989 TFLOP/s\"}", None),
    ("gemm-h100", "gpu.tensor_flops={bf16 = \"989 TFLOP/s\"}",
     ["gpu.tensor_flops", "cannot be set on a preset with an MMA table"]),
    ("gemm-h100", "workload.m=1000000000000", ["workload.m: 1000000000000 must be <= 4,294,967,296"]),
    ("gemm-h100", "workload.tile=[1, 1, 1]", ["workload.tile"]),
])
def test_bad_chip_fields_are_one_line_errors(capsys, scenario, setting, fragments):
    argv = ["run", scenario, "--set", setting]
    if fragments is None:  # a tensor_flops table without the workload's dtype (a preset without an MMA table)
        argv += ["--set", "gpu.preset=ideal", "--set", "workload.dtype=fp8"]
        fragments = ["workload.dtype: 'fp8' has no tensor-core rate on ideal (gpu.tensor_flops gives bf16)"]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, *fragments)


def test_edited_configs_are_checked_again():
    scenario = load()
    for change in ({"stages": 0}, {"stages": -1}, {"consumers": 0}, {"consumer_mode": "both"},
                   {"stages": True}, {"expect_tx": -5}):
        with pytest.raises(ScenarioError, match="pipeline"):
            dataclasses.replace(scenario.pipeline, **change)
    with pytest.raises(ScenarioError, match="run.seed"):
        dataclasses.replace(scenario.run, seed=-1)
    with pytest.raises(ScenarioError, match="workload.tiles"):
        dataclasses.replace(scenario.workload, tiles=0)
    with pytest.raises(ScenarioError, match="workload.load"):
        dataclasses.replace(scenario.workload, load=-5)
    with pytest.raises(ScenarioError, match="has one entry per tile|one entry per tile"):
        dataclasses.replace(scenario.workload, load=(1, 2))
    with pytest.raises(ScenarioError, match="gpu.sms"):
        dataclasses.replace(scenario.gpu, sms=0)
    with pytest.raises(ScenarioError, match="gpu.hbm_bandwidth"):
        dataclasses.replace(scenario.gpu, hbm_bandwidth=float("nan"))


def test_the_mma_model_fields_are_checked_on_every_construction():
    """pipeline.registers, run.drift and the preset's MMA table, as the other fields."""
    from tmasim.drift import Drift
    from tmasim.hardware import load_gpu

    pipeline = Pipeline()
    for registers in ((None, 250), (16, None), (None, 264), (None, 232.0), [40, 232]):
        with pytest.raises(ScenarioError, match="pipeline.registers"):
            dataclasses.replace(pipeline, registers=registers)
    assert dataclasses.replace(pipeline, registers=(40, 232)).registers == (40, 232)
    with pytest.raises(ScenarioError, match="run.drift.start"):
        Drift(-1, 0.0)
    with pytest.raises(ScenarioError, match="run.drift.latency_cv"):
        Drift(0, 1.5)
    with pytest.raises(ScenarioError, match="run.drift"):
        dataclasses.replace(RunOptions(), drift={"start": 0})
    mma = load_gpu("b200").mma
    assert mma is not None
    with pytest.raises(ScenarioError, match="gpu.mma.registers_per_sm"):
        dataclasses.replace(mma, registers_per_sm=0)
    with pytest.raises(ScenarioError, match="gpu.mma.instruction"):
        dataclasses.replace(mma, instruction="hmma")
    with pytest.raises(ScenarioError, match="gpu.mma.shape.latency"):
        dataclasses.replace(mma.shapes[0], latency=mma.shapes[0].ii / 2)
    with pytest.raises(ScenarioError, match="gpu.mma"):
        dataclasses.replace(load_gpu("b200"), mma="table")


def test_simulate_checks_a_scenario_edited_behind_the_dataclasses_back():
    scenario = load()
    object.__setattr__(scenario.pipeline, "stages", 0)  # what no caller should do; still an error
    with pytest.raises(ScenarioError, match="pipeline.stages: 0 must be >= 1"):
        simulate(scenario)


def test_a_scenario_of_unchecked_parts_is_refused():
    scenario = load()
    with pytest.raises(ScenarioError, match="pipeline"):
        dataclasses.replace(scenario, pipeline={"stages": 2})
    assert dataclasses.replace(scenario, pipeline=Pipeline(stages=1), run=RunOptions(records=False)) is not None


def test_records_for_very_many_tiles_are_refused_with_the_way_out():
    with pytest.raises(ScenarioError, match="run.records.*set run.records=false"):
        load(None, ["workload.tiles=20000000"])
    assert load(None, ["workload.tiles=20000000", "run.records=false"]).workload.tiles == 20_000_000


def test_preset_files_that_cannot_be_read(tmp_path, capsys):
    latin = tmp_path / "latin.toml"
    latin.write_bytes('description = "caf\xe9"\n'.encode("latin-1"))
    code, _, err = run_cli(capsys, "run", "--set", f"gpu={latin}")
    assert_one_line_error(code, err, "is not UTF-8 text")
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    code, _, err = run_cli(capsys, "run", "--set", f"gpu={folder}")
    assert_one_line_error(code, err, "is not a preset file that exists")
    code, _, err = run_cli(capsys, "run", "--set", f"gpu={tmp_path / ('x' * 5000)}.toml")
    assert_one_line_error(code, err, "characters)")


def test_scenario_files_with_a_bom_long_names_or_deep_nesting(tmp_path, capsys):
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + (load().raw and b'name = "bom"\n[workload]\ntiles = 4\nload = "3 us"\n'
                                              b'compute = "5 us"\n'))
    code, out, err = run_cli(capsys, "run", str(bom))
    assert code == 0 and "pipelined time       23 µs" in out, err
    code, _, err = run_cli(capsys, "run", "y" * 5000)
    assert_one_line_error(code, err, "scenario:", "characters)")
    deep = tmp_path / "deep.toml"
    deep.write_text("v = " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = run_cli(capsys, "run", str(deep))
    assert_one_line_error(code, err, "nested too deeply")
    code, _, err = run_cli(capsys, "run", "--set", "workload.load=" + "[" * 5000 + "]" * 5000)
    assert_one_line_error(code, err, "--set", "nested too deeply")


def test_a_key_with_a_newline_keeps_the_message_on_one_line(tmp_path, capsys):
    odd = tmp_path / "odd.toml"
    odd.write_text('"a\\nb" = 1\n[workload]\ntiles = 4\nload = "3 us"\ncompute = "5 us"\n')
    code, _, err = run_cli(capsys, "run", str(odd))
    assert_one_line_error(code, err, "'a\\nb'", "is not a known field")


def test_a_run_with_races_is_invalid_everywhere(capsys):
    result = simulate(load("bug-missing-wait"))
    assert result.stats["valid"] is False
    assert result.stats["invalid_reason"].startswith("2 reads before data landed")
    code, out, err = run_cli(capsys, "run", "bug-missing-wait")
    assert code == 0
    assert out.splitlines()[1].startswith("  INVALID RUN: 2 reads before data landed")
    assert "pipelined time" not in out and "23 µs" not in out and "23 us" not in out
    code, out, _ = run_cli(capsys, "run", "bug-missing-wait", "--json")
    data = json.loads(out)
    assert data["valid"] is False and list(data)[:2] == ["valid", "invalid_reason"]


def test_a_correct_run_is_valid(reference):
    assert reference.stats["valid"] is True and reference.stats["invalid_reason"] is None


def test_a_sweep_records_a_run_with_races_as_invalid_never_as_a_time(tmp_path):
    from tmasim.sweep import run_sweep

    frame = run_sweep("reference", [], ["pipeline.consumer_waits_full=true,false"], out=tmp_path / "s.csv",
                      progress=False)
    ok, broken = frame.iloc[0], frame.iloc[1]
    assert ok["status"] == "ok" and ok["makespan_ns"] == 23_000
    assert broken["status"] == "invalid" and "reads before data landed" in broken["error"]
    assert broken["makespan_ns"] != broken["makespan_ns"]  # NaN: no time recorded


def test_load_scenario_takes_a_list_or_a_dict_of_overrides_and_refuses_one_string():
    import tmasim

    assert tmasim.load_scenario("reference", ["pipeline.stages=3"]).pipeline.stages == 3
    assert tmasim.load_scenario("reference", {"pipeline.stages": 3, "workload.load": "4 us"}).workload.load == 4 * 10**6
    with pytest.raises(ScenarioError, match="not one string"):
        tmasim.load_scenario("reference", "pipeline.stages=3")
    with pytest.raises(ScenarioError, match="must be a string FIELD=VALUE"):
        tmasim.load_scenario("reference", [("pipeline.stages", 3)])


def test_load_scenario_finds_a_bundled_file_by_its_file_name(tmp_path, monkeypatch):
    import tmasim

    monkeypatch.chdir(tmp_path)  # no reference.toml here: the bundled one is meant
    assert tmasim.load_scenario("reference.toml").name == "reference"
    (tmp_path / "reference.toml").write_text('name = "mine"\n[workload]\ntiles = 2\nload = "1 us"\ncompute = "1 us"\n')
    assert tmasim.load_scenario("reference.toml").name == "mine"  # a file of that name here comes first


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory: pytest.TempPathFactory):
    from tmasim.sweep import run_sweep

    out = tmp_path_factory.mktemp("sweep") / "s.parquet"
    run_sweep("reference", [], ["pipeline.stages=1,2"], out=out, progress=False)
    return out


@pytest.mark.parametrize(("extra", "fragments"), [
    (["--y", "status"], ["--y: column 'status' is not numeric (it holds ok)", "makespan_ns"]),
    (["--out", "x.jpeg"], ["--out: 'x.jpeg' must end in .png or .svg"]),
])
def test_plot_refuses_what_it_cannot_draw_in_one_line(capsys, sweep_file, extra, fragments):
    code, _, err = run_cli(capsys, "plot", str(sweep_file), "--kind", "stage-sweep", *extra)
    assert_one_line_error(code, err, *fragments)


def test_plot_says_the_path_it_really_wrote(capsys, sweep_file, tmp_path):
    code, _, err = run_cli(capsys, "plot", str(sweep_file), "--kind", "stage-sweep", "--out", str(tmp_path / "x"))
    assert code == 0 and err.strip() == f"wrote {tmp_path / 'x.png'}" and (tmp_path / "x.png").is_file()


@pytest.mark.parametrize("window", ["nan us..5 us", "0..inf us", "0..1e400 us", "inf us..5 us"])
def test_a_window_that_is_not_finite_is_refused(capsys, tmp_path, window):
    assert run_cli(capsys, "run", "--out", str(tmp_path / "run"))[0] == 0
    code, _, err = run_cli(capsys, "plot", str(tmp_path / "run"), "--kind", "gantt", "--window", window)
    assert_one_line_error(code, err, "--window")


def test_plot_of_empty_or_all_failed_tables(capsys, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code, _, err = run_cli(capsys, "plot", str(empty), "--kind", "stage-sweep")
    assert_one_line_error(code, err, "cannot be read")
    failed = tmp_path / "failed.csv"
    failed.write_text("point,pipeline.stages,status,error\n0,0,invalid,bad\n")
    code, _, err = run_cli(capsys, "plot", str(failed), "--kind", "stage-sweep")
    assert_one_line_error(code, err, "no point of", "ran (1 invalid)")


def test_a_report_whose_sweep_all_failed_still_has_an_index(capsys, tmp_path):
    out = tmp_path / "review"
    code, _, err = run_cli(capsys, "report", "reference", "--set", "pipeline.consumer_waits_full=false",
                           "--vary", "pipeline.stages=2,3", "--out", str(out))
    assert code == 0, err
    page = (out / "index.html").read_text()
    assert "INVALID RUN: 2 reads before data landed" in page and "No point of the sweep ran (2 invalid)" in page
    assert '<th scope="row">time to finish</th>' not in page and '<th scope="row">valid</th><td>False' in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["review"]  # no staging folder left behind


def test_a_report_that_fails_leaves_no_half_written_folder(capsys, tmp_path, monkeypatch):
    from tmasim.review import report

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "_timeline_figures", broken)
    code, _, err = run_cli(capsys, "report", "reference", "--out", str(tmp_path / "review"))
    assert_one_line_error(code, err, "--out: cannot write", "No space left on device")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["run", "--out"], ["report", "reference", "--out"], ["run", "--trace"],
                                     ["sweep", "reference", "--vary", "pipeline.stages=1,2", "--out"]])
def test_an_out_name_the_os_refuses_is_one_line(capsys, tmp_path, command):
    code, _, err = run_cli(capsys, *command, str(tmp_path / ("z" * 3000)))
    assert_one_line_error(code, err, "--out" if "--out" in command else "--trace")
    assert list(tmp_path.iterdir()) == []
