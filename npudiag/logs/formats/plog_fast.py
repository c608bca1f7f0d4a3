"""The vectorised path for the plog records of a chunk: a record header and its plain continuations.

Real plog / device-log files are millions of lines in one format, so they are parsed a chunk at
a time with pyarrow's RE2 kernels (one pass per field) instead of a Python loop per line. A record
that holds anything else (a console form or ``[rankN]:`` prefix on a continuation line, two headers on
one line, a literal ``\\n``, a runaway of continuation lines), and the lines before the chunk's first
header, go through the line-by-line parser, which gives the same rows: each such record is a range of
the chunk from its header to the next header, so a rare line costs its own record, never the chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.logs.formats.log_common import (
    CODE_HINT_RE2,
    DEVICE_HINT,
    DEVICE_IN_TEXT,
    KERNEL_LEVEL,
    MAX_CONTINUATION_LINES,
    MAX_MESSAGE_CHARS,
    PLOG_LEVEL,
    PLOG_TS,
    QUIET_LEVELS,
    RANK_HINTS,
    RANK_IN_TEXT,
    TSCH_CONTENT,
    LogContext,
    cap_message,
    error_codes,
)
from npudiag.schemas import LOG_EVENTS

_HEADER = r"^\[(?:" + PLOG_LEVEL + r")\] [A-Za-z_0-9]+\(-?\d+,[^)]*\):" + PLOG_TS
# the line parser's bounds on the fields (PLOG): checked by this pattern only on lines whose fields are longer
# in bytes (the counted repetitions double the time of a pass over every line)
_HEADER_BOUNDED = r"^\[(?:" + PLOG_LEVEL + r")\] [A-Za-z_0-9]{1,32}\(-?\d{1,10},[^)\n]{0,128}\):" + PLOG_TS
# its fields are cut from the line at the delimiters the pattern fixes (_header_fields): RE2 extracting
# even one group costs four times its match, per line
_TS_CHARS = 27  # PLOG_TS: 2025-08-06-23:09:35.772.604
_SOURCE = r"^ \[[^\]:\n]{1,256}:\d{1,9}\]"  # the header's optional [file:line] after the time, as PLOG bounds it
_HEADER_ANYWHERE = r"\[(?:" + PLOG_LEVEL + r")\] [A-Za-z_0-9]+\(-?\d+,[^)]*\):\d{4}-"
# a line that would start a record of another form (must go through the line parser)
_OTHER_START = (
    r"^(?:\[rank\d+\]:|[EWI][0-9A-Z]\d{4}|\[(?:ERROR|WARN|WARNING|INFO|DEBUG|EVENT)\]|\s*Traceback "
    r"|\[?[EWIF]\d{3,4} |\[?[EWIF] [\w.]+:\d+\]|\[Error\]: |\[Warning\]: |\[Info\]: "
    r"|[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning):|\[\d{4}-\d{2}-\d{2}[ "
    r"-]|\d{4}-\d{2}-\d{2}[ T]|\[\s*\d+\.\d+\]"
    r"|<[0-7]>\[|\[\d+\] \[\d{4}-|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d|\w+\s*:\w+\s*: "
    r"|device-\d+\s|[\w.-]+\s+\| |[A-Za-z][\w.-]*\s*\| )"
)
# a record's thread (and function) at the start of its text, in the line parser's order of forms (one pattern
# each: as one alternation RE2 takes twice as long, the pattern no longer one-pass)
_TID_RT = r"^(?P<tid>\d+) (?P<func>\w+):"
_TID_TDT = r"^\[(?P<func>\w+)\]\[tid:(?P<tid>\d+)\]"
_TID_BRACKET = r"^\s*\[(?P<tid>\d+)\]"
_TID_PROF = r"^ >>> \(tid:(?P<tid>\d+)\)"
_FUNC_FILE_LINE = r"\[FUNC:(?P<f>\w+)\]\[FILE:(?P<file>[^\]]+)\]\[LINE:(?P<line>\d+)\]"


def _field(struct: pa.Array, name: str) -> pa.Array:
    return pc.struct_field(struct, name)


def _has(arr: pa.Array, literal: str) -> pa.Array:
    """Whether each string holds ``literal``: RE2 finds a literal about three times as fast as
    ``match_substring`` (it skips ahead with memchr)."""
    return pc.match_substring_regex(arr, re.escape(literal))


def _where(arr: pa.Array, mask: pa.Array, compute: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """``compute`` run only on the strings ``mask`` (no nulls) selects, its result at their places and null
    elsewhere (a struct's fields too: ``pc.struct_field`` keeps the struct's nulls)."""
    chosen = mask.to_numpy(zero_copy_only=False)
    if not chosen.any():  # none chosen (the usual case for the rarer fields): nulls of the result's type
        return pa.nulls(len(arr), compute(arr.slice(0, 0)).type)
    at = np.cumsum(chosen) - 1  # each chosen string's place among the chosen
    return compute(arr.filter(mask)).take(pa.array(at, mask=~chosen))


def _rank_in_text(message: pa.Array, fallback: int | None) -> pa.Array:
    """The rank a line states (RANK_IN_TEXT's alternatives, run only on lines that could state one), else
    ``fallback`` (the path's): as on the line parser, a stated rank no int32 holds is null, not the path's."""
    n = len(message)
    mask = pc.fill_null(pc.or_(*(_has(message, h) for h in RANK_HINTS)), False)
    out = pa.nulls(n, pa.int32())
    stated = pa.repeat(pa.scalar(False), n)
    if pc.any(mask).as_py():
        found = pc.extract_regex(message.filter(mask), RANK_IN_TEXT)
        values = pc.coalesce(*(_int(_field(found, g), 31) for g in ("r", "r2", "r3")))
        out = pc.replace_with_mask(out, mask, pc.cast(values, pa.int32()))
        stated = pc.replace_with_mask(stated, mask, pc.is_valid(found))
    return out if fallback is None else pc.if_else(stated, out, pa.scalar(fallback, pa.int32()))


def _device_in_text(message: pa.Array, fallback: int | None) -> pa.Array:
    """The device a line states (DEVICE_IN_TEXT), else ``fallback``; a stated id no int32 holds is null."""
    could = pc.fill_null(_has(message, DEVICE_HINT), False)  # a cheap scan first: most messages name no device
    stated = _where(message, could, lambda texts: _field(pc.extract_regex(texts, DEVICE_IN_TEXT), "d"))
    device = pc.cast(_int(stated, 31), pa.int32())
    return device if fallback is None else pc.if_else(pc.is_null(stated), pa.scalar(fallback, pa.int32()), device)


def _func_file_line(message: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The ``[FUNC:f][FILE:file][LINE:n]`` a message states: (file, function, line), null where none."""
    could = pc.fill_null(_has(message, "[FUNC:"), False)  # a cheap scan first: few messages hold one
    found = _where(message, could, lambda texts: pc.extract_regex(texts, _FUNC_FILE_LINE))
    return _field(found, "file"), _field(found, "f"), _int(_field(found, "line"))


def codes_column(message: pa.Array, level: pa.Array | None = None) -> pa.ListArray:
    """Each record's error codes (log_common.error_codes; none at an information level: a catalogue line is
    not an error), read by Python only from the messages an RE2 prefilter (CODE_HINT_RE2, run on the other
    records) marks as able to hold one; empty for the rest. ``level`` None: records of no level."""
    loud = (
        pc.invert(pc.fill_null(pc.is_in(level, pa.array(list(QUIET_LEVELS))), False))
        if level is not None
        else pa.repeat(pa.scalar(True), len(message))
    )
    hint = loud.to_numpy(zero_copy_only=False).copy()
    if hint.any():
        hint[hint] = pc.fill_null(pc.match_substring_regex(message.filter(loud), CODE_HINT_RE2), False).to_numpy(
            zero_copy_only=False
        )
    counts = np.zeros(len(message), np.int32)
    flat: list[str] = []
    at = np.flatnonzero(hint)
    if len(at):
        for i, msg in zip(at.tolist(), message.take(pa.array(at)).to_pylist()):
            found = error_codes(msg)
            counts[i] = len(found)
            flat.extend(found)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.string()))


