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

import pyarrow as pa

from npudiag.schemas import LOG_EVENTS

BATCH_ROWS = 20_000
CHUNK_LINES = 32_768  # lines per vectorised plog chunk
CHUNK_CHARS = 4 << 20  # and at most this many characters: a chunk of 64 KB lines must not hold gigabytes
MIN_VECTOR_LINES = 4096  # a shorter tail is parsed line by line (the vector set-up costs more)
MAX_CONTINUATION_LINES = 400  # a record longer than this is split, so one runaway block cannot grow unbounded
MAX_MESSAGE_CHARS = 16_384  # a record's message; longer is cut with a note (real records are a few hundred characters)
BATCH_CHARS = 8 << 20  # a batch is also flushed when its messages reach this many characters

LEVELS = {"ERROR": "ERROR", "WARNING": "WARNING", "WARN": "WARNING", "INFO": "INFO", "DEBUG": "DEBUG", "EVENT": "EVENT", "TRACE": "TRACE"}
GLOG_LEVELS = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "FATAL"}
# 2nd character of a CANN error code -> component (CANN error code reference)
CODE_MODULES = {
    "1": "GE",
    "2": "FE",
    "3": "AICPU",
    "4": "TEFUSION",
    "7": "OP_PLUGIN",
    "8": "VECTOR_OP",
    "B": "TBE",
    "C": "AUTOTUNE",
    "D": "RLTUNE",
    "E": "RUNTIME",
    "F": "LXFUSION",
    "G": "AOE",
    "H": "ASCENDCL",
    "I": "HCCL",
    "J": "HCCP",
    "K": "PROFILING",
    "L": "DRV",
    "M": "QUEUE_SCHEDULE",
    "N": "DVPP",
    "O": "AMCT",
    "P": "DUMP",
    "Z": "OPS",
}

_TS = r"\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}\.\d{3}\.\d{3}"
# every repetition is bounded: a crafted line ("[ERROR] A(1," 24,000 times) must not make a search quadratic
PLOG = re.compile(
    r"\[(ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\] ([A-Za-z_0-9]{1,32})\((\d{1,10}),([^)\n]{0,128})\):(" + _TS + r")"
    r"(?: \[([^\]:\n]{1,256}):(\d{1,9})\])?"
)
RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")
CANN_CODE = r"[EWI][0-9A-Z]\d{4}"
CANN_LINE = re.compile(
    r"^(?P<code>" + CANN_CODE + r")(?:\[PID: (?P<pid1>\d+)\])?:?\s*(?:\[PID: (?P<pid2>\d+)\])?\s*"
    r"(?P<ts>" + _TS + r")?\s*(?:\((?P=code)\):)?\s*(?P<msg>.*)$"
)
TORCH_NPU = re.compile(
    r"^\[(ERROR|WARN|WARNING|INFO|DEBUG)\] (\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}) \(PID:(\d+), Device:(-?\d+), RankID:(-?\d+)\) "
    r"(ERR\d{5}) (\w+) ?(.*)$"
)
GLOG = re.compile(r"^\[?([EWIF])(\d{3,4}) (\d{2}:\d{2}:\d{2}\.\d+)(?: +(\d+))? ([^\s:\]]+):(\d+)\] ?(.*)$")
GLOG_SHORT = re.compile(r"^\[?([EWIF]) ([\w.]+\.(?:cpp|cc|h|hpp|c|ts|py)):(\d+)\] ?(.*)$")
PY_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)): ?(.*)$")
MINDIE = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[.,:](\d+)\] \[(\w+)\] \[(\d+)\] \[([^\]:]+):(\d+)\] ?(.*)$")
PYLOG = re.compile(
    r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3}) - (\S+) - (CRITICAL|ERROR|WARNING|INFO|DEBUG) - (?:([\w.]+):(\d+) - )?(.*)$"
)
LOGURU = re.compile(r"^(?:[\w.-]+\s+\|\s+)?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\.(\d+) \| (\w+)\s*\| ([\w.<>]+):([\w<>]+):(\d+) \| ?(.*)$")
DMESG = re.compile(r"^\[\s*(\d+\.\d+)\] (.*)$")
DMESG_MODULE = re.compile(r"^\[ascend\] \[(\w+)\]")
APP = re.compile(r"^\[(ERROR|WARN|WARNING|INFO|DEBUG|EVENT)\]\s*(.*)$")

