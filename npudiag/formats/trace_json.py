"""msprof_*.json / trace_view.json (Chrome trace) → ``kernels``, ``api_calls`` and device ``copies``.

Which process an event belongs to is only known from ``ph:"M"`` ``process_name`` metadata, which
may come after the events, so complete events are collected with their pid and sorted into tables
at the end. Python-side torch events (``cat`` cpu_op, python_function, enqueue, dequeue), counters and
flows are skipped: the tables here describe device tasks and CANN host API calls.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.formats.csvtext import NO_MODEL_ID
from npudiag.formats.jsonstream import iter_events

HARDWARE = "Ascend Hardware"
CANN = "CANN"
HCCL = {"HCCL", "Communication"}
_NEEDED = {HARDWARE, CANN, *HCCL}
_SKIP_CATS = {"cpu_op", "python_function", "enqueue", "dequeue", "user_annotation", "gpu_user_annotation"}
_OPERATION = {"host to device": "H2D", "device to host": "D2H", "device to device": "D2D", "host to host": "H2H"}
_LEVEL_PREFIX = {"AscendCL": "acl", "Runtime": "runtime", "Node": "node", "HCCL": "hccl", "Model": "model"}


@dataclass
class TraceTables:
    kernels: pa.Table
    api_calls: pa.Table
    device_copies: pa.Table
    device_ids: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _num(value: object) -> float:
    """Trace numbers come as numbers or as strings ("1736405443876953.510")."""
    if value is None:
        return np.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return np.nan


MISSING = -(2**63)  # "no value" in the int64 columns kept while streaming
# column -> arg names, first present wins (older CANN writes "Stream Id", HCCL ops "model id")
_INT_ARGS = {
    "stream": ("Physic Stream Id", "Stream Id"),
    "task": ("Task Id",),
    "model": ("Model Id", "model id"),
    "connection": ("connection_id",),
    "size": ("size(B)",),
    "thread": ("Thread Id",),
}
_STR_ARGS = ("Task Type", "operation", "level")


def _code(value: object) -> int:
    """An int64 for a number-like value, MISSING otherwise (pid/tid/args are ints in real traces)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if MISSING < value < 2**63 else MISSING
    if isinstance(value, (float, str)):
        try:
            out = int(value)
        except (TypeError, ValueError, OverflowError):
            return MISSING
        return out if MISSING < out < 2**63 else MISSING
    return MISSING


def _exact_ns(ts: object, as_float: float) -> int:
    """The trace's ts (a string of microseconds with 3 decimals) as exact integer nanoseconds."""
    if ts.__class__ is str:
        whole, _, frac = ts.strip().partition(".")
        try:
            return int(whole) * 1000 + (int((frac + "000")[:3]) if frac else 0) * (-1 if whole.startswith("-") else 1)
        except ValueError:
            pass
    return round(as_float * 1000.0)


class _Columns:
    """Typed columns kept while streaming (about 130 bytes an event); strings are interned."""

    def __init__(self) -> None:
        self.pid = array("q")
        self.tid = array("q")
        self.ts = array("d")
        self.ts_ns = array("q")
        self.dur = array("d")
        self.name: list[str] = []
        self.ints = {k: array("q") for k in _INT_ARGS}
        self.strs: dict[str, list[str | None]] = {k: [] for k in _STR_ARGS}
        self._intern: dict[str, str] = {}
        self.other_pids: dict[object, int] = {}
        self._int_items = tuple((_INT_ARGS[k], col.append) for k, col in self.ints.items())
        self._str_items = tuple((k, col.append) for k, col in self.strs.items())
        self._int_appends = tuple(a for _, a in self._int_items)
        self._str_appends = tuple(a for _, a in self._str_items)

    def pid_code(self, value: object) -> int:
        c = _code(value)
        if c == MISSING and value is not None:
            c = self.other_pids.setdefault(value, -1 - len(self.other_pids))
        return c

    def add(self, ev: dict, t: float) -> None:
        # the hot loop of trace reading: bound methods and inline checks keep it near 3 µs an event
        intern = self._intern
        pid = ev.get("pid")
        self.pid.append(pid if pid.__class__ is int and MISSING < pid < 2**63 else self.pid_code(pid))
        tid = ev.get("tid")
        self.tid.append(tid if tid.__class__ is int and MISSING < tid < 2**63 else _code(tid))
        nm = ev.get("name", "")
        if nm.__class__ is not str:
            nm = str(nm)
        self.name.append(intern.setdefault(nm, nm))
        self.ts.append(t)
        self.ts_ns.append(_exact_ns(ev.get("ts"), t))
        d = ev.get("dur")
        self.dur.append(d if d.__class__ is float else _num(d))
        a = ev.get("args")
        if a.__class__ is not dict or not a:
            for append in self._int_appends:
                append(MISSING)
            for append in self._str_appends:
                append(None)
            return
        get = a.get
        for keys, append in self._int_items:
            v = get(keys[0])
            if v is None and len(keys) > 1:
                v = get(keys[1])
            if v is None:
                append(MISSING)
            elif v.__class__ is int and MISSING < v < 2**63:
                append(v)
            else:
                append(_code(v))
        for key, append in self._str_items:
            v = get(key)
            if v is None:
                append(None)
            else:
                if v.__class__ is not str:
                    v = str(v)
                append(intern.setdefault(v, v))

    def np(self, col: array) -> np.ndarray:
        return np.frombuffer(col, dtype=np.int64) if col.typecode == "q" else np.frombuffer(col, dtype=np.float64)