def _int(a: pa.Array, bits: int = 63) -> pa.Array:
    """Digits as integers; null where empty or where a column of ``bits`` + 1 bits cannot hold the
    number (a line may state a device id of any length: the record is kept, the number left out)."""
    null = pa.scalar(None, pa.string())
    n = pc.cast(pc.if_else(pc.or_(pc.equal(a, ""), pc.greater(pc.utf8_length(a), 18)), null, a), pa.int64())
    if bits < 63:
        n = pc.if_else(
            pc.and_(pc.greater_equal(n, -(1 << bits)), pc.less(n, 1 << bits)), n, pa.scalar(None, pa.int64())
        )
    return n


_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def _timestamps(ts: pa.Array) -> pa.Array:
    """2025-08-06-23:09:35.772.604 (PLOG_TS: ASCII digits at fixed places) -> timestamp[us], null where
    the date or time does not exist (month 13, 30 February, 25 o'clock, second 60, year 0), as the line
    parser's datetime() says: read from the digits' bytes (Arrow's strptime moved 30 February to
    2 March and took second 60)."""
    offsets, data = _buffers(ts)
    digits = (data[offsets[:-1, None] + np.arange(_TS_CHARS)] - 48).T  # one row per place

    def number(*at: int) -> np.ndarray:
        out = digits[at[0]].astype(np.int32)
        for i in at[1:]:
            out = out * 10 + digits[i]
        return out

    year, month, day = number(0, 1, 2, 3), number(5, 6), number(8, 9)
    hour, minute, second = number(11, 12), number(14, 15), number(17, 18)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    known = (month >= 1) & (month <= 12)
    days_in_month = _MONTH_DAYS[np.where(known, month, 1) - 1] + (leap & (month == 2))
    valid = (year >= 1) & known & (day >= 1) & (day <= days_in_month) & (hour <= 23) & (minute <= 59) & (second <= 59)
    months = (year - 1970) * 12 + np.where(known, month, 1) - 1
    days = months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64) + day - 1
    us = ((days * 24 + hour) * 60 + minute) * 60 + second
    us = us * 1_000_000 + (number(20, 21, 22) * 1000 + number(24, 25, 26))
    return pa.array(us, pa.timestamp("us"), mask=~valid)


