"""The vectorised path for chunks that are pure plog: every line a record header or a plain continuation.

Real plog / device-log files are millions of lines in one format, so they are parsed a chunk at
a time with pyarrow's RE2 kernels (one pass per field) instead of a Python loop per line. A chunk
that holds anything else (console forms, ``[rankN]:`` prefixes, two headers on one line, literal
``\\n``) returns None and goes through the line-by-line parser, which gives the same rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.logs.formats.log_common import (
    CODE_HINT_RE2,
    DEVICE_IN_TEXT,
    KERNEL_LEVEL,
    MAX_CONTINUATION_LINES,
    MAX_MESSAGE_CHARS,
    PLOG_LEVEL,
    PLOG_TS,
    QUIET_LEVELS,
    RANK_IN_TEXT,
    TSCH_CONTENT,
    LogContext,
    cap_message,
    error_codes,
)
from npudiag.schemas import LOG_EVENTS

_HEADER = (
    r"^\[(?P<level>" + PLOG_LEVEL + r")\] (?P<module>[A-Za-z_0-9]+)\((?P<pid>-?\d+),(?P<process>[^)]*)\):"
    r"(?P<ts>" + PLOG_TS + r")(?: \[(?P<src_file>[^\]:]+):(?P<src_line>\d+)\])?(?P<content>.*)$"
)
_HEADER_ANYWHERE = r"\[(?:" + PLOG_LEVEL + r")\] [A-Za-z_0-9]+\(-?\d+,[^)]*\):\d{4}-"
# a line that would start a record of another form (must go through the line parser)
_OTHER_START = (
    r"^(?:\[rank\d+\]:|[EWI][0-9A-Z]\d{4}|\[(?:ERROR|WARN|WARNING|INFO|DEBUG|EVENT)\]|\s*Traceback "
    r"|\[?[EWIF]\d{3,4} |\[?[EWIF] [\w.]+:\d+\]|\[Error\]: |\[Warning\]: |\[Info\]: "
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning):|\[\d{4}-\d{2}-\d{2}[ -]|\d{4}-\d{2}-\d{2}[ T]|\[\s*\d+\.\d+\]"
    r"|<[0-7]>\[|\[\d+\] \[\d{4}-|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d|\w+\s*:\w+\s*: "
    r"|device-\d+\s|[\w.-]+\s+\| |[A-Za-z][\w.-]*\s*\| )"
)
_TID_RT = r"^(?P<tid>\d+) (?P<func>\w+):"
_TID_TDT = r"^\[(?P<func>\w+)\]\[tid:(?P<tid>\d+)\]"
_TID_BRACKET = r"^\s*\[(?P<tid>\d+)\]"
_TID_PROF = r"^ >>> \(tid:(?P<tid>\d+)\)"
_FUNC_FILE_LINE = r"\[FUNC:(?P<f>\w+)\]\[FILE:(?P<file>[^\]]+)\]\[LINE:(?P<line>\d+)\]"


def _field(struct: pa.Array, name: str) -> pa.Array:
    return pc.struct_field(struct, name)


def _extract_where(arr: pa.Array, literal: str, pattern: str, name: str) -> pa.Array:
    """Group ``name`` of ``pattern``, run only on the rows containing ``literal`` (a cheap substring
    scan first: most plog messages carry none of these fields); null elsewhere."""
    mask = pc.match_substring(arr, literal)
    hits = int(pc.sum(mask).as_py() or 0)
    out = pa.nulls(len(arr), pa.string())
    if hits == 0:
        return out
    values = _field(pc.extract_regex(arr.filter(mask), pattern), name)
    return pc.replace_with_mask(out, mask, values)


def _rank_in_text(message: pa.Array) -> pa.Array:
    """The rank a line states (RANK_IN_TEXT's alternatives), run only on lines that could state one."""
    mask = pc.fill_null(pc.match_substring_regex(message, r"\[Rank |rank\[|\(\d+\)\s*\|"), False)
    out = pa.nulls(len(message), pa.int64())
    if not pc.any(mask).as_py():
        return out
    found = pc.extract_regex(message.filter(mask), RANK_IN_TEXT)
    values = pc.coalesce(*(_int(_field(found, g), 31) for g in ("r", "r2", "r3")))
    return pc.replace_with_mask(out, mask, values)


def _int(a: pa.Array, bits: int = 63) -> pa.Array:
    """Digits as integers; null where empty or where a column of ``bits`` + 1 bits cannot hold the
    number (a line may state a device id of any length: the record is kept, the number left out)."""
    null = pa.scalar(None, pa.string())
    n = pc.cast(pc.if_else(pc.or_(pc.equal(a, ""), pc.greater(pc.utf8_length(a), 18)), null, a), pa.int64())
    if bits < 63:
        n = pc.if_else(pc.and_(pc.greater_equal(n, -(1 << bits)), pc.less(n, 1 << bits)), n, pa.scalar(None, pa.int64()))
    return n


def _timestamps(ts: pa.Array) -> pa.Array:
    """2025-08-06-23:09:35.772.604 -> timestamp[us] (null where the date is impossible)."""
    secs = pc.strptime(pc.utf8_slice_codeunits(ts, 0, 19), format="%Y-%m-%d-%H:%M:%S", unit="us", error_is_null=True)
    ms = pc.cast(pc.utf8_slice_codeunits(ts, 20, 23), pa.int64())
    us = pc.cast(pc.utf8_slice_codeunits(ts, 24, 27), pa.int64())
    total = pc.add(pc.cast(secs, pa.int64()), pc.add(pc.multiply(ms, 1000), us))
    return pc.cast(total, pa.timestamp("us"))


def _thread_and_function(content: pa.Array) -> tuple[pa.Array, pa.Array]:
    tids, funcs = [], []
    for pattern in (_TID_RT, _TID_TDT, _TID_BRACKET, _TID_PROF):
        m = pc.extract_regex(content, pattern)
        tids.append(_field(m, "tid"))
        funcs.append(_field(m, "func") if "func" in pattern else pa.nulls(len(content), pa.string()))
    # the first form that matched wins, as in the line parser
    tid = pc.coalesce(*tids)
    func = pc.if_else(
        pc.is_valid(tids[0]),
        funcs[0],
        pc.if_else(pc.and_(pc.is_null(tids[0]), pc.is_valid(tids[1])), funcs[1], pa.scalar(None, pa.string())),
    )
    return _int(tid), func


def parse_plog_chunk(lines: list[str], first_line: int, ctx: LogContext) -> pa.RecordBatch | None:
    """LOG_EVENTS rows for ``lines`` (line numbers from ``first_line``), or None if this chunk is not pure plog."""
    arr = pa.array(lines, pa.string())
    head = pc.extract_regex(arr, _HEADER)
    is_header = pc.is_valid(head).to_numpy(zero_copy_only=False)
    if not is_header[0]:
        return None
    other = ~is_header
    hdr_idx = np.flatnonzero(is_header)
    if other.any():
        cont = arr.filter(pa.array(other))
        if (
            pc.any(pc.match_substring_regex(cont, _OTHER_START)).as_py()
            or pc.any(pc.match_substring(cont, "\\n")).as_py()
            or pc.any(pc.match_substring_regex(cont, _HEADER_ANYWHERE)).as_py()
        ):
            return None
        nonblank = pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(cont)), 0).to_numpy(zero_copy_only=False)
        cont_idx = np.flatnonzero(other)[nonblank]
        owner = np.searchsorted(hdr_idx, cont_idx, side="right") - 1
        if len(owner) and np.bincount(owner).max() >= MAX_CONTINUATION_LINES:
            return None  # the line parser splits such a runaway record
    else:
        cont_idx = owner = np.array([], np.int64)
    maybe_two = pc.greater(pc.count_substring(arr, "):"), 1)
    if pc.any(maybe_two).as_py() and pc.any(pc.greater(pc.count_substring_regex(arr.filter(maybe_two), _HEADER_ANYWHERE), 1)).as_py():
        return None
    h = head.filter(pa.array(is_header))
    content = _field(h, "content")
    if other.any():
        # join continuation lines onto their record (rare in plog: tables, wrapped messages)
        texts = pc.utf8_trim_whitespace(content).to_pylist()
        extra: dict[int, list[str]] = {}  # each record's continuation lines, joined once (not one + at a time)
        for i, o in zip(cont_idx.tolist(), owner.tolist()):
            extra.setdefault(o, []).append(lines[i])
        for o, more in extra.items():
            texts[o] = "\n".join([texts[o], *more])
        message = pa.array([cap_message(t) if len(t) > MAX_MESSAGE_CHARS else t for t in texts], pa.string())
    else:
        message = pc.utf8_trim_whitespace(content)
        long = pc.greater(pc.utf8_length(message), MAX_MESSAGE_CHARS)
        if pc.any(long).as_py():
            message = pa.array([cap_message(t) if t is not None else None for t in message.to_pylist()], pa.string())
    n = len(hdr_idx)
    last = hdr_idx.copy()
    if len(owner):
        np.maximum.at(last, owner, cont_idx)
    tid, func = _thread_and_function(content)
    src_file = pc.if_else(pc.equal(_field(h, "src_file"), ""), pa.scalar(None, pa.string()), _field(h, "src_file"))
    src_line = _int(_field(h, "src_line"))
    module = _field(h, "module")
    level = _field(h, "level")
    if pc.any(pc.equal(module, "TSCH")).as_py():
        # the firmware's "17 (cpuid:0) path/x.c:1193 function:" where there is no [file:line]
        fw = pc.extract_regex(content, TSCH_CONTENT)
        use = pc.and_(pc.is_null(src_file), pc.is_valid(fw))
        src_file = pc.if_else(use, _field(fw, "f"), src_file)
        src_line = pc.if_else(use, _int(_field(fw, "l")), src_line)
        func = pc.if_else(use, _field(fw, "fn"), pc.if_else(pc.is_valid(fw), pa.scalar(None, pa.string()), func))
        tid = pc.if_else(pc.is_valid(fw), pa.scalar(None, pa.int64()), tid)
    is_kernel = pc.equal(module, "KERNEL")
    if pc.any(is_kernel).as_py():
        inner = _field(pc.extract_regex(content, r".*?" + KERNEL_LEVEL), "lv")
        inner = pc.if_else(pc.equal(inner, "WARN"), pa.scalar("WARNING"), inner)
        hw = pc.if_else(pc.match_substring(content, "[Hardware Error]"), pa.scalar("ERROR"), pa.scalar(None, pa.string()))
        level = pc.if_else(is_kernel, pc.coalesce(inner, hw, level), level)
    ffl_file = _extract_where(message, "[FUNC:", _FUNC_FILE_LINE, "file")
    if ffl_file.null_count < len(ffl_file):
        use = pc.and_(pc.is_null(src_file), pc.is_valid(ffl_file))
        func = pc.if_else(use, _extract_where(message, "[FUNC:", _FUNC_FILE_LINE, "f"), func)
        src_line = pc.if_else(use, _int(_extract_where(message, "[FUNC:", _FUNC_FILE_LINE, "line")), src_line)
        src_file = pc.coalesce(src_file, ffl_file)
    if ctx.device_id is not None:
        device = pa.array(np.full(n, ctx.device_id, np.int32))
    else:
        device = pc.cast(_int(_extract_where(message, "dev", DEVICE_IN_TEXT, "d"), 31), pa.int32())
    rank = pc.cast(_rank_in_text(message), pa.int32())
    if ctx.rank is not None:
        rank = pc.fill_null(rank, ctx.rank)
    loud = pc.invert(pc.fill_null(pc.is_in(level, pa.array(list(QUIET_LEVELS))), False))
    hint = pc.fill_null(pc.and_(loud, pc.match_substring_regex(message, CODE_HINT_RE2)), False)
    hinted = np.flatnonzero(hint.to_numpy(zero_copy_only=False))
    counts = np.zeros(n, np.int32)
    flat: list[str] = []
    if len(hinted):
        for i, msg in zip(hinted.tolist(), message.take(pa.array(hinted)).to_pylist()):
            found = error_codes(msg)
            counts[i] = len(found)
            flat.extend(found)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    codes = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.string()))
    columns = {
        "file": pa.repeat(pa.scalar(ctx.file, pa.string()), n),
        "line": pa.array(hdr_idx + first_line, pa.int64()),
        "line_count": pa.array(last - hdr_idx + 1, pa.int32()),
        "origin": pa.repeat(pa.scalar(ctx.origin, pa.string()), n),
        "format": pa.repeat(pa.scalar("plog", pa.string()), n),
        "device_id": device,
        "rank": rank,
        "pid": pc.if_else(pc.less(pid := _int(_field(h, "pid")), 0), pa.scalar(None, pa.int64()), pid),
        "process": _field(h, "process"),
        "level": level,
        "module": module,
        "timestamp": _timestamps(_field(h, "ts")),
        "timestamp_no_year": pa.nulls(n, pa.timestamp("us")),
        "src_file": src_file,
        "src_line": src_line,
        "thread_id": tid,
        "function": func,
        "message": message,
        "error_codes": codes,
        "prefix": pa.nulls(n, pa.string()),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in LOG_EVENTS], schema=LOG_EVENTS)
