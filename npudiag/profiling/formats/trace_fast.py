"""The fast path of :mod:`trace_json`: the event array decoded by msgspec (C) a piece at a time, and
the columns of the complete events filled a piece at a time with array operations.

It gives the same state as the per-event reader (``trace_json._Reading.event``), field for field;
whatever it cannot vouch for raises :class:`Unsure` and the caller reads the file again event by
event, which also gives the exact error for malformed input. Unsure is raised for: a file that is
not a bare JSON array (the ``{"traceEvents": [...]}`` form), a piece that is not valid JSON or not
an array of objects with object ``args`` (a cut that falls inside a string or a nested array makes
its piece invalid, never a different valid document), numbers beyond a double, and a pid that is
not an int. Real msprof and torch_npu traces take this path throughout.

Pieces are cut where one event object ends and the next begins (``}`` ``,`` ``{``), so memory is a
piece of text, its decoded events and the typed columns kept (about 140 bytes an event).
"""

from __future__ import annotations

import contextlib
import gc
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import wait
from itertools import repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.executors import threads
from npudiag.profiling.formats import jsonstream
from npudiag.profiling.formats import trace_events as te
from npudiag.profiling.formats.torch_ops import MODULE_PREFIX

PIECE_BYTES = 8 << 20
_WINDOW = 1 << 16  # where the last cut of a piece is looked for first
_JSON_WS = b" \t\r\n"
_CUT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_EXACT3 = r"^-?(\d{1,15}|[1-8]\d{15})\.\d{3}$"  # 'digits.ddd' whose digits without the point are the ns and fit int64
MISSING = te.MISSING


class Unsure(Exception):
    """This input is left to the per-event reader."""


# every args key the per-event reader looks at, as attributes a0, a1, ...
_ARG_KEYS = [k for keys in (*te.INT_ARGS.values(), *te.STR_ARGS.values()) for k in keys] + ["correlation_id", "MHz"]
_ATTR = {k: f"a{i}" for i, k in enumerate(_ARG_KEYS)}
_Args = msgspec.defstruct(
    "_Args",
    [(_ATTR[k], Any, msgspec.field(default=None, name=k)) for k in _ARG_KEYS]
    + [
        ("name", Any, msgspec.UNSET),
        ("labels", Any, msgspec.UNSET),
    ],  # absent is not null: M events read a.get("name", "")
    gc=False,
)


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = msgspec.UNSET  # absent reads as "", null as "None"
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: _Args | None = None  # type: ignore[valid-type]


