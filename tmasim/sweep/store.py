"""The result file of a sweep, and the journal that makes a sweep resumable.

While a sweep runs, each finished point is appended (and flushed) as one JSON line to
``FILE.partial.jsonl``, whose first line is the sweep's fingerprint. When the sweep ends, or
is interrupted, the finished points go into FILE (Parquet, or CSV with ``FILE.meta.json``),
written to a temporary file and moved into place with ``os.replace``, so FILE is always
either the previous complete version or the new one; then the journal is removed. A CSV and
its metadata are two files, so their save is ordered for a kill between any two steps: the new
metadata, with the new CSV's SHA-256, goes to ``FILE.meta.json.pending``; then the CSV is
renamed into place; then the pending metadata. The next run finds a pending file whose digest
matches FILE (the CSV got there: the metadata is renamed after it) or not (dropped): FILE and
its metadata always agree, and the journal, removed last, still holds the points. A process
killed outright leaves the journal, and the next run reads it. Running the same sweep again
reads FILE and the journal and computes only the points found in neither; a file or journal
from another sweep is refused before anything is computed or written.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tmasim.errors import TmasimError
from tmasim.inputs.scenario import parse_value
from tmasim.output import read_back as result_files
from tmasim.output.paths import replacing
from tmasim.sweep import table
from tmasim.sweep.extend import renumbered, renumbering
from tmasim.sweep.points import Outcome
from tmasim.sweep.spec import SweepPlan
from tmasim.version import __version__

if TYPE_CHECKING:
    import pandas as pd

METADATA_KEY = "tmasim"
FORMAT = "tmasim-sweep/1"
_MISSING = "(not set)"


class SweepStore:
    """The output file of one sweep plan, with its journal and metadata."""

    def __init__(self, out: Path, plan: SweepPlan) -> None:
        self.out = Path(out)
        if not self.out.name or str(out) in (".", ".."):
            raise TmasimError(f"--out: {str(out)!r} is not a file name; give one ending in .parquet or .csv")
        self.plan = plan
        self.csv = self.out.suffix.lower() == ".csv"
        self.journal_path = self.out.with_name(self.out.name + ".partial.jsonl")
        self.sidecar = self.out.with_name(self.out.name + ".meta.json")
        self.lock_path = self.out.with_name(self.out.name + ".lock")
        self.pending = self.out.with_name(self.out.name + ".meta.json.pending")
        self.skipped_lines: list[int] = []  # journal lines that did not parse (1-based)
        self._fingerprint = _normalized(plan.fingerprint())
        self._journal_extended = False

    def check_writable(self) -> None:
        """Refused before any point runs: a folder, a missing folder, a file or folder we cannot write,
        a format we do not write, a name too long for the files kept beside it, a target that is not a
        regular file (a device, a FIFO, a symbolic link: each would be replaced, not written)."""
        from tmasim.output.paths import check_name, check_target

        name = str(self.out)
        self._check_format()
        check_name("--out", self.out)
        self._check_beside_names()
        try:
            if self.out.is_dir():
                raise TmasimError(f"--out: {name!r} is a directory; give a file name (.parquet or .csv)")
            if not self.out.parent.is_dir():
                raise TmasimError(f"--out: folder {str(self.out.parent)!r} does not exist")
        except OSError as err:
            raise TmasimError(f"--out: {name[:100]!r} cannot be used ({err.strerror})") from None
        if not os.access(self.out.parent, os.W_OK | os.X_OK):
            raise TmasimError(f"--out: folder {str(self.out.parent)!r} is not writable")
        roles = {self.journal_path: "journal", self.sidecar: "metadata", self.lock_path: "lock"}
        for path, role in roles.items():
            if path.is_dir():
                raise TmasimError(f"--out: {str(path)!r}, where the sweep keeps its {role}, is a directory; remove "
                                  "it or choose another --out")
        for path in (self.out, self.journal_path, self.sidecar, self.pending):
            check_target("--out", path)
        for path in (self.out, self.journal_path, self.sidecar):
            if path.exists() and not os.access(path, os.W_OK):
                raise TmasimError(f"--out: {str(path)!r} exists and is read-only")

    def _check_beside_names(self) -> None:
        """The files kept beside FILE have longer names: each must fit the file system too."""
        size = len(os.fsencode(self.out.name))
        beside = {self.journal_path: "journal", self.pending: "pending metadata"}
        extra = max(len(os.fsencode(p.name)) - size for p in beside)
        for path, role in beside.items():
            longer = len(os.fsencode(path.name))
            if longer > 255:
                raise TmasimError(f"--out: a name of {size} bytes is too long: the sweep's {role} beside it, "
                                  f"NAME{path.name[len(self.out.name):]}, would be {longer} bytes, over the 255 "
                                  f"a file system takes (at most {255 - extra} for this --out)")

    def _check_format(self) -> None:
        suffix = self.out.suffix.lower()
        if suffix not in (".parquet", ".csv"):
            said = f"ends in {suffix!r}" if suffix else "has no suffix"
            raise TmasimError(f"--out: {str(self.out)[:100]!r} {said}; a sweep writes .parquet or .csv "
                              "(compressed tables are not written)")

    def load_finished(self) -> dict[int, Outcome]:
        """Points finished by earlier runs of this same sweep (FILE, then the journal); the
        temporary files of a save that was killed are removed first (their writer is gone)."""
        from tmasim.output.paths import remove_stale_temporaries

        for path in (self.out, self.sidecar, self.pending):
            remove_stale_temporaries(path)
        finished: dict[int, Outcome] = {}
        extended = False
        if self.csv:
            self._settle_pending()
        if self.out.exists():
            mapping = self._check_same_sweep(self._read_metadata(), str(self.out))
            finished.update(renumbered(self._read_rows(), mapping))
            extended = mapping is not None
        if self.journal_path.exists():
            finished.update(self._read_journal())
            if extended or self._journal_extended:
                self.save(finished)  # under this sweep's fingerprint, so new points journal cleanly
        return {i: o for i, o in finished.items() if 0 <= i < len(self.plan.points)}

    @contextlib.contextmanager
    def journal(self) -> Iterator[Journal]:
        from tmasim.output.paths import write_error

        try:
            handle = self.journal_path.open("a+b")
        except OSError as err:
            raise write_error("--out", self.journal_path, err) from None
        with handle:
            journal = Journal(handle)
            if journal.is_empty():
                journal.write_many([{"format": FORMAT, "fingerprint": self._fingerprint}])
            yield journal

    def save(self, outcomes: Mapping[int, Outcome]) -> pd.DataFrame:
        """Write the finished points to FILE (atomically), then drop the journal they came from."""
        from tmasim.output.paths import WriteError

        frame = table.build(self.plan, outcomes)
        metadata = self.metadata(len(outcomes))
        try:
            if self.csv:
                self._save_csv(frame, metadata)
            else:
                with replacing(self.out) as tmp:
                    _write_parquet(frame, metadata, tmp)
        except WriteError as err:
            kept = f"; the journal {self.journal_path.name} keeps the finished points: rerun to resume"
            raise WriteError(err.option, err.path, err.cause + kept) from None
        self.journal_path.unlink(missing_ok=True)
        return frame

    def _save_csv(self, frame: pd.DataFrame, metadata: dict[str, Any]) -> None:
        """Data, then metadata, in the order the module's docstring gives."""
        from tmasim.output.paths import write_error, write_text

        with replacing(self.out) as tmp:
            frame.to_csv(tmp, index=False)
            write_text(self.pending, json.dumps({**metadata, "csv_sha256": _sha256(tmp)}, indent=2) + "\n")
        try:
            os.replace(self.pending, self.sidecar)
        except OSError as err:
            raise write_error("--out", self.sidecar, err) from None

    def _settle_pending(self) -> None:
        """Finish or undo a CSV save that stopped between its steps."""
        if not self.pending.exists():
            return
        try:
            digest = result_files.json_value(self.pending.read_text(encoding="utf-8")).get("csv_sha256")
            if self.out.exists() and digest == _sha256(self.out):
                os.replace(self.pending, self.sidecar)
            else:
                self.pending.unlink()
        except (OSError, ValueError, AttributeError) as err:
            raise TmasimError(f"--out: {str(self.pending)!r} cannot be read ({err}); remove it") from None

    def metadata(self, finished: int) -> dict[str, Any]:
        """What produced the file: the base scenario, the varied fields, and how far it got."""
        return {"format": FORMAT, "tmasim_version": __version__, "source": self.plan.source,
                **self._fingerprint, "points": len(self.plan.points), "points_finished": finished,
                "varied_columns": [a.field for a in self.plan.axes]}

    def _read_metadata(self) -> dict[str, Any]:
        try:
            if self.csv:
                return result_files.sweep_metadata(result_files.json_value(self.sidecar.read_text(encoding="utf-8")))
            import pyarrow.parquet as pq

            raw = (pq.read_schema(self.out).metadata or {}).get(METADATA_KEY.encode())
            if raw is None:
                raise ValueError("no tmasim metadata")
            return result_files.sweep_metadata(result_files.json_value(raw))
        except (OSError, ValueError, TypeError) as err:
            where = self.sidecar if self.csv else self.out
            raise TmasimError(f"--out: {str(self.out)!r} exists but is not a tmasim sweep result "
                              f"({where.name}: {err}); choose another --out or remove it") from None

    def _read_rows(self) -> dict[int, Outcome]:
        import pandas as pd

        from tmasim.review.columns import read_csv

        try:
            frame = read_csv(self.out) if self.csv else pd.read_parquet(self.out)
            result_files.check_table(frame, self.out, sweep=True)
            return table.outcomes_from_frame(frame, self.plan)
        except (OSError, ValueError, KeyError) as err:
            raise TmasimError(f"--out: {str(self.out)!r} cannot be read back ({err}); "
                              "choose another --out or remove it") from None

    def _read_journal(self) -> dict[int, Outcome]:
        """A line that is not JSON (one a kill cut short) is skipped and counted in ``skipped_lines``:
        its point simply runs again. A line that is JSON but not an outcome tmasim writes (an ok
        point without a time, a wrong type, nesting too deep) is damage, not a kill: refused with
        the journal and the line named, never folded in. A journal whose first line is not a
        tmasim header is refused, never deleted; one with nothing but a torn header is removed."""
        data = self.journal_path.read_bytes()
        lines = data.decode("utf-8", errors="replace").splitlines()
        parsed = [_json_or_none(line) for line in lines]
        if all(p is None or p is _TORN for p in parsed) and _torn_header(data):  # killed writing the header
            self.journal_path.unlink()
            return {}
        header = parsed[0] if parsed else None
        if not isinstance(header, dict) or not isinstance(header.get("fingerprint"), dict):
            raise TmasimError(f"--out: {str(self.journal_path)!r} is not a tmasim sweep journal (its first line "
                              "is not a tmasim header); move it away or remove it")
        try:
            fingerprint = result_files.sweep_metadata(header["fingerprint"])
        except ValueError as err:
            raise TmasimError(f"--out: the journal {str(self.journal_path)!r} is damaged at line 1, its header "
                              f"({err}); move it away or remove it") from None
        mapping = self._check_same_sweep(fingerprint, str(self.journal_path))
        self._journal_extended = mapping is not None
        outcomes: dict[int, Outcome] = {}
        for number, record in enumerate(parsed[1:], start=2):
            if record is _TORN:  # a line a kill cut short: its point runs again
                self.skipped_lines.append(number)
                continue
            if record is None:
                continue
            problem = record.reason if isinstance(record, _Damaged) else result_files.journal_problem(record)
            outcome = _outcome_or_none(record) if problem is None else None
            if outcome is None:
                raise TmasimError(f"--out: the journal {str(self.journal_path)!r} is damaged at line {number} "
                                  f"({problem or 'not a point outcome'}); remove that line, and its point runs "
                                  "again") from None
            outcomes[outcome.point] = outcome
        return renumbered(outcomes, mapping)

    def _check_same_sweep(self, theirs: Mapping[str, Any], where: str) -> dict[int, int] | None:
        """None for the same sweep; old -> new point ids for a sweep this one extends."""
        for key in ("scenario", "vary", "zip"):
            if key not in theirs:
                raise TmasimError(f"--out: {where!r} has no {key!r} in its metadata; choose another --out")
        if theirs["scenario"] == self._fingerprint["scenario"] and theirs["vary"] != self._fingerprint["vary"]:
            mapping = renumbering(theirs, self.plan)
            if mapping is not None:
                return mapping
        for key in ("scenario", "vary", "zip"):
            if theirs[key] != self._fingerprint[key]:
                difference = _difference(key, theirs[key], self._fingerprint[key])
                raise TmasimError(f"--out: {where!r} holds another sweep ({difference}); "
                                  "choose another --out or remove it")
        return None


