"""msprof_*.json / trace_view.json (Chrome trace) → ``kernels``, ``api_calls`` and device ``copies``.

Which process an event belongs to is only known from ``ph:"M"`` ``process_name`` metadata, which
may come after the events, so complete events are collected with their pid and sorted into tables
at the end. Python-side torch events (``cat`` cpu_op, python_function, enqueue, dequeue), counters and
flows are skipped: the tables here describe device tasks and CANN host API calls.
"""

from __future__ import annotations

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


def _int(value: object) -> int | None:
    try:
        out = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return out if -(2**63) <= out < 2**63 else None


_ARG_KEYS = (
    "Task Type",
    "Physic Stream Id",
    "Stream Id",
    "Task Id",
    "Model Id",
    "model id",
    "connection_id",
    "size(B)",
    "operation",
    "Thread Id",
    "level",
)


class _Columns:
    """Per-event columns kept while streaming; repeated strings are interned to save memory."""

    def __init__(self) -> None:
        self.pid: list[object] = []
        self.tid: list[object] = []
        self.name: list[str] = []
        self.ts: list[float] = []
        self.dur: list[float] = []
        self.args: dict[str, list[object]] = {k: [] for k in _ARG_KEYS}
        self._intern: dict[str, str] = {}

    def add(self, ev: dict, t: float) -> None:
        self.pid.append(ev.get("pid"))
        self.tid.append(ev.get("tid"))
        nm = str(ev.get("name", ""))
        self.name.append(self._intern.setdefault(nm, nm))
        self.ts.append(t)
        self.dur.append(_num(ev.get("dur")))
        a = ev.get("args")
        if not isinstance(a, dict):
            a = {}
        for k, col in self.args.items():
            v = a.get(k)
            if isinstance(v, str):
                v = self._intern.setdefault(v, v)
            col.append(v)


def read_trace(path: Path, rank: int | None = None, progress: Callable[[int], None] | None = None) -> TraceTables:
    process_names: dict[object, str] = {}
    process_labels: dict[object, str] = {}
    thread_names: dict[tuple[object, object], str] = {}
    cols = _Columns()
    bad_ts = 0
    for ev in iter_events(path, progress):
        ph = ev.get("ph")
        if ph == "X":
            if ev.get("cat") in _SKIP_CATS:
                continue
            t = _num(ev.get("ts"))
            if t != t:  # NaN
                bad_ts += 1
                continue
            cols.add(ev, t)
        elif ph == "M":
            a = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            if ev.get("name") == "process_name":
                process_names[ev.get("pid")] = str(a.get("name", ""))
            elif ev.get("name") == "process_labels":
                process_labels[ev.get("pid")] = str(a.get("labels", ""))
            elif ev.get("name") == "thread_name":
                thread_names[(ev.get("pid"), ev.get("tid"))] = str(a.get("name", ""))
    warnings = []
    if bad_ts:
        warnings.append(f"{path}: {bad_ts} complete event(s) without a numeric 'ts' were skipped")
    if not process_names and cols.pid:
        raise InputError(path, "no process_name metadata events; expected an msprof / torch_npu Chrome trace")
    procs = [process_names.get(p, "") for p in cols.pid]
    device_ids = sorted({d for d in (_device_from_label(v) for v in process_labels.values()) if d is not None})
    device_id = device_ids[0] if len(device_ids) == 1 else None

    hw = [i for i, p in enumerate(procs) if p == HARDWARE]
    hccl = [i for i, p in enumerate(procs) if p in HCCL and not thread_names.get((cols.pid[i], cols.tid[i]), "").startswith("Plane")]
    cann = [i for i, p in enumerate(procs) if p == CANN]
    copies = [i for i in hw if "MEMCPY" in cols.name[i].upper()]
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


def _pick(values: list, rows: list[int]) -> list:
    return [values[i] for i in rows]


def _stream(cols: _Columns, rows: list[int]) -> list[int | None]:
    phys, old, tid = cols.args["Physic Stream Id"], cols.args["Stream Id"], cols.tid
    return [_int(phys[i] if phys[i] is not None else old[i] if old[i] is not None else tid[i]) for i in rows]