def _buffers(lines: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's offsets (int64, into the data) and its data bytes, without copies."""
    offsets = np.frombuffer(lines.buffers()[1], np.int32, len(lines) + 1, lines.offset * 4).astype(np.int64)
    data = lines.buffers()[2]
    return offsets, np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)


def _spans(lines: pa.Array, start: np.ndarray, stop: np.ndarray) -> pa.Array:
    """Each line's bytes from ``start`` to ``stop`` (positions in the line, at ASCII delimiters, so each
    span is whole UTF-8): a gather of the spans' bytes alone, for short fields."""
    offsets, data = _buffers(lines)
    width = stop - start
    out = np.zeros(len(lines) + 1, np.int32)
    np.cumsum(width, out=out[1:])
    at = np.repeat(offsets[:-1] + start - out[:-1], width) + np.arange(out[-1])
    return pa.StringArray.from_buffers(len(lines), pa.py_buffer(out), pa.py_buffer(data[at]))


def _after(lines: pa.Array, start: np.ndarray) -> pa.Array:
    """Each line's bytes from ``start`` to its end (a position at an ASCII delimiter): one pass that keeps
    the bytes past each start, for long texts."""
    offsets, data = _buffers(lines)
    data = data[offsets[0] : offsets[-1]]
    widths = np.diff(offsets)
    keep = np.repeat(np.tile([False, True], len(lines)), np.column_stack([start, widths - start]).ravel())
    kept = np.zeros(len(lines) + 1, np.int32)
    np.cumsum(widths - start, out=kept[1:])
    return pa.StringArray.from_buffers(len(lines), pa.py_buffer(kept), pa.py_buffer(data[keep]))