_FIELDS = [attrgetter(f) for f in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")]
_ARGS_ALL = attrgetter(*_ATTR.values())
_ARGS_GET = attrgetter(*(_ATTR[k] for keys in (*te.INT_ARGS.values(), *te.STR_ARGS.values()) for k in keys))
_COL = {k: i for i, k in enumerate(k for keys in (*te.INT_ARGS.values(), *te.STR_ARGS.values()) for k in keys)}
_EMPTY = _Args()
_PH = {"X": 1, "s": 2, "f": 2, "C": 2, "M": 3}
# 1: torch ops, per event; 2: skipped; 3: python functions, per event when a module's forward, else skipped
_CAT = {**dict.fromkeys(te.SKIP_CATS, 2), "cpu_op": 1, "enqueue": 1, "dequeue": 1, "python_function": 3}
NoneType = type(None)


def read(path: Path, make_state: Callable[[], Any], progress: Callable[[int], None] | None = None) -> Any:
    """The reader state for ``path`` (a ``trace_json._Reading``), or Unsure."""
    state = make_state()
    decoder = msgspec.json.Decoder(list[_Event])
    arrow = _ArrowPieces(decoder)
    # nothing made here can form a cycle; the collector walking millions of new objects costs 40 %
    collecting = gc.isenabled()
    gc.disable()
    try:
        with contextlib.closing(_ahead(path, arrow, progress)) as pieces:
            for body, text, parsed in pieces:
                if not body.strip(_JSON_WS):
                    continue
                if not text:
                    raise Unsure  # bytes that are not UTF-8: the per-event reader names the place
                if arrow.fill(state, parsed):
                    state.pieces["arrow"] += 1
                    continue
                state.pieces["msgspec"] += 1
                try:
                    events = decoder.decode(b"[" + body + b"]")
                except msgspec.MsgspecError:
                    raise Unsure from None
                _fill(state, events)
                del events
    finally:
        if collecting:
            gc.enable()
    return state


def _ahead(
    path: Path, arrow: _ArrowPieces, progress: Callable[[int], None] | None
) -> Iterator[tuple[bytes, bool, _Parsed | None]]:
    """The pieces of ``path`` in order, each with whether it is UTF-8 text and what ``arrow.prepare``
    made of it. Two threads prepare the next pieces (pyarrow parses and computes without the GIL)
    while the caller fills the state from the previous one; at most three pieces are in hand."""
    pending: deque = deque()
    pool = threads("trace", 2)
    pieces = _pieces(path, progress)
    try:
        while True:
            while len(pending) < 3 and pieces is not None:
                try:
                    body = next(pieces)
                except StopIteration:
                    pieces = None
                    break
                if body.strip(_JSON_WS):
                    arrow.learn_separator(body)
                    pending.append((body, pool.submit(_prepare, arrow, body)))
                else:
                    pending.append((body, None))
            if not pending:
                return
            body, made = pending.popleft()
            yield (body, *made.result()) if made is not None else (body, True, None)
    finally:  # the pool is the process's: what this file started is cancelled or waited for
        started = [made for _, made in pending if made is not None and not made.cancel()]
        wait(started)


def _prepare(arrow: _ArrowPieces, body: bytes) -> tuple[bool, _Parsed | None]:
    """Whether the piece is UTF-8 text, and what ``arrow.prepare`` makes of it if so. Checked first:
    pyarrow passes invalid UTF-8 inside strings through, and nothing may be made of such a piece
    (pieces are cut at ASCII bytes, so a character is never split between two)."""
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return False, None
    return True, arrow.prepare(body)


def _pieces(path: Path, progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """The text of whole events, in order, about PIECE_BYTES each, without the array's brackets. An
    event longer than jsonstream's MAX_EVENT_CHARS is an InputError at its offset (bounded memory)."""
    done = 0  # bytes of the file before ``buf``
    with open(path, "rb") as fh:

        def more() -> bytes:
            raw = fh.read(PIECE_BYTES)
            if progress is not None:
                progress(len(raw))
            return raw

        buf = more()
        first = len(buf)
        buf = buf[3:] if buf.startswith(b"\xef\xbb\xbf") else buf
        buf = buf.lstrip(_JSON_WS)
        if not buf.startswith(b"["):
            raise Unsure
        buf = buf[1:]
        done = first - len(buf)
        eof = False
        while True:
            if not eof:
                raw = more()
                eof = not raw
                buf += raw
            cut = None
            if not eof:
                for m in _CUT.finditer(buf, max(0, len(buf) - _WINDOW)):
                    cut = m
                if cut is None:
                    for m in _CUT.finditer(buf):
                        cut = m
            if cut is None:
                # one event (no cut in it) longer than the limit: refused, not buffered on
                if len(buf) > jsonstream.MAX_EVENT_CHARS + _WINDOW and (not eof or _CUT.search(buf) is None):
                    raise InputError(path, jsonstream.too_large_event(), offset=done)
                if eof:
                    buf = buf.rstrip(_JSON_WS)
                    if not buf.endswith(b"]"):
                        raise Unsure  # cut off, or more after the array
                    yield buf[:-1]
                    return
                continue  # one event larger than the buffer: read on
            yield buf[: cut.start() + 1]
            done += cut.end() - 1
            buf = buf[cut.end() - 1 :]


def _take(seq: tuple | list, rows: np.ndarray) -> list:
    if len(rows) == len(seq):
        return list(seq)
    if len(rows) == 1:
        return [seq[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(seq)) if len(rows) else []


def _as_dict(e: Any) -> dict:
    """The event as the per-event reader sees it (None and absent read alike, except names)."""
    d = {"ph": e.ph, "cat": e.cat, "pid": e.pid, "tid": e.tid, "ts": e.ts, "dur": e.dur, "id": e.id}
    if e.name is not msgspec.UNSET:
        d["name"] = e.name
    a = e.args
    if a is not None:
        args = {k: v for k, v in zip(_ARG_KEYS, _ARGS_ALL(a)) if v is not None}
        for k in ("name", "labels"):
            v = getattr(a, k)
            if v is not msgspec.UNSET:
                args[k] = v
        d["args"] = args
    return d


def _fill(state: Any, events: list) -> None:
    n = len(events)
    if not n:
        return
    ph, cat, name, pid, tid, ts, dur, args = (list(map(get, events)) for get in _FIELDS)
    if set(map(type, pid)) != {int}:
        raise Unsure
    try:
        pids = np.array(pid, np.int64)
        phk = np.fromiter(map(_PH.get, ph, repeat(0)), np.int8, n)
        catk = np.fromiter(map(_CAT.get, cat, repeat(0)), np.int8, n)
    except (OverflowError, TypeError):  # a pid beyond int64, a list as ph or cat
        raise Unsure from None
    if (pids == MISSING).any():
        raise Unsure
    # events read one at a time, in file order: metadata, flows, counters, torch ops, queues, modules
    per_event = (phk >= 2) | ((phk == 1) & (catk == 1))
    py = np.nonzero((phk == 1) & (catk == 3))[0]
    if len(py):
        per_event[py[np.array([_name(v).startswith(MODULE_PREFIX) for v in _take(name, py)], bool)]] = True
        catk[py] = 2  # the others are skipped like any python function
    one = np.nonzero(per_event)[0]
    skip_before = set(state.skip_pids)
    skipped_at: dict[int, int] = {}  # pid -> position in this piece where its process was found not needed
    for i in one.tolist():
        state.event(_as_dict(events[i]))
        if phk[i] == 3 and len(state.skip_pids) > len(skip_before) + len(skipped_at):
            skipped_at.setdefault(pid[i], i)
    # complete events of the processes kept, filled column-wise
    x = (phk == 1) & (catk != 1)
    sc = np.nonzero(x & (catk == 2))[0]
    if len(sc):
        steps = [_name(v).startswith("ProfilerStep#") for v in _take(name, sc)]
        x[sc[~np.array(steps, bool)]] = False
    if skip_before:
        x &= ~np.isin(pids, np.array(list(skip_before), np.int64))
    if skipped_at:
        at = np.arange(n)
        for p, i in skipped_at.items():
            x &= ~((pids == p) & (at > i))
    rows = np.nonzero(x)[0]
    if not len(rows):
        return
    raw_ts = _take(ts, rows)
    t = _ts_floats(raw_ts)
    bad = np.isnan(t)
    if bad.any():
        state.bad_ts += int(bad.sum())
        rows, t = rows[~bad], t[~bad]
        raw_ts = _take(ts, rows)
        if not len(rows):
            return
    _append(
        state.cols,
        pids[rows],
        _take(tid, rows),
        _take(name, rows),
        _take(cat, rows),
        t,
        raw_ts,
        _take(dur, rows),
        _take(args, rows),
    )


def _append(
    cols: Any, pids: np.ndarray, tid: list, name: list, cat: list, t: np.ndarray, raw_ts: list, dur: list, args: list
) -> None:
    if set(map(type, name)) != {str}:
        name = [_name(v) for v in name]
    if not set(map(type, cat)) <= {str, NoneType}:
        cat = [v if v is None or v.__class__ is str else str(v) for v in cat]
    if args.count(None):
        args = [_EMPTY if a is None else a for a in args]
    values = list(zip(*map(_ARGS_GET, args)))
    ints = {key: _ints(_coalesce([values[_COL[k]] for k in names])) for key, names in te.INT_ARGS.items()}
    strs = {}
    for key, names in te.STR_ARGS.items():
        v = _coalesce([values[_COL[k]] for k in names])
        if not set(map(type, v)) <= {str, NoneType}:
            v = [s if s is None or s.__class__ is str else str(s) for s in v]
        strs[key] = pa.array(v, pa.string())
    cols.append_chunk(
        te.store_chunk(
            pids,
            _ints(tid),
            t,
            _ns(raw_ts, t),
            _floats(dur),
            pa.array(name, pa.string()),
            pa.array(cat, pa.string()),
            ints,
            strs,
        )
    )


def _name(v: object) -> str:
    if v.__class__ is str:
        return v  # type: ignore[return-value]
    return "" if v is msgspec.UNSET else str(v)


def _coalesce(candidates: list) -> list | tuple:
    """Per row, the first candidate that is not None (older and newer CANN name the same arg differently)."""
    out = candidates[0]
    for c in candidates[1:]:
        if not out.count(None):
            break
        if c.count(None) == len(c):
            continue
        out = [a if a is not None else b for a, b in zip(out, c)]
    return out


def _ints(values: list | tuple) -> np.ndarray:
    """int64 as trace_json._code gives them, MISSING for None."""
    if values.count(None) == len(values):
        return np.full(len(values), MISSING, np.int64)
    if set(map(type, values)) <= {int, NoneType}:
        try:
            return pc.fill_null(pa.array(values, pa.int64()), MISSING).to_numpy()
        except (OverflowError, pa.ArrowException):
            pass
    return np.fromiter(map(te.code, values), np.int64, len(values))


def _floats(values: list | tuple) -> np.ndarray:
    """float64 as trace_json._num gives them, NaN for None."""
    if set(map(type, values)) <= {float, int, NoneType}:
        try:
            return pc.fill_null(pa.array(values, pa.float64()), np.nan).to_numpy()
        except (OverflowError, pa.ArrowException):
            pass
    return np.fromiter(map(te.num, values), np.float64, len(values))


def _ts_floats(values: list) -> np.ndarray:
    if set(map(type, values)) == {str}:
        try:
            return pc.cast(pa.array(values, pa.string()), pa.float64()).to_numpy()
        except pa.ArrowException:
            return np.fromiter(map(te.num, values), np.float64, len(values))
    return _floats(values)


def _ns(values: list, t: np.ndarray) -> np.ndarray:
    """Exact ns as trace_json._exact_ns gives them."""
    kinds = set(map(type, values))
    if kinds == {str}:
        text = pa.array(values, pa.string())
        if pc.all(pc.match_substring_regex(text, _EXACT3)).as_py():
            return pc.replace_substring(text, ".", "", max_replacements=1).cast(pa.int64()).to_numpy()
    elif kinds <= {float, int}:
        ok = np.abs(t) < te.NS_LIMIT / 1000.0  # False for NaN
        return np.where(ok, np.rint(np.where(ok, t, 0.0) * 1000.0), MISSING).astype(np.int64)
    return np.fromiter(map(te.exact_ns, values, t.tolist()), np.int64, len(values))


# --- pieces read by pyarrow's JSON reader (C++, on every core) ---------------------------------
# The commas between events become line breaks and the piece is read as JSON lines with a declared
# schema. Arrow refuses what the schema does not say (a string where a number is declared, a number
# beyond int64, a key twice, a NaN literal), and a line break put inside a string or a nested array
# leaves lines that are not JSON, so a piece it reads is read right; any refusal leaves the piece,
# untouched, to msgspec. Events the per-event reader handles one at a time (metadata, flows,
# counters, torch ops, queues) are decoded from their own lines by msgspec.
_BANDWIDTH = "bandwidth(GB/s)"  # a number in real traces (read as text by the per-event reader; the same float)


def _arrow_schema(ts: pa.DataType) -> pa.Schema:
    args = [pa.field(k, pa.int64()) for keys in te.INT_ARGS.values() for k in keys]
    args += [
        pa.field(k, pa.float64() if k == _BANDWIDTH else pa.string()) for keys in te.STR_ARGS.values() for k in keys
    ]
    return pa.schema(
        [
            ("ph", pa.string()),
            ("cat", pa.string()),
            ("name", pa.string()),
            ("pid", pa.int64()),
            ("tid", pa.int64()),
            ("ts", ts),
            ("dur", pa.float64()),
            ("args", pa.struct(args)),
        ]
    )


_PH_CODES = pa.array(["X", "s", "f", "C", "M"])
_TORCH_CATS = pa.array(["cpu_op", "enqueue", "dequeue"])
_SKIP = pa.array(sorted(te.SKIP_CATS))


class _Parsed(NamedTuple):
    """A piece as far as it can be read without the reader state: made on the reading thread."""

    pids: np.ndarray  # every event's pid
    ph: np.ndarray  # index of each event's ph in _PH_CODES, -1 for another
    one: np.ndarray  # events read one at a time (metadata, flows, counters, torch ops, queues)
    one_text: bytes  # their text, as a JSON array
    rows: np.ndarray  # complete events that go to the store unless their process is skipped
    bad: np.ndarray  # of those, the ones whose ts is no number (left out of chunk)
    chunk: pa.Table | None  # the store rows of rows[~bad]


class _ArrowPieces:
    def __init__(self, decoder: msgspec.json.Decoder) -> None:
        import pyarrow.json as pj

        self.pj = pj
        self.decoder = decoder
        # torch_npu and msprof >= 8 write ts as text, older msprof as a number; msprof 8 pretty-prints
        # (events over several lines); the combination that last worked is tried first
        self.options = [
            pj.ParseOptions(explicit_schema=_arrow_schema(t), unexpected_field_behavior="ignore", newlines_in_values=nl)
            for nl in (False, True)
            for t in (pa.string(), pa.float64())
        ]
        self.read = pj.ReadOptions(block_size=1 << 20)
        self.sep: bytes | None = None
        self.mixed = False  # the first piece has separators other than sep: cut by the pattern
        self.failed = 0  # pieces in a row this path left to msgspec; after two it stops trying
        self._order = threading.Lock()  # pieces are prepared on two threads

    def learn_separator(self, body: bytes) -> None:
        """The text between events, from the first piece (before any piece is prepared); when that
        piece has more than one kind of separator (torch_npu writes ``}, {`` and, where it joined
        two parts, ``},{``), every piece is cut by the pattern at once instead of parsed twice."""
        if self.sep is None:
            found = _CUT.search(body)
            self.sep = found.group(0) if found else b"}, {"
            self.mixed = _CUT.search(body.replace(self.sep, b"")) is not None

    def _parse(self, lines: bytes) -> pa.Table | None:
        for i, opts in enumerate(list(self.options)):
            try:
                table = self.pj.read_json(pa.BufferReader(lines), read_options=self.read, parse_options=opts)
            except (pa.ArrowException, ValueError):
                continue
            if i:
                with self._order:
                    self.options.remove(opts)
                    self.options.insert(0, opts)
            return table
        return None

    def prepare(self, body: bytes) -> _Parsed | None:
        """What of the piece does not depend on the events before it: parsed, the events sorted, the
        store rows of its complete events made. Runs on the reading thread, a piece ahead of
        ``fill``; None when the piece is not for this path (or this path has stopped trying)."""
        if self.failed >= 2:
            return None
        body = body.strip(_JSON_WS)
        # the file's own separator replaced by one line break more than its length (a plain replace is
        # faster than the pattern, and the count falls out of the lengths); any other separator in
        # the piece leaves two events on a line, which the row count below catches
        sep = self.sep or b"}, {"  # learnt from the first piece, before it was prepared
        t = None
        if not self.mixed:
            lines = body.replace(sep, b"}" + b"\n" * (len(sep) - 1) + b"{")
            count = len(lines) - len(body)
            t = self._parse(lines)
            split = lambda b: b.split(sep)  # noqa: E731
            del lines
        if t is None or t.num_rows != count + 1:
            lines, count = _CUT.subn(b"}\n{", body)
            t, split = self._parse(lines), _CUT.split
            del lines
        if t is None or t.num_rows != count + 1 or t["pid"].null_count:
            return None  # two events on a line, or a pid that is no int: not for this path
        # left in pyarrow's blocks: combining them copies the piece; only the rows kept are copied, once
        n = t.num_rows
        pids = t["pid"].to_numpy()
        if (pids == MISSING).any():
            return None
        ph = pc.fill_null(pc.index_in(t["ph"], _PH_CODES), -1).to_numpy()
        torch = pc.fill_null(pc.is_in(t["cat"], _TORCH_CATS), False)
        module = pc.and_(pc.equal(t["cat"], "python_function"), pc.starts_with(t["name"], MODULE_PREFIX))
        torch = pc.or_(torch, pc.fill_null(module, False)).to_numpy(zero_copy_only=False)
        x = (ph == 0) & ~torch
        one = np.nonzero((ph > 0) | ((ph == 0) & torch))[0]
        name = t["name"]
        if name.null_count and (pc.is_null(name).to_numpy(zero_copy_only=False) & x).any():
            return None  # an absent name reads "", a null one "None": msgspec tells them apart
        one_text = b"[" + b",".join(_event_texts(_take(split(body), one), one, n)) + b"]" if len(one) else b"[]"
        skipped = pc.fill_null(pc.is_in(t["cat"], _SKIP), False)
        skipped = pc.and_(skipped, pc.invert(pc.fill_null(pc.starts_with(name, "ProfilerStep#"), False)))
        x &= ~skipped.to_numpy(zero_copy_only=False)
        rows = np.nonzero(x)[0]
        no = np.zeros(0, bool)
        if not len(rows):
            return _Parsed(pids, ph, one, one_text, rows, no, None)
        k = t if len(rows) == n else t.take(rows)
        del t
        ts = k["ts"]
        if pa.types.is_string(ts.type):
            try:
                sec = pc.cast(ts, pa.float64()).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid:
                sec = np.fromiter(map(te.num, ts.to_pylist()), np.float64, len(ts))
        else:
            sec = ts.to_numpy(zero_copy_only=False)
        bad = np.isnan(sec)
        if bad.any():
            good = np.nonzero(~bad)[0]
            k, ts, sec = k.take(good), ts.take(good), sec[good]
            if not k.num_rows:
                return _Parsed(pids, ph, one, one_text, rows, bad, None)
        if pa.types.is_string(ts.type):
            if pc.all(pc.match_substring_regex(ts, _EXACT3)).as_py():
                ns = pc.replace_substring(ts, ".", "", max_replacements=1).cast(pa.int64()).to_numpy()
            else:
                ns = np.fromiter(map(te.exact_ns, ts.to_pylist(), sec.tolist()), np.int64, len(ts))
        else:
            ok = np.abs(sec) < te.NS_LIMIT / 1000.0
            ns = np.where(ok, np.rint(np.where(ok, sec, 0.0) * 1000.0), MISSING).astype(np.int64)
        args = k["args"]

        def arg(key: str) -> pa.ChunkedArray:
            return pc.struct_field(args, key)

        rows_kept = k.num_rows

        def first(names: tuple[str, ...]) -> pa.ChunkedArray | None:
            # the first non-null of the candidates (most are absent from a whole piece); None: none
            present = [c for c in (arg(a) for a in names) if c.null_count < rows_kept]
            return None if not present else present[0] if len(present) == 1 else pc.coalesce(*present)

        ints = {}
        for key, names in te.INT_ARGS.items():
            v = first(names)
            ints[key] = (
                np.full(rows_kept, MISSING, np.int64) if v is None else pc.fill_null(v, MISSING) if v.null_count else v
            )
        strs = {}
        for key, names in te.STR_ARGS.items():
            v = first(names)
            if v is None:
                strs[key] = schemas.nulls(rows_kept, pa.string())
            else:
                strs[key] = v if pa.types.is_string(v.type) else pc.cast(v, pa.string())
        chunk = te.store_chunk(
            k["pid"],
            pc.fill_null(k["tid"], MISSING),
            sec,
            ns,
            pc.fill_null(k["dur"], np.nan),
            k["name"],
            k["cat"],
            ints,
            strs,
        )
        return _Parsed(pids, ph, one, one_text, rows, bad, chunk)

    def fill(self, state: Any, parsed: _Parsed | None) -> bool:
        """Fill ``state`` from one prepared piece; False, with ``state`` untouched, when the piece is
        left to msgspec."""
        if self.failed >= 2:
            return False
        if parsed is None:
            self.failed += 1
            return False
        events = []
        if len(parsed.one):
            try:
                events = self.decoder.decode(parsed.one_text)
            except msgspec.MsgspecError:
                self.failed += 1
                return False
        self.failed = 0
        # from here on the piece is read by this path: events in file order, then the store rows of
        # the complete events whose process is still wanted
        pids, ph, rows = parsed.pids, parsed.ph, parsed.rows
        skip_before = set(state.skip_pids)
        skipped_at: dict[int, int] = {}
        for i, e in zip(parsed.one.tolist(), events):
            state.event(_as_dict(e))
            if ph[i] == 4 and len(state.skip_pids) > len(skip_before) + len(skipped_at):
                skipped_at.setdefault(e.pid, i)
        if not len(rows):
            return True
        keep = None
        if skip_before or skipped_at:
            p = pids[rows]
            keep = ~np.isin(p, np.array(list(skip_before), np.int64)) if skip_before else np.ones(len(rows), bool)
            for pid, i in skipped_at.items():
                keep &= ~((p == pid) & (rows > i))
        bad = parsed.bad
        state.bad_ts += int(bad.sum() if keep is None else (bad & keep).sum())
        chunk = parsed.chunk
        if chunk is not None and keep is not None and not keep.all():
            chunk = chunk.filter(pa.array(keep[~bad]))  # bad has a flag for each of rows
        if chunk is not None and chunk.num_rows:
            state.cols.append_chunk(chunk)
        return True


def _event_texts(parts: list[bytes], rows: np.ndarray, n: int) -> list[bytes]:
    """Part i of a piece split at its separators is event i less the '{' the separator before it took
    (i > 0) and the '}' the one after it took (i < n - 1)."""
    return [(b"{" if i else b"") + part + (b"}" if i < n - 1 else b"") for part, i in zip(parts, rows.tolist())]