def _ints(cols: _Columns, key: str, rows: list[int]) -> list[int | None]:
    col = cols.args[key]
    return [_int(col[i]) for i in rows]


def _kernel_table(cols: _Columns, hw: list[int], hccl: list[int], rank, device_id) -> pa.Table:
    rows = hw + hccl
    n = len(rows)
    tt = cols.args["Task Type"]
    task_type = [None if tt[i] is None else str(tt[i]) for i in hw] + ["HCCL"] * len(hccl)
    m1, m2 = cols.args["Model Id"], cols.args["model id"]
    model = [_int(m1[i] if m1[i] is not None else m2[i]) for i in rows]
    table = pa.table(
        {
            "source": pa.array(["trace"] * n, pa.string()),
            "rank": pa.array([rank] * n, pa.int32()),
            "device_id": pa.array([device_id] * n, pa.int32()),
            "model_id": pa.array([None if m == NO_MODEL_ID else m for m in model], pa.int64()),
            "stream_id": pa.array(_stream(cols, hw) + [None] * len(hccl), pa.int64()),
            "task_id": pa.array(_ints(cols, "Task Id", rows), pa.int64()),
            "op_name": pa.array(_pick(cols.name, rows), pa.string()),
            "task_type": pa.array(task_type, pa.string()),
            "start_us": pa.array(_pick(cols.ts, rows), pa.float64()),
            "duration_us": pa.array(_pick(cols.dur, rows), pa.float64()),
            "connection_id": pa.array(_ints(cols, "connection_id", rows), pa.int64()),
        }
    )
    return schemas.conform(table, schemas.KERNELS, keep_extra=True)


def _copy_table(cols: _Columns, rows: list[int], rank) -> pa.Table:
    n = len(rows)
    op = cols.args["operation"]
    table = pa.table(
        {
            "source": pa.array(["trace"] * n, pa.string()),
            "rank": pa.array([rank] * n, pa.int32()),
            "side": pa.array(["device"] * n, pa.string()),
            "name": pa.array(_pick(cols.name, rows), pa.string()),
            "direction": pa.array([_OPERATION.get(str(op[i] or "").lower(), "unknown") for i in rows], pa.string()),
            "size_bytes": pa.array(_ints(cols, "size(B)", rows), pa.int64()),
            "start_us": pa.array(_pick(cols.ts, rows), pa.float64()),
            "duration_us": pa.array(_pick(cols.dur, rows), pa.float64()),
            "stream_id": pa.array(_stream(cols, rows), pa.int64()),
            "mode": pa.array(["unknown"] * n, pa.string()),
            "connection_id": pa.array(_ints(cols, "connection_id", rows), pa.int64()),
        }
    )
    return schemas.conform(table, schemas.COPIES)


def _api_table(cols: _Columns, rows: list[int], rank) -> pa.Table:
    levels, names = [], []
    lv = cols.args["level"]
    for i in rows:
        prefix, _, rest = cols.name[i].partition("@")
        level = lv[i]
        if rest:
            levels.append(str(level) if level else _LEVEL_PREFIX.get(prefix, prefix.lower()))
            names.append(rest)
        else:
            levels.append(str(level) if level else None)
            names.append(cols.name[i])
    n = len(rows)
    th, tid = cols.args["Thread Id"], cols.tid
    table = pa.table(
        {
            "source": pa.array(["trace"] * n, pa.string()),
            "rank": pa.array([rank] * n, pa.int32()),
            "level": pa.array(levels, pa.string()),
            "name": pa.array(names, pa.string()),
            "start_us": pa.array(_pick(cols.ts, rows), pa.float64()),
            "duration_us": pa.array(_pick(cols.dur, rows), pa.float64()),
            "thread_id": pa.array([_int(th[i] if th[i] is not None else tid[i]) for i in rows], pa.int64()),
            "connection_id": pa.array(_ints(cols, "connection_id", rows), pa.int64()),
        }
    )
    return schemas.conform(table, schemas.API_CALLS)