def _first(lines: pa.Array, literal: str) -> np.ndarray:
    return pc.find_substring(lines, literal).to_numpy(zero_copy_only=False).astype(np.int64)


def _header_fields(lines: pa.Array) -> tuple[pa.StructArray, pa.Array, np.ndarray]:
    """The fields of lines that match _HEADER (level, module, pid, process, ts, src_file, src_line; ""
    for a [file:line] the line does not have), each line's text after its header, and whether its fields
    are within the line parser's bounds (_HEADER_BOUNDED). The pattern fixes where they lie: the level
    ends at the first "]", the module at the first "(", the pid at the first "," and the process at the
    first ")" (none of them can hold the later ones), the time is the 27 characters after "):", and a
    [file:line] holds no "]" or ":" before its own."""
    level_end, module_end, pid_end, process_end = (_first(lines, c) for c in "](,)")
    bounded = np.ones(len(lines), bool)
    long = (module_end - level_end - 2 > 32) | (pid_end - module_end - 1 > 10) | (process_end - pid_end - 1 > 128)
    if long.any():  # longer in bytes: the pattern counts characters
        at = np.flatnonzero(long)
        bounded[at] = pc.match_substring_regex(lines.take(pa.array(at)), _HEADER_BOUNDED).to_numpy(zero_copy_only=False)
    ts_start = process_end + 2
    rest = _after(lines, ts_start + _TS_CHARS)
    source = pc.match_substring_regex(rest, _SOURCE).to_numpy(zero_copy_only=False)
    none = np.zeros(len(lines), np.int64)
    if source.any():
        colon, shut = np.where(source, _first(rest, ":"), 0), np.where(source, _first(rest, "]"), 0)
        src_file, src_line = _spans(rest, np.where(source, 2, 0), colon), _spans(rest, colon + source, shut)
        content = _after(rest, shut + source)
    else:
        src_file = src_line = _spans(rest, none, none)
        content = rest
    fields = {
        "level": _spans(lines, none + 1, level_end),
        "module": _spans(lines, level_end + 2, module_end),
        "pid": _spans(lines, module_end + 1, pid_end),
        "process": _spans(lines, pid_end + 1, process_end),
        "ts": _spans(lines, ts_start, ts_start + _TS_CHARS),
        "src_file": src_file,
        "src_line": src_line,
    }
    return pa.StructArray.from_arrays(list(fields.values()), names=list(fields)), content, bounded


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


Piece = pa.RecordBatch | tuple[int, int]


