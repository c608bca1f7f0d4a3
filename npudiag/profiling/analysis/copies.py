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
                "mode": pa.array([copy_mode(x or "") for x in calls["name"].to_pylist()], pa.string()),
                "connection_id": calls["connection_id"],
            }
        ),
        schemas.COPIES,
    )


def _link(device: pa.Table, host: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Join device copies and the host copy calls that launched them (same connection id): the
    device copy takes the call's sync/async mode, the call takes the copy's size and direction."""
    if device.num_rows == 0 or host.num_rows == 0:
        return device, host
    h_conn = host["connection_id"].to_pylist()
    h_mode = dict(zip(h_conn, host["mode"].to_pylist()))
    d_conn = device["connection_id"].to_pylist()
    d_info = dict(zip(d_conn, zip(device["size_bytes"].to_pylist(), device["direction"].to_pylist())))
    modes = [h_mode.get(c, m) if c is not None else m for c, m in zip(d_conn, device["mode"].to_pylist())]
    device = device.set_column(device.schema.get_field_index("mode"), "mode", pa.array(modes, pa.string()))
    sizes, directions = [], []
    for c, size, direction in zip(h_conn, host["size_bytes"].to_pylist(), host["direction"].to_pylist()):
        linked = d_info.get(c) if c is not None else None
        sizes.append(linked[0] if linked and size is None else size)
        directions.append(linked[1] if linked and direction == "unknown" else direction)
    host = host.set_column(host.schema.get_field_index("size_bytes"), "size_bytes", pa.array(sizes, pa.int64()))
    host = host.set_column(host.schema.get_field_index("direction"), "direction", pa.array(directions, pa.string()))
    return device, host


def build_copies(device_copies: pa.Table | None, api_calls: pa.Table | None) -> pa.Table:
    """Device copy tasks (the task model's copy class) and host copy calls, linked and sorted."""
    device = device_copies if device_copies is not None and device_copies.num_rows else schemas.empty("copies")
    host = _host_copies(api_calls) if api_calls is not None and api_calls.num_rows else schemas.empty("copies")
    device, host = _link(device, host)
    parts = [t for t in (device, host) if t.num_rows]
    if not parts:
        return schemas.empty("copies")
    return pa.concat_tables(parts).sort_by([("start_us", "ascending")])
