"""Output paths checked before any work or output: a one-line error when a file or folder
cannot be written (a directory named like the file, a missing or unwritable folder, a name the
OS refuses), so that a run never ends in a traceback after minutes of work."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tmasim.errors import TmasimError


def check_file(option: str, path: Path) -> None:
    """A file about to be written (its folder is made if missing and possible)."""
    name = _shown(path)
    _check_name(option, path)
    try:
        if path.is_dir():
            raise TmasimError(f"{option}: {name} is a directory; give a file name")
        if path.exists() and not os.access(path, os.W_OK):
            raise TmasimError(f"{option}: {name} exists and is read-only")
    except OSError as err:
        raise TmasimError(f"{option}: {name} cannot be used ({err.strerror or err})") from None
    check_folder(option, path.parent if str(path.parent) else Path("."), what="folder of ")


def check_folder(option: str, path: Path, *, what: str = "") -> None:
    """A folder to write into, checked without making it (nothing is written before the work):
    the nearest part of it that exists must be a writable folder, so that the rest can be made."""
    name = _shown(path)
    _check_name(option, path)
    try:
        if path.exists() and not path.is_dir():
            raise TmasimError(f"{option}: {what}{name} exists and is not a directory")
        existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor or "."))
        if not existing.is_dir():
            raise TmasimError(f"{option}: {what}{name} cannot be made: {_shown(existing)} is not a directory")
    except OSError as err:
        raise TmasimError(f"{option}: {what}{name} cannot be used ({err.strerror or err})") from None
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TmasimError(f"{option}: {what}{name} cannot be made or written: {_shown(existing)} is not writable")
    _try_making(option, what, path, existing)


def _try_making(option: str, what: str, path: Path, existing: Path) -> None:
    """Make the missing folders and take them away again: the OS says whether it can."""
    missing = [p for p in (path, *path.parents) if p != existing and existing in p.parents]
    made: list[Path] = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
    except OSError as err:
        raise TmasimError(f"{option}: {what}{_shown(path)} cannot be made ({err.strerror or err})") from None
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()


def _check_name(option: str, path: Path) -> None:
    """Names no file system takes: a NUL character, a component over 255 bytes."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise TmasimError(f"{option}: {_shown(path)} cannot be a file name (it holds a NUL character)")
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > 255:
        raise TmasimError(f"{option}: {_shown(path)} has a name of {longest} bytes, over the 255 a file system takes")


def _shown(path: Path) -> str:
    text = str(path)
    return repr(text if len(text) <= 100 else f"{text[:100]}...")


class WriteError(TmasimError):
    """A write that failed (a full disk, an unwritable folder): names the path and the cause."""

    def __init__(self, option: str, path: Path, cause: str) -> None:
        self.option, self.path, self.cause = option, Path(path), cause
        prefix = f"{option}: " if option else ""
        super().__init__(f"{prefix}cannot write {_shown(self.path)} ({cause}); nothing was written there")


def write_error(option: str, path: Path, err: OSError) -> WriteError:
    return WriteError(option, path, err.strerror or str(err) or type(err).__name__)


@contextlib.contextmanager
def replacing(path: str | Path, option: str = "--out") -> Iterator[Path]:
    """A temporary file beside ``path`` for the caller to write, renamed onto ``path`` when the
    block ends: ``path`` is the old file or the whole new one, never a part. A write that fails
    (OSError) removes the temporary file and is one :class:`TmasimError` naming ``path``. The
    temporary name keeps the file's own name at its end, so writers that go by the extension
    (matplotlib, PIL, pandas' compression) write the same format."""
    path = Path(path)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        raise write_error(option, path, err) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str, option: str = "--out") -> Path:
    """``path`` written whole or not at all (see :func:`replacing`)."""
    with replacing(path, option) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


@contextlib.contextmanager
def staged_folder(out: Path, option: str = "--out") -> Iterator[Path]:
    """A hidden folder beside ``out`` to write a set of files into, moved into place when the
    block ends: a new ``out`` is renamed in whole; into an existing one each file is renamed in
    (renames take no space). A failure leaves ``out`` as it was and names the file it was writing."""
    import shutil
    import tempfile

    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as err:
        raise write_error(option, out, err) from None
    try:
        yield stage
        _move_in(stage, out)
    except OSError as err:
        raise write_error(option, _final(err.filename, stage, out), err) from None
    except WriteError as err:  # a file inside, named as it would have been in ``out``
        raise WriteError(err.option, _final(err.path, stage, out), err.cause) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def staged_paths(paths: list[Path], stage: Path, out: Path) -> list[Path]:
    """Where files written under ``stage`` end up once moved into ``out``."""
    return [out / Path(p).relative_to(stage) for p in paths]


def _move_in(stage: Path, out: Path) -> None:
    if not any(stage.iterdir()):
        return  # nothing was written: no folder made either
    if not out.exists():
        umask = os.umask(0o22)
        os.umask(umask)
        os.chmod(stage, 0o777 & ~umask)  # a folder as mkdir would make it (mkdtemp's is private)
        os.rename(stage, out)
        return
    for path in sorted(stage.rglob("*"), key=lambda p: len(p.parts)):
        target = out / path.relative_to(stage)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        else:
            os.replace(path, target)


def _final(filename: Any, stage: Path, out: Path) -> Path:
    """The path the failed write was for, as the user named it (not the hidden folder's)."""
    try:
        return out / Path(filename).relative_to(stage)
    except (TypeError, ValueError):
        return out