def parse_plog_chunk(lines: list[str], first_line: int, ctx: LogContext) -> list[Piece]:
    """The chunk's rows in line order: RecordBatches of LOG_EVENTS for its plain plog records, and
    ``(start, end)`` index ranges of ``lines`` that the line parser must read (see the module doc). A
    range always ends before a header, so the line parser's record is complete at its end."""
    arr = pa.array(lines, pa.string())
    header_rows = pc.match_substring_regex(arr, _HEADER)
    is_header = header_rows.to_numpy(zero_copy_only=False)
    hdr_idx = np.flatnonzero(is_header)
    n_lines = len(lines)
    if not len(hdr_idx):
        return [(0, n_lines)]
    fields, content, bounded = _header_fields(arr.filter(header_rows))  # and the text after each header
    if not bounded.all():  # a field longer than the line parser's PLOG allows: not a header line
        is_header[hdr_idx[~bounded]] = False
        hdr_idx = hdr_idx[bounded]
        if not len(hdr_idx):
            return [(0, n_lines)]
        fields, content = fields.filter(pa.array(bounded)), content.filter(pa.array(bounded))
    bad = np.zeros(n_lines, bool)
    bad[: hdr_idx[0]] = True  # before the first header: whatever it is, not a plog record
    text_line = np.zeros(n_lines, bool)  # a runaway record's lines past the cap: one text record each
    cont_line = np.zeros(n_lines, bool)  # the continuation lines with text (a record's blank lines add nothing)
    other = ~is_header
    if other.any():
        cont = arr.filter(pa.array(other))
        odd = pc.or_(
            pc.or_(pc.match_substring_regex(cont, _OTHER_START), _has(cont, "\\n")),
            pc.match_substring_regex(cont, _HEADER_ANYWHERE),
        )
        bad[np.flatnonzero(other)[pc.fill_null(odd, False).to_numpy(zero_copy_only=False)]] = True
        nonblank = pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(cont)), 0).to_numpy(zero_copy_only=False)
        cont_idx = np.flatnonzero(other)[nonblank]
        cont_line[cont_idx] = True
        owner = np.searchsorted(hdr_idx, cont_idx, side="right") - 1
        owner_ok = owner >= 0
        if owner_ok.any():
            counts = np.bincount(owner[owner_ok], minlength=len(hdr_idx))
            runaways = np.flatnonzero(counts >= MAX_CONTINUATION_LINES).tolist()
            indented = _indented(arr, lines) if runaways else None
            for r in runaways:
                _split_runaway(indented, hdr_idx, r, cont_idx[owner == r], bad, text_line)
    # two headers on one line: a header in a header line's text (continuation lines holding one are odd above)
    maybe_two = _has(content, "):").to_numpy(zero_copy_only=False)
    if maybe_two.any():
        two = np.flatnonzero(maybe_two)
        many = pc.match_substring_regex(content.take(pa.array(two)), _HEADER_ANYWHERE).to_numpy(zero_copy_only=False)
        bad[hdr_idx[two[many]]] = True
    if not bad.any() and not text_line.any():
        return [_parse_pure(lines, fields, content, is_header, cont_line, np.arange(n_lines), first_line, ctx)]
    # each bad line's record, from its header to the next header, goes to the line parser
    rec_of = np.cumsum(is_header) - 1  # the record (header ordinal) each line belongs to; -1 before the first
    slow_rec = np.zeros(len(hdr_idx) + 1, bool)  # index 0: the lines before the first header
    slow_rec[rec_of[bad] + 1] = True
    line_slow = slow_rec[rec_of + 1]
    pieces: list[Piece] = []
    tail = _runaway_tails(text_line, is_header, line_slow)
    fast = np.flatnonzero(~line_slow & ~tail)
    batch = None
    if len(fast):
        mine = pa.array(~line_slow[hdr_idx])  # the header rows of the fast lines (a runaway's tail holds none)
        batch = _parse_pure(
            lines, fields.filter(mine), content.filter(mine), is_header[fast], cont_line[fast], fast, first_line, ctx
        )
    texts = np.flatnonzero(text_line & ~line_slow)
    if len(texts):
        rows = _text_rows(arr.take(pa.array(texts)), texts, first_line, ctx)
        batch = (
            rows
            if batch is None
            else pa.Table.from_batches([batch, rows]).sort_by("line").combine_chunks().to_batches()[0]
        )
    starts = (
        batch.column(LOG_EVENTS.get_field_index("line")).to_numpy() - first_line
        if batch is not None
        else np.array([], np.int64)
    )
    edges = np.flatnonzero(np.diff(np.concatenate([[0], line_slow.astype(np.int8), [0]])))
    done = 0
    for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist()):
        cut = int(np.searchsorted(starts, a))
        if batch is not None and cut > done:
            pieces.append(batch.slice(done, cut - done))
        done = max(done, cut)
        pieces.append((a, b))
    if batch is not None and done < batch.num_rows:
        pieces.append(batch.slice(done))
    return pieces