def read_trace(path: Path, rank: int | None = None, progress: Callable[[int], None] | None = None) -> TraceTables:
    process_names: dict[int, str] = {}
    process_labels: dict[int, str] = {}
    thread_names: dict[tuple[int, int], str] = {}
    cols = _Columns()
    bad_ts = 0
    skip_pids: set[object] = set()  # processes already named and not needed (Overlap Analysis, HBM, ...)
    for ev in iter_events(path, progress):
        ph = ev.get("ph")
        if ph == "X":
            if ev.get("cat") in _SKIP_CATS or ev.get("pid") in skip_pids:
                continue
            t = _num(ev.get("ts"))
            if t != t:  # NaN
                bad_ts += 1
                continue
            cols.add(ev, t)
        elif ph == "M":
            a = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            pid = cols.pid_code(ev.get("pid"))
            if ev.get("name") == "process_name":
                process_names[pid] = str(a.get("name", ""))
                if process_names[pid] not in _NEEDED:
                    skip_pids.add(ev.get("pid"))
            elif ev.get("name") == "process_labels":
                process_labels[pid] = str(a.get("labels", ""))
            elif ev.get("name") == "thread_name":
                thread_names[(pid, _code(ev.get("tid")))] = str(a.get("name", ""))
    warnings = []
    if bad_ts:
        warnings.append(f"{path}: {bad_ts} complete event(s) without a numeric 'ts' were skipped")
    if not process_names and len(cols.pid):
        raise InputError(path, "no process_name metadata events; expected an msprof / torch_npu Chrome trace")
    device_ids = sorted({d for d in (_device_from_label(v) for v in process_labels.values()) if d is not None})
    device_id = device_ids[0] if len(device_ids) == 1 else None

    pid = cols.np(cols.pid)
    tid = cols.np(cols.tid)

    def rows_of(names: set[str]) -> np.ndarray:
        pids = [p for p, n in process_names.items() if n in names]
        return np.nonzero(np.isin(pid, np.array(pids, dtype=np.int64)))[0] if pids else np.array([], dtype=np.int64)

    hw = rows_of({HARDWARE})
    hccl = rows_of(HCCL)
    if len(hccl) and thread_names:
        plane = np.array([thread_names.get((int(pid[i]), int(tid[i])), "").startswith("Plane") for i in hccl], dtype=bool)
        hccl = hccl[~plane]
    cann = rows_of({CANN})
    copies = hw[np.array(["MEMCPY" in cols.name[i].upper() for i in hw], dtype=bool)] if len(hw) else hw
    return TraceTables(
        _kernel_table(cols, hw, hccl, rank, device_id),
        _api_table(cols, cann, rank),
        _copy_table(cols, copies, rank),
        device_ids,
        warnings,
    )


def _device_from_label(label: str) -> int | None:
    parts = label.split()
    if len(parts) == 2 and parts[0] == "NPU" and parts[1].isdigit():
        return int(parts[1])
    return None


def _int_col(values: np.ndarray) -> pa.Array:
    return pa.array(values, pa.int64(), mask=values == MISSING)


