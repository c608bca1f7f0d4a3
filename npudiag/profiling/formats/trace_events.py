"""The state both trace readers share: how a kept event is stored while a trace is read (the
columns of the store, the args each takes, the int64 "no value") and the number conversions.
:mod:`trace_json` (per event) and :mod:`trace_fast` (msgspec, a piece at a time) both fill this store,
so they give the same tables field for field."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# event categories of torch_npu's Python side that never become device or host tables
SKIP_CATS = {"cpu_op", "python_function", "enqueue", "dequeue", "user_annotation", "gpu_user_annotation"}


def num(value: object) -> float:
    """Trace numbers come as numbers or as strings ("1736405443876953.510")."""
    if value is None:
        return np.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return np.nan


MISSING = -(2**63)  # "no value" in the int64 columns kept while streaming
# column -> arg names, first present wins (older CANN writes "Stream Id", HCCL ops "model id",
# HCCL plane tasks lower-case names)
INT_ARGS = {
    "stream": ("Physic Stream Id", "Stream Id", "stream id"),
    "task": ("Task Id", "task id"),
    "model": ("Model Id", "model id"),
    "connection": ("connection_id",),
    "size": ("size(B)", "size(Byte)"),
    "thread": ("Thread Id",),
    "src": ("src rank",),
    "dst": ("dst rank",),
    "plane": ("plane id",),
}
STR_ARGS = {
    "type": ("Task Type", "task type"),
    "operation": ("operation",),
    "level": ("level",),
    "transport": ("transport type",),
    "link": ("link type",),
    "bandwidth": ("bandwidth(GB/s)",),
}


def code(value: object) -> int:
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


NS_LIMIT = 9 * 10**18  # |ns| an int64 holds with room to subtract


def exact_ns(ts: object, as_float: float) -> int:
    """The trace's ts (a string of microseconds with 3 decimals) as exact integer nanoseconds;
    MISSING where it is no finite time an int64 holds (the float start then stands alone)."""
    if ts.__class__ is str:
        whole, _, frac = ts.strip().partition(".")
        if len(whole) <= 17:
            try:
                out = int(whole) * 1000 + (int((frac + "000")[:3]) if frac else 0) * (
                    -1 if whole.startswith("-") else 1
                )
                return out if -NS_LIMIT < out < NS_LIMIT else MISSING
            except ValueError:
                pass
    if as_float != as_float or abs(as_float) >= NS_LIMIT / 1000.0:
        return MISSING
    return round(as_float * 1000.0)


TEXT = pa.dictionary(pa.int32(), pa.string())  # names repeat: a chunk keeps each distinct one once
STORE = pa.schema(
    [("pid", pa.int64()), ("tid", pa.int64()), ("ts", pa.float64()), ("ts_ns", pa.int64()), ("dur", pa.float64()),
     ("name", TEXT), ("cat", TEXT)]
    + [(f"i:{k}", pa.int64()) for k in INT_ARGS] + [(f"s:{k}", TEXT) for k in STR_ARGS]
)  # fmt: skip


def store_chunk(pid, tid, ts, ts_ns, dur, name: pa.Array, cat: pa.Array, ints: dict, strs: dict) -> pa.Table:
    """Kept complete events in the reader's store: int columns hold MISSING for no value (no nulls),
    text columns are dictionary-encoded."""
    arrays = [pid, tid, ts, ts_ns, dur, name, cat, *(ints[k] for k in INT_ARGS), *(strs[k] for k in STR_ARGS)]
    return pa.Table.from_arrays(
        [
            pa.array(a, f.type) if isinstance(a, np.ndarray) else pc.dictionary_encode(a) if f.type == TEXT else a
            for a, f in zip(arrays, STORE)
        ],
        schema=STORE,
    )