_ASCII_SPACE = np.zeros(256, bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True  # the ASCII characters str.isspace() takes


def _indented(arr: pa.Array, lines: list[str]) -> np.ndarray:
    """Whether each line (``arr``: ``lines`` as Arrow) starts with a character str.isspace() takes: an
    ASCII first byte looked up, a line starting with any other character asked of Python."""
    offsets, data = _buffers(arr)
    has = np.diff(offsets) > 0
    first = np.zeros(len(arr), np.uint8)
    first[has] = data[offsets[:-1][has]]
    out = _ASCII_SPACE[first]
    for i in np.flatnonzero(first >= 0x80).tolist():
        out[i] = lines[i][:1].isspace()
    return out


def _split_runaway(
    indented: np.ndarray, hdr_idx: np.ndarray, r: int, conts: np.ndarray, bad: np.ndarray, text_line: np.ndarray
) -> None:
    """A record past MAX_CONTINUATION_LINES, as the line parser splits it: the header keeps its first
    MAX_CONTINUATION_LINES - 1 lines, every later line opens a text record of its own; an indented line
    there would continue the one before (the line parser's rule), so such a record goes to it whole."""
    later = conts[MAX_CONTINUATION_LINES - 1 :]
    if indented[later[1:]].any():
        bad[hdr_idx[r]] = True
    else:
        text_line[later] = True


def _runaway_tails(text_line: np.ndarray, is_header: np.ndarray, slow: np.ndarray) -> np.ndarray:
    """Every line of a runaway record from its first text line to the next header (its blank lines too),
    so the plog record stops where the line parser stops it."""
    if not text_line.any():
        return text_line
    rec = np.cumsum(is_header)
    first_text = np.full(rec[-1] + 1, np.iinfo(np.int64).max)
    idx = np.flatnonzero(text_line)
    np.minimum.at(first_text, rec[idx], idx)
    return (np.arange(len(is_header)) >= first_text[rec]) & ~is_header & ~slow


def _text_rows(arr: pa.Array, at: np.ndarray, first_line: int, ctx: LogContext) -> pa.RecordBatch:
    """One-line ``text`` records, as the line parser writes a line no form claims: the device, rank and
    [FUNC][FILE][LINE] the text states, its error codes, nothing else."""
    n = len(at)
    message = arr
    src_file, function, src_line = _func_file_line(message)
    null_s, null_i = pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())
    columns = {
        "file": pa.repeat(pa.scalar(ctx.file, pa.string()), n),
        "line": pa.array(at + first_line, pa.int64()),
        "line_count": pa.repeat(pa.scalar(1, pa.int32()), n),
        "origin": pa.repeat(pa.scalar(ctx.origin, pa.string()), n),
        "format": pa.repeat(pa.scalar("text", pa.string()), n),
        "device_id": _device_in_text(message, ctx.device_id),  # a text record always says its own
        "rank": _rank_in_text(message, ctx.rank),
        "pid": pa.repeat(pa.scalar(ctx.pid, pa.int64()), n),
        "process": null_s,
        "level": null_s,
        "module": null_s,
        "timestamp": pa.nulls(n, pa.timestamp("us")),
        "timestamp_no_year": pa.nulls(n, pa.timestamp("us")),
        "src_file": src_file,
        "src_line": src_line,
        "thread_id": null_i,
        "function": function,
        "message": message,
        "error_codes": codes_column(message),
        "prefix": null_s,
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in LOG_EVENTS], schema=LOG_EVENTS)