def _take_int(cols: _Columns, key: str, rows: np.ndarray) -> np.ndarray:
    return cols.np(cols.ints[key])[rows]


def _first(*candidates: np.ndarray) -> np.ndarray:
    out = candidates[0].copy()
    for c in candidates[1:]:
        out = np.where(out == MISSING, c, out)
    return out


def _stream(cols: _Columns, rows: np.ndarray) -> np.ndarray:
    return _first(_take_int(cols, "stream", rows), cols.np(cols.tid)[rows])


def _strs(values: list, rows: np.ndarray) -> pa.Array:
    return pa.array([values[i] for i in rows], pa.string())


def _kernel_table(cols: _Columns, hw: np.ndarray, hccl: np.ndarray, rank, device_id) -> pa.Table:
    rows = np.concatenate([hw, hccl]).astype(np.int64)
    n = len(rows)
    task_type = [cols.strs["Task Type"][i] for i in hw] + ["HCCL"] * len(hccl)
    model = _take_int(cols, "model", rows)
    model = np.where(model == NO_MODEL_ID, MISSING, model)
    stream = np.concatenate([_stream(cols, hw), np.full(len(hccl), MISSING, np.int64)])
    table = pa.table(
        {
            "source": pa.repeat(pa.scalar("trace"), n),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
            "device_id": pa.repeat(pa.scalar(device_id, pa.int32()), n),
            "model_id": _int_col(model),
            "stream_id": _int_col(stream),
            "task_id": _int_col(_take_int(cols, "task", rows)),
            "op_name": _strs(cols.name, rows),
            "task_type": pa.array(task_type, pa.string()),
            "start_us": pa.array(cols.np(cols.ts)[rows], pa.float64()),
            "start_ns": pa.array(cols.np(cols.ts_ns)[rows], pa.int64()),
            "duration_us": pa.array(cols.np(cols.dur)[rows], pa.float64()),
            "connection_id": _int_col(_take_int(cols, "connection", rows)),
        }
    )
    return schemas.conform(table, schemas.KERNELS, keep_extra=True)


def _copy_table(cols: _Columns, rows: np.ndarray, rank) -> pa.Table:
    n = len(rows)
    op = cols.strs["operation"]
    table = pa.table(
        {
            "source": pa.repeat(pa.scalar("trace"), n),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
            "side": pa.repeat(pa.scalar("device"), n),
            "name": _strs(cols.name, rows),
            "direction": pa.array([_OPERATION.get((op[i] or "").lower(), "unknown") for i in rows], pa.string()),
            "size_bytes": _int_col(_take_int(cols, "size", rows)),
            "start_us": pa.array(cols.np(cols.ts)[rows], pa.float64()),
            "start_ns": pa.array(cols.np(cols.ts_ns)[rows], pa.int64()),
            "duration_us": pa.array(cols.np(cols.dur)[rows], pa.float64()),
            "stream_id": _int_col(_stream(cols, rows)),
            "mode": pa.repeat(pa.scalar("unknown"), n),
            "connection_id": _int_col(_take_int(cols, "connection", rows)),
        }
    )
    return schemas.conform(table, schemas.COPIES)


def _api_table(cols: _Columns, rows: np.ndarray, rank) -> pa.Table:
    levels, names = [], []
    lv = cols.strs["level"]
    for i in rows:
        prefix, _, rest = cols.name[i].partition("@")
        level = lv[i]
        if rest:
            levels.append(level or _LEVEL_PREFIX.get(prefix, prefix.lower()))
            names.append(rest)
        else:
            levels.append(level)
            names.append(cols.name[i])
    n = len(rows)
    table = pa.table(
        {
            "source": pa.repeat(pa.scalar("trace"), n),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
            "level": pa.array(levels, pa.string()),
            "name": pa.array(names, pa.string()),
            "start_us": pa.array(cols.np(cols.ts)[rows], pa.float64()),
            "start_ns": pa.array(cols.np(cols.ts_ns)[rows], pa.int64()),
            "duration_us": pa.array(cols.np(cols.dur)[rows], pa.float64()),
            "thread_id": _int_col(_first(_take_int(cols, "thread", rows), cols.np(cols.tid)[rows])),
            "connection_id": _int_col(_take_int(cols, "connection", rows)),
        }
    )
    return schemas.conform(table, schemas.API_CALLS)
