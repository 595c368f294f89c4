"""Output paths checked before any work or output: a one-line error when a file or folder
cannot be written (a directory named like the file, a missing or unwritable folder, a name the
OS refuses), so that a run never ends in a traceback after minutes of work."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tmasim.errors import TmasimError

# Compression that a file name's last suffix asks for but no writer here implements.
UNSUPPORTED_COMPRESSION = (".bz2", ".xz", ".lzma", ".zst", ".zstd", ".zip", ".7z", ".lz4", ".lz", ".br", ".z",
                           ".tgz", ".tar")
_TEMPORARY = re.compile(r"\.tmp-(\d+)-(.+)\Z", re.DOTALL)
_NAME_MAX = 255
_PATH_MAX = 4096  # Linux's PATH_MAX, the terminating NUL included


def check_file(option: str, path: Path) -> None:
    """A file about to be written (its folder is made if missing and possible): a new path or a
    regular file, never a device, FIFO, socket, directory or symbolic link (see
    :func:`check_target`)."""
    name = _shown(path)
    check_name(option, path)
    check_target(option, path)
    try:
        if path.exists() and not os.access(path, os.W_OK):
            raise TmasimError(f"{option}: {name} exists and is read-only")
    except OSError as err:
        raise TmasimError(f"{option}: {name} cannot be used ({err.strerror or err})") from None
    check_folder(option, path.parent if str(path.parent) else Path("."), what="folder of ")


def check_target(option: str, path: Path) -> None:
    """What a file is written onto: nothing yet, or a regular file. Every file is written beside
    its target and renamed onto it, which would replace a device (``/dev/null``), a FIFO, a
    socket or a symbolic link itself rather than write through it: those are refused, a link
    with its target named so the user can ask for that path instead."""
    check_unlocked(option, path)
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # a new path (a folder in the way is the folder check's to name)
    except OSError as err:
        raise TmasimError(f"{option}: {_shown(path)} cannot be used ({err.strerror or err})") from None
    if stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        raise TmasimError(f"{option}: {_shown(path)} is a symbolic link (to {_shown(Path(os.readlink(path)))}); "
                          "tmasim replaces files whole, which would replace the link: name its target to write there")
    kind = _kind(mode)
    hint = "; give a file name" if kind == "a directory" else "; tmasim writes only regular files (or new paths)"
    raise TmasimError(f"{option}: {_shown(path)} is {kind}, not a regular file{hint}")


def check_unlocked(option: str, path: Path) -> None:
    """A path a running sweep writes (its ``PATH.lock`` held, see :mod:`tmasim.sweep.lock`) is
    not written by anything else: the sweep's final save would replace it, or fail on it."""
    owner = sweep_holding(Path(path))
    if owner is not None:
        raise TmasimError(f"{option}: {_shown(path)} is being written by another sweep ({owner}, lock "
                          f"{Path(path).name}.lock); wait for it to finish or choose another {option}")


def sweep_holding(path: Path) -> str | None:
    """``pid N`` of another process holding ``PATH.lock``; None when no one (or this process) does."""
    import fcntl

    try:
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        if text == str(os.getpid()):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released when fd closes
        except OSError:
            return f"pid {text}" if text.isdigit() else "pid unknown"
        return None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def check_suffix(option: str, path: Path, supported: tuple[str, ...]) -> None:
    """A compression the name asks for that is not written here is refused, naming the
    supported endings (a ``.xz`` trace would otherwise be plain JSON under a lying name);
    ``.gz`` too unless one of ``supported`` ends in it."""
    suffix = Path(path).suffix.lower()
    gzip_written = any(s.endswith(".gz") for s in supported)
    if suffix in UNSUPPORTED_COMPRESSION or (suffix == ".gz" and not gzip_written):
        raise TmasimError(f"{option}: {_shown(path)} asks for {suffix} compression, which tmasim does not write; "
                          f"use {' or '.join(supported)}")


def check_folder(option: str, path: Path, *, what: str = "", files: tuple[str, ...] = ()) -> None:
    """A folder to write into, checked without making it (nothing is written before the work):
    the nearest part of it that exists must be a writable folder, so that the rest can be made;
    ``files``, the names to be written in it, must each be new or a regular file."""
    name = _shown(path)
    check_name(option, path)
    check_unlocked(option, path)
    for file in files:
        check_target(option, path / file)
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


