"""A Chrome trace (Perfetto, chrome://tracing, MindStudio Insight) of the tables plus npudiag's marks.

When the profile came with trace JSON files, their events are copied through; otherwise (CSV or .db
input) the timeline is rebuilt from the tables: device tasks per rank and stream, host API calls per
thread. Either way a ``npudiag`` process is added whose tracks mark exposed copies, device idle gaps,
each finding's worst ranges and the late ranks of collectives.

Written so that Perfetto reads it right: every ``ts`` is a number, microseconds from the earliest
event (the profilers write absolute times as text, which Perfetto mis-nests, and as doubles they
lose the nanoseconds); the absolute start is in an ``npudiag_time_origin`` metadata event (Unix ns).
Flow and async ids (torch_npu's go above 2^53, where a double cannot tell two apart) are renumbered
from 1, the two ends of a flow keeping one number. No track holds two complete events that partly
overlap (Perfetto nests slices by time and mis-nests those): an event that would is moved to an
overflow track of its thread ("Stream 2 (overlap 1)"), with the flow ends bound to it."""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.output import escape_invisible, strict, write_file
from npudiag.results import RANK_KEY

_NPUDIAG_PID = 1


_MAX_US = 9 * 10**15  # microseconds whose nanoseconds an int64 holds (Unix time now is about 1.8e15 us)
_IDS = {"s": "flow", "t": "flow", "f": "flow", "b": "async", "e": "async", "n": "async"}


def ns_of(value: Any) -> int | None:
    """A trace time (microseconds, as text or a number) in exact nanoseconds; None where it is none."""
    if isinstance(value, str):
        try:
            d = Decimal(value.strip())
        except InvalidOperation:
            return None
        return int((d * 1000).to_integral_value()) if d.is_finite() and abs(d) < _MAX_US else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(value * 1000) if math.isfinite(value) and abs(value) < _MAX_US else None


_RANK_PIDS = 10_000  # the first pid given to a rank's process in a many-rank timeline


class _Clock:
    """Times relative to the earliest one, and flow / async ids renumbered."""

    def __init__(self, origin_ns: int) -> None:
        self.origin_ns = origin_ns
        self.ids: dict[tuple[Any, str, Any, str], int] = {}
        self.pids: dict[tuple[Any, str], int] = {}

    def us(self, ns: int) -> float:
        return (ns - self.origin_ns) / 1000.0

    def event(self, e: dict[str, Any]) -> dict[str, Any] | None:
        """``e`` with a numeric relative ``ts`` (None: a timed event whose time is no number) and its id renumbered."""
        out = dict(e)
        rank = out.pop(RANK_KEY, None)
        if RANK_KEY in e:  # one of several ranks: its processes get pids of their own, named with the rank
            out["pid"] = self.pids.setdefault((rank, str(out.get("pid"))), _RANK_PIDS + len(self.pids))
            if out.get("ph") == "M" and out.get("name") == "process_name" and isinstance(out.get("args"), dict):
                out["args"] = {**out["args"], "name": f"rank {rank}: {out['args'].get('name', '')}"}
        if "ts" in out:
            ns = ns_of(out["ts"])
            if ns is None:
                return None
            out["ts"] = self.us(ns)
        if isinstance(out.get("dur"), str):
            d = ns_of(out["dur"])
            out["dur"] = d / 1000.0 if d is not None else 0.0
        group = _IDS.get(out.get("ph"))
        if group is not None and "id" in out:
            key = (rank, group, out.get("cat"), str(out["id"]))  # a flow never joins two ranks
            out["id"] = self.ids.setdefault(key, len(self.ids) + 1)
        return out


_LANE_TIDS = 1 << 40  # the tids of overflow tracks: above any thread or stream id a profiler writes
_EPS = 1e-6  # us: ends and starts this close touch, they do not overlap