class Journal:
    """An append-only file of JSON lines, flushed per write so a killed run loses nothing finished.

    Lines are ASCII (JSON's escapes), written in binary mode so that a torn last line can be
    found by its final byte whatever it held.
    """

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle

    def is_empty(self) -> bool:
        return self._handle.seek(0, os.SEEK_END) == 0

    def write_many(self, records: list[Mapping[str, Any]]) -> None:
        from tmasim.output.paths import write_error

        try:
            self._end_torn_line()
            self._handle.write("".join(json.dumps(r, default=_jsonable) + "\n" for r in records).encode("ascii"))
            self._handle.flush()
        except OSError as err:  # a full disk: the lines flushed before stay, a torn one is skipped on resume
            raise write_error("--out", Path(self._handle.name), err) from None

    def _end_torn_line(self) -> None:
        """After a kill mid-line, start on a fresh line so the torn one stays the only bad one."""
        size = self._handle.seek(0, os.SEEK_END)
        if size:
            self._handle.seek(size - 1)
            if self._handle.read(1) != b"\n":
                self._handle.write(b"\n")


def _write_parquet(frame: pd.DataFrame, metadata: Mapping[str, Any], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        arrow = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, OverflowError, ValueError, TypeError) as err:  # a row no column type can hold
        raise TmasimError(f"--out: the table cannot be written as Parquet ({' '.join(str(err).split())[:200]}); "
                          "the journal beside it keeps the finished points") from None
    extra = {METADATA_KEY.encode(): json.dumps(metadata, default=_jsonable).encode()}
    pq.write_table(arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **extra}), path)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of a sweep result file: base scenario, varied fields, points finished."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return dict(json.loads(path.with_name(path.name + ".meta.json").read_text(encoding="utf-8")))
    import pyarrow.parquet as pq

    return dict(json.loads((pq.read_schema(path).metadata or {})[METADATA_KEY.encode()]))


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _zip_text(zipped: Any) -> str:
    if isinstance(zipped, list):
        return f"pairs {', '.join(map(str, zipped))} (--zip {','.join(map(str, zipped))})"
    return "pairs values (--zip)" if zipped else "is a grid"


