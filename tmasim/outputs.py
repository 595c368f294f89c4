"""Output paths checked before any work or output: a one-line error when a file or folder
cannot be written (a directory named like the file, a missing or unwritable folder, a name the
OS refuses), so that a run never ends in a traceback after minutes of work."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

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
