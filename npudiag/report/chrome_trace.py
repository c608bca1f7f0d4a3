"""A Chrome trace (Perfetto, chrome://tracing, MindStudio Insight) of the tables plus npudiag's marks.

When the profile came with trace JSON files, their events are copied through unchanged; otherwise
(CSV or .db input) the timeline is rebuilt from the tables: device tasks per rank and stream, host
API calls per thread. Either way a ``npudiag`` process is added whose tracks mark exposed copies,
device idle gaps and each finding's worst ranges. ``ts`` are written as strings with 3 decimals,
as msprof does, so absolute microsecond times keep their precision."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from npudiag.output import escape_invisible, strict, write_file

_NPUDIAG_PID = 1


def _ts(start_ns: int | None, start_us: float) -> str:
    if start_ns is not None:
        return f"{start_ns // 1000}.{start_ns % 1000:03d}"
    return f"{start_us:.3f}"


def _write_events(fh: BinaryIO, events, notes: list[str]) -> None:
    """A JSON array of ``events``, written in chunks of about 1 MB. Strict JSON: a number JSON cannot
    hold (NaN, Infinity, 1e400 read from an input) is written as null and its place noted in
    ``notes``; control, bidi and zero-width characters of input text are \\u-escaped."""
    chunk: list[str] = []
    size = 0
    lead = "["
    for i, e in enumerate(events):
        try:
            text = json.dumps(e, ensure_ascii=False, allow_nan=False)
        except ValueError:
            found: list[str] = []
            text = json.dumps(strict(e, f"event {i}", found), ensure_ascii=False, allow_nan=False)
            notes.extend(found)
        chunk.append(escape_invisible(text))
        size += len(text)
        if size > 1 << 20:
            fh.write((lead + ",\n".join(chunk)).encode("utf-8"))
            chunk, size, lead = [], 0, ",\n"
    if chunk:
        fh.write((lead + ",\n".join(chunk)).encode("utf-8"))
    elif lead == "[":
        fh.write(b"[")
    fh.write(b"]\n")


def _events(tables: dict[str, pa.Table], marks: pa.Table, findings: list[dict[str, Any]], originals: Iterator[dict[str, Any]] | None):
    named: set[tuple[int, int]] = set()

    def meta(pid: int, tid: int | None, name: str, kind: str):
        key = (pid, -1 if tid is None else tid)
        if key in named:
            return []
        named.add(key)
        if tid is None:
            return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}]
        return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}]

    yield from meta(_NPUDIAG_PID, None, "npudiag", "p")
    if originals is not None:
        # the profiler's own events, unchanged, then npudiag's tracks on top
        yield from originals
        yield from _marks(meta, marks, findings)
        return

    def device_event(row: dict, name: str, args: dict):
        pid = 1000 + (row["rank"] or 0)
        tid = row["stream_id"] if row["stream_id"] is not None else 0
        yield from meta(pid, None, f"NPU rank {row['rank']}", "p")
        yield from meta(pid, tid, f"Stream {tid}", "t")
        ts = _ts(row["start_ns"], row["start_us"])
        yield {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": row["duration_us"] or 0.0, "args": args}

    kernel_cols = ["rank", "stream_id", "op_name", "task_type", "start_us", "start_ns", "duration_us"]
    for row in tables["kernels"].select(kernel_cols).to_pylist():
        if row["start_us"] is not None:
            yield from device_event(row, row["op_name"] or "", {"Task Type": row["task_type"]})
    copy_cols = ["rank", "side", "stream_id", "name", "size_bytes", "direction", "start_us", "start_ns", "duration_us"]
    for row in tables["copies"].select(copy_cols).to_pylist():
        if row["side"] == "device" and row["start_us"] is not None:
            yield from device_event(row, row["name"] or "MEMCPY", {"size(B)": row["size_bytes"], "direction": row["direction"]})
    for row in tables["api_calls"].select(["rank", "level", "name", "thread_id", "start_us", "start_ns", "duration_us"]).to_pylist():
        if row["start_us"] is None:
            continue
        pid = 2000 + (row["rank"] or 0)
        tid = row["thread_id"] or 0
        yield from meta(pid, None, f"Host rank {row['rank']}", "p")
        yield from meta(pid, tid, f"Thread {tid}", "t")
        yield {
            "ph": "X",
            "name": f"{row['level']}@{row['name']}",
            "pid": pid,
            "tid": tid,
            "ts": _ts(row["start_ns"], row["start_us"]),
            "dur": row["duration_us"] or 0.0,
        }
    yield from _marks(meta, marks, findings)


def _marks(meta, marks: pa.Table, findings: list[dict[str, Any]]):
    tracks = {"exposed copy": 1, "device idle": 2, "findings": 3}
    for name, tid in tracks.items():
        yield from meta(_NPUDIAG_PID, tid, name, "t")
    for row in marks.to_pylist():
        yield {
            "ph": "X",
            "name": row["kind"],
            "pid": _NPUDIAG_PID,
            "tid": tracks[row["kind"]],
            "ts": f"{row['start_us']:.3f}",
            "dur": row["duration_us"],
            "args": {"rank": row["rank"]},
        }
    for f in findings:
        for r in f["evidence"].get("worst_ranges", []) + f["evidence"].get("worst_gaps", []) + f["evidence"].get("worst", []):
            dur = r.get("exposed_us") or r.get("gap_us") or r.get("duration_us") or 0.0
            yield {
                "ph": "X",
                "name": f"{f['rule_id']}: {f['title']}",
                "pid": _NPUDIAG_PID,
                "tid": tracks["findings"],
                "ts": f"{r['start_us']:.3f}",
                "dur": dur,
                "args": {"severity": f["severity"], "advice": f["advice"]},
            }


def write_chrome_trace(path: Path, view: Any, inputs: list[Path] = ()) -> list[str]:  # type: ignore[assignment]
    """The timeline ``view`` (``npudiag.profiling.pipeline.Timeline``: tables, marks, findings and
    the profiler's own events, copied through unchanged when it has them, else the timeline rebuilt
    from the tables) as a Chrome trace. Written through ``npudiag.output`` (a FIFO or ``/dev/stdout``
    streams); returns the places of numbers JSON cannot hold, written as null (also listed in a
    ``npudiag_notes`` metadata event)."""
    notes: list[str] = []

    def events():
        yield from _events(view.tables, view.marks, view.findings, view.originals)
        if notes:
            args = {"non_finite_as_null": notes[:1000], "count": len(notes)}
            yield {"ph": "M", "name": "npudiag_notes", "pid": _NPUDIAG_PID, "tid": 0, "args": args}

    write_file(path, lambda fh: _write_events(fh, events(), notes), inputs=inputs)
    return notes