def _difference(key: str, theirs: Any, ours: Any) -> str:
    """The first thing that differs, in words: which field, or which axes."""
    if key == "zip":
        return f"the file {_zip_text(theirs)}, this run {_zip_text(ours)}"
    if key == "vary":
        return (f"the file has {_vary_text(theirs)}; this run has {_vary_text(ours)}; a sweep that keeps every "
                "value the file has and adds more extends it")
    path, there, here = _first_difference(theirs, ours, "")
    return f"scenario field {path or '(root)'} is {_show(there)} in the file, {_show(here)} in this run"


def _first_difference(theirs: Any, ours: Any, path: str) -> tuple[str, Any, Any]:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key in [*theirs, *(k for k in ours if k not in theirs)]:
            if theirs.get(key, _MISSING) != ours.get(key, _MISSING):
                return _first_difference(theirs.get(key, _MISSING), ours.get(key, _MISSING),
                                         f"{path}.{key}" if path else key)
    return path, theirs, ours


def _vary_text(axes: Any) -> str:
    return " ".join(f"--vary {name}={','.join(_value_text(v) for v in values)}" for name, values in axes)


def _value_text(value: Any) -> str:
    """As a user would type it: bare where that reads back the same (``3 us``), else TOML."""
    if isinstance(value, str) and not set(value) & set(",[]{}\"'") and parse_value(value) == value:
        return value
    return table.toml_text(value)


