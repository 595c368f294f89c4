"""Classes of bad input and damaged files, each closed as a class: extreme floats in every unit a
GPU field takes, names of any length, damaged result files and journals (refused with the file
and line named, never folded in), control characters, compressions not written, what a killed
save leaves, a sweep's lock, stale run folders, ``Scenario.raw`` after ``dataclasses.replace``,
API switches, JSON, the field an error names, byte-identical figures and traces, and what
``tmasim scenarios FILE`` prints. Errors are one line, exit status 2; nothing half-written."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import tmasim
from tmasim import hardware
from tmasim.cli import main
from tmasim.errors import ScenarioError
from tmasim.scenario import from_dict
from tmasim.simulation import simulate

STAGES = ["--vary", "pipeline.stages=1,2,3"]
DEAD_PID = 2**22 + 12345  # over Linux's pid_max: no process has it


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *fragments: str) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    return err


# ------------------------------------------------------------------ extreme floats, every unit


FREQUENCY_FIELDS = ("clock", "boost_clock", "power_limited_clock")
EXTREMES = ("5e-324", "2.2e-308", "1e300", "1.7976931348623157e308")


@pytest.mark.parametrize("preset", ["h100-sxm", "b200"])
def test_every_gpu_quantity_at_either_end_of_a_double_is_one_line(preset):
    """Every field of a preset that takes a unit, at the smallest and largest doubles in that
    unit: a ScenarioError naming the field, or a value the preset accepts; never an overflow."""
    kinds = {key: kind for key, (kind, _) in hardware._FIELDS.items()
             if kind in ("frequency", "bandwidth", "time", "size", "flop_rates")}
    units = {"frequency": "GHz", "bandwidth": "TB/s", "time": "us", "size": "KiB"}
    for key, kind in kinds.items():
        for number in EXTREMES:
            value = {"bf16": f"{number} TFLOP/s"} if kind == "flop_rates" else f"{number} {units[kind]}"
            try:
                hardware.load_gpu({"preset": preset, key: value})
            except ScenarioError as err:
                assert f"gpu.{key}" in str(err) and "\n" not in str(err), (key, value, err)


def test_a_clock_too_slow_is_refused_before_cycles_are_converted_at_it():
    with pytest.raises(ScenarioError, match=r"gpu.clock: .* must be from 1 Hz to 1 THz"):
        tmasim.load_scenario("gemm-h100", ['gpu.clock="5e-324 GHz"'])
    with pytest.raises(ScenarioError, match=r"gpu.power_limited_clock: .* must be from 1 Hz to 1 THz"):
        tmasim.load_scenario("attention-h100", ['gpu.power_limited_clock="5e-324 GHz"'])
    with pytest.raises(ScenarioError, match="workload.softmax_scale: 1000000"):
        tmasim.load_scenario("attention-h100", [f"workload.softmax_scale=1{'0' * 400}"])


# ------------------------------------------------------------------------- names of any length


def test_a_run_folder_named_with_255_bytes_is_written(tmp_path, capsys):
    out = tmp_path / ("r" * 255)
    assert main(["run", "reference", "--set", "run.records=false", "--out", str(out)]) == 0
    assert (out / "summary.csv").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no staging folder left


def test_calibrate_checks_its_journals_name_before_the_fit(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("stages,total_ns\n1,32000\n2,23000\n")
    refused(capsys, ["calibrate", str(tmp_path / "t.csv"), "--scenario", "reference", "--set",
                     'gpu={preset="ideal", tma_issue="10 ns"}', "--map", "stages=pipeline.stages",
                     "--measure", "total_ns", "--fit", "tma_issue", "--out", str(tmp_path / ("w" * 245 + ".toml"))],
            "a name of 250 bytes is too long: calibrate's journal beside it", "would be 263 bytes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


# --------------------------------------------------------------------------- damaged results


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweeps")
    for name in ("s.csv", "s.parquet"):
        assert main(["sweep", "reference", *STAGES, "--out", str(folder / name), "--quiet"]) == 0
    assert main(["run", "reference", "--out", str(folder / "run")]) == 0
    return folder


def _copy(sweeps: Path, tmp_path: Path, *names: str) -> None:
    import shutil

    for name in names:
        source = sweeps / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)


@pytest.mark.parametrize("value", [-5.0, "fast", 0.0])
def test_a_sweep_csv_with_a_bad_time_is_refused_by_plot_and_resume_naming_the_line(sweeps, tmp_path, capsys,
                                                                                    value):
    _copy(sweeps, tmp_path, "s.csv", "s.csv.meta.json")
    path = tmp_path / "s.csv"
    table = pd.read_csv(path)
    table["makespan_ns"] = table["makespan_ns"].astype(object)
    table.loc[1, "makespan_ns"] = value
    table.to_csv(path, index=False)
    before = path.read_bytes()
    refused(capsys, ["plot", str(path), "--out", str(tmp_path / "a.png")], "is damaged at line 3",
            f"makespan_ns is {value!r}")
    refused(capsys, ["sweep", "reference", *STAGES, "--out", str(path)], "cannot be read back (line 3",
            "not a run's time")
    assert path.read_bytes() == before and not (tmp_path / "a.png").exists()


def test_a_parquet_row_and_a_run_folder_are_checked_too(sweeps, tmp_path, capsys):
    _copy(sweeps, tmp_path, "s.parquet", "run")
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "s.parquet"
    table = pd.read_parquet(path)
    table.loc[2, "consumer_wait_full_ns"] = -1.0
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    pq.write_table(arrow.replace_schema_metadata(pq.read_schema(path).metadata), path)
    refused(capsys, ["plot", str(path), "--out", str(tmp_path / "a.png")], "damaged at row 3",
            "consumer_wait_full_ns is -1.0, not a number >= 0")
    spans = tmp_path / "run" / "spans.csv"
    frame = pd.read_csv(spans)
    frame.loc[0, "end_ps"] = -7
    frame.to_csv(spans, index=False)
    refused(capsys, ["plot", str(tmp_path / "run"), "--kind", "gantt", "--out", str(tmp_path / "g.png")],
            "spans.csv' is damaged at line 2", "end_ps is -7")


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("metadata", "said"), [
    ("[1, 2]", "it holds a list, not a JSON object"),
    ('{"scenario": 3, "vary": [], "zip": false}', "its 'scenario' is 3, not an object"),
    ('{"scenario": {}, "vary": [["pipeline.stages", 3]], "zip": false}', "its 'vary' is a list, not a list of"),
    ('{"scenario": {}, "vary": [], "zip": "no"}', "its 'zip' is 'no', not true, false or a list of the zipped fields"),
    (DEEP, "nests arrays or objects deeper than any file tmasim writes"),
])
def test_sweep_metadata_of_the_wrong_shape_is_refused(sweeps, tmp_path, capsys, metadata, said):
    _copy(sweeps, tmp_path, "s.csv")
    (tmp_path / "s.csv.meta.json").write_text(metadata)
    refused(capsys, ["sweep", "reference", *STAGES, "--out", str(tmp_path / "s.csv")],
            "exists but is not a tmasim sweep result (s.csv.meta.json: ", said)


def _journal(tmp_path: Path, sweeps: Path, *lines: str) -> Path:
    meta = json.loads((sweeps / "s.csv.meta.json").read_text())
    header = {"format": "tmasim-sweep/1", "fingerprint": {k: meta[k] for k in ("scenario", "vary", "zip")}}
    journal = tmp_path / "j.csv.partial.jsonl"
    journal.write_text("\n".join([json.dumps(header), *lines]) + "\n")
    return journal


GOOD = {"point": 0, "seed": 0, "status": "ok", "error": None, "stats": {"makespan_ns": 32000.0}}


@pytest.mark.parametrize(("line", "said"), [
    (json.dumps({**GOOD, "stats": {"makespan_ns": "fast"}}), "an ok point whose makespan_ns is 'fast'"),
    (json.dumps({**GOOD, "stats": {"makespan_ns": math.nan}}), "makespan_ns is nan"),
    (json.dumps({**GOOD, "stats": {}}), "makespan_ns is None"),
    (json.dumps({**GOOD, "stats": {"makespan_ns": 1.0, "bytes": -3}}), "its bytes is -3"),
    (json.dumps({**GOOD, "point": "0"}), "its point is '0'"),
    (json.dumps({**GOOD, "status": "done"}), "its status is 'done'"),
    (json.dumps({**GOOD, "seed": [1]}), "its seed is a list"),
    ("[1, 2]", "it holds a list"),
    (DEEP, "nests arrays or objects deeper"),
    ('{"point": ' + DEEP + "}", "nests arrays or objects deeper"),
])
def test_a_damaged_journal_line_is_refused_with_the_file_and_line(sweeps, tmp_path, capsys, line, said):
    journal = _journal(tmp_path, sweeps, json.dumps({**GOOD, "point": 1, "stats": {"makespan_ns": 23000.0}}), line)
    before = journal.read_text()
    refused(capsys, ["sweep", "reference", *STAGES, "--out", str(tmp_path / "j.csv")],
            f"the journal {str(journal)!r} is damaged at line 3 (", said)
    assert journal.read_text() == before and not (tmp_path / "j.csv").exists()


def test_a_journal_header_of_the_wrong_shape_is_refused(sweeps, tmp_path, capsys):
    journal = _journal(tmp_path, sweeps)
    header = json.loads(journal.read_text())
    header["fingerprint"]["vary"] = 3
    journal.write_text(json.dumps(header) + "\n")
    refused(capsys, ["sweep", "reference", *STAGES, "--out", str(tmp_path / "j.csv")],
            "is damaged at line 1, its header (its 'vary' is 3")


# ------------------------------------------------------------------------------ validate


TIMES = "stages,load_us,compute_us,total_ns\n1,3,5,32000\n2,3,5,23000\n"
MAPS = ["--map", "stages=pipeline.stages", "--map", "load_us=workload.load:us",
        "--map", "compute_us=workload.compute:us", "--measure", "total_ns"]


@pytest.mark.parametrize(("extra", "said"), [
    (["--map", "stages=workload.tiles"], "'stages' is mapped twice (also --map stages=pipeline.stages)"),
    (["--map", "load_us=pipeline.stages"], "'load_us' is mapped twice"),
    (["--map", "total_ns=workload.load:ns"], "'workload.load' is mapped twice"),
])
def test_validate_refuses_a_column_or_field_mapped_twice(tmp_path, capsys, extra, said):
    (tmp_path / "t.csv").write_text(TIMES)
    refused(capsys, ["validate", str(tmp_path / "t.csv"), "--scenario", "reference", *MAPS, *extra,
                     "--out", str(tmp_path / "v")], said)


def test_validate_refuses_a_header_naming_a_column_twice(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("stages,stages,load_us,compute_us,total_ns\n1,1,3,5,32000\n")
    refused(capsys, ["validate", str(tmp_path / "t.csv"), "--scenario", "reference", *MAPS,
                     "--out", str(tmp_path / "v")], "names column 'stages' twice in its header")


@pytest.mark.parametrize("meta", [DEEP, "[1]", '"text"'])
def test_validate_refuses_a_meta_json_it_cannot_read(tmp_path, capsys, meta):
    (tmp_path / "t.csv").write_text(TIMES)
    (tmp_path / "meta.json").write_text(meta)
    refused(capsys, ["validate", str(tmp_path / "t.csv"), "--scenario", "reference", *MAPS,
                     "--out", str(tmp_path / "v")], "meta.json")


def test_validate_says_how_many_rows_it_left_out(tmp_path, capsys):
    (tmp_path / "t.csv").write_text(TIMES + "3,3,5,\n4,3,5,0\n5,3,5,-3\n6,3,5,fast\n7,3,5,inf\n")
    assert main(["validate", str(tmp_path / "t.csv"), "--scenario", "reference", *MAPS, "--quiet",
                 "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert ("left out 5 rows whose total_ns is not a finite number above zero (1 empty, 1 not a number, "
            "1 infinite, 1 zero, 1 negative)") in out


# --------------------------------------------------------------------- control characters, names


@pytest.mark.parametrize("override", [
    'gpu={preset="ideal", name="a\\u001b[31mred"}',
    'gpu={preset="ideal", description="x\\ry"}',
    'gpu={preset="ideal", name="bell\\u0007"}',
    'name="nul\\u0000"',
    'description="esc\\u001b"',
])
def test_control_characters_in_names_and_descriptions_are_refused(override):
    with pytest.raises(ScenarioError, match="must not contain control characters"):
        tmasim.load_scenario("reference", [override])


def test_a_preset_file_with_a_control_character_is_refused(tmp_path):
    text = hardware.raw_preset("ideal")
    text["name"] = "my\x1bgpu"
    import tomli_w

    (tmp_path / "mine.toml").write_text(tomli_w.dumps(text))
    with pytest.raises(ScenarioError, match=r"gpu.name: 'my\\x1bgpu' must not contain control characters"):
        tmasim.load_scenario("reference", [f'gpu="{tmp_path / "mine.toml"}"'])


def test_a_name_is_at_most_200_characters():
    assert tmasim.load_scenario("reference", [f'name="{"n" * 200}"']).name == "n" * 200
    with pytest.raises(ScenarioError, match="is 600,000 characters long; a name has at most 200"):
        tmasim.load_scenario("reference", [f'name="{"n" * 600_000}"'])
    with pytest.raises(ScenarioError, match="gpu.name: .* a name has at most 200"):
        tmasim.load_scenario("reference", [f'gpu={{preset="ideal", name="{"g" * 201}"}}'])


def test_varied_values_are_printed_escaped(capsys, tmp_path):
    assert main(["sweep", "reference", "--vary", 'description="a\\u001b[2J\\u0000",b',
                 "--out", str(tmp_path / "v.csv")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x00" not in out and "a\\x1b[2J\\x00" in out


# --------------------------------------------------------------------------- compression


def test_a_compression_not_written_is_refused(tmp_path, capsys):
    for suffix in (".gz", ".xz", ".bz2", ".zst", ".zip"):
        refused(capsys, ["validate", "cutlass-profiler", str(tmp_path / "p.csv"), "--out",
                         str(tmp_path / f"j.csv{suffix}")], f"asks for {suffix} compression")
        refused(capsys, ["sweep", "reference", *STAGES, "--out", str(tmp_path / f"s.csv{suffix}")],
                "a sweep writes .parquet or .csv")
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------- what a killed save leaves


def test_a_dead_writers_temporary_files_are_removed_by_the_next_run(sweeps, tmp_path, capsys):
    _copy(sweeps, tmp_path, "s.csv", "s.csv.meta.json")
    dead = [tmp_path / f".tmp-{DEAD_PID}-s.csv", tmp_path / f".tmp-{DEAD_PID}-s.csv.meta.json.pending"]
    alive = tmp_path / f".tmp-{os.getppid()}-s.csv"
    for path in (*dead, alive):
        path.write_text("half")
    assert main(["sweep", "reference", *STAGES, "--out", str(tmp_path / "s.csv")]) == 0
    assert "nothing new" in capsys.readouterr().out
    assert not any(p.exists() for p in dead) and alive.exists()
    stage = tmp_path / f".r.{DEAD_PID}.abcd1234"
    stage.mkdir()
    (stage / "summary.csv").write_text("half")
    assert main(["run", "reference", "--out", str(tmp_path / "r")]) == 0
    assert not stage.exists() and (tmp_path / "r" / "summary.csv").is_file()


# ------------------------------------------------------------------------------- a sweep's lock


def test_a_path_a_running_sweep_holds_is_not_written_by_another_command(tmp_path, capsys):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, str(os.getpid()).encode())\n"
        "time.sleep(60)\n"), str(tmp_path / "X.lock")])
    try:
        deadline = time.monotonic() + 30
        while (not (tmp_path / "X.lock").exists() or not (tmp_path / "X.lock").read_text()) \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        said = f"'{tmp_path / 'X'}' is being written by another sweep (pid {holder.pid}, lock X.lock)"
        refused(capsys, ["report", "reference", "--out", str(tmp_path / "X")], said)
        refused(capsys, ["run", "reference", "--out", str(tmp_path / "X")], said)
        refused(capsys, ["run", "reference", "--trace", str(tmp_path / "X")], said)
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.lock"]


# -------------------------------------------------------------------------- a stale run folder


def test_run_out_into_an_earlier_runs_folder_keeps_none_of_its_files(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "reference", "--out", str(out)]) == 0
    (out / "bandwidth.csv").write_text("time_ps,link,gbytes_per_s\n0,hbm,1\n")  # as a gemm run leaves it
    (out / "notes.txt").write_text("mine")
    assert (out / "gantt.png").exists()
    assert main(["run", "reference", "--set", "run.records=false", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["events.csv", "notes.txt", "scenario.json", "spans.csv",
                                                    "summary.csv"]
    capsys.readouterr()
    refused(capsys, ["plot", str(out), "--kind", "bandwidth"], "has no bandwidth.csv")


# ------------------------------------------------------------------- Scenario.raw after replace


def test_raw_follows_dataclasses_replace(tmp_path):
    scenario = tmasim.load_scenario("reference")
    edited = dataclasses.replace(scenario, pipeline=dataclasses.replace(scenario.pipeline, stages=1),
                                 workload=dataclasses.replace(scenario.workload, tiles=8,
                                                              compute=7 * 10**6))
    assert from_dict(edited.raw) == edited
    assert edited.raw["pipeline"]["stages"] == 1 and edited.raw["workload"]["tiles"] == 8
    result = simulate(edited)
    assert result.stats["makespan_ns"] == 8 * (3000 + 7000)
    result.save(tmp_path)
    saved = json.loads((tmp_path / "scenario.json").read_text())
    assert from_dict(saved) == edited
    from tmasim.teach.explain import explain_result

    assert "N = 8 tiles" in explain_result(result)
    gpu = tmasim.load_scenario("gemm-h100")
    faster = dataclasses.replace(gpu, gpu=dataclasses.replace(gpu.gpu, hbm_bandwidth=gpu.gpu.hbm_bandwidth * 2),
                                 run=dataclasses.replace(gpu.run, seed=7))
    assert from_dict(faster.raw) == faster and faster.raw["run"]["seed"] == 7
    assert scenario.raw["pipeline"]["stages"] == 2  # the original is untouched


# -------------------------------------------------------------------------------- API switches


def test_api_switches_take_booleans_only():
    scenario = tmasim.load_scenario("reference")
    for value in ("no", 0, None, "False"):
        with pytest.raises(TypeError, match="must be True or False"):
            simulate(scenario, allow_large=value)
    attention = tmasim.load_scenario("attention-h100")
    with pytest.raises(ScenarioError, match="workload.head_dim: None must be a whole number"):
        dataclasses.replace(attention.workload, head_dim=None)
    with pytest.raises(ScenarioError, match="gpu.gpc_sms: None must be a list"):
        dataclasses.replace(attention.gpu, gpc_sms=None)


def test_vary_run_records_is_checked_as_run_checks_it(tmp_path, capsys):
    refused(capsys, ["sweep", "reference", "--vary", "run.records=1,yes", "--out", str(tmp_path / "a.csv")],
            "run.records: 1 must be true or false")
    refused(capsys, ["sweep", "reference", "--set", "run.records=1", *STAGES, "--out", str(tmp_path / "b.csv")],
            "run.records: 1 must be true or false")
    assert main(["sweep", "reference", "--vary", "run.records=true,yes", "--out", str(tmp_path / "c.csv")]) == 0
    assert pd.read_csv(tmp_path / "c.csv")["status"].tolist() == ["ok", "invalid"]


# ---------------------------------------------------------------------------------------- JSON


def _strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_json_never_holds_infinity_or_nan():
    result = simulate(tmasim.load_scenario("reference", ["run.records=false"]))
    patched = dataclasses.replace(result, stats={**result.stats, "a": math.inf, "b": -math.inf, "c": math.nan})
    data = _strict(patched.to_json())
    assert (data["a"], data["b"], data["c"]) == ("inf", "-inf", None)


# ----------------------------------------------------------------------- the field named


@pytest.mark.parametrize(("name", "field", "named"), [
    ("gemm-h100", "smem_write_bandwidth", "gpu.smem_write_bandwidth"),
    ("gemm-h100", "smem_bandwidth", "gpu.smem_bandwidth"),
    ("gemm-b200-2sm", "smem_bandwidth", "gpu.smem_bandwidth"),
    ("gemm-b200-2sm", "smem_write_bandwidth", "gpu.smem_write_bandwidth"),
    ("gemm-h100", "sm_port_bandwidth", "gpu.sm_port_bandwidth"),
])
def test_an_error_names_the_field_that_made_it(name, field, named):
    scenario = tmasim.load_scenario(name, [f'gpu.{field}="1e-11 TB/s"', "run.records=false"])
    with pytest.raises(ScenarioError) as caught:
        simulate(scenario)
    assert str(caught.value).startswith(f"{named}: '1e-11 TB/s' makes"), caught.value


# ------------------------------------------------------------------ the same bytes every run


def test_figures_and_gzip_traces_are_the_same_bytes_run_to_run(tmp_path):
    from tmasim.review import plots
    from tmasim.review.trace import write_chrome_trace

    result = simulate(tmasim.load_scenario("reference"))
    written = []
    for _ in range(2):
        plots.save(plots.gantt(result.spans, result.events, title="t"), tmp_path / "g.png", svg=True)
        write_chrome_trace(result, tmp_path / "t.json.gz")
        written.append([(tmp_path / n).read_bytes() for n in ("g.png", "g.svg", "t.json.gz")])
    assert written[0] == written[1]
    svg, trace = written[0][1], written[0][2]
    assert b"<dc:date>" not in svg  # no date: a second later, the same bytes
    assert trace[4:8] == b"\0\0\0\0" and trace[10:].startswith(b"t.json\0")  # no mtime, the file's own name


# ---------------------------------------------------------------------- tmasim scenarios FILE


def test_scenarios_prints_a_file_only_when_it_is_a_scenario(tmp_path, capsys):
    (tmp_path / "notes.toml").write_text('secret = "x"\n')
    (tmp_path / "notes.txt").write_text("not toml at all\n")
    refused(capsys, ["scenarios", str(tmp_path / "notes.toml")], "secret")
    refused(capsys, ["scenarios", str(tmp_path / "notes.txt")], "is not valid TOML")
    refused(capsys, ["scenarios", "../../../../etc/hostname"])
    assert main(["scenarios", "reference"]) == 0
    mine = tmp_path / "mine.toml"
    mine.write_text(capsys.readouterr().out)
    assert main(["scenarios", str(mine)]) == 0
    assert capsys.readouterr().out == mine.read_text()