# error codes: CANN 6-character codes, torch_npu ERRxxxxx, ACL/runtime 6-digit codes in the contexts they are printed in
CODES = re.compile(r"(?<![A-Za-z0-9_])(" + CANN_CODE + r"|ERR\d{5})(?![A-Za-z0-9_])")
ACL_CODE = re.compile(
    r"(?:err(?:or)? ?code(?: is)?|retCode|ret|runtime result|rtRet|result|failed)[ \t]{0,8}(?:is[ \t]{1,8})?(?:[:=][ \t]{0,8})?"
    r"\[?(\d{6})(?!\d|\.\d)",
    re.IGNORECASE,
)
_CODE_HINT = re.compile(r"[EWI][0-9A-Z]\d{4}|ERR\d{5}|\d{6}")

# content after plog's [file:line]: RUNTIME "6219 ProcLogicCqReport:", HCCL "[36818][Init]", TDT "[OpenProcess][tid:947062]",
# PROFILING " >>> (tid:947062)"
_RT_TID = re.compile(r"^(\d+) (\w+):")
_BRACKET_TID = re.compile(r"^\s*\[(\d+)\]")
_TDT = re.compile(r"^\[(\w+)\]\[tid:(\d+)\]")
_PROF_TID = re.compile(r"^ >>> \(tid:(\d+)\)")
_FUNC_FILE_LINE = re.compile(r"\[FUNC:(\w+)\]\[FILE:([^\]]+)\]\[LINE:(\d+)\]")
_DEVICE_IN_TEXT = re.compile(r"device\((?:chipId:)?(\d+)|\bdevice_id=(\d+)|\bdeviceId[=\[](\d+)|\bdevId[:=] ?(\d+)")
_RANK_IN_TEXT = re.compile(r"\[Rank (\d+)\]")


_CUT_NOTE = re.compile(r" \[\.\.\. ([\d,]+) more characters cut by npudiag\]$")


def cap_message(msg: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A record's message of at most ``limit`` characters and a note of how many were cut (counting an
    earlier cut of the same text): one runaway record cannot hold the memory of a whole log."""
    if len(msg) <= limit:
        return msg
    earlier = 0
    if (m := _CUT_NOTE.search(msg[-64:])) is not None:
        earlier = int(m.group(1).replace(",", ""))
        msg = msg[: len(msg) - (64 - m.start()) if len(msg) > 64 else m.start()]
    return msg[:limit] + f" [... {len(msg) - limit + earlier:,} more characters cut by npudiag]"


def error_codes(text: str) -> list[str]:
    """Distinct codes in order: CANN (EZ9999, EI0002...), torch_npu (ERR01100) and ACL 6-digit codes in known contexts."""
    if not _CODE_HINT.search(text):
        return []
    found: dict[str, None] = {}
    for m in CODES.finditer(text.replace("\\n", "\n")):
        found[m.group(1)] = None
    for m in ACL_CODE.finditer(text):
        code = m.group(1)
        if code[0] in "12345":
            found[code] = None
    return list(found)


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
            int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), int(text[14:16]), int(text[17:19]),
            int(text[20:23]) * 1000 + int(text[24:27]),
        )  # fmt: skip
    except ValueError:
        return None


def _time(date_time: str, frac: str = "", sep: str = " ") -> datetime | None:
    try:
        t = datetime.strptime(date_time, f"%Y-%m-%d{sep}%H:%M:%S")
    except ValueError:
        return None
    if frac:
        t = t.replace(microsecond=int(frac[:6].ljust(6, "0")))
    return t


@dataclass
class _Record:
    line: int
    fmt: str
    level: str | None = None
    module: str | None = None
    timestamp: datetime | None = None
    pid: int | None = None
    process: str | None = None
    device_id: int | None = None
    rank: int | None = None
    src_file: str | None = None
    src_line: int | None = None
    thread_id: int | None = None
    function: str | None = None
    parts: list[str] = field(default_factory=list)
    in_traceback: bool = False


@dataclass
class LogContext:
    """What the file's path says about its records (applied where a record does not say itself)."""

    file: str
    origin: str = "console"
    device_id: int | None = None
    rank: int | None = None
    pid: int | None = None


