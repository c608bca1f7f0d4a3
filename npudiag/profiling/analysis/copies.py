"""The ``copies`` table: every memory copy seen on the device or on the host.

Device side: the copy-class device tasks of :mod:`npudiag.profiling.tasks` (MEMCPY tasks on a stream, with
msprof's ``size(B)`` and ``operation`` args, or the .db's MEMCPY_INFO, when present). Host side: copy API calls
(aclrtMemcpy*, runtime MemCopySync / MemcpyAsync...). A runtime-level copy call nested inside an
AscendCL-level copy call on the same thread is the same copy and is dropped. A device copy whose
``connection_id`` links it to a host copy call takes that call's sync/async mode, and the call
takes the copy's size and direction.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas

COPY_API = re.compile(r"^(aclrtMemcpy\w*|rtMemcpy\w*|MemCopy\w*|Memcpy\w*|aclrtMemcpy2d\w*)$", re.IGNORECASE)
_SYNC_NAMES = {"aclrtmemcpy", "aclrtmemcpy2d", "rtmemcpy", "memcopysync", "memcopy2dsync"}


def copy_mode(name: str) -> str:
    low = name.lower()
    if "async" in low:
        return "async"
    if low in _SYNC_NAMES or low.endswith("sync"):
        return "sync"
    return "unknown"


def _host_copies(api: pa.Table) -> pa.Table:
    keep = pc.fill_null(pc.match_substring_regex(api["name"], COPY_API.pattern, ignore_case=True), False)
    calls = api.filter(keep)
    if calls.num_rows == 0:
        return schemas.empty("copies")
    n = calls.num_rows
    start = pc.fill_null(calls["start_us"], np.nan).to_numpy(zero_copy_only=False).astype(float)
    end = start + pc.fill_null(calls["duration_us"], 0.0).to_numpy(zero_copy_only=False).astype(float)
    is_acl = pc.fill_null(pc.equal(calls["level"], "acl"), False).to_numpy(zero_copy_only=False)
    # a thread id that is missing is its own group (-1 can not be a real thread id here: ids are >= 0)
    thread = pc.fill_null(calls["thread_id"], -(2**62)).to_numpy(zero_copy_only=False)
    drop = np.zeros(n, bool)
    if is_acl.any() and (~is_acl).any():
        for tid in np.unique(thread[is_acl]):
            outer = np.nonzero(is_acl & (thread == tid))[0]
            inner = np.nonzero(~is_acl & (thread == tid))[0]
            if not len(inner):
                continue
            order = np.argsort(start[outer], kind="stable")
            o_s, o_e = start[outer][order], end[outer][order]
            j = np.searchsorted(o_s, start[inner], side="right") - 1
            ok = j >= 0
            contained = np.zeros(len(inner), bool)
            contained[ok] = o_e[j[ok]] >= end[inner][ok]
            drop[inner[contained]] = True
    calls = calls.filter(pa.array(~drop))
    m = calls.num_rows
    return schemas.conform(
        pa.table(
            {
                "source": calls["source"],
                "rank": calls["rank"],
                "side": pa.repeat(pa.scalar("host"), m),
                "name": calls["name"],
                "direction": pa.repeat(pa.scalar("unknown"), m),
                "start_us": calls["start_us"],
                "start_ns": calls["start_ns"],
                "duration_us": calls["duration_us"],
                "thread_id": calls["thread_id"],
                "mode": schemas.map_distinct(calls["name"], lambda x: copy_mode(x or "")),
                "connection_id": calls["connection_id"],
            }
        ),
        schemas.COPIES,
    )


def _link(device: pa.Table, host: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Join device copies and the host copy calls that launched them (same connection id): the
    device copy takes the call's sync/async mode, the call takes the copy's size and direction
    where it has none. Where several rows share a connection id, the last one counts."""
    if device.num_rows == 0 or host.num_rows == 0:
        return device, host
    call = _last_with(device["connection_id"], host["connection_id"])  # per device copy: its call's row, or null
    copy = _last_with(host["connection_id"], device["connection_id"])  # per call: its copy's row, or null
    linked = pc.is_valid(copy)
    mode = pc.if_else(pc.is_valid(call), pc.take(host["mode"], call), device["mode"])
    size = pc.if_else(
        pc.and_(linked, pc.is_null(host["size_bytes"])), pc.take(device["size_bytes"], copy), host["size_bytes"]
    )
    unknown = pc.fill_null(pc.equal(host["direction"], "unknown"), False)
    direction = pc.if_else(pc.and_(linked, unknown), pc.take(device["direction"], copy), host["direction"])
    device = device.set_column(device.schema.get_field_index("mode"), "mode", mode)
    host = host.set_column(host.schema.get_field_index("size_bytes"), "size_bytes", size)
    host = host.set_column(host.schema.get_field_index("direction"), "direction", direction)
    return device, host


def _last_with(keys: pa.ChunkedArray, among: pa.ChunkedArray) -> pa.Array:
    """For each key, the index of the last row of ``among`` holding it; null for a null key or none."""
    n = len(among)
    backwards = among.take(pa.array(np.arange(n - 1, -1, -1, dtype=np.int64))).combine_chunks()
    first_backwards = pc.index_in(keys, value_set=backwards, skip_nulls=True)
    return pc.subtract(pa.scalar(n - 1, pa.int64()), first_backwards.cast(pa.int64()))


def build_copies(device_copies: pa.Table | None, api_calls: pa.Table | None) -> pa.Table:
    """Device copy tasks (the task model's copy class) and host copy calls, linked and sorted."""
    device = device_copies if device_copies is not None and device_copies.num_rows else schemas.empty("copies")
    host = _host_copies(api_calls) if api_calls is not None and api_calls.num_rows else schemas.empty("copies")
    device, host = _link(device, host)
    parts = [t for t in (device, host) if t.num_rows]
    if not parts:
        return schemas.empty("copies")
    return pa.concat_tables(parts).sort_by([("start_us", "ascending")])
