"""What the system says: whether a process is the one that wrote a marker (from /proc), and an atomic
exchange of two names (renameat2) where the kernel has one."""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path


def alive(pid: int, started: float | None = None) -> bool:
    """Whether process ``pid`` runs, and (given ``started``, the epoch time it wrote in a marker) is
    the process that wrote it: a pid reused by a process started later is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    if started is not None:
        began = start_time(pid)
        if began is not None and began > started + 2.0:
            return False
    return True


def start_time(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), from /proc; None where that cannot be told."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, counted after the command name
        with open("/proc/stat", "rb") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


_AT_FDCWD = -100


def _renameat2() -> Callable[..., int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


RENAMEAT2 = _renameat2() if sys.platform.startswith("linux") else None


def rename2(src: Path, dst: Path, flags: int) -> bool:
    """renameat2 with ``flags``: True when done, False when this system or file system cannot."""
    if RENAMEAT2 is None:
        return False
    if RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))
