"""Output paths that are not regular files, names too long, compressions not written, and the
temporary files a killed save leaves: each a one-line error (exit 2) before any simulation, the
target untouched; or, for the temporary files, removed by the next save."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tmasim.cli import main
from tmasim.errors import TmasimError
from tmasim.outputs import temporary_name, write_text


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)

    def no_simulation(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before the output path was checked")

    monkeypatch.setattr("tmasim.simulation.simulate", no_simulation)
    return tmp_path


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *fragments: str) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("tmasim: error: "), err
    for fragment in fragments:
        assert fragment in err, err
    return err


def _special(here: Path, kind: str) -> tuple[Path, object]:
    """A path of the given kind in ``here``, and what shows it untouched afterwards."""
    path = here / "t.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("t.json")  # relative: AF_UNIX paths are short
        sock.close()
    elif kind == "symlink":
        (here / "real.json").write_text("kept")
        path.symlink_to("real.json")
    else:
        path.mkdir()
    return path, os.lstat(path).st_mode


@pytest.mark.parametrize(("kind", "said"), [("fifo", "is a FIFO (named pipe), not a regular file"),
                                             ("socket", "is a socket, not a regular file"),
                                             ("symlink", "is a symbolic link (to 'real.json')"),
                                             ("directory", "is a directory")])
@pytest.mark.parametrize("option", ["--trace", "sweep", "plot", "run --out"])
def test_a_target_that_is_not_a_regular_file_is_refused_before_any_work(capsys, here, kind, said, option):
    path, mode = _special(here, kind)
    argv = {"--trace": ["run", "--trace", "t.json"],
            "sweep": ["sweep", "reference", "--vary", "pipeline.stages=1,2", "--out", "t.json.csv"],
            "plot": ["plot", "nowhere", "--out", "t.json.png"],
            "run --out": ["run", "--out", "folder"]}[option]
    if option == "sweep":
        path.rename(here / "t.json.csv")
        path = here / "t.json.csv"
    elif option == "plot":
        path.rename(here / "t.json.png")
        path = here / "t.json.png"
    elif option == "run --out":
        (here / "folder").mkdir()
        path.rename(here / "folder" / "summary.csv")
        path = here / "folder" / "summary.csv"
    refused(capsys, argv, said)
    assert os.lstat(path).st_mode == mode
    if kind == "symlink":
        assert (here / "real.json").read_text() == "kept"
    assert not any(p.name.startswith(".tmp-") for p in here.rglob("*"))


def test_a_device_is_never_replaced(capsys, here):
    before = os.stat("/dev/null")
    refused(capsys, ["run", "--trace", "/dev/null"], "'/dev/null' is a character device, not a regular file")
    after = os.stat("/dev/null")
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev, before.st_ino)


def test_the_api_writer_refuses_a_fifo_too(tmp_path):
    fifo = tmp_path / "f.txt"
    os.mkfifo(fifo)
    with pytest.raises(TmasimError, match="FIFO"):
        write_text(fifo, "x")
    assert not fifo.is_file() and fifo.is_fifo()


@pytest.mark.parametrize("suffix", [".bz2", ".xz", ".zst", ".zip"])
def test_a_trace_compression_not_written_is_refused_naming_the_supported(capsys, here, suffix):
    refused(capsys, ["run", "--trace", f"t.json{suffix}"], f"asks for {suffix} compression", ".json or .json.gz")
    assert not (here / f"t.json{suffix}").exists()


@pytest.mark.parametrize("name", ["x.csv.gz", "x.parquet.zst", "x.txt", "results"])
def test_a_sweep_file_is_parquet_or_csv(capsys, here, name):
    refused(capsys, ["sweep", "reference", "--vary", "pipeline.stages=1,2", "--out", name],
            "a sweep writes .parquet or .csv")
    assert list(here.iterdir()) == []


def test_a_gz_trace_is_gzip_and_a_json_trace_is_plain(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--trace", "t.json.gz"]) == 0
    assert main(["run", "--trace", "t.json"]) == 0
    assert gzip.decompress((tmp_path / "t.json.gz").read_bytes()) == (tmp_path / "t.json").read_bytes()
    assert (tmp_path / "t.json").read_bytes().startswith(b"{")


def test_names_too_long_are_refused_before_the_work(capsys, here):
    refused(capsys, ["run", "--trace", "t" * 251 + ".json"], "has a name of 256 bytes, over the 255")
    # 245 bytes is a legal name, but the sweep's journal beside it (+ .partial.jsonl) would not be
    refused(capsys, ["sweep", "reference", "--vary", "pipeline.stages=1,2", "--out", "s" * 241 + ".csv"],
            "NAME.partial.jsonl, would be 259 bytes, over the 255", "(at most 237 for this --out)")
    refused(capsys, ["run", "--trace", "d/" * 2100 + "t.json"], "too long for this system")
    assert list(here.iterdir()) == []


def test_a_long_name_is_written_through_a_temporary_name_that_fits(tmp_path):
    name = "n" * 250 + ".json"
    assert len(temporary_name(name, 4194304)) <= 255 and temporary_name(name, 7).endswith(".json")
    write_text(tmp_path / name, "whole")
    assert [p.name for p in tmp_path.iterdir()] == [name]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_saves_temporary_file_is_removed_by_the_next_save(tmp_path):
    dead, alive = _dead_pid(), os.getppid()
    stale = tmp_path / temporary_name("t.json", dead)
    live = tmp_path / temporary_name("t.json", alive)
    other = tmp_path / temporary_name("other.json", dead)
    for path in (stale, live, other):
        path.write_text("half")
    write_text(tmp_path / "t.json", "whole")
    assert not stale.exists()                   # its writer is gone
    assert live.read_text() == "half"           # a live process may still be writing it
    assert other.read_text() == "half"          # another file's: its own save removes it
    assert (tmp_path / "t.json").read_text() == "whole"


def test_a_killed_saves_temporary_file_is_removed_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stale = tmp_path / temporary_name("t.json", _dead_pid())
    stale.write_text("half")
    assert main(["run", "--trace", "t.json"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