def check_name(option: str, path: Path) -> None:
    """Names no file system takes: a NUL character, a component over 255 bytes, a path over 4095."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise TmasimError(f"{option}: {_shown(path)} cannot be a file name (it holds a NUL character)")
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > _NAME_MAX:
        raise TmasimError(f"{option}: {_shown(path)} has a name of {longest} bytes, over the 255 a file system takes")
    if len(raw) >= _PATH_MAX:
        raise TmasimError(f"{option}: {_shown(path)} is a path of {len(raw)} bytes, too long for this system")


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
    check_target(option, path)
    remove_stale_temporaries(path)
    tmp = path.with_name(temporary_name(path.name, os.getpid()))
    try:
        yield tmp
        check_target(option, path)  # still a file or nothing, as the writer found it
        os.replace(tmp, path)
    except OSError as err:
        raise write_error(option, path, err) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def temporary_name(name: str, pid: int) -> str:
    """``.tmp-PID-NAME``: beside the file, hidden, with the file's own ending (writers go by it).
    A name too long for that keeps its suffixes after a digest of the rest, within 255 bytes."""
    full = f".tmp-{pid}-{name}"
    if len(os.fsencode(full)) <= _NAME_MAX:
        return full
    suffixes = "".join(Path(name).suffixes[-2:])[-40:]
    return f".tmp-{pid}-{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}{suffixes}"


def remove_stale_temporaries(path: Path) -> None:
    """A save killed before its rename leaves ``.tmp-PID-NAME`` beside ``path``: removed here when
    process PID no longer runs (a live one may still be writing it)."""
    for entry in _dead_leftovers(path, _temporary_pid):
        if entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def _temporary_pid(entry: str, name: str) -> int | None:
    match = _TEMPORARY.match(entry)
    if match is None or entry != temporary_name(name, int(match.group(1))):
        return None
    return int(match.group(1))


def _dead_leftovers(path: Path, pid_of: Callable[[str, str], int | None]) -> list[os.DirEntry[str]]:
    """The entries beside ``path`` that ``pid_of`` reads as left by a process that no longer runs."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    found = []
    for entry in entries:
        pid = pid_of(entry.name, path.name)
        if pid is not None and not _running(pid):
            found.append(entry)
    return found


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process (or a number no process has): left alone
    return True


def write_text(path: str | Path, text: str, option: str = "--out") -> Path:
    """``path`` written whole or not at all (see :func:`replacing`)."""
    with replacing(path, option) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


@contextlib.contextmanager
def staged_folder(out: Path, option: str = "--out", owned: tuple[str, ...] = ()) -> Iterator[Path]:
    """A hidden folder beside ``out`` to write a set of files into, moved into place when the
    block ends: a new ``out`` is renamed in whole; into an existing one each file is renamed in
    (renames take no space), then each ``owned`` file (one this command writes) that this time
    did not write is removed, so an earlier run's ``bandwidth.csv`` is never taken for this
    run's. A failure leaves ``out`` as it was and names the file it was writing."""
    import shutil
    import tempfile

    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_stages(out)
        stage = Path(tempfile.mkdtemp(prefix=stage_prefix(out.name), dir=out.parent))
    except OSError as err:
        raise write_error(option, out, err) from None
    try:
        yield stage
        _move_in(stage, out, owned)
    except OSError as err:
        raise write_error(option, _final(err.filename, stage, out), err) from None
    except WriteError as err:  # a file inside, named as it would have been in ``out``
        raise WriteError(err.option, _final(err.path, stage, out), err.cause) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def stage_prefix(name: str, pid: int | None = None) -> str:
    """``.NAME.PID.`` for a hidden folder beside ``NAME`` (mkdtemp adds 8 characters), the pid
    telling a later run whether its writer still runs; a name too long for that, one of up to 255
    bytes, is replaced by a digest so the folder can still be made."""
    pid = os.getpid() if pid is None else pid
    if len(os.fsencode(f".{name}.{pid}.")) + 8 <= _NAME_MAX:
        return f".{name}.{pid}."
    return f".{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}.{pid}."


def remove_stale_stages(out: Path) -> None:
    """A run killed while writing leaves its hidden folder (``.NAME.PID.XXXXXXXX``) beside ``out``:
    removed here when process PID no longer runs."""
    import shutil

    for entry in _dead_leftovers(out, _stage_pid):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


def _stage_pid(entry: str, name: str) -> int | None:
    match = re.fullmatch(r"\.(.+)\.(\d+)\.[a-z0-9_]{8}", entry, re.DOTALL)
    if match is None or stage_prefix(name, int(match.group(2))) != entry[:-8]:
        return None
    return int(match.group(2))


def staged_paths(paths: list[Path], stage: Path, out: Path) -> list[Path]:
    """Where files written under ``stage`` end up once moved into ``out``."""
    return [out / Path(p).relative_to(stage) for p in paths]


def _move_in(stage: Path, out: Path, owned: tuple[str, ...] = ()) -> None:
    if not any(stage.iterdir()):
        return  # nothing was written: no folder made either
    if not out.exists():
        umask = os.umask(0o22)
        os.umask(umask)
        os.chmod(stage, 0o777 & ~umask)  # a folder as mkdir would make it (mkdtemp's is private)
        os.rename(stage, out)
        return
    moves = sorted(stage.rglob("*"), key=lambda p: len(p.parts))
    check_moves(moves, stage, out)
    stale = [name for name in owned if not (stage / name).exists()]
    for path in moves:
        target = out / path.relative_to(stage)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        else:
            os.replace(path, target)
    for name in stale:  # an earlier run's file this run did not write (its records, its bandwidth)
        if os.path.isfile(out / name) and not os.path.islink(out / name):
            os.unlink(out / name)


def check_moves(moves: list[Path], stage: Path, out: Path, option: str = "--out") -> None:
    """Every file about to be renamed into ``out`` lands on a regular file or a new name: checked
    for all before the first rename, so a FIFO or link in the way leaves ``out`` as it was."""
    check_unlocked(option, out)
    for path in moves:
        if not path.is_dir():
            check_target(option, out / path.relative_to(stage))


def _final(filename: Any, stage: Path, out: Path) -> Path:
    """The path the failed write was for, as the user named it (not the hidden folder's)."""
    try:
        return out / Path(filename).relative_to(stage)
    except (TypeError, ValueError):
        return out
