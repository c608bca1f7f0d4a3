"""msprof_*.json / trace_view.json / task_time_*.json / hccl_*.json / step_trace_*.json (Chrome
trace) → device tasks, communication ops and sub-tasks, host API calls and steps.

Which process an event belongs to is only known from ``ph:"M"`` ``process_name`` metadata, which
may come after the events, so complete events are collected with their pid/tid and sorted into
tables at the end:

- ``Ascend Hardware`` events are device tasks, classified later by :mod:`npudiag.profiling.tasks` (compute,
  copy, HCCL sub-task, sync...), except the step-trace markers msprof puts on a ``Step Trace``
  thread there (``Iteration N``, ``FP_BP Time N``, ``Iteration Refresh N``, ``Reduce_N_M``),
  which become steps;
- ``HCCL`` / ``Communication`` events are communication ops (group threads) or, on ``Plane N``
  threads, HCCL's sub-tasks with their ranks, transport, size and bandwidth;
- ``CANN`` events are host API calls; ``Step Trace`` processes (step_trace_*.json) give steps;
- torch_npu's ``ProfilerStep#N`` host ranges give steps where nothing else does, and its
  HostToDevice flows give each device task's launch time, which places the task in its step.

Python-side torch events, counters and the Overlap Analysis / memory processes are skipped.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.phases import phase
from npudiag.profiling import tasks
from npudiag.profiling.assemble import drop_bad_timing
from npudiag.profiling.formats import trace_fast
from npudiag.profiling.formats.csvtext import NO_MODEL_ID
from npudiag.profiling.formats.jsonstream import iter_events
from npudiag.profiling.formats.registry import FileTables, Format, from_object, register
from npudiag.profiling.formats.torch_ops import (
    MODULE_PREFIX,
    Launches,
    Queue,
    launched_by,
    op_launches,
    op_table,
    range_table,
)
from npudiag.profiling.formats.trace_events import (
    INT_ARGS,
    MISSING,
    SKIP_CATS,
    STORE,
    STR_ARGS,
    TEXT,
    code,
    exact_ns,
    num,
    store_chunk,
)
from npudiag.schemas import map_distinct

HARDWARE = "Ascend Hardware"
AICORE_FREQ = "AI Core Freq"  # the counter events (ph C, args MHz) of the process of that name
CANN = "CANN"
HCCL = {"HCCL", "Communication"}
STEP_TRACE = "Step Trace"
PYTHON = "Python"
_NEEDED = {HARDWARE, CANN, STEP_TRACE, PYTHON, *HCCL}
_OPERATION = {"host to device": "H2D", "device to host": "D2H", "device to device": "D2D", "host to host": "H2H"}
_LEVEL_PREFIX = {"AscendCL": "acl", "Runtime": "runtime", "Node": "node", "HCCL": "hccl", "Model": "model"}
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_MARKER = re.compile(r"^(Iteration Refresh|Iteration|FP_BP Time|Data_aug Bound|Reduce)[ _](\d+)(?:_\d+)?$")
NO_RANK = 4294967295


@dataclass
class TraceTables:
    """What one trace file holds, each part in its canonical schema (``tasks`` in the kernels
    schema plus ``connection_id``, ``size_bytes``, ``direction`` and ``launch_ns``)."""

    tasks: pa.Table
    comm_ops: pa.Table
    comm_tasks: pa.Table
    api_calls: pa.Table
    steps: pa.Table
    hccl_streams: set[int] = field(default_factory=set)
    device_ids: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    aicore_freq: pa.Table = field(default_factory=lambda: schemas.empty("aicore_freq"))
    torch_ops: pa.Table = field(default_factory=lambda: schemas.empty("torch_ops"))
    host_ops: pa.Table = field(default_factory=lambda: schemas.empty("host_ops"))
    ranges: pa.Table = field(default_factory=lambda: schemas.empty("ranges"))
    # host-to-device flows (torch_npu's async_npu op -> kernel, CANN's HostToDevice call -> task): how many
    # flow ids, and how many have both a start and an end
    links: dict[str, int] = field(default_factory=dict)


class _Columns:
    """Typed columns kept while streaming (about 150 bytes an event); strings are interned."""

    def __init__(self) -> None:
        self.chunks: list[pa.Table] = []  # in file order, each in the STORE schema
        self._intern: dict[str, str] = {}
        self.other_pids: dict[object, int] = {}
        self._reset()

    def _reset(self) -> None:
        self.pid = array("q")
        self.tid = array("q")
        self.ts = array("d")
        self.ts_ns = array("q")
        self.dur = array("d")
        self.name: list[str] = []
        self.cat: list[str | None] = []
        self.ints = {k: array("q") for k in INT_ARGS}
        self.strs: dict[str, list[str | None]] = {k: [] for k in STR_ARGS}
        self._int_items = tuple((INT_ARGS[k], col.append) for k, col in self.ints.items())
        self._str_items = tuple((STR_ARGS[k], col.append) for k, col in self.strs.items())
        self._int_appends = tuple(a for _, a in self._int_items)
        self._str_appends = tuple(a for _, a in self._str_items)

    def append_chunk(self, chunk: pa.Table) -> None:
        """Rows filled elsewhere (trace_fast), after those added one by one so far."""
        self._flush()
        self.chunks.append(chunk)

    def _flush(self) -> None:
        if not len(self.pid):
            return
        f64, i64 = (lambda c: np.frombuffer(c, np.float64)), (lambda c: np.frombuffer(c, np.int64))
        self.chunks.append(
            store_chunk(
                i64(self.pid),
                i64(self.tid),
                f64(self.ts),
                i64(self.ts_ns),
                f64(self.dur),
                pa.array(self.name, pa.string()),
                pa.array(self.cat, pa.string()),
                {k: i64(v) for k, v in self.ints.items()},
                {k: pa.array(v, pa.string()) for k, v in self.strs.items()},
            )
        )
        self._reset()

    def finish(self) -> _Final:
        self._flush()
        chunks, self.chunks = self.chunks, []
        return _Final(chunks)

    def pid_code(self, value: object) -> int:
        c = code(value)
        if c == MISSING and value is not None:
            key = (
                value if value.__hash__ is not None else repr(value)
            )  # a list or object as pid: hostile, still one process
            c = self.other_pids.setdefault(key, -1 - len(self.other_pids))
        return c

    def add(self, ev: dict, t: float) -> None:
        # the hot loop of trace reading: bound methods and inline checks keep it near 3 µs an event
        intern = self._intern
        pid = ev.get("pid")
        self.pid.append(pid if pid.__class__ is int and MISSING < pid < 2**63 else self.pid_code(pid))
        tid = ev.get("tid")
        self.tid.append(tid if tid.__class__ is int and MISSING < tid < 2**63 else code(tid))
        nm = ev.get("name", "")
        if nm.__class__ is not str:
            nm = str(nm)
        self.name.append(intern.setdefault(nm, nm))
        cat = ev.get("cat")
        self.cat.append(cat if cat is None or cat.__class__ is str else str(cat))
        self.ts.append(t)
        self.ts_ns.append(exact_ns(ev.get("ts"), t))
        d = ev.get("dur")
        self.dur.append(d if d.__class__ is float else num(d))
        a = ev.get("args")
        if a.__class__ is not dict or not a:
            for append in self._int_appends:
                append(MISSING)
            for append in self._str_appends:
                append(None)
            return
        get = a.get
        for keys, append in self._int_items:
            v = None
            for k in keys:
                v = get(k)
                if v is not None:
                    break
            if v is None:
                append(MISSING)
            elif v.__class__ is int and MISSING < v < 2**63:
                append(v)
            else:
                append(code(v))
        for keys, append in self._str_items:
            v = None
            for k in keys:
                v = get(k)
                if v is not None:
                    break
            if v is None:
                append(None)
            else:
                if v.__class__ is not str:
                    v = str(v)
                append(intern.setdefault(v, v))


class _Final:
    """The store once read: numbers as numpy arrays, text as Arrow arrays, row i = kept event i.
    Built a column at a time, each column's chunks released as it is copied, so the peak is the store
    plus one column (a whole-table combine doubled it)."""

    def __init__(self, chunks: list[pa.Table]) -> None:
        self.n = sum(c.num_rows for c in chunks)

        def column(name: str) -> pa.ChunkedArray:
            return pa.chunked_array([a for c in chunks for a in c.column(name).chunks], STORE.field(name).type)

        def numbers(name: str) -> np.ndarray:
            # combined in Arrow's pool (a view for numpy; no nulls: MISSING / NaN stand for no value)
            out = column(name).combine_chunks()
            chunks[:] = [c.drop_columns([name]) for c in chunks]  # in place: the caller's list lets go too
            return out.to_numpy()

        # pid and tid are read whole; the rest only at the rows of each table, taken from the chunks
        # (combining them all would add a copy of the store that the allocator keeps)
        self.pid, self.tid = numbers("pid"), numbers("tid")
        self._columns = {c: column(c) for c in STORE.names if c not in ("pid", "tid")}

    def drop(self, *keys: str) -> None:
        """Let go of columns no longer needed (their memory is freed with the last reference)."""
        for k in keys:
            self._columns.pop(k, None)

    def num(self, key: str, rows: np.ndarray) -> np.ndarray:
        """Number column ``key`` (ts, ts_ns, dur, or "i:" and an int arg) at ``rows``."""
        return self._columns[key].take(rows).to_numpy()

    def text(self, key: str, rows: np.ndarray) -> pa.Array:
        """Column ``key`` (name, cat or a text arg) at ``rows``."""
        return self.encoded(key, rows).cast(pa.string())

    def encoded(self, key: str, rows: np.ndarray) -> pa.DictionaryArray:
        """Column ``key`` at ``rows``, still dictionary-encoded (one dictionary): work that depends on the
        text alone is done once per distinct value and taken to the rows."""
        taken = self._columns[key if key in ("name", "cat") else f"s:{key}"].take(rows)
        if taken.num_chunks == 1:
            return taken.chunk(0)
        return taken.unify_dictionaries().combine_chunks() if taken.num_chunks else pa.array([], TEXT)


class _Reading:
    """What is gathered while the events stream past, in file order: the per-event reader below
    and the piece-wise one of :mod:`trace_fast` fill the same state, so the tables come out the same."""

    def __init__(self) -> None:
        self.process_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.cols = _Columns()
        self.bad_ts = 0
        self.flows: dict[int, int] = {}  # HostToDevice flow id (the connection id) -> host launch time, ns
        self.flow_ids = _FlowIds()  # every host-to-device flow's id and end, for check's count of those with both ends
        self.skip_pids: set[object] = set()  # processes already named and not needed (Overlap Analysis, HBM, ...)
        self.freq: list[tuple[int, float, float]] = []  # "AI Core Freq" counter samples: (exact ns, us, MHz)
        self.torch = _TorchOps()  # torch_npu's cpu_op events and the torch_to_npu flows from them to kernels
        self.pieces = {"arrow": 0, "msgspec": 0}  # how trace_fast read the file's pieces

    def event(self, ev: dict) -> None:
        """One event, by its phase (complete, flow start or end, counter, metadata; the rest are not read)."""
        ph = ev.get("ph")
        handle = _BY_PHASE.get(ph) if ph.__class__ is str else None
        if handle is not None:
            handle(self, ev)

    def _complete(self, ev: dict) -> None:
        cols, torch = self.cols, self.torch
        cat = ev.get("cat")
        if cat == "cpu_op":
            torch.add_op(ev, cols)
            name = ev.get("name")
            if name.__class__ is str and name.startswith("ProfilerStep#"):  # the step's recorded range too
                t = num(ev.get("ts"))
                if t == t:
                    cols.add(ev, t)
            return
        if cat == "enqueue" or cat == "dequeue":
            torch.add_queue(ev, cols, cat)
            return
        if cat == "python_function":
            name = ev.get("name")
            if name.__class__ is str and name.startswith(MODULE_PREFIX):
                torch.add_module(ev, cols)
                return
        if cat.__class__ is str and cat in SKIP_CATS and not str(ev.get("name", "")).startswith("ProfilerStep#"):
            return
        pid = ev.get("pid")
        if self.skip_pids and pid.__hash__ is not None and pid in self.skip_pids:
            return
        t = num(ev.get("ts"))
        if t != t:  # NaN
            self.bad_ts += 1
            return
        cols.add(ev, t)

    def _flow_start(self, ev: dict) -> None:
        cat = ev.get("cat")
        if cat == "HostToDevice":
            fid, t = code(ev.get("id")), num(ev.get("ts"))
            if fid != MISSING and t == t:
                self.flows[fid] = exact_ns(ev.get("ts"), t)
            elif fid == MISSING:
                self.flow_ids.odd(cat, ev.get("id"), end=False)
        elif cat == "async_npu":
            self.torch.add_flow(ev, self.cols, end=False)
            if code(ev.get("id")) == MISSING:
                self.flow_ids.odd(cat, ev.get("id"), end=False)

    def _flow_end(self, ev: dict) -> None:
        cat = ev.get("cat")
        if cat != "HostToDevice" and cat != "async_npu":
            return
        fid = code(ev.get("id"))
        if fid == MISSING:
            self.flow_ids.odd(cat, ev.get("id"), end=True)
        elif cat == "HostToDevice":
            self.flow_ids.h2d_ends.append(fid)
        if cat == "async_npu":
            self.torch.add_flow(ev, self.cols, end=True)

    def _counter(self, ev: dict) -> None:
        if ev.get("name") == AICORE_FREQ and isinstance(ev.get("args"), dict):
            t, mhz = num(ev.get("ts")), num(ev["args"].get("MHz"))
            if t == t and mhz == mhz:
                self.freq.append((exact_ns(ev.get("ts"), t), t, mhz))

    def _metadata(self, ev: dict) -> None:
        a = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        pid = self.cols.pid_code(ev.get("pid"))
        name = ev.get("name")
        if name == "process_name":
            self.process_names[pid] = str(a.get("name", ""))
            if self.process_names[pid] not in _NEEDED and ev.get("pid").__hash__ is not None:
                self.skip_pids.add(ev.get("pid"))
        elif name == "process_labels":
            self.process_labels[pid] = str(a.get("labels", ""))
        elif name == "thread_name":
            self.thread_names[(pid, code(ev.get("tid")))] = str(a.get("name", ""))


# the phases the reader reads (Trace Event Format: X complete, s / f flow start / end, C counter, M metadata)
_BY_PHASE = {
    "X": _Reading._complete,
    "s": _Reading._flow_start,
    "f": _Reading._flow_end,
    "C": _Reading._counter,
    "M": _Reading._metadata,
}


def _read_events(path: Path, progress: Callable[[int], None] | None) -> _Reading:
    """One event at a time (the reference reader; any input, exact errors)."""
    state = _Reading()
    for ev in iter_events(path, progress):
        state.event(ev)
    return state


def read_trace(path: Path, rank: int | None = None, progress: Callable[[int], None] | None = None) -> TraceTables:
    with phase("trace: parse"):
        try:
            state = trace_fast.read(path, _Reading, progress)
        except trace_fast.Unsure:
            state = _read_events(path, progress)
    with phase("trace: tables"):
        tables = _tables(path, state, rank)
    del state  # the store: hundreds of MB for a large trace, handed back to the system at once
    pa.default_memory_pool().release_unused()
    return tables


def _tables(path: Path, state: _Reading, rank: int | None) -> TraceTables:
    cols, bad_ts, process_names, process_labels = (
        state.cols.finish(),
        state.bad_ts,
        state.process_names,
        state.process_labels,
    )
    thread_names, flows, freq, torch = state.thread_names, state.flows, state.freq, state.torch
    warnings = []
    if bad_ts:
        warnings.append(f"{path}: {bad_ts} complete event(s) without a numeric 'ts' were skipped")
    if not process_names and cols.n:
        raise InputError(path, "no process_name metadata events; expected an msprof / torch_npu Chrome trace")
    device_ids = sorted({d for d in (_device_from_label(v) for v in process_labels.values()) if d is not None})
    device_id = device_ids[0] if len(device_ids) == 1 else None

    pid, tid = cols.pid, cols.tid

    def rows_of(names: set[str]) -> np.ndarray:
        pids = [p for p, n in process_names.items() if n in names]
        return np.nonzero(np.isin(pid, np.array(pids, dtype=np.int64)))[0] if pids else np.array([], dtype=np.int64)

    def on_threads(rows: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
        names = [k for k, v in thread_names.items() if test(v)]
        if not names or not len(rows):
            return np.zeros(len(rows), bool)
        here = pa.table({"pid": pid[rows], "tid": tid[rows], "i": np.arange(len(rows))})
        named = pa.table(
            {"pid": [k[0] for k in names], "tid": [k[1] for k in names]}, schema=here.select(["pid", "tid"]).schema
        )
        out = np.zeros(len(rows), bool)
        out[here.join(named, ["pid", "tid"], join_type="left semi")["i"].to_numpy()] = True
        return out

    hw = rows_of({HARDWARE})
    marker_rows = hw[on_threads(hw, lambda n: n.startswith(STEP_TRACE))]
    hw = hw[~on_threads(hw, lambda n: n.startswith(STEP_TRACE))]
    marker_rows = np.concatenate([marker_rows, rows_of({STEP_TRACE})]).astype(np.int64)
    hccl = rows_of(HCCL)
    plane = on_threads(hccl, lambda n: n.startswith("Plane"))
    planes, ops = hccl[plane], hccl[~plane]
    cann = rows_of({CANN})
    py = rows_of({PYTHON})
    step_rows = py[_step_events(cols.text("name", py))] if len(py) else py
    streams = cols.num("i:stream", planes)
    plane_ids = _plane_ids(pid[planes], tid[planes], thread_names)
    torch_tables, launchers, comm_launchers = torch.tables(cols, hw, ops, rank)
    parts = []
    for build in (
        lambda: _task_table(cols, hw, rank, device_id, flows, launchers),
        lambda: _comm_op_table(cols, ops, rank, device_id, comm_launchers),
        lambda: _comm_task_table(cols, planes, plane_ids, rank),
        lambda: _api_table(cols, cann, rank),
    ):
        if len(parts) == 3:  # the API calls and what follows need none of the device tasks' columns
            cols.drop(
                *(f"i:{k}" for k in ("model", "stream", "task", "size", "src", "dst", "plane")),
                *(f"s:{k}" for k in ("operation", "transport", "link", "bandwidth")),
            )
        table = build()
        # the takes and casts of a table leave memory free but held by Arrow's allocator; handed
        # back, the peak stays near what is live
        pa.default_memory_pool().release_unused()
        label = (
            "op_name" if "op_name" in table.column_names else ("name" if "name" in table.column_names else "task_type")
        )
        table, bad = drop_bad_timing(
            table, str(path), lambda i, t=table, c=label: f"event {t[c][i].as_py()!r} at {t['start_us'][i]}"
        )
        warnings.extend(bad)
        parts.append(table)
    return TraceTables(
        *parts,
        _step_table(cols, marker_rows, step_rows, rank, device_id),
        {int(s) for s in streams if s != MISSING},
        device_ids,
        warnings,
        _freq_table(freq, rank, device_id),
        *torch_tables,
        _links(state),
    )


def _links(state: _Reading) -> dict[str, int]:
    """Flow ids of both kinds, and those with both ends: the HostToDevice starts are the reader's launch
    table, the async_npu starts and ends the framework ops' (torch_ops); ids no int64 holds by their text."""
    f = state.flow_ids
    pairs = [
        (np.fromiter(state.flows, np.int64, len(state.flows)), np.unique(np.frombuffer(f.h2d_ends, np.int64))),
        (
            np.fromiter(state.torch.starts, np.int64, len(state.torch.starts)),
            np.fromiter(state.torch.ends, np.int64, len(state.torch.ends)),
        ),
    ]
    ids = both = starts = 0
    for s, e in pairs:
        ids += len(np.union1d(s, e))
        both += len(np.intersect1d(s, e))
        starts += len(s)
    for cat in {c for c, _ in f.texts}:
        ts, te = f.texts.get((cat, False), set()), f.texts.get((cat, True), set())
        ids, both, starts = ids + len(ts | te), both + len(ts & te), starts + len(ts)
    return {"flow_ids": ids, "flows_both_ends": both, "flow_starts": starts} if ids else {}