def _show(value: Any) -> str:
    return value if value == _MISSING else table.toml_text(value)


def _normalized(data: Any) -> Any:
    """As JSON gives it back, so that tuples, dates and numpy numbers compare as stored."""
    return json.loads(json.dumps(data, default=_jsonable))


_TORN = object()  # a journal line that is not JSON: cut short by a kill


def _json_or_none(line: str) -> Any:
    """A journal line parsed: None for a blank one, ``_TORN`` for one that is not JSON (a kill cut
    it short), else what it holds, to be checked (too deep to read: a damaged line, shown as such)."""
    if not line.strip():
        return None
    try:
        return result_files.json_value(line)
    except json.JSONDecodeError:
        return _TORN
    except ValueError as err:
        return _Damaged(str(err))


class _Damaged:
    """A journal line that is JSON but cannot be read (nested too deep): why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _outcome_or_none(record: Any) -> Outcome | None:
    if record is None or not isinstance(record.get("point"), int) or isinstance(record.get("point"), bool):
        return None
    try:
        return Outcome.from_json(record)
    except ValueError:
        return None


def _torn_header(data: bytes) -> bool:
    """Nothing but the start of a header line: what a kill during the very first write leaves."""
    text = data.strip()
    return not text or (b"\n" not in text and b'{"format": "tmasim-sweep/1"'.startswith(text[:27]))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return value.isoformat() if hasattr(value, "isoformat") else str(value)
