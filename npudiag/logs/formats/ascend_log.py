"""CANN host/device logs (plog, device-<id>, msnpureport slog) and the console text users paste.

One streaming reader for every form, because a single pasted excerpt mixes them: plog records
``[ERROR] RUNTIME(1365,python3.8):2025-08-06-23:09:35.772.604 [stars_engine.cc:1551]6219 ...``,
CANN's stderr blocks (``EZ9999: Inner Error!`` / ``EZ9999[PID: n] <time> (EZ9999): ...`` with an
indented ``TraceBack``), torch_npu's ``[ERROR] <time> (PID:.., Device:1, RankID:1) ERR01100 OPS ...``,
c10 glog lines (``[rank1]:[E324 13:00:25.428 compiler_depend.ts:574] ...``), Python tracebacks,
MindIE/loguru/logging lines and dmesg. Lines that start no record continue the previous one
(multi-line records are joined), so nothing is dropped; a line cut at the start of an excerpt
becomes a ``text`` record of its own. Text embedded in a JSON string (literal ``\\n``) is split
back into lines. Memory is bounded: records are flushed in Arrow batches.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain

import pyarrow as pa

from npudiag.logs.formats import plog_fast

# CODE_MODULES, error_codes and MAX_MESSAGE_CHARS are this module's API too
from npudiag.logs.formats.log_common import (  # noqa: F401
    CANN_CODE,
    CODE_MODULES,
    DEVICE_HINT,
    DEVICE_IN_TEXT,
    KERNEL_LEVEL_RE,
    LEVELS,
    MAX_CONTINUATION_LINES,
    MAX_MESSAGE_CHARS,
    PLOG,
    PLOG_TS,
    RANK_HINTS,
    RANK_IN_TEXT,
    TSCH_RE,
    BlankRun,
    Block,
    LogContext,
    ascii_re,
    cap_message,
    error_codes,
    plog_pid,
)
from npudiag.safeio import fit_int
from npudiag.schemas import LOG_EVENTS

BATCH_ROWS = 20_000
CHUNK_LINES = 32_768  # lines per vectorised plog chunk
CHUNK_CHARS = 4 << 20  # and at most this many characters: a chunk of 64 KB lines must not hold gigabytes
MIN_VECTOR_LINES = 4096  # a shorter tail is parsed line by line (the vector set-up costs more)
BATCH_CHARS = 8 << 20  # a batch is also flushed when its messages reach this many characters
PREFIX_SAMPLE_LINES = 256  # the prefix detector looks at this many non-blank lines at the start of a file

GLOG_LEVELS = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "FATAL"}


# syslog / dmesg priorities (RFC 5424 names, printk numbers) -> our levels
PRIORITY_LEVELS = {
    "emerg": "FATAL", "panic": "FATAL", "alert": "FATAL", "crit": "FATAL",
    "err": "ERROR", "error": "ERROR", "warn": "WARNING", "warning": "WARNING",
    "notice": "INFO", "info": "INFO", "debug": "DEBUG",
}  # fmt: skip
PRINTK_LEVELS = ("FATAL", "FATAL", "FATAL", "ERROR", "WARNING", "INFO", "INFO", "DEBUG")
RANK_PREFIX = ascii_re(r"^\[rank(\d{1,6})\]:\s?")
CANN_LINE = ascii_re(
    r"^(?P<code>" + CANN_CODE + r")(?:\[PID: (?P<pid1>\d+)\])?:?\s*(?:\[PID: (?P<pid2>\d+)\])?\s*"
    r"(?P<ts>" + PLOG_TS + r")?\s*(?:\((?P=code)\):)?\s*(?P<msg>.*)$"
)
TORCH_NPU = ascii_re(
    r"^\[(ERROR|WARN|WARNING|INFO|DEBUG)\] (\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}) "
    r"\(PID:(\d+), Device:(-?\d+), RankID:(-?\d+)\) "
    r"(ERR\d{5}) (\w+) ?(.*)$"
)
# torch_npu's distributed logger: "[285] [2025-12-12 12:10:10:644] torch.distributed: [ERROR] [479] ..."
TORCH_DIST = ascii_re(
    r"^\[(\d{1,10})\] \[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[:.,](\d{1,6})\] ([\w.]{1,64}): \[(\w{1,8})\] ?(.*)$"
)
GLOG = ascii_re(r"^\[?([EWIF])(\d{3,4}) (\d{2}:\d{2}:\d{2}\.\d+)(?: +(\d+))? ([^\s:\]]+):(\d+)\] ?(.*)$")
GLOG_SHORT = ascii_re(r"^\[?([EWIF]) ([\w.]+\.(?:cpp|cc|h|hpp|c|ts|py)):(\d+)\] ?(.*)$")
PY_TRACEBACK = ascii_re(r"^\s*Traceback \(most recent call last\):\s*$")
PY_EXCEPTION = ascii_re(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)): ?(.*)$")
MINDIE = ascii_re(
    r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[.,:](\d+)\] \[(\w+)\] \[(\d+)\] \[([^\]:]+):(\d+)\] ?(.*)$"
)
PYLOG = ascii_re(
    r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3}) - (\S+) - "
    r"(CRITICAL|ERROR|WARNING|INFO|DEBUG) - (?:([\w.]+):(\d+) - )?(.*)$"
)
LOGURU = ascii_re(
    r"^(?:[\w.-]+\s+\|\s+)?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\.(\d+) \| (\w+)\s*\| "
    r"([\w.<>]+):([\w<>]+):(\d+) \| ?(.*)$"
)
# the kernel ring buffer: "[ 2204.894988] msg", with a printk level "<3>[ 2204.89] msg", or dmesg -x "kern  :err   :
# [ 2204.89] msg"
DMESG = ascii_re(r"^(?:<([0-7])>)?\[\s{0,12}(\d{1,10}\.\d{1,9})\](?:\[\s{0,8}[TC]\d{1,8}\])? ?(.*)$")
DMESG_X = ascii_re(
    r"^(kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local\d)\s{0,8}:(\w{3,7})\s{0,8}: (.*)$"
)
DMESG_MODULE = ascii_re(r"\[ascend\] \[(\w{1,32})\]")
# syslog (RFC 3164, as /var/log/messages and the device's message/ folder write it), optionally with
# facility.priority: "May  8 17:24:32 (none) kern.warn kernel: [48596.522791][T10066] [ascend] [icm] ..."
SYSLOG = ascii_re(
    r"^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) ([ \d]\d) (\d{2}:\d{2}:\d{2}) (\S{1,255}) "
    r"(?:(\w{1,16})\.(\w{1,8}) )?([^\s:\[]{1,128})(?:\[(\d{1,10})\])?: ?(.*)$"
)
# RFC 5424-style timestamps (rsyslog, journalctl -o short-iso): "2025-05-08T09:05:00.123+08:00 host prog[12]: msg"
SYSLOG_ISO = ascii_re(
    r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(?:Z|[+-]\d{2}:?\d{2}) (\S{1,255}) "
    r"(?:(\w{1,16})\.(\w{1,8}) )?([^\s:\[]{1,128})(?:\[(\d{1,10})\])?: ?(.*)$"
)
# the device's black box (hisi_logs/device-K/history.log): one line per exception
BBOX = ascii_re(
    r"^\[(\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2})\.(\d{1,6})\] system exception code \[(0x[0-9A-Fa-f]{1,16})\]: "
    r"ModuleName \[(\w{1,32})\], ExceptionReason \[(\w{1,64})\]"
)
# hisi_logs/device_info.txt: "device-0   0         0           os running"
DEVICE_INFO = ascii_re(r"^device-(\d{1,4})\s{1,32}(\d{1,4})\s{1,32}(\d{1,4})\s{1,32}(.{1,64})$")
APP = ascii_re(r"^\[(ERROR|WARN|WARNING|INFO|DEBUG|EVENT)\]\s*(.*)$")
# an unindented line that still continues the record before it: ACL's "[Error]: <reason>" detail line
DETAIL_LINE = ascii_re(r"^\[(?:Error|Warning|Info)\]: ")

# prefixes that a collector adds to every line of a pasted log: stripped before parsing, kept in "prefix"
PREFIXES = (
    ("ray", ascii_re(r"^\((?:[\w.:-]{1,64} )?pid=(\d{1,10})(?:, ip=[\w.:]{1,64})?\) ")),
    (
        "cri",
        ascii_re(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2}) (?:stdout|stderr) [FP] "),
    ),
    ("docker", ascii_re(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2}) ")),
    ("mpirun", ascii_re(r"^\[\d{1,6},\d{1,6}\]<(?:stdout|stderr)>:")),
    ("compose", ascii_re(r"^[A-Za-z][\w.-]{0,63}\s{0,32}\| ")),
)

# content after plog's [file:line]: RUNTIME "6219 ProcLogicCqReport:", HCCL "[36818][Init]", TDT
# "[OpenProcess][tid:947062]",
# PROFILING " >>> (tid:947062)"
_RT_TID = ascii_re(r"^(\d+) (\w+):")
_BRACKET_TID = ascii_re(r"^\s*\[(\d+)\]")
_TDT = ascii_re(r"^\[(\w+)\]\[tid:(\d+)\]")
_PROF_TID = ascii_re(r"^ >>> \(tid:(\d+)\)")
_FUNC_FILE_LINE = ascii_re(r"\[FUNC:(\w+)\]\[FILE:([^\]]+)\]\[LINE:(\d+)\]")
_DEVICE_IN_TEXT = ascii_re(DEVICE_IN_TEXT)
_RANK_IN_TEXT = ascii_re(RANK_IN_TEXT)


def detect_prefix(lines: list[str]) -> str | None:
    """The name of the collector prefix most of ``lines`` start with (Ray actors, container runtimes,
    docker -t, mpirun --tag-output, compose), or None. Half of the non-blank lines must carry it."""
    sample = [x for x in lines if x.strip()]
    if len(sample) < 2:
        return None
    for name, rx in PREFIXES:
        hits = sum(1 for x in sample if rx.match(x))
        if hits * 2 >= len(sample):
            return name
    return None


def _valid_utf8(line: str) -> str:
    """Lone surrogates (text decoded with surrogateescape) cannot go into Arrow strings."""
    try:
        line.encode("utf-8")
        return line
    except UnicodeEncodeError:
        return line.encode("utf-8", "replace").decode("utf-8")


def _plog_time(text: str) -> datetime | None:
    # 2025-08-06-23:09:35.772.604 -> ms.us
    try:
        return datetime(
            int(text[0:4]),
            int(text[5:7]),
            int(text[8:10]),
            int(text[11:13]),
            int(text[14:16]),
            int(text[17:19]),
            int(text[20:23]) * 1000 + int(text[24:27]),
        )
    except ValueError:
        return None


_MONTHS = {
    m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)
}


def _no_year(month: int, day: int, hms: str, frac: str = "") -> datetime | None:
    """A month, day and time with no year, in 2000 (a leap year: Feb 29 exists); None when not a date."""
    try:
        t = datetime(2000, month, day, int(hms[0:2]), int(hms[3:5]), int(hms[6:8]))
    except ValueError:
        return None
    return t.replace(microsecond=int(frac[:6].ljust(6, "0"))) if frac else t


def _glog_time(mmdd: str, clock: str) -> datetime | None:
    """c10 / glog's ``E0324 13:00:25.428029551``: month and day, then the time to the ns (kept to the µs)."""
    hms, _, frac = clock.partition(".")
    return _no_year(int(mmdd) // 100, int(mmdd) % 100, hms, frac)


def _time(date_time: str, frac: str = "", sep: str = " ") -> datetime | None:
    try:
        t = datetime.strptime(date_time, f"%Y-%m-%d{sep}%H:%M:%S")
    except ValueError:
        return None
    if frac:
        t = t.replace(microsecond=int(frac[:6].ljust(6, "0")))
    return t


def _kernel_module(text: str) -> str:
    """A kernel line's module: the Ascend driver's "[ascend] [devmm]" tag, else KERNEL."""
    m = DMESG_MODULE.search(text)
    return m.group(1).upper() if m else "KERNEL"


def _kernel_level(text: str, fallback: str | None) -> str | None:
    """A kernel line's level: the driver's own "[ascend] [ERROR]" tag, "[Hardware Error]", else ``fallback``."""
    if (m := KERNEL_LEVEL_RE.search(text)) is not None:
        return LEVELS[m.group(1)]
    if "[Hardware Error]" in text:
        return "ERROR"
    return fallback


@dataclass
class _Record:
    line: int
    fmt: str
    level: str | None = None
    module: str | None = None
    timestamp: datetime | None = None
    no_year: datetime | None = None  # a month-day time without a year (in 2000)
    pid: int | None = None
    process: str | None = None
    device_id: int | None = None
    rank: int | None = None
    src_file: str | None = None
    src_line: int | None = None
    thread_id: int | None = None
    function: str | None = None
    prefix: str | None = None
    parts: list[str] = field(default_factory=list)
    last: int = 0  # the last input line with text in this record
    in_traceback: bool = False


class LogParser:
    """Feed lines, take Arrow batches. ``feed`` is a plain loop over regexes anchored at the line start,
    tried only when the first character can begin that form.

    Every non-blank input line lands in exactly one record (``line`` .. ``line + line_count - 1``), except
    that one line holding several record starts (three plog records on one line of a page copy) gives
    each its own record on that line. A line continues the record before it only when it is indented,
    inside a Python traceback, ACL's ``[Error]: <reason>`` detail, or part of a plog record (register
    dumps, wrapped messages); any other line no parser claims is a ``text`` record of its own."""

    def __init__(self, ctx: LogContext, batch_rows: int = BATCH_ROWS, vectorised: bool = True) -> None:
        self.ctx = ctx
        self.vectorised = vectorised
        self.batch_rows = batch_rows
        self._cols: dict[str, list] = {f.name: [] for f in LOG_EVENTS}
        self._chars = 0  # message characters in the open batch
        self._cur: _Record | None = None
        self._prefix: re.Pattern[str] | None = None
        self._prefix_text: str | None = None  # the prefix stripped from the line being parsed
        self._prefix_pid: int | None = None  # the pid that prefix names (Ray's "(train pid=8464)")
        self.prefix_kind: str | None = None
        self._detected = False
        self.lines = 0
        self.records = 0

    # -- records -------------------------------------------------------------------------------
    def _open(self, rec: _Record, text: str) -> None:
        self._close()
        rec.parts.append(text)
        rec.last = rec.line
        if rec.prefix is None:
            rec.prefix = self._prefix_text
        self._cur = rec

    def _continue(self, lineno: int, text: str) -> None:
        cur = self._cur
        if cur is None or len(cur.parts) >= MAX_CONTINUATION_LINES:
            self._open(_Record(lineno, "text"), text)
            return
        cur.parts.append(text)
        cur.last = lineno

    def _close(self) -> None:
        rec = self._cur
        if rec is None:
            return
        self._cur = None
        msg = cap_message("\n".join(rec.parts))
        ctx = self.ctx
        # each search only where the text holds a literal every form of it has (a scan at memchr speed)
        if rec.device_id is None:
            look = DEVICE_HINT in msg and (rec.fmt != "plog" or ctx.device_id is None)
            m = _DEVICE_IN_TEXT.search(msg) if look else None
            rec.device_id = next((int(g) for g in m.groups() if g is not None), None) if m else ctx.device_id
        if rec.rank is None:
            m = _RANK_IN_TEXT.search(msg) if any(h in msg for h in RANK_HINTS) else None
            rec.rank = next((int(g) for g in m.groups() if g is not None), None) if m else ctx.rank
        if rec.src_file is None and "[FUNC:" in msg and (m := _FUNC_FILE_LINE.search(msg)):
            rec.function, rec.src_file, rec.src_line = m.group(1), m.group(2), int(m.group(3))
        c = self._cols
        # numbers a line states (a device, rank, pid, thread or source line of any length) that no
        # column holds are left out, never a crash: the record is kept
        rec.device_id, rec.rank = fit_int(rec.device_id, 31), fit_int(rec.rank, 31)
        rec.src_line, rec.thread_id = fit_int(rec.src_line), fit_int(rec.thread_id)
        rec.pid = fit_int(rec.pid)
        c["file"].append(ctx.file)
        c["line"].append(rec.line)
        c["line_count"].append(rec.last - rec.line + 1)
        c["origin"].append(ctx.origin)
        c["format"].append(rec.fmt)
        c["device_id"].append(rec.device_id)
        c["rank"].append(rec.rank)
        c["pid"].append(rec.pid if rec.pid is not None else ctx.pid)
        c["process"].append(rec.process)
        c["level"].append(rec.level)
        c["module"].append(rec.module)
        c["timestamp"].append(rec.timestamp)
        c["timestamp_no_year"].append(rec.no_year if rec.timestamp is None else None)
        c["src_file"].append(rec.src_file)
        c["src_line"].append(rec.src_line)
        c["thread_id"].append(rec.thread_id)
        c["function"].append(rec.function)
        c["message"].append(msg)
        self._chars += len(msg)
        c["prefix"].append(rec.prefix)
        self.records += 1

    def _batch(self) -> pa.RecordBatch:
        cols = self._cols
        message, level = pa.array(cols["message"], pa.string()), pa.array(cols["level"], pa.string())
        # the error codes of the batch's records at once (an RE2 prefilter first: most hold none)
        codes = plog_fast.codes_column(message, level)
        arrays = {**cols, "message": message, "level": level, "error_codes": codes}
        batch = pa.RecordBatch.from_pydict(arrays, schema=LOG_EVENTS)
        self._cols = {f.name: [] for f in LOG_EVENTS}
        self._chars = 0
        return batch

    # -- lines ---------------------------------------------------------------------------------
    def _clean(self, lines: Iterable[str]) -> Iterator[str]:
        for raw in lines:
            if type(raw) is BlankRun:
                self.lines += raw.count
                yield raw
                continue
            if type(raw) is Block:  # already clean: counted and passed on whole
                self.lines += len(raw)
                yield raw
                continue
            self.lines += 1
            line = raw.rstrip("\r\n")
            if len(line) > MAX_MESSAGE_CHARS:  # no message keeps more: every later pass reads less
                line = cap_message(line)
            if not line.isascii():
                line = _valid_utf8(line)
            yield line

    def feed(self, lines: Iterable[str]) -> Iterator[pa.RecordBatch]:
        """Lines are buffered into chunks cut just before a plog header, so a chunk of pure plog can
        take the vectorised path and a record never straddles two chunks. Vectorised chunks run on a
        worker thread (pyarrow's kernels release the GIL) while the next chunk is read; at most two
        are in flight, so memory stays bounded, and results are taken in order. A file whose lines
        carry a collector prefix is parsed line by line, each line's prefix stripped first."""
        start = self.lines + 1
        clean = self._clean(lines)
        if not self._detected:
            self._detected = True
            # the items up to the sample's lines (a Block holds a megabyte of lines: counting items instead
            # held the first 256 MB of a file in memory before its first chunk)
            head: list[str] = []
            sample: list[str] = []
            for item in clean:
                head.append(item)
                sample.extend(item[: PREFIX_SAMPLE_LINES - len(sample)] if type(item) is Block else (item,))
                if len(sample) >= PREFIX_SAMPLE_LINES:
                    break
            kind = detect_prefix(sample)
            if kind is not None:
                self.prefix_kind = kind
                self._prefix = dict(PREFIXES)[kind]
            clean = chain(head, clean)
        pending: deque[tuple[Future[list[plog_fast.Piece]] | None, list[str], int]] = deque()
        pool: ThreadPoolExecutor | None = None  # started at the first full chunk: a small file is parsed line by line
        vectorised = self.vectorised and self._prefix is None
        try:
            buf: list[str] = []
            buf_chars = 0
            for line in clean:
                if type(line) is BlankRun:
                    # the lines so far are one chunk (for the line parser: a record may go on after
                    # blank lines), the run one blank line numbered as all of its lines
                    if buf:
                        pending.append((None, buf, start))
                        start += len(buf)
                        buf, buf_chars = [], 0
                    pending.append((None, [""], start))
                    start += line.count
                    while len(pending) > 3:
                        yield from self._resolve(*pending.popleft())
                    continue
                if type(line) is Block:
                    buf.extend(line)
                    buf_chars += sum(map(len, line))
                else:
                    buf.append(line)
                    buf_chars += len(line)
                if len(buf) >= CHUNK_LINES or buf_chars >= CHUNK_CHARS:
                    if pool is None and vectorised:
                        pool = ThreadPoolExecutor(max_workers=2)
                    cut = next(
                        (i for i in range(len(buf) - 1, 0, -1) if buf[i].startswith("[") and PLOG.match(buf[i])),
                        len(buf),
                    )
                    chunk, buf = buf[:cut], buf[cut:]
                    buf_chars = sum(len(x) for x in buf)
                    # cut before a header, the chunk ends where a record ends; with no header to cut at, its
                    # record may go on in the next chunk, and only the line parser carries a record across
                    # (lines before a chunk's first header go to the line parser: they may continue it)
                    vector = pool is not None and bool(buf)
                    fut = pool.submit(plog_fast.parse_plog_chunk, chunk, start, self.ctx) if vector else None
                    pending.append((fut, chunk, start))
                    start += cut
                    while len(pending) > 3:
                        yield from self._resolve(*pending.popleft())
            if buf:
                big = pool is not None and len(buf) >= MIN_VECTOR_LINES
                fut = pool.submit(plog_fast.parse_plog_chunk, buf, start, self.ctx) if big else None
                pending.append((fut, buf, start))
            while pending:
                yield from self._resolve(*pending.popleft())
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)

    def _resolve(
        self, fut: Future[list[plog_fast.Piece]] | None, lines: list[str], start: int
    ) -> Iterator[pa.RecordBatch]:
        """The chunk's rows in line order: the vectorised path's batches as they are, the ranges it left
        (and a chunk it did not take) line by line; a chunk of both forms comes out as one batch (a
        hundred rare records must not make a hundred small batches for every later step)."""
        if fut is None:
            yield from self._lines(lines, start, 0, len(lines))
            return
        pieces = fut.result()
        # the line parser's rows of the whole chunk go into one batch (a batch per range cost more than the
        # range), each range's rows a slice of it; a range ends before a header, so its last record is
        # complete at its end (and the chunk's, which ends before a header)
        cols = self._cols["file"]
        parts: list[pa.RecordBatch | tuple[int, int]] = [(0, len(cols))]  # rows of earlier chunks not in a batch
        for piece in pieces:
            first = len(cols)
            if isinstance(piece, tuple):
                for _ in self._lines(lines, start, *piece, flush=False):
                    pass  # nothing is yielded without flush
                self._close()
                parts.append((first, len(cols)))
                continue
            if self._cur is not None:  # a record of an earlier chunk, still open: it ends before this header
                self._close()
                parts.append((first, len(cols)))
            self.records += piece.num_rows
            parts.append(piece)
        slow = self._batch() if self._cols["file"] else None
        out = [
            p if isinstance(p, pa.RecordBatch) else slow.slice(p[0], p[1] - p[0])
            for p in parts
            if isinstance(p, pa.RecordBatch) or p[1] > p[0]
        ]
        if len(out) > 1:
            yield pa.Table.from_batches(out, schema=LOG_EVENTS).combine_chunks().to_batches()[0]
        elif out:
            yield out[0]

    def _lines(self, lines: list[str], start: int, a: int, b: int, flush: bool = True) -> Iterator[pa.RecordBatch]:
        for i in range(a, b):
            line = lines[i]
            self._prefix_text = self._prefix_pid = None
            if self._prefix is not None and (m := self._prefix.match(line)) is not None:
                self._prefix_text = m.group(0).rstrip()
                self._prefix_pid = int(m.group(1)) if m.re.groups else None
                line = line[m.end() :]
            if "\\n" in line and not line.startswith("["):
                for sub in line.replace('\\"', '"').split("\\n"):
                    self._line(start + i, sub)
            else:
                self._line(start + i, line)
            if flush and (len(self._cols["file"]) >= self.batch_rows or self._chars >= BATCH_CHARS):
                yield self._batch()

    def parse(self, lines: Iterable[str]) -> Iterator[pa.RecordBatch]:
        """All of one file: its lines, then the last open record."""
        yield from self.feed(lines)
        yield from self.finish()

    def finish(self) -> Iterator[pa.RecordBatch]:
        self._close()
        if self._cols["file"]:
            yield self._batch()

    def _line(self, n: int, line: str) -> None:
        if not line.strip():
            if self._cur is not None and self._cur.fmt not in ("plog", "python"):
                self._close()
            return
        rank = None
        if line.startswith("[rank"):
            m = RANK_PREFIX.match(line)
            if m:
                rank = int(m.group(1))
                self._prefix_text = (self._prefix_text + " " if self._prefix_text else "") + m.group(0).rstrip()
                line = line[m.end() :]
                if not line.strip():
                    return
        first = line[0]
        if first == "[" and "] " in line and self._plog(n, line, rank):
            return
        rec = self._console(n, line, first)
        if rec is not None:
            if rank is not None:
                rec.rank = rank
            if rec.pid is None:
                rec.pid = self._prefix_pid
            return
        cur = self._cur
        if cur is not None and cur.in_traceback and (m := PY_EXCEPTION.match(line.strip())):
            cur.in_traceback = False
            cur.parts.insert(0, line.strip())
            cur.last = n
            cur.level = "ERROR"
            return
        if cur is not None and (cur.in_traceback or cur.fmt == "plog" or first.isspace() or DETAIL_LINE.match(line)):
            self._continue(n, line)
            return
        if PY_EXCEPTION.match(line):
            self._open(_Record(n, "python", level="ERROR", module="PYTHON", rank=rank), line)
            return
        self._open(_Record(n, "text", rank=rank), line)

    def _plog(self, n: int, line: str, rank: int | None) -> bool:
        matches = list(PLOG.finditer(line))
        if not matches:
            return False
        if matches[0].start() > 0:
            self._continue(n, line[: matches[0].start()].rstrip())
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
            content = line[m.end() : end].rstrip() if i + 1 < len(matches) else line[m.end() :]
            rec = _Record(
                n,
                "plog",
                level=m.group(1),
                module=m.group(2),
                pid=plog_pid(m.group(3)),
                process=m.group(4),
                timestamp=_plog_time(m.group(5)),
                src_file=m.group(6),
                src_line=int(m.group(7)) if m.group(7) else None,
                rank=rank,
            )
            if rec.src_file is None and (t := TSCH_RE.match(content)) is not None:
                rec.src_file, rec.src_line, rec.function = t.group(1), int(t.group(2)), t.group(3)
            elif (t := _RT_TID.match(content)) is not None:
                rec.thread_id, rec.function = int(t.group(1)), t.group(2)
            elif (t := _TDT.match(content)) is not None:
                rec.function, rec.thread_id = t.group(1), int(t.group(2))
            elif (t := _BRACKET_TID.match(content)) is not None or (t := _PROF_TID.match(content)) is not None:
                rec.thread_id = int(t.group(1))
            if rec.module == "KERNEL":
                rec.level = _kernel_level(content, rec.level)
            self._open(rec, content.strip())
        return True

    def _console(self, n: int, line: str, first: str) -> _Record | None:
        rec: _Record | None = None
        if (
            first in "EWI"
            and (m := CANN_LINE.match(line))
            and (m.group("ts") or m.group("pid1") or m.group("pid2") or ":" in line[6:8])
        ):
            code = m.group("code")
            pid = m.group("pid1") or m.group("pid2")
            rec = _Record(
                n,
                "cann_console",
                level={"E": "ERROR", "W": "WARNING", "I": "INFO"}[code[0]],
                module=CODE_MODULES.get(code[1]),
                timestamp=_plog_time(m.group("ts")) if m.group("ts") else None,
                pid=int(pid) if pid else None,
            )
        elif first == "[":
            rec = self._bracketed(n, line)
        elif first == "<" and (m := DMESG.match(line)) is not None:
            rec = self._dmesg(n, m)
        elif first == "T" and PY_TRACEBACK.match(line):
            rec = _Record(n, "python", level="ERROR", module="PYTHON", in_traceback=True)
        elif first in "EWIF" and (m := GLOG_SHORT.match(line)) is not None:
            rec = _Record(n, "glog", level=GLOG_LEVELS[m.group(1)], src_file=m.group(2), src_line=int(m.group(3)))
        elif first.isdigit() and (m := PYLOG.match(line)) is not None:
            rec = _Record(
                n,
                "python_logging",
                level=LEVELS.get(m.group(4), "ERROR"),
                module=m.group(3),
                timestamp=_time(m.group(1), m.group(2)),
            )
            if m.group(5):
                rec.src_file, rec.src_line = m.group(5), int(m.group(6))
        elif first.isdigit() and (m := SYSLOG_ISO.match(line)) is not None:
            rec = self._syslog(n, m, _time(f"{m.group(1)} {m.group(2)}", m.group(3) or ""))
        elif first in "JFMASOND" and (m := SYSLOG.match(line)) is not None:
            rec = self._syslog(n, m, None)  # RFC 3164 has no year: the time stays in the message
        elif first.isalpha() and (m := DMESG_X.match(line)) is not None:
            inner = DMESG.match(m.group(3))
            rec = self._dmesg(n, inner) if inner else _Record(n, "dmesg", module="KERNEL")
            rec.level = PRIORITY_LEVELS.get(m.group(2).lower(), rec.level)
        elif (m := LOGURU.match(line)) is not None:
            rec = _Record(
                n,
                "python_logging",
                level=LEVELS.get(m.group(3).upper(), m.group(3).upper()),
                timestamp=_time(m.group(1), m.group(2)),
            )
            rec.src_file, rec.function, rec.src_line = m.group(4), m.group(5), int(m.group(6))
        elif first == "d" and (m := DEVICE_INFO.match(line)) is not None:
            status = m.group(4).strip()
            rec = _Record(
                n,
                "device_info",
                level="INFO" if "running" in status else "WARNING",
                module="DEVICE",
                device_id=int(m.group(3)),
            )
        if rec is not None:
            self._open(rec, line)
        return rec

    def _bracketed(self, n: int, line: str) -> _Record | None:
        if (m := TORCH_NPU.match(line)) is not None:
            rank_id = int(m.group(5))
            return _Record(
                n,
                "torch_npu",
                level=LEVELS[m.group(1)],
                module=m.group(7),
                timestamp=_time(m.group(2), sep="-"),
                pid=int(m.group(3)),
                device_id=int(m.group(4)),
                rank=rank_id if rank_id >= 0 else None,
            )
        if (m := TORCH_DIST.match(line)) is not None:
            ts = _time(m.group(2), m.group(3).rjust(3, "0"))
            return _Record(
                n,
                "torch_dist",
                level=LEVELS.get(m.group(5).upper()),
                module=m.group(4),
                timestamp=ts,
                pid=int(m.group(1)),
            )
        if (m := GLOG.match(line)) is not None:
            rec = _Record(n, "glog", level=GLOG_LEVELS[m.group(1)], src_file=m.group(5), src_line=int(m.group(6)))
            rec.no_year = _glog_time(m.group(2), m.group(3))
            if m.group(4):
                rec.thread_id = int(m.group(4))
            return rec
        if (m := GLOG_SHORT.match(line)) is not None:
            return _Record(n, "glog", level=GLOG_LEVELS[m.group(1)], src_file=m.group(2), src_line=int(m.group(3)))
        if (m := MINDIE.match(line)) is not None:
            return _Record(
                n,
                "mindie",
                level=LEVELS.get(m.group(3).upper(), m.group(3).upper()),
                timestamp=_time(m.group(1), m.group(2)),
                thread_id=int(m.group(4)),
                src_file=m.group(5),
                src_line=int(m.group(6)),
            )
        if (m := BBOX.match(line)) is not None:
            return _Record(
                n, "bbox", level="ERROR", module=m.group(4), timestamp=_time(m.group(1), m.group(2), sep="-")
            )
        if (m := DMESG.match(line)) is not None:
            return self._dmesg(n, m)
        if (m := APP.match(line)) is not None:
            return _Record(n, "app", level=LEVELS[m.group(1)])
        return None

    @staticmethod
    def _dmesg(n: int, m: re.Match[str]) -> _Record:
        text = m.group(3)
        rec = _Record(n, "dmesg", module=_kernel_module(text))
        if m.group(1) is not None:
            rec.level = _kernel_level(text, PRINTK_LEVELS[int(m.group(1))])
        else:
            low = text.lower()
            rec.level = _kernel_level(text, "ERROR" if ("error" in low or "fail" in low) else "INFO")
        return rec

    @staticmethod
    def _syslog(n: int, m: re.Match[str], ts: datetime | None) -> _Record:
        program, text = m.group(7), m.group(9)
        no_year = (
            _no_year(_MONTHS[m.group(1)], int(m.group(2)), m.group(3)) if ts is None and m.group(1) in _MONTHS else None
        )
        level = PRIORITY_LEVELS.get((m.group(6) or "").lower())
        if program == "kernel":
            rec = _Record(n, "syslog", module=_kernel_module(text), timestamp=ts, level=_kernel_level(text, level))
        else:
            rec = _Record(
                n, "syslog", level=level, module=program, timestamp=ts, pid=int(m.group(8)) if m.group(8) else None
            )
        rec.process = program
        rec.no_year = no_year
        return rec
