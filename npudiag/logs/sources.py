"""Find the log files in what a user gives ``npudiag logs parse``, and what their paths say.

A path is an msnpureport export folder, a host log folder (``$HOME/ascend/log``), one log file,
an archive of them, or ``-`` for text on standard input. The path tells the origin (host plog,
device logs from an export or flushed to the host), the device id (``device-K`` folders), the
pid (``plog-<pid>_<ts>.log``) and the rank (``rank_N`` folders) where the records do not.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from npudiag.errors import InputError, text_of
from npudiag.logs.archive import MAX_ARCHIVE_BYTES, MAX_MEMBERS, check_members, is_archive, members_of, open_archive
from npudiag.logs.formats.ascend_log import LogContext
from npudiag.logs.formats.log_common import BLANK_RUN, MAX_MESSAGE_CHARS, BlankRun, Block, cap_message

# numbers in names are ASCII digits of a bounded length: a pid fits int64, a device or rank int32
LOG_NAME = re.compile(r"(\.log|\.txt|\.out)(\.[0-9]+)?$|^(messages|syslog|history\.log|kernel\.log)")
PLOG_NAME = re.compile(r"plog-([0-9]{1,10})_[0-9]{1,20}\.log$")
DEVICE_LOG_NAME = re.compile(r"device-([0-9]{1,10})_[0-9]{1,20}\.log$")
DEVICE_DIR = re.compile(r"^device-([0-9]{1,9})$")
DEV_OS_DIR = re.compile(r"^dev-os-([0-9]{1,9})$")
RANK_DIR = re.compile(r"^rank[_-]?([0-9]{1,9})$")
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
    ctx = LogContext(text_of(name))  # a name that is not UTF-8 shown escaped (the file is opened by its real path)
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


READ_BYTES = 1 << 20  # a block: one read of this many bytes, split into lines in C
# a run of line ends: a single character class, which the regex engine scans at memory speed (the group
# (?:\r?\n) took 115 ns a character); a line of nothing but \r is blank to the parser too
_BLANKS = re.compile(f"[\\r\\n]{{{BLANK_RUN + 1},}}")
# a run of blank lines holds one of these (the regex runs only on text that does)
_BLANK_NEEDLES = ("\n" * 8, "\r\n" * 8, "\r\r\n" * 4)


def block_lines(read: Callable[[int], bytes]) -> Iterator[Block | BlankRun]:
    """The lines of a binary stream (``read(n)``), decoded as UTF-8 with replacement, as Blocks of
    cleaned lines; BLANK_RUN or more blank lines in a row come as one BlankRun (however many reads
    they span). A line of MAX_LINE_CHARS characters or more keeps its first MAX_LINE_CHARS and says how
    many more it had (its line end counted); the rest of a line that long is dropped as it is read."""
    blank = 0
    for item in _read_blocks(read):
        if type(item) is BlankRun:
            blank += item.count
            continue
        if blank:
            yield BlankRun(blank)
            blank = 0
        yield item
    if blank:
        yield BlankRun(blank)


def _read_blocks(read: Callable[[int], bytes]) -> Iterator[Block | BlankRun]:
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    rest = ""  # the unfinished line at the end of the last read
    head: str | None = None  # while dropping the rest of a long unfinished line: its kept head
    dropped = 0
    while True:
        data = read(READ_BYTES)
        text = decoder.decode(data) if data else decoder.decode(b"", final=True)
        if head is not None:
            nl = text.find("\n")
            if nl < 0 and data:
                dropped += len(text)
                continue
            dropped += (nl + 1) if nl >= 0 else len(text)
            yield _clean_block([f"{head} [... {dropped} more characters cut by npudiag]"], cut=False)
            head, text = None, text[nl + 1 :] if nl >= 0 else ""
        text = rest + text
        end = text.rfind("\n") + 1  # the complete lines: up to the last line end
        body, rest = text[:end], text[end:]
        if data and len(rest) >= MAX_LINE_CHARS:  # a line that has not ended within MAX_LINE_CHARS: keep its head only
            head, dropped, rest = rest[:MAX_LINE_CHARS], len(rest) - MAX_LINE_CHARS, ""
        if body:
            yield from _body_blocks(body)
        if not data:
            if rest:  # the last line, with no line end
                more = len(rest) - MAX_LINE_CHARS
                yield _clean_block(
                    [rest if more < 0 else f"{rest[:MAX_LINE_CHARS]} [... {more} more characters cut by npudiag]"],
                    cut=False,
                )
            return


def _body_blocks(body: str) -> Iterator[Block | BlankRun]:
    """Complete lines (``body`` starts at a line start and ends with a line end) as Blocks, and every
    run of BLANK_RUN or more blank lines as one BlankRun, found by a regex at memory speed."""
    pos = 0
    cr = "\r" in body
    # str.find scans at memchr speed; the needles with a carriage return only where the text holds one
    runs = _BLANKS.finditer(body) if any(x in body for x in _BLANK_NEEDLES[: 3 if cr else 1]) else ()
    for m in runs:
        a, b = m.span()
        n = body.count("\n", a, b)
        cut = a
        if a > 0:  # the run's first line end ends the line before it
            cut = body.index("\n", a) + 1
            n -= 1
        if n < BLANK_RUN:  # carriage returns, not blank lines: left to the split
            continue
        if cut > pos:
            yield _clean_block(body[pos:cut].split("\n")[:-1], cr=cr)
        yield BlankRun(n)
        pos = b
    if pos < len(body):
        yield _clean_block(body[pos:].split("\n")[:-1], cr=cr)


def _clean_block(lines: list[str], cut: bool = True, cr: bool = True) -> Block:
    """Each line as the parser takes it: no trailing \\r, at most MAX_MESSAGE_CHARS characters; with
    ``cut``, a line of MAX_LINE_CHARS or more (its line end read too) first cut with its note."""
    block = Block(lines)
    longest = max(map(len, block)) if block else 0
    if cut and longest >= MAX_LINE_CHARS:
        block = Block(
            f"{x[:MAX_LINE_CHARS]} [... {len(x) - MAX_LINE_CHARS + 1} more characters cut by npudiag]"
            if len(x) >= MAX_LINE_CHARS
            else x
            for x in block
        )
    if cr and any(x.endswith("\r") for x in block):  # ``cr``: whether the text holds a \\r at all
        block = Block(x.rstrip("\r") for x in block)
    if longest > MAX_MESSAGE_CHARS:
        block = Block(cap_message(x) if len(x) > MAX_MESSAGE_CHARS else x for x in block)
    return block


def _file_lines(path: Path) -> Callable[[], Iterator[str]]:
    def lines() -> Iterator[str]:
        with open(path, "rb") as fh:
            yield from block_lines(fh.read)

    return lines


class _TarStream:
    """Reads an archive's members in one pass when they are asked for in archive order (as ``logs
    parse`` does): a compressed archive is decompressed once, not once per member."""

    def __init__(self, archive: Path) -> None:
        self.archive = archive
        self.tar: tarfile.TarFile | None = None
        self.members: Iterator[tarfile.TarInfo] | None = None

    def lines(self, name: str, offset: int) -> Callable[[], Iterator[str]]:
        """The lines of the regular member ``name`` whose header is at ``offset`` (names may repeat:
        a link and a file, or a file added twice)."""

        def gen() -> Iterator[str]:
            for attempt in (0, 1):
                if self.tar is None:
                    # not tarfile's stream mode: it slices its whole inflated buffer for every 10 KB
                    # block it skips (a 1,000 : 1 member took minutes); the seekable reader inflates
                    # once too, as long as members are read in archive order
                    self.tar = open_archive(self.archive)
                    self.members = members_of(self.archive, self.tar)
                assert self.members is not None
                for m in self.members:
                    if m.name == name and m.offset == offset and m.isfile():
                        try:
                            fh = self.tar.extractfile(m)
                        except tarfile.TarError as exc:
                            raise InputError(self.archive, f"member {name!r}: cannot be read ({exc})") from None
                        if fh is not None:
                            yield from _member_lines(self.archive, name, block_lines(fh.read))
                        return
                # asked out of order: start the stream again, once
                self.tar.close()
                self.tar = None
                if attempt:
                    return

        return gen


def _zip_members(archive: Path, max_bytes: int) -> list[zipfile.ZipInfo]:
    """A zip's members after the same checks as a tar's: no absolute paths, no '..', size limits."""
    try:
        zf = zipfile.ZipFile(archive)
    except _MEMBER_ERRORS as exc:
        raise InputError(archive, f"not a readable zip archive ({exc})") from None
    with zf:
        infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise InputError(archive, f"more than {MAX_MEMBERS} members; refusing the archive")
    total = 0
    for m in infos:
        name = m.filename
        if (
            name.startswith(("/", "\\"))
            or (len(name) > 1 and name[1] == ":")
            or ".." in name.replace("\\", "/").split("/")
        ):
            raise InputError(archive, f"member {name!r}: an absolute path or '..'; refusing the archive")
        total += m.file_size
        if total > max_bytes:
            raise InputError(
                archive, f"more than {max_bytes} bytes uncompressed (at member {name!r}); refusing the archive"
            )
    # members whose data overlap (several central-directory entries pointing at one member) are read
    # once each: a 48 KB zip of 8 such entries inflated one 16 MiB member 8 times (Python 3.11.7's
    # zipfile has no overlap check; 3.11.8 added one)
    spans = sorted(
        (
            m.header_offset,
            m.header_offset + 30 + len(m.orig_filename.encode("utf-8", "replace")) + m.compress_size,
            m.filename,
        )
        for m in infos
    )
    for (_, end, name), (start, _, nxt) in zip(spans, spans[1:]):
        if start < end:
            raise InputError(
                archive,
                f"members {name!r} and {nxt!r} overlap (one member's data read as several); refusing the archive",
            )
    return infos


# what a damaged or unusual archive member raises while it is read: an encrypted zip member
# (RuntimeError), a compression method Python lacks (NotImplementedError), a bad CRC or header
# (BadZipFile), corrupt deflate data (zlib.error), a truncated or corrupt stream (TarError, EOFError)
_MEMBER_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    tarfile.TarError,
    EOFError,
    RuntimeError,
    NotImplementedError,
    OSError,
    ValueError,
)


def _member_lines(archive: Path, name: str, lines: Iterator[str]) -> Iterator[str]:
    """``lines`` of an archive member; whatever the member's damage raises is one InputError naming it
    (the lines already read are kept)."""
    try:
        yield from lines
    except InputError:
        raise
    except _MEMBER_ERRORS as exc:
        raise InputError(f"{archive}!{name}", f"cannot be read ({type(exc).__name__}: {str(exc)[:160]})") from None


def _zip_lines(archive: Path, name: str) -> Callable[[], Iterator[str]]:
    def lines() -> Iterator[str]:
        def read() -> Iterator[str]:
            with zipfile.ZipFile(archive) as zf, zf.open(name) as fh:
                yield from block_lines(fh.read)

        yield from _member_lines(archive, name, read())

    return lines


def _stdin_lines() -> Iterator[str]:
    yield from block_lines(sys.stdin.buffer.read)


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
    if p.is_file() and p.name.lower().endswith(".zip"):
        out = []
        for m in _zip_members(p, max_archive_bytes):
            if not m.is_dir() and LOG_NAME.search(posixpath.basename(m.filename)):
                ctx = context_for(m.filename)
                ctx.file = text_of(f"{p}!{m.filename}")
                out.append(LogSource(ctx, _zip_lines(p, m.filename), m.file_size))
        if not out:
            raise InputError(p, "no log files (*.log, *.txt) in the zip archive")
        return out
    if p.is_file() and is_archive(p):
        with open_archive(p) as tar:
            members = check_members(p, tar, max_archive_bytes, skipped=warnings)
        stream = _TarStream(p)
        out = []
        for m in members:
            if m.isfile() and LOG_NAME.search(posixpath.basename(m.name)):
                ctx = context_for(m.name)
                ctx.file = text_of(f"{p}!{m.name}")
                out.append(LogSource(ctx, stream.lines(m.name, m.offset), m.size))
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