class _Lanes:
    """Which complete events move to an overflow track of their thread so that no track holds two
    that partly overlap: per track, events in start order (the longer first at one start) go to the
    first lane whose open events all end at or after theirs, closed ones dropping off."""

    def __init__(self, events: Iterator[dict[str, Any]]) -> None:
        starts: dict[tuple[Any, Any], array] = {}
        ends: dict[tuple[Any, Any], array] = {}
        index: dict[tuple[Any, Any], array] = {}
        self.names: dict[tuple[Any, Any], str] = {}
        n = 0
        for e in events:
            ph = e.get("ph")
            if ph == "X":
                ts, dur = e.get("ts"), e.get("dur") or 0.0
                if isinstance(ts, (int, float)) and isinstance(dur, (int, float)) and dur == dur:
                    key = (e.get("pid"), e.get("tid"))
                    if key not in starts:
                        starts[key], ends[key], index[key] = array("d"), array("d"), array("q")
                    starts[key].append(ts)
                    ends[key].append(ts + max(dur, 0.0))
                    index[key].append(n)
                n += 1
            elif ph == "M" and e.get("name") == "thread_name" and isinstance(e.get("args"), dict):
                self.names[(e.get("pid"), e.get("tid"))] = str(e["args"].get("name", ""))
        self.moved: dict[int, int] = {}  # the n-th complete event -> its new tid
        self.at: dict[
            tuple[Any, Any, Any], int
        ] = {}  # (pid, tid, ts) of a moved event -> new tid (flow ends follow it)
        self.meta: list[dict[str, Any]] = []
        for key, s in starts.items():
            self._assign(
                key, np.frombuffer(s, float), np.frombuffer(ends[key], float), np.frombuffer(index[key], np.int64)
            )

    def _assign(self, key: tuple[Any, Any], s: np.ndarray, e: np.ndarray, idx: np.ndarray) -> None:
        order = np.lexsort((-e, s))
        lanes: list[list[float]] = []
        tids: dict[int, int] = {}
        for start, end, i in zip(s[order].tolist(), e[order].tolist(), idx[order].tolist()):
            lane = -1
            for k, stack in enumerate(lanes):
                while stack and stack[-1] <= start + _EPS:
                    stack.pop()
                if not stack or end <= stack[-1] + _EPS:
                    stack.append(end)
                    lane = k
                    break
            if lane < 0:
                lanes.append([end])
                lane = len(lanes) - 1
            if lane:
                if lane not in tids:
                    tids[lane] = _LANE_TIDS + len(self.meta)
                    name = self.names.get(key) or f"Thread {key[1]}"
                    self.meta.append(
                        {
                            "ph": "M",
                            "name": "thread_name",
                            "pid": key[0],
                            "tid": tids[lane],
                            "args": {"name": f"{name} (overlap {lane})"},
                        }
                    )
                self.moved[i] = tids[lane]
                self.at[(key[0], key[1], start)] = tids[lane]

    def apply(self, events: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """``events`` (the same stream again) with the moved ones, and the flow ends at their starts, on their new
        tracks."""
        n = 0
        for e in events:
            ph = e.get("ph")
            if ph == "X":
                new = self.moved.get(n)
                n += 1
                if new is not None:
                    e = {**e, "tid": new}
            elif ph in ("s", "t", "f") and self.at:
                new = self.at.get((e.get("pid"), e.get("tid"), e.get("ts")))
                if new is not None:
                    e = {**e, "tid": new}
            yield e
        yield from self.meta


def _exact_end(e: dict[str, Any]) -> dict[str, Any]:
    """A complete event whose ``ts + dur``, added in doubles as chrome://tracing, speedscope and other
    viewers do, lands on the double nearest its exact end (the exact nanoseconds of ``ts`` plus those of
    ``dur``). Decimal microseconds summed in binary miss it by one unit in the last place in about a
    third of the events, so two events that end together end a hair apart and a viewer nests the
    inner one outside the outer (Perfetto rounds to nanoseconds and is not misled). Where the sum
    misses, ``dur`` becomes the exact end less ``ts`` (a difference of two close doubles, exact);
    Perfetto's nanoseconds are the same either way. A ``dur`` finer than a nanosecond is left alone."""
    if e.get("ph") != "X":
        return e
    ts, dur = e.get("ts"), e.get("dur")
    if (
        ts.__class__ is not float
        or dur.__class__ not in (float, int)
        or not (math.isfinite(ts) and math.isfinite(dur))
        or dur <= 0
    ):
        return e
    dur_ns = round(dur * 1000)
    if abs(dur * 1000 - dur_ns) > 1e-6:  # finer than a nanosecond (as the profiler wrote it): left as it is
        return e
    end = (round(ts * 1000) + dur_ns) / 1000
    if ts + dur == end:
        return e
    fixed = end - ts
    return {**e, "dur": fixed} if ts + fixed == end else e


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


def _origin_ns(
    tables: dict[str, pa.Table], marks: pa.Table, originals: Callable[[], Iterator[dict[str, Any]]] | None
) -> int:
    """The earliest time of everything the trace will hold, in Unix ns (one pass over the originals)."""
    found = []
    if originals is not None:
        first = min((t for t in (ns_of(e["ts"]) for e in originals() if "ts" in e) if t is not None), default=None)
        found += [first] if first is not None else []
    else:
        for name in ("kernels", "copies", "api_calls"):
            t = tables.get(name)
            if t is not None and t.num_rows:
                v = pc.min(t["start_ns"]).as_py()
                found += [v] if v is not None else []
                u = pc.min(t["start_us"]).as_py()
                found += [round(u * 1000)] if v is None and u is not None else []
    if marks.num_rows:
        found.append(round(pc.min(marks["start_us"]).as_py() * 1000))
    return min(found) if found else 0


def _events(
    tables: dict[str, pa.Table],
    marks: pa.Table,
    findings: list[dict[str, Any]],
    originals: Callable[[], Iterator[dict[str, Any]]] | None,
    clock: _Clock,
    dropped: list[int],
):
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
    origin = {"origin_ns": clock.origin_ns, "meaning": "every ts is microseconds from origin_ns, Unix time in ns"}
    yield {"ph": "M", "name": "npudiag_time_origin", "pid": _NPUDIAG_PID, "tid": 0, "args": origin}
    if originals is not None:
        # the profiler's own events, on the relative clock, then npudiag's tracks on top
        for e in originals():
            out = clock.event(e)
            if out is None:
                dropped[0] += 1
            else:
                yield out
        yield from _marks(meta, marks, findings, clock)
        return

    def device_event(row: dict, name: str, args: dict):
        pid = 1000 + (row["rank"] or 0)
        tid = row["stream_id"] if row["stream_id"] is not None else 0
        yield from meta(pid, None, f"NPU rank {row['rank']}", "p")
        yield from meta(pid, tid, f"Stream {tid}", "t")
        ts = clock.us(row["start_ns"] if row["start_ns"] is not None else round(row["start_us"] * 1000))
        yield {
            "ph": "X",
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": ts,
            "dur": row["duration_us"] or 0.0,
            "args": args,
        }

    def host_event(row: dict, base: int, label: str, name: str):
        """A host call or framework op on its rank's process (``base`` + rank), its thread a track."""
        pid = base + (row["rank"] or 0)
        tid, args = _thread(row["thread_id"])
        if row.get("connection_id") is not None:
            args["connection_id"] = row["connection_id"]
        yield from meta(pid, None, f"{label} rank {row['rank']}", "p")
        yield from meta(pid, tid, f"Thread {tid}", "t")
        ts = clock.us(row["start_ns"] if row["start_ns"] is not None else round(row["start_us"] * 1000))
        yield {
            "ph": "X",
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": ts,
            "dur": row["duration_us"] or 0.0,
            "args": args,
        }

    launches: dict[
        tuple[Any, int], tuple[int, int, float]
    ] = {}  # (rank, connection id) -> the launching call's pid, tid, ts
    api_cols = ["rank", "level", "name", "thread_id", "start_us", "start_ns", "duration_us", "connection_id"]
    for row in tables["api_calls"].select(api_cols).to_pylist():
        if row["start_us"] is not None:
            events = list(host_event(row, 2000, "Host", f"{row['level']}@{row['name']}"))
            yield from events
            if row["connection_id"] is not None:
                launches[(row["rank"], row["connection_id"])] = (events[-1]["pid"], events[-1]["tid"], events[-1]["ts"])
    host_ops = tables.get("host_ops")
    if (
        host_ops is not None and host_ops.num_rows
    ):  # framework ops (a .db's PYTORCH_API), a process of their own per rank
        for row in host_ops.select(["rank", "name", "thread_id", "start_us", "start_ns", "duration_us"]).to_pylist():
            if row["start_us"] is not None:
                yield from host_event(row, 3000, "Framework", row["name"] or "")
    flow = 0

    def link(row: dict, pid: int, tid: int, ts: float):
        """A flow from the host call carrying the task's connection id to the task."""
        nonlocal flow
        start = launches.get((row["rank"], row.get("connection_id")))
        if start is None:
            return
        flow += 1
        yield {
            "ph": "s",
            "cat": "HostToDevice",
            "name": "HostToDevice",
            "id": flow,
            "pid": start[0],
            "tid": start[1],
            "ts": start[2],
        }
        yield {
            "ph": "f",
            "bp": "e",
            "cat": "HostToDevice",
            "name": "HostToDevice",
            "id": flow,
            "pid": pid,
            "tid": tid,
            "ts": ts,
        }

    kernel_cols = [
        "rank",
        "stream_id",
        "op_name",
        "task_type",
        "start_us",
        "start_ns",
        "duration_us",
        "connection_id",
        "launched_by",
    ]
    for row in tables["kernels"].select([c for c in kernel_cols if c in tables["kernels"].column_names]).to_pylist():
        if row["start_us"] is not None:
            args = {"Task Type": row["task_type"]}
            if row.get("launched_by"):
                args["launched_by"] = row["launched_by"]
            events = list(device_event(row, row["op_name"] or "", args))
            yield from events
            yield from link(row, events[-1]["pid"], events[-1]["tid"], events[-1]["ts"])
    copy_cols = [
        "rank",
        "side",
        "stream_id",
        "name",
        "size_bytes",
        "direction",
        "start_us",
        "start_ns",
        "duration_us",
        "connection_id",
    ]
    for row in tables["copies"].select([c for c in copy_cols if c in tables["copies"].column_names]).to_pylist():
        if row["side"] == "device" and row["start_us"] is not None:
            events = list(
                device_event(
                    row, row["name"] or "MEMCPY", {"size(B)": row["size_bytes"], "direction": row["direction"]}
                )
            )
            yield from events
            yield from link(row, events[-1]["pid"], events[-1]["tid"], events[-1]["ts"])
    yield from _marks(meta, marks, findings, clock)


def _thread(thread_id: int | None) -> tuple[int, dict[str, Any]]:
    """A host thread's track id a viewer keeps apart: the id itself, or for a .db's globalTid (process
    id above the thread id) its low 32 bits, with the original in the args."""
    if thread_id is None:
        return 0, {}
    if 0 <= thread_id < 2**32:
        return thread_id, {}
    return thread_id & 0xFFFFFFFF, {"thread_id": str(thread_id)}


def _marks(meta, marks: pa.Table, findings: list[dict[str, Any]], clock: _Clock):
    tracks = {"exposed copy": 1, "device idle": 2, "findings": 3, "late rank": 4}
    for name, tid in tracks.items():
        yield from meta(_NPUDIAG_PID, tid, name, "t")
    for row in marks.to_pylist():
        name, args = row["kind"], {"rank": row["rank"]}
        if row.get("cause_kind") is not None:  # a device idle gap: what the host was doing
            name = f"device idle: {row['cause'] or 'no host call recorded'}" + (
                f" ({row['cause_kind']})" if row["cause"] else ""
            )
            args.update(cause=row["cause"], cause_kind=row["cause_kind"])
        elif row["kind"] == "late rank":  # the stretch the other ranks waited for this one to enter a collective
            name = f"late rank {row['rank']}: {row['cause']}"
            args.update(cause=row["cause"])
        yield {
            "ph": "X",
            "name": name,
            "pid": _NPUDIAG_PID,
            "tid": tracks[row["kind"]],
            "ts": clock.us(round(row["start_us"] * 1000)),
            "dur": row["duration_us"],
            "args": args,
        }
    for f in findings:
        for r in (
            f["evidence"].get("worst_ranges", []) + f["evidence"].get("worst_gaps", []) + f["evidence"].get("worst", [])
        ):
            dur = r.get("exposed_us") or r.get("gap_us") or r.get("duration_us") or 0.0
            yield {
                "ph": "X",
                "name": f"{f['rule_id']}: {f['title']}",
                "pid": _NPUDIAG_PID,
                "tid": tracks["findings"],
                "ts": clock.us(round(r["start_us"] * 1000)),
                "dur": dur,
                "args": {"severity": f["severity"], "advice": f["advice"]},
            }


def write_chrome_trace(path: Path, view: Any, inputs: list[Path] = ()) -> list[str]:  # type: ignore[assignment]
    """The timeline ``view`` (``npudiag.profiling.pipeline.TimelineView``: tables, marks, findings and a
    factory of the profiler's own events, copied through when it has them, else the timeline rebuilt
    from the tables) as a Chrome trace. Written through ``npudiag.output`` (a FIFO or ``/dev/stdout``
    streams); returns the places of numbers JSON cannot hold, written as null (listed, with the events
    left out because their time is no number, in an ``npudiag_notes`` metadata event)."""
    notes: list[str] = []
    dropped = [0]
    clock = _Clock(_origin_ns(view.tables, view.marks, view.originals))
    lanes = _Lanes(
        _events(view.tables, view.marks, view.findings, view.originals, clock, [0])
    )  # a pass to find the overlaps

    def events():
        yield from map(
            _exact_end, lanes.apply(_events(view.tables, view.marks, view.findings, view.originals, clock, dropped))
        )
        if notes or dropped[0]:
            args = {"non_finite_as_null": notes[:1000], "count": len(notes), "events_without_a_time": dropped[0]}
            yield {"ph": "M", "name": "npudiag_notes", "pid": _NPUDIAG_PID, "tid": 0, "args": args}

    write_file(path, lambda fh: _write_events(fh, events(), notes), inputs=inputs)
    return notes