def _parse_pure(
    lines: list[str],
    h: pa.StructArray,
    content: pa.Array,
    is_header: np.ndarray,
    cont: np.ndarray,
    at: np.ndarray,
    first_line: int,
    ctx: LogContext,
) -> pa.RecordBatch:
    """LOG_EVENTS rows of plain plog records: the chunk's lines ``at`` (which of them are headers and which
    continuation lines with text) start with a header; ``h`` and ``content`` are their header lines' fields
    and texts after them (_header_fields); ``lines`` is the whole chunk, and line numbers stay the file's where
    records of the chunk went to the line parser."""
    hdr_idx = np.flatnonzero(is_header)
    cont_idx = np.flatnonzero(cont)
    owner = np.searchsorted(hdr_idx, cont_idx, side="right") - 1
    message = pc.utf8_trim_whitespace(content)
    if len(cont_idx):
        # join continuation lines onto their record (rare in plog: tables, wrapped messages); only those
        # records' texts go through Python
        extra: dict[int, list[str]] = {}  # each record's continuation lines, joined once (not one + at a time)
        for i, o in zip(at[cont_idx].tolist(), owner.tolist()):
            extra.setdefault(o, []).append(lines[i])
        joined = np.array(sorted(extra), np.int64)
        heads = message.take(pa.array(joined)).to_pylist()
        texts = ["\n".join([head, *extra[o]]) for head, o in zip(heads, joined.tolist())]
        mask = np.zeros(len(message), bool)
        mask[joined] = True
        message = pc.replace_with_mask(message, pa.array(mask), pa.array(texts, pa.string()))
    long = pc.greater(pc.utf8_length(message), MAX_MESSAGE_CHARS)
    if pc.any(long).as_py():
        cut = [cap_message(t) for t in message.filter(long).to_pylist()]  # the long ones only
        message = pc.replace_with_mask(message, long, pa.array(cut, pa.string()))
    n = len(hdr_idx)
    last = hdr_idx.copy()
    if len(owner):
        np.maximum.at(last, owner, cont_idx)
    hdr_line, last_line = at[hdr_idx], at[last]
    tid, func = _thread_and_function(content)
    src_file = pc.if_else(pc.equal(_field(h, "src_file"), ""), pa.scalar(None, pa.string()), _field(h, "src_file"))
    src_line = _int(_field(h, "src_line"))
    module = _field(h, "module")
    level = _field(h, "level")
    bare = pc.is_null(src_file)
    if pc.any(bare).as_py():
        # a record with no [file:line]: the firmware's "17 (cpuid:0) path/x.c:1193 function:" when its text
        # starts so (TSCH writes it), read only on those records, as in the line parser
        fw = _where(content, bare, lambda texts: pc.extract_regex(texts, TSCH_CONTENT))
        use = pc.is_valid(fw)
        src_file = pc.if_else(use, _field(fw, "f"), src_file)
        src_line = pc.if_else(use, _int(_field(fw, "l")), src_line)
        func = pc.if_else(use, _field(fw, "fn"), func)
        tid = pc.if_else(use, pa.scalar(None, pa.int64()), tid)
    is_kernel = pc.equal(module, "KERNEL")
    if pc.any(is_kernel).as_py():

        def kernel_level(texts: pa.Array) -> pa.Array:
            inner = _field(pc.extract_regex(texts, r".*?" + KERNEL_LEVEL), "lv")
            inner = pc.if_else(pc.equal(inner, "WARN"), pa.scalar("WARNING"), inner)
            hw = pc.if_else(_has(texts, "[Hardware Error]"), pa.scalar("ERROR"), pa.scalar(None, pa.string()))
            return pc.coalesce(inner, hw)

        level = pc.coalesce(_where(content, is_kernel, kernel_level), level)
    ffl_file, ffl_func, ffl_line = _func_file_line(message)
    if ffl_file.null_count < len(ffl_file):
        use = pc.and_(pc.is_null(src_file), pc.is_valid(ffl_file))
        func = pc.if_else(use, ffl_func, func)
        src_line = pc.if_else(use, ffl_line, src_line)
        src_file = pc.coalesce(src_file, ffl_file)
    # a plog record takes the path's device without looking (the line parser's rule); its rank it states
    device = (
        pa.array(np.full(n, ctx.device_id, np.int32)) if ctx.device_id is not None else _device_in_text(message, None)
    )
    rank = _rank_in_text(message, ctx.rank)
    columns = {
        "file": pa.repeat(pa.scalar(ctx.file, pa.string()), n),
        "line": pa.array(hdr_line + first_line, pa.int64()),
        "line_count": pa.array(last_line - hdr_line + 1, pa.int32()),
        "origin": pa.repeat(pa.scalar(ctx.origin, pa.string()), n),
        "format": pa.repeat(pa.scalar("plog", pa.string()), n),
        "device_id": device,
        "rank": rank,
        # firmware's -1 ("no process") and a number no column holds are the path's pid, as on the line parser
        "pid": pc.coalesce(
            pc.if_else(pc.less(pid := _int(_field(h, "pid")), 0), pa.scalar(None, pa.int64()), pid),
            pa.scalar(ctx.pid, pa.int64()),
        ),
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
        "error_codes": codes_column(message, level),
        "prefix": pa.nulls(n, pa.string()),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in LOG_EVENTS], schema=LOG_EVENTS)