class _FlowIds:
    """The flow ends of HostToDevice flows (8-byte codes) and, of both categories, the ids no int64 holds
    (torch_npu's 20-digit HostToDevice ids), kept by their text, for check's count of flows with both ends."""

    def __init__(self) -> None:
        self.h2d_ends = array("q")
        self.texts: dict[tuple[str, bool], set[str]] = {}

    def odd(self, cat: str, fid: object, end: bool) -> None:
        if fid is not None:
            self.texts.setdefault((cat, end), set()).add(str(fid))


class _TorchOps:
    """cpu_op calls (thread, exact start and end ns, name) and torch_to_npu flow ends by flow id."""

    def __init__(self) -> None:
        self.thread = array("q")
        self.start = array("q")
        self.end = array("q")
        self.names: list[str] = []
        self.starts: dict[int, tuple[int, int]] = {}  # flow id -> (thread code, ns) inside the op
        self.ends: dict[int, tuple[int, int, int]] = {}  # flow id -> (pid, tid, ns): the kernel's start on its stream
        self.threads: dict[tuple[int, int], int] = {}  # (pid, tid) -> thread code
        self.queue: dict[str, list[tuple[int, int, int, int]]] = {
            "enqueue": [],
            "dequeue": [],
        }  # (thread, start, end, corr)
        self.modules: tuple[array, array, array] = (
            array("q"),
            array("q"),
            array("q"),
        )  # nn.Module ranges: thread, start, end
        self.module_names: list[str] = []

    def _thread(self, ev: dict, cols: _Columns) -> int:
        return self.threads.setdefault((cols.pid_code(ev.get("pid")), code(ev.get("tid"))), len(self.threads))

    @staticmethod
    def _span(ev: dict) -> tuple[int, int] | None:
        """A complete event's exact start and end ns; None where its ts or dur is no usable time."""
        t, d = num(ev.get("ts")), num(ev.get("dur"))
        if t != t or d != d or d < 0 or d > 1e12:
            return None
        s = exact_ns(ev.get("ts"), t)
        return None if s == MISSING else (s, s + round(d * 1000))

    def add_op(self, ev: dict, cols: _Columns) -> None:
        span = self._span(ev)
        if span is None:
            return
        self.thread.append(self._thread(ev, cols))
        self.start.append(span[0])
        self.end.append(span[1])
        nm = ev.get("name", "")
        self.names.append(nm if nm.__class__ is str else str(nm))

    def add_module(self, ev: dict, cols: _Columns) -> None:
        """A torch module's forward (python_function "nn.Module: Conv2d_0") as a range of its thread."""
        span = self._span(ev)
        if span is None:
            return
        thread, start, end = self.modules
        thread.append(self._thread(ev, cols))
        start.append(span[0])
        end.append(span[1])
        self.module_names.append(ev["name"][len(MODULE_PREFIX) :])

    def add_queue(self, ev: dict, cols: _Columns, cat: str) -> None:
        t, d = num(ev.get("ts")), num(ev.get("dur"))
        a = ev.get("args")
        corr = code(a.get("correlation_id")) if isinstance(a, dict) else MISSING
        if (
            t != t or d != d or d > 1e12 or corr == MISSING
        ):  # as _span: no enqueue lasts 11 days (1.8e305 µs overflowed)
            return
        s = exact_ns(ev.get("ts"), t)
        if s == MISSING:
            return
        self.queue[cat].append((self._thread(ev, cols), s, s + round(max(d, 0.0) * 1000), corr))

    def add_flow(self, ev: dict, cols: _Columns, end: bool) -> None:
        fid, t = code(ev.get("id")), num(ev.get("ts"))
        if fid == MISSING or t != t:
            return
        ns = exact_ns(ev.get("ts"), t)
        if ns == MISSING:
            return
        if end:
            self.ends[fid] = (cols.pid_code(ev.get("pid")), code(ev.get("tid")), ns)
        else:
            self.starts[fid] = (self._thread(ev, cols), ns)

    def intervals(self, rank) -> pa.Table:
        """Each cpu_op call as a time range (HOST_OPS)."""
        if not self.names:
            return schemas.empty("host_ops")
        tids = np.array(
            [tid for (_pid, tid) in self.threads], np.int64
        )  # thread code -> tid (codes are insertion order)
        start = np.frombuffer(self.start, np.int64)
        end = np.frombuffer(self.end, np.int64)
        thread = tids[np.frombuffer(self.thread, np.int64)]
        n = len(start)
        table = pa.table(
            {
                "source": pa.repeat(pa.scalar("trace", pa.string()), n),
                "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
                "name": pa.array(self.names, pa.string()),
                "start_us": pa.array(start / 1000.0, pa.float64()),
                "start_ns": pa.array(start, pa.int64()),
                "duration_us": pa.array((end - start) / 1000.0, pa.float64()),
                "thread_id": pa.array(thread, pa.int64(), mask=thread == MISSING),
            },
            schema=schemas.HOST_OPS,
        )
        return table.sort_by([("start_ns", "ascending")])

    def tables(
        self, cols: _Final, hw: np.ndarray, comm: np.ndarray, rank
    ) -> tuple[tuple[pa.Table, pa.Table, pa.Table], pa.Array | None, pa.Array | None]:
        """TORCH_OPS, HOST_OPS and RANGES: the framework ops and modules with the kernels launched inside;
        and per device task (``hw`` row) and per communication op (``comm`` row, the HCCL process's ops)
        the framework op that issued it (None without framework ops)."""
        if not self.names and not self.module_names:
            return (schemas.empty("torch_ops"), schemas.empty("host_ops"), schemas.empty("ranges")), None, None
        deq = np.array(self.queue["dequeue"], np.int64).reshape(-1, 4)
        enq = np.array(self.queue["enqueue"], np.int64).reshape(-1, 4)
        queue = Queue(deq[:, 0], deq[:, 1], deq[:, 2], deq[:, 3], enq[:, 0], enq[:, 1], enq[:, 3])
        both = [f for f in self.starts if f in self.ends]
        launches = pa.table(
            {
                "pid": [self.ends[f][0] for f in both],
                "tid": [self.ends[f][1] for f in both],
                "ns": [self.ends[f][2] for f in both],
                "lt": [self.starts[f][0] for f in both],
                "lns": [self.starts[f][1] for f in both],
            },
            schema=pa.schema([(c, pa.int64()) for c in ("pid", "tid", "ns", "lt", "lns")]),
        )

        def flows_to(rows: np.ndarray, keep: pa.Array | None) -> pa.Table:
            """Each flow's task: the one starting at the flow's end, on the same stream thread."""
            t = pa.table(
                {
                    "pid": cols.pid[rows],
                    "tid": cols.tid[rows],
                    "ns": cols.num("ts_ns", rows),
                    "us": cols.num("dur", rows),
                    "row": np.arange(len(rows)),
                }
            )
            return launches.join(t.filter(keep) if keep is not None else t, ["pid", "tid", "ns"], join_type="inner")

        # device work only: compute kernels and copies, not communication sub-tasks or syncs
        kind, _ = tasks.classify(cols.text("type", hw), cols.text("name", hw))
        j = flows_to(hw, pc.is_in(kind, pa.array([tasks.COMPUTE, tasks.COPY])))
        jc = flows_to(comm, None)  # the communication ops: who issued them, their time not counted in the ops
        lt, lns, k_us = j["lt"].to_numpy(), j["lns"].to_numpy(), np.nan_to_num(j["us"].to_numpy(zero_copy_only=False))
        ops = schemas.empty("torch_ops")
        launchers = comm_launchers = None
        if self.names:
            thread, start, end = (np.frombuffer(a, np.int64) for a in (self.thread, self.start, self.end))
            found = op_launches(
                self.names,
                thread,
                start,
                end,
                np.r_[lt, jc["lt"].to_numpy()],
                np.r_[lns, jc["lns"].to_numpy()],
                queue=queue,
            )
            n = j.num_rows
            ops = op_table(
                self.names, Launches(found.dur, found.parent, found.owner[:n], found.outermost[:n]), k_us, rank
            )
            names = launched_by(self.names, found)
            launchers = _per_row(len(hw), j["row"].to_numpy(), names.slice(0, n))
            comm_launchers = _per_row(len(comm), jc["row"].to_numpy(), names.slice(n))
        ranges = schemas.empty("ranges")
        if self.module_names:
            tids = np.array(
                [tid for (_pid, tid) in self.threads], np.int64
            )  # thread code -> tid (codes are insertion order)
            m_thread = np.frombuffer(self.modules[0], np.int64)
            ranges = range_table(
                "trace",
                "module",
                self.module_names,
                m_thread,
                tids[m_thread],
                np.frombuffer(self.modules[1], np.int64),
                np.frombuffer(self.modules[2], np.int64),
                lt,
                lns,
                k_us,
                rank,
                queue=queue,
            )
        return (ops, self.intervals(rank), ranges), launchers, comm_launchers