class LogParser:
    """Feed lines, take Arrow batches. ``feed`` is a plain loop over regexes anchored at the line start,
    tried only when the first character can begin that form."""

    def __init__(self, ctx: LogContext, batch_rows: int = BATCH_ROWS, vectorised: bool = True) -> None:
        self.ctx = ctx
        self.vectorised = vectorised
        self.batch_rows = batch_rows
        self._cols: dict[str, list] = {f.name: [] for f in LOG_EVENTS}
        self._chars = 0  # message characters in the open batch
        self._cur: _Record | None = None
        self.lines = 0
        self.records = 0

    # -- records -------------------------------------------------------------------------------
    def _open(self, rec: _Record, text: str) -> None:
        self._close()
        rec.parts.append(text)
        self._cur = rec

    def _continue(self, lineno: int, text: str) -> None:
        cur = self._cur
        if cur is None or len(cur.parts) >= MAX_CONTINUATION_LINES:
            self._open(_Record(lineno, "text"), text)
            return
        cur.parts.append(text)

    def _close(self) -> None:
        rec = self._cur
        if rec is None:
            return
        self._cur = None
        msg = cap_message("\n".join(rec.parts))
        ctx = self.ctx
        if rec.device_id is None:
            m = _DEVICE_IN_TEXT.search(msg) if rec.fmt != "plog" or ctx.device_id is None else None
            rec.device_id = next((int(g) for g in m.groups() if g is not None), None) if m else ctx.device_id
        if rec.rank is None:
            m = _RANK_IN_TEXT.search(msg)
            rec.rank = int(m.group(1)) if m else ctx.rank
        if rec.src_file is None and (m := _FUNC_FILE_LINE.search(msg)):
            rec.function, rec.src_file, rec.src_line = m.group(1), m.group(2), int(m.group(3))
        c = self._cols
        c["file"].append(ctx.file)
        c["line"].append(rec.line)
        c["origin"].append(ctx.origin)
        c["format"].append(rec.fmt)
        c["device_id"].append(rec.device_id)
        c["rank"].append(rec.rank)
        c["pid"].append(rec.pid if rec.pid is not None else ctx.pid)
        c["process"].append(rec.process)
        c["level"].append(rec.level)
        c["module"].append(rec.module)
        c["timestamp"].append(rec.timestamp)
        c["src_file"].append(rec.src_file)
        c["src_line"].append(rec.src_line)
        c["thread_id"].append(rec.thread_id)
        c["function"].append(rec.function)
        c["message"].append(msg)
        self._chars += len(msg)
        c["error_codes"].append(error_codes(msg))
        self.records += 1

    def _batch(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(self._cols, schema=LOG_EVENTS)
        self._cols = {f.name: [] for f in LOG_EVENTS}
        self._chars = 0
        return batch

    # -- lines ---------------------------------------------------------------------------------
    def feed(self, lines: Iterable[str]) -> Iterator[pa.RecordBatch]:
        """Lines are buffered into chunks cut just before a plog header, so a chunk of pure plog can
        take the vectorised path and a record never straddles two chunks. Vectorised chunks run on a
        worker thread (pyarrow's kernels release the GIL) while the next chunk is read; at most two
        are in flight, so memory stays bounded, and results are taken in order."""
        from npudiag.formats.plog_fast import parse_plog_chunk  # it builds on this module

        pending: deque[tuple[Future[pa.RecordBatch | None] | None, list[str], int]] = deque()
        pool: ThreadPoolExecutor | None = None  # started at the first full chunk: a small file is parsed line by line
        try:
            buf: list[str] = []
            buf_chars = 0
            start = self.lines + 1
            for raw in lines:
                self.lines += 1
                line = raw.rstrip("\r\n")
                if len(line) > MAX_MESSAGE_CHARS:  # no message keeps more: every later pass reads less
                    line = cap_message(line)
                if not line.isascii():
                    line = _valid_utf8(line)
                buf.append(line)
                buf_chars += len(line)
                if len(buf) >= CHUNK_LINES or buf_chars >= CHUNK_CHARS:
                    if pool is None and self.vectorised:
                        pool = ThreadPoolExecutor(max_workers=2)
                    cut = next((i for i in range(len(buf) - 1, 0, -1) if buf[i].startswith("[") and PLOG.match(buf[i])), len(buf))
                    chunk, buf = buf[:cut], buf[cut:]
                    buf_chars = sum(len(x) for x in buf)
                    fut = pool.submit(parse_plog_chunk, chunk, start, self.ctx) if pool and chunk[0].startswith("[") else None
                    pending.append((fut, chunk, start))
                    start += cut
                    while len(pending) > 3:
                        yield from self._resolve(*pending.popleft())
            if buf:
                big = pool is not None and len(buf) >= MIN_VECTOR_LINES
                fut = pool.submit(parse_plog_chunk, buf, start, self.ctx) if big and buf[0].startswith("[") else None
                pending.append((fut, buf, start))
            while pending:
                yield from self._resolve(*pending.popleft())
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)

    def _resolve(self, fut: Future[pa.RecordBatch | None] | None, lines: list[str], start: int) -> Iterator[pa.RecordBatch]:
        fast = fut.result() if fut is not None else None
        if fast is not None:
            self._close()
            if self._cols["file"]:
                yield self._batch()
            self.records += fast.num_rows
            yield fast
            return
        for i, line in enumerate(lines):
            if "\\n" in line and not line.startswith("["):
                for sub in line.replace('\\"', '"').split("\\n"):
                    self._line(start + i, sub)
            else:
                self._line(start + i, line)
            if len(self._cols["file"]) >= self.batch_rows or self._chars >= BATCH_CHARS:
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
                line = line[m.end() :]
        first = line[0] if line else ""
        if first == "[" and "] " in line and self._plog(n, line, rank):
            return
        rec = self._console(n, line, first)
        if rec is not None:
            if rank is not None:
                rec.rank = rank
            return
        cur = self._cur
        if cur is not None and cur.in_traceback and (m := PY_EXCEPTION.match(line.strip())):
            cur.in_traceback = False
            cur.parts.insert(0, line.strip())
            cur.level = "ERROR"
            return
        if cur is not None and cur.in_traceback:
            cur.parts.append(line)
            return
        if not line[:1].isspace() and PY_EXCEPTION.match(line):
            self._open(_Record(n, "python", level="ERROR", module="PYTHON", rank=rank), line)
            return
        self._continue(n, line)

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
                pid=int(m.group(3)),
                process=m.group(4),
                timestamp=_plog_time(m.group(5)),
                src_file=m.group(6),
                src_line=int(m.group(7)) if m.group(7) else None,
                rank=rank,
            )
            if (t := _RT_TID.match(content)) is not None:
                rec.thread_id, rec.function = int(t.group(1)), t.group(2)
            elif (t := _TDT.match(content)) is not None:
                rec.function, rec.thread_id = t.group(1), int(t.group(2))
            elif (t := _BRACKET_TID.match(content)) is not None or (t := _PROF_TID.match(content)) is not None:
                rec.thread_id = int(t.group(1))
            self._open(rec, content.strip())
        return True

    def _console(self, n: int, line: str, first: str) -> _Record | None:
        rec: _Record | None = None
        if first in "EWI" and (m := CANN_LINE.match(line)) and (m.group("ts") or m.group("pid1") or m.group("pid2") or ":" in line[6:8]):
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
            self._open(rec, line)
        elif first == "[":
            if (m := TORCH_NPU.match(line)) is not None:
                rank_id = int(m.group(5))
                rec = _Record(
                    n,
                    "torch_npu",
                    level=LEVELS[m.group(1)],
                    module=m.group(7),
                    timestamp=_time(m.group(2), sep="-"),
                    pid=int(m.group(3)),
                    device_id=int(m.group(4)),
                    rank=rank_id if rank_id >= 0 else None,
                )
            elif (m := GLOG.match(line)) is not None:
                rec = _Record(n, "glog", level=GLOG_LEVELS[m.group(1)], src_file=m.group(5), src_line=int(m.group(6)))
                if m.group(4):
                    rec.thread_id = int(m.group(4))
            elif (m := GLOG_SHORT.match(line)) is not None:
                rec = _Record(n, "glog", level=GLOG_LEVELS[m.group(1)], src_file=m.group(2), src_line=int(m.group(3)))
            elif (m := MINDIE.match(line)) is not None:
                rec = _Record(
                    n,
                    "mindie",
                    level=LEVELS.get(m.group(3).upper(), m.group(3).upper()),
                    timestamp=_time(m.group(1), m.group(2)),
                    thread_id=int(m.group(4)),
                    src_file=m.group(5),
                    src_line=int(m.group(6)),
                )
            elif (m := DMESG.match(line)) is not None:
                mod = DMESG_MODULE.match(m.group(2))
                rec = _Record(n, "dmesg", module=mod.group(1).upper() if mod else "KERNEL")
                low = m.group(2).lower()
                rec.level = "ERROR" if ("error" in low or "fail" in low) else "INFO"
            elif (m := APP.match(line)) is not None:
                rec = _Record(n, "app", level=LEVELS[m.group(1)])
            if rec is not None:
                self._open(rec, line)
        elif first == "T" and PY_TRACEBACK.match(line):
            rec = _Record(n, "python", level="ERROR", module="PYTHON", in_traceback=True)
            self._open(rec, line)
        elif first in "EWIF" and (m := GLOG_SHORT.match(line)) is not None:
            rec = _Record(n, "glog", level=GLOG_LEVELS[m.group(1)], src_file=m.group(2), src_line=int(m.group(3)))
            self._open(rec, line)
        elif first.isdigit() and (m := PYLOG.match(line)) is not None:
            rec = _Record(
                n, "python_logging", level=LEVELS.get(m.group(4), "ERROR"), module=m.group(3), timestamp=_time(m.group(1), m.group(2))
            )
            if m.group(5):
                rec.src_file, rec.src_line = m.group(5), int(m.group(6))
            self._open(rec, line)
        elif (m := LOGURU.match(line)) is not None:
            rec = _Record(
                n, "python_logging", level=LEVELS.get(m.group(3).upper(), m.group(3).upper()), timestamp=_time(m.group(1), m.group(2))
            )
            rec.src_file, rec.function, rec.src_line = m.group(4), m.group(5), int(m.group(6))
            self._open(rec, line)
        return rec


def parse_text(text: str, ctx: LogContext | None = None, vectorised: bool = True) -> pa.Table:
    """A whole text at once (tests, short pasted excerpts)."""
    parser = LogParser(ctx or LogContext("-"), vectorised=vectorised)
    batches = list(parser.parse(text.splitlines()))
    return pa.Table.from_batches(batches, schema=LOG_EVENTS)
