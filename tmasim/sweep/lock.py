"""One sweep at a time per result file: ``FILE.lock``, holding its owner's pid.

Two sweeps writing one file would each rewrite it from their own points, and the second
would keep appending to a journal the first had already folded in and deleted. The lock is an
advisory ``flock`` on ``FILE.lock``: the kernel releases it when its process dies, however it
dies, so a lock left by a killed sweep is taken over by the next one, while a live owner makes
a second sweep refuse with one line naming its pid. The lock file is removed when the sweep
ends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tmasim.errors import TmasimError


@contextlib.contextmanager
def held(path: Path, out: Path) -> Iterator[None]:
    """Hold the lock at ``path`` for the sweep writing ``out``, or refuse in one line."""
    fd = _acquire(path, out)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)  # closing releases the flock


def _acquire(path: Path, out: Path) -> int:
    import fcntl

    for _ in range(100):  # retried only while another process removes the file under us
        _refuse_special(path)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
        except OSError as err:
            raise TmasimError(f"--out: cannot write beside {str(out)!r} ({err.strerror}): "
                              "choose a folder you can write to") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner = _owner(fd)
            os.close(fd)
            raise TmasimError(f"--out: {str(out)!r} is being written by another sweep ({owner}, lock "
                              f"{path.name}); wait for it to finish or choose another --out") from None
        if _same_file(fd, path):
            _write_owner(fd, path, out)
            return fd
        os.close(fd)  # the previous owner removed the file between our open and our lock
    raise TmasimError(f"--out: cannot take the lock {str(path)!r}; try again")


def _refuse_special(path: Path) -> None:
    """A lock path that is a device, a pipe or a folder (by a link or not) is not ours to write."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # not there (or a dangling link): made by the open
    if not stat.S_ISREG(mode):
        raise TmasimError(f"--out: the lock {str(path)!r} exists and is not a regular file; remove it or "
                          "choose another --out")


def _write_owner(fd: int, path: Path, out: Path) -> None:
    """The pid, for a second sweep's message; a full disk is one line and leaves no empty lock."""
    try:
        os.ftruncate(fd, 0)
        if os.write(fd, f"{os.getpid()}\n".encode()) == 0:
            raise OSError(28, os.strerror(28))
    except OSError as err:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise TmasimError(f"--out: cannot write the lock {str(path)!r} beside {str(out)!r} "
                          f"({err.strerror or err})") from None


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except OSError:
        return False


def _owner(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"
