"""Stream the events of a Chrome-trace JSON array without loading the document.

msprof_*.json and trace_view.json are one JSON array of event objects and reach hundreds of MB. We
decode one object at a time from a sliding text buffer with ``json.JSONDecoder.raw_decode``, so
memory stays at the buffer size plus what the caller keeps. Both the bare array form and the
``{"traceEvents": [...]}`` object form are accepted.
"""

from __future__ import annotations

import codecs
import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from npudiag.errors import InputError

CHUNK_CHARS = 1 << 22
# one event's text: the largest real ones (a deep Python call stack) are tens of KB; a larger one is
# refused rather than buffered, decoded and copied into tables (a 64 MB name once cost gigabytes)
MAX_EVENT_CHARS = 4 << 20
_WS = " \t\r\n"
_decoder = json.JSONDecoder()


class _Reader:
    def __init__(self, path: Path, progress: Callable[[int], None] | None) -> None:
        self.path = path
        # a gzip-compressed trace (PyTorch's tensorboard_trace_handler writes *.pt.trace.json.gz) is read as it
        # decompresses
        # (closed by iter_events)
        self.fh = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf = ""
        self.pos = 0
        self.consumed = 0  # characters dropped from the front of buf
        self.eof = False
        self.progress = progress

    def offset(self) -> int:
        return self.consumed + self.pos

    def fill(self) -> bool:
        """Append more text; False at end of file."""
        if self.eof:
            return False
        try:
            raw = self.fh.read(CHUNK_CHARS)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a damaged or cut compressed file
            raise InputError(
                self.path, f"not a readable gzip file ({type(exc).__name__})", offset=self.offset()
            ) from None
        if self.progress is not None:
            self.progress(len(raw))
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError:
            raise InputError(self.path, "not UTF-8 text", offset=self.offset()) from None
        if not raw:
            self.eof = True
        if self.pos:
            self.consumed += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        self.buf += text
        return bool(raw) or bool(text)

    def skip_ws(self) -> str:
        """The next non-blank character (not consumed), or '' at end of file."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""


def too_large_event() -> str:
    return (
        f"an event of more than {MAX_EVENT_CHARS >> 20} MiB of text; no real trace event "
        "comes near this (file not read)"
    )


def _decode_value(r: _Reader) -> Any:
    """Decode the JSON value at ``r.pos`` (reading more text as needed) and step past it."""
    while True:
        try:
            obj, end = _decoder.raw_decode(r.buf, r.pos)
            r.pos = end
            return obj
        except json.JSONDecodeError as exc:
            if not r.eof and len(r.buf) - r.pos < MAX_EVENT_CHARS and r.fill():
                continue
            raise InputError(r.path, f"malformed JSON: {exc.msg}", offset=r.consumed + exc.pos) from None


def _open_array(r: _Reader) -> None:
    first = r.skip_ws()
    if first == "[":
        r.pos += 1
        return
    if first == "{":
        # object form: walk the top-level keys; the value of the key "traceEvents" is the array (a
        # "traceEvents" nested inside another key, such as otherData, is not)
        r.pos += 1
        while True:
            ch = r.skip_ws()
            if ch == "}" or ch == "":
                break
            if ch == ",":
                r.pos += 1
                continue
            if ch != '"':
                raise InputError(r.path, f"found {ch!r}; expected a key of the trace object", offset=r.offset())
            key = _decode_value(r)
            if r.skip_ws() != ":":
                raise InputError(r.path, "expected ':' after a key of the trace object", offset=r.offset())
            r.pos += 1
            if key == "traceEvents":
                if r.skip_ws() != "[":
                    raise InputError(r.path, "traceEvents is not an array; expected a Chrome trace", offset=r.offset())
                r.pos += 1
                return
            r.skip_ws()
            _decode_value(r)
        raise InputError(r.path, "JSON object without a traceEvents array; expected a Chrome trace", offset=r.offset())
    if first == "":
        raise InputError(r.path, "empty file; expected a JSON array of trace events", offset=0)
    raise InputError(r.path, f"found {first!r}; expected a JSON array of trace events", offset=r.offset())


def iter_events(path: Path, progress: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """Yield each event object. Raises InputError (with the character offset) on malformed input."""
    r = _Reader(path, progress)
    try:
        _open_array(r)
        expect_value = True
        while True:
            ch = r.skip_ws()
            if ch == "":
                raise InputError(
                    path, "trace ends in the middle of the event array (file cut off?); expected ']'", offset=r.offset()
                )
            if ch == "]":
                return
            if ch == ",":
                if expect_value:
                    raise InputError(path, "unexpected ','; expected an event object", offset=r.offset())
                r.pos += 1
                expect_value = True
                continue
            if not expect_value:
                raise InputError(path, f"found {ch!r}; expected ',' or ']' between events", offset=r.offset())
            while True:
                try:
                    obj, end = _decoder.raw_decode(r.buf, r.pos)
                    break
                except json.JSONDecodeError as exc:
                    # an object split across the buffer end decodes once more text is read;
                    # past MAX_EVENT_CHARS the object is refused, not buffered on
                    if not r.eof and len(r.buf) - r.pos < MAX_EVENT_CHARS and r.fill():
                        continue
                    if len(r.buf) - r.pos >= MAX_EVENT_CHARS:
                        raise InputError(path, too_large_event(), offset=r.offset()) from None
                    where = r.consumed + exc.pos
                    if r.eof:
                        raise InputError(
                            path,
                            (
                                f"trace is cut off or malformed inside an event ({exc.msg}); "
                                "expected a complete JSON object"
                            ),
                            offset=where,
                        ) from None
                    raise InputError(path, f"malformed event JSON: {exc.msg}", offset=where) from None
            r.pos = end
            expect_value = False
            if isinstance(obj, dict):
                yield obj
            # non-object array items are ignored (no real tool writes them)
    finally:
        r.fh.close()
