"""Find the log files in what a user gives ``npudiag logs parse``, and what their paths say.

A path is an msnpureport export folder, a host log folder (``$HOME/ascend/log``), one log file,
an archive of them, or ``-`` for text on standard input. The path tells the origin (host plog,
device logs from an export or flushed to the host), the device id (``device-K`` folders), the
pid (``plog-<pid>_<ts>.log``) and the rank (``rank_N`` folders) where the records do not.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from npudiag.archive import MAX_ARCHIVE_BYTES, check_members, is_archive, open_archive
from npudiag.errors import InputError
from npudiag.formats.ascend_log import LogContext

LOG_NAME = re.compile(r"(\.log|\.txt|\.out)(\.\d+)?$|^(messages|syslog|history\.log|kernel\.log)")
PLOG_NAME = re.compile(r"plog-(\d{1,10})_\d{1,20}\.log$")
DEVICE_LOG_NAME = re.compile(r"device-(\d{1,10})_\d{1,20}\.log$")
DEVICE_DIR = re.compile(r"^device-(\d+)$")
DEV_OS_DIR = re.compile(r"^dev-os-(\d+)$")
RANK_DIR = re.compile(r"^rank[_-]?(\d+)$")
EXPORT_DIRS = {"slog", "hisi_logs", "message", "stackcore", "vmcore", "event_sched", "system_info", "module_log"}
MAX_DEPTH = 12


@dataclass
class LogSource:
    ctx: LogContext
    open_lines: Callable[[], Iterator[str]]
    size_bytes: int


def context_for(name: str) -> LogContext:
    """What the path ``name`` (slash-separated) says about its records."""
    parts = [p for p in name.replace("\\", "/").split("/") if p]
    base = parts[-1] if parts else name
    ctx = LogContext(name)
    dirs = parts[:-1]
    if (m := PLOG_NAME.search(base)) is not None:
        ctx.origin, ctx.pid = "host", int(m.group(1))
    elif (m := DEVICE_LOG_NAME.search(base)) is not None:
        ctx.origin, ctx.pid = "device", int(m.group(1))
    if any(d in EXPORT_DIRS for d in dirs):
        ctx.origin = "device"
    for d in reversed(dirs):
        if (m := DEVICE_DIR.match(d)) is not None:
            ctx.device_id = int(m.group(1))
            break
    if ctx.device_id is None:
        for d in reversed(dirs):
            if (m := DEV_OS_DIR.match(d)) is not None:
                ctx.device_id = int(m.group(1))
                break
    for d in reversed(dirs):
        if (m := RANK_DIR.match(d)) is not None:
            ctx.rank = int(m.group(1))
            break
    return ctx


MAX_LINE_CHARS = 1 << 20  # longer lines are cut (and say so): one 100 MB line must not cost 100s of MB


def bounded_lines(fh: io.TextIOBase) -> Iterator[str]:
    """Lines of ``fh``, each at most MAX_LINE_CHARS; the rest of a longer line is read and dropped."""
    while True:
        line = fh.readline(MAX_LINE_CHARS)
        if not line:
            return
        if len(line) == MAX_LINE_CHARS and not line.endswith("\n"):
            cut = 0
            while True:
                more = fh.readline(MAX_LINE_CHARS)
                cut += len(more)
                if not more or more.endswith("\n"):
                    break
            line = f"{line} [... {cut} more characters cut by npudiag]\n"
        yield line


def _file_lines(path: Path) -> Callable[[], Iterator[str]]:
    def lines() -> Iterator[str]:
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            yield from bounded_lines(fh)

    return lines


def _member_lines(archive: Path, member: str) -> Callable[[], Iterator[str]]:
    def lines() -> Iterator[str]:
        with open_archive(archive) as tar:
            fh = tar.extractfile(member)
            if fh is None:
                return
            yield from bounded_lines(io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline=""))

    return lines


def _stdin_lines() -> Iterator[str]:
    stream = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="")
    yield from bounded_lines(stream)


def _walk(folder: Path, warnings: list[str]) -> Iterator[Path]:
    root_depth = len(folder.parts)
    for dirpath, dirnames, filenames in os.walk(
        folder, followlinks=False, onerror=lambda e: warnings.append(f"{e.filename}: cannot read ({e.strerror})")
    ):
        depth = len(Path(dirpath).parts) - root_depth
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if depth >= MAX_DEPTH:
            warnings.append(f"{dirpath}: deeper than {MAX_DEPTH} levels, not searched")
            dirnames[:] = []
        for f in sorted(filenames):
            if LOG_NAME.search(f):
                p = Path(dirpath) / f
                try:
                    st = p.lstat()
                except OSError as exc:
                    warnings.append(f"{p}: cannot read ({exc.strerror})")
                    continue
                if not stat.S_ISREG(st.st_mode):  # FIFOs, sockets, devices and symlinks are never opened
                    warnings.append(f"{p}: not a regular file, skipped")
                    continue
                yield p


def find_sources(path: str, warnings: list[str], max_archive_bytes: int = MAX_ARCHIVE_BYTES) -> list[LogSource]:
    """The log files under ``path``. InputError when ``path`` itself is unusable."""
    if path == "-":
        return [LogSource(LogContext("-"), _stdin_lines, 0)]
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or folder")
    if p.is_file() and is_archive(p):
        with open_archive(p) as tar:
            members = check_members(p, tar, max_archive_bytes)
        out = []
        for m in members:
            if m.isfile() and LOG_NAME.search(posixpath.basename(m.name)):
                ctx = context_for(m.name)
                ctx.file = f"{p}!{m.name}"
                out.append(LogSource(ctx, _member_lines(p, m.name), m.size))
        if not out:
            raise InputError(p, "no log files (*.log, *.txt) in the archive")
        return out
    if p.is_file():
        return [LogSource(context_for(str(p)), _file_lines(p), p.stat().st_size)]
    if not p.is_dir():
        raise InputError(p, "not a regular file or folder (a FIFO, socket or device is never read)")
    files = list(_walk(p, warnings))
    if not files:
        raise InputError(p, "no log files (*.log, *.txt) in this folder")
    return [LogSource(context_for(str(f)), _file_lines(f), f.stat().st_size) for f in files]