def _per_row(n: int, rows: np.ndarray, values: pa.Array) -> pa.Array:
    """``values`` (one per join row) placed at their ``rows`` of ``n``; a row two flows reach (a repeated
    event): its first; rows none reach: null."""
    at, first = np.unique(rows, return_index=True)
    return pc.take(
        values.take(pa.array(first, pa.int64())), pc.index_in(pa.array(np.arange(n)), value_set=pa.array(at))
    )


def _freq_table(samples: list[tuple[int, float, float]], rank, device_id) -> pa.Table:
    if not samples:
        return schemas.empty("aicore_freq")
    samples.sort()
    ns, us, mhz = (np.array(c) for c in zip(*samples))
    n = len(samples)
    return pa.table(
        {
            "source": pa.repeat(pa.scalar("trace", pa.string()), n),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
            "device_id": pa.repeat(pa.scalar(device_id, pa.int32()), n),
            "ts_us": pa.array(us, pa.float64()),
            "ts_ns": pa.array(np.where(ns == MISSING, None, ns).tolist(), pa.int64()),
            "freq_mhz": pa.array(mhz, pa.float64()),
        },
        schema=schemas.AICORE_FREQ,
    )


def _step_events(names: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Which names are torch_npu's ``ProfilerStep#N`` events. Only the names that start so go
    through the pattern: the Python process may have a million events, and a handful of steps."""
    maybe = np.flatnonzero(pc.fill_null(pc.starts_with(names, "ProfilerStep#"), False).to_numpy(zero_copy_only=False))
    out = np.zeros(len(names), bool)
    out[maybe] = [_PROFILER_STEP.match(n) is not None for n in names.take(pa.array(maybe)).to_pylist()]
    return out


def _plane_ids(pids: np.ndarray, tids: np.ndarray, thread_names: dict[tuple[int, int], str]) -> np.ndarray:
    """The HCCL plane of each row, from its thread's name, worked out once per thread."""
    if len(pids) == 0:
        return np.zeros(0, np.int64)
    threads, row_thread = np.unique(np.stack([pids, tids], axis=1), axis=0, return_inverse=True)
    per_thread = np.array([_plane_of(thread_names.get((int(p), int(t)), "")) for p, t in threads], dtype=np.int64)
    return per_thread[row_thread.reshape(-1)]


def _plane_of(thread: str) -> int:
    m = re.match(r"Plane (\d+)", thread)
    return int(m.group(1)) if m else MISSING


def _device_from_label(label: str) -> int | None:
    parts = label.split()
    if len(parts) == 2 and parts[0] == "NPU" and parts[1].isdigit():
        return int(parts[1])
    return None


def _int_col(values: np.ndarray) -> pa.Array:
    return pa.array(values, pa.int64(), mask=values == MISSING)


def _take_int(cols: _Final, key: str, rows: np.ndarray) -> np.ndarray:
    return cols.num(f"i:{key}", rows)


def _first(*candidates: np.ndarray) -> np.ndarray:
    out = candidates[0].copy()
    for c in candidates[1:]:
        out = np.where(out == MISSING, c, out)
    return out


def _to_floats(values: pa.Array) -> np.ndarray:
    """float() of each text (None and what is no number: NaN)."""
    try:
        return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        return np.array([num(v) for v in values.to_pylist()], np.float64)


def _common(cols: _Final, rows: np.ndarray, rank, device_id) -> dict[str, pa.Array]:
    n = len(rows)
    return {
        "source": pa.repeat(pa.scalar("trace"), n),
        "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
        "device_id": pa.repeat(pa.scalar(device_id, pa.int32()), n),
        "op_name": cols.text("name", rows),
        "start_us": pa.array(cols.num("ts", rows), pa.float64()),
        "start_ns": _int_col(cols.num("ts_ns", rows)),
        "duration_us": pa.array(cols.num("dur", rows), pa.float64()),
    }


def _model(cols: _Final, rows: np.ndarray) -> pa.Array:
    model = _take_int(cols, "model", rows)
    return _int_col(np.where(model == NO_MODEL_ID, MISSING, model))


def _task_table(
    cols: _Final, rows: np.ndarray, rank, device_id, flows: dict[int, int], launchers: pa.Array | None
) -> pa.Table:
    conn = _take_int(cols, "connection", rows)
    launch = None
    if flows:
        at = pc.index_in(pa.array(conn), pa.array(np.fromiter(flows, np.int64, len(flows)))).to_numpy(
            zero_copy_only=False
        )
        found = ~np.isnan(at) & (conn != MISSING)
        launch = np.full(len(rows), MISSING, np.int64)
        launch[found] = np.fromiter(flows.values(), np.int64, len(flows))[at[found].astype(np.int64)]
    table = pa.table(
        {
            **_common(cols, rows, rank, device_id),
            "model_id": _model(cols, rows),
            "stream_id": _int_col(_first(_take_int(cols, "stream", rows), cols.tid[rows])),
            "task_id": _int_col(_take_int(cols, "task", rows)),
            "task_type": cols.text("type", rows),
            "connection_id": _int_col(conn),
            "size_bytes": _int_col(_take_int(cols, "size", rows)),
            "direction": map_distinct(
                cols.text("operation", rows), lambda op: _OPERATION.get((op or "").lower(), "unknown")
            ),
            "launch_ns": _int_col(launch) if launch is not None else pa.nulls(len(rows), pa.int64()),
            "launched_by": launchers if launchers is not None else pa.nulls(len(rows), pa.string()),
        }
    )
    return schemas.conform(table, schemas.KERNELS, keep_extra=True)


def _comm_op_table(cols: _Final, rows: np.ndarray, rank, device_id, launchers: pa.Array | None) -> pa.Table:
    n = len(rows)
    table = pa.table(
        {
            **_common(cols, rows, rank, device_id),
            "model_id": _model(cols, rows),
            "task_type": pa.repeat(pa.scalar("HCCL"), n),
            "task_class": pa.repeat(pa.scalar("communication"), n),
            "connection_id": _int_col(_take_int(cols, "connection", rows)),
            "launched_by": launchers if launchers is not None else pa.nulls(n, pa.string()),
        }
    )
    return schemas.conform(table, schemas.KERNELS, keep_extra=True)


def _rank_col(values: np.ndarray) -> pa.Array:
    return _int_col(np.where(values == NO_RANK, MISSING, values))


def _comm_task_table(cols: _Final, rows: np.ndarray, plane_ids: np.ndarray, rank) -> pa.Table:
    n = len(rows)
    bw = _to_floats(cols.text("bandwidth", rows))
    table = pa.table(
        {
            "source": pa.repeat(pa.scalar("trace"), n),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
            "plane_id": pa.array(np.where(plane_ids == MISSING, 0, plane_ids), pa.int32(), mask=plane_ids == MISSING),
            "task_type": pc.coalesce(
                cols.text("type", rows), cols.text("name", rows)
            ),  # else its name: both say Notify_Wait...
            "start_us": pa.array(cols.num("ts", rows), pa.float64()),
            "start_ns": _int_col(cols.num("ts_ns", rows)),
            "duration_us": pa.array(cols.num("dur", rows), pa.float64()),
            "stream_id": _int_col(_take_int(cols, "stream", rows)),
            "task_id": _int_col(_take_int(cols, "task", rows)),
            "src_rank": _rank_col(_take_int(cols, "src", rows)),
            "dst_rank": _rank_col(_take_int(cols, "dst", rows)),
            "transport": cols.text("transport", rows),
            "link_type": cols.text("link", rows),
            "size_bytes": _int_col(_take_int(cols, "size", rows)),
            "bandwidth_gbps": pa.array(bw, pa.float64(), mask=np.isnan(bw)),
        }
    )
    return schemas.conform(table, schemas.COMM_TASKS)


def _step_table(cols: _Final, markers: np.ndarray, profiler_steps: np.ndarray, rank, device_id) -> pa.Table:
    """Steps from msprof's step-trace markers (by iteration id), else torch_npu's ProfilerStep#N ranges."""
    steps: dict[int, dict] = {}
    ts, dur = cols.num("ts", markers), cols.num("dur", markers)
    for i, name in enumerate(cols.text("name", markers).to_pylist()):
        m = _MARKER.match(name)
        if not m:
            continue
        kind, step = m.group(1), int(m.group(2))
        row = steps.setdefault(step, {"step": step})
        d = float(dur[i]) if dur[i] == dur[i] else None
        if kind == "Iteration":
            row["start_us"], row["step_time_us"] = float(ts[i]), d
            row["end_us"] = float(ts[i]) + d if d is not None else None
        elif kind == "FP_BP Time":
            row["fp_bp_us"] = d
        elif kind == "Iteration Refresh":
            row["iteration_refresh_us"] = d
        elif kind == "Data_aug Bound":
            row["data_aug_bound_us"] = d
        elif kind == "Reduce":
            row["reduce_us"] = (row.get("reduce_us") or 0.0) + (d or 0.0)
    source = "step_trace"
    if not steps:
        source = "trace"
        ts, dur, ns = cols.num("ts", profiler_steps), cols.num("dur", profiler_steps), cols.num("ts_ns", profiler_steps)
        for i, name in enumerate(cols.text("name", profiler_steps).to_pylist()):
            step = int(_PROFILER_STEP.match(name).group(1))  # type: ignore[union-attr]
            d = float(dur[i]) if dur[i] == dur[i] else None
            exact = int(ns[i]) if ns[i] != MISSING else None
            steps.setdefault(
                step,
                {
                    "step": step,
                    "start_us": float(ts[i]),
                    "end_us": float(ts[i]) + d if d is not None else None,
                    "start_ns": exact,
                    "end_ns": exact + round(d * 1000)
                    if exact is not None and d is not None and abs(d) <= 1e12
                    else None,
                },
            )
    rows = [{"source": source, "rank": rank, "device_id": device_id, **steps[k]} for k in sorted(steps)]
    return pa.Table.from_pylist(rows, schema=schemas.STEPS) if rows else schemas.empty("steps")


def _api_table(cols: _Final, rows: np.ndarray, rank) -> pa.Table:
    # "AscendCL@aclnnAdd": the level from the prefix where the event has no level arg, the name after '@'
    # the pattern and the prefix's level once per distinct name of the store's dictionary, taken to the rows
    encoded, level = cols.encoded("name", rows), cols.text("level", rows)
    distinct, at = encoded.dictionary, encoded.indices
    parts = pc.extract_regex(
        distinct, r"(?s)^(?P<prefix>[^@]*)@(?P<rest>.+)$"
    )  # null where there is no '@' or nothing after it
    split = pc.is_valid(parts)
    prefix_level = map_distinct(
        pc.struct_field(parts, "prefix"), lambda p: _LEVEL_PREFIX.get(p, p.lower()) if p is not None else None
    )
    names = pc.if_else(split, pc.struct_field(parts, "rest"), distinct).take(at)
    split, prefix_level = pc.fill_null(split.take(at), False), prefix_level.take(at)
    has_level = pc.fill_null(pc.not_equal(level, ""), False)
    levels = pc.if_else(pc.and_(split, pc.invert(has_level)), prefix_level, level)
    del encoded, level, parts, split, prefix_level, has_level  # before the number columns are taken
    n = len(rows)
    table = pa.table(
        {
            "source": pa.repeat(pa.scalar("trace"), n),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
            "level": levels,
            "name": names,
            "start_us": pa.array(cols.num("ts", rows), pa.float64()),
            "start_ns": _int_col(cols.num("ts_ns", rows)),
            "duration_us": pa.array(cols.num("dur", rows), pa.float64()),
            "thread_id": _int_col(_first(_take_int(cols, "thread", rows), cols.tid[rows])),
            "connection_id": _int_col(_take_int(cols, "connection", rows)),
        }
    )
    return schemas.conform(table, schemas.API_CALLS)


_TRACE_PARTS = (
    "tasks",
    "comm_ops",
    "comm_tasks",
    "api_calls",
    "steps",
    "aicore_freq",
    "torch_ops",
    "host_ops",
    "ranges",
)


def _read_as(path: Path, rank: int | None) -> FileTables:
    return from_object(read_trace(path, rank), _TRACE_PARTS)


# Chrome-trace JSON: torch_npu's trace_view.json and msprof's msprof_*.json timelines (recognised by
# content too), and msprof's per-kind slices; tasks, HCCL ops and steps each come from the best of them
register(
    Format(
        "trace",
        re.compile(r"^(trace_view|msprof(?!_tx))[^/]*\.json$"),
        _read_as,
        _TRACE_PARTS,
        trace_content=True,
        sources={
            "device_tasks": 5,
            "device_timeline": 1,
            "hccl": 1,
            "hccl_streams": 0,
            "steps": 4,
            "api_calls": 0,
            "aicore_freq": 1,
            "torch_ops": 0,
            "host_ops": 0,
            "ranges": 0,
        },
    )
)
register(
    Format(
        "task_time_json",
        re.compile(r"^task_time[^/]*\.json$"),
        _read_as,
        _TRACE_PARTS,
        sources={"device_tasks": 4, "device_timeline": 0, "hccl_streams": 0},
    )
)
register(
    Format("step_trace_json", re.compile(r"^step_trace[^/]*\.json$"), _read_as, _TRACE_PARTS, sources={"steps": 3})
)
register(
    Format(
        "hccl_json", re.compile(r"^hccl_\d[^/]*\.json$"), _read_as, _TRACE_PARTS, sources={"hccl": 0, "hccl_streams": 0}
    )
)
