"""The ``copies`` table: every memory copy seen on the device or on the host.

Device side: the copy-class device tasks of :mod:`npudiag.tasks` (MEMCPY tasks on a stream, with
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
    df = calls.to_pandas()
    df["end_us"] = df["start_us"] + df["duration_us"]
    acl = df[df["level"] == "acl"]
    drop = np.zeros(len(df), bool)
    if len(acl) and (df["level"] != "acl").any():
        for tid, group in acl.groupby("thread_id", dropna=False):
            starts = group["start_us"].to_numpy()
            order = np.argsort(starts)
            starts, ends = starts[order], group["end_us"].to_numpy()[order]
            inner = (df["level"] != "acl").to_numpy() & (
                df["thread_id"].to_numpy() == tid if tid == tid else df["thread_id"].isna().to_numpy()
            )
            idx = np.nonzero(inner)[0]
            if not len(idx):
                continue
            s = df["start_us"].to_numpy()[idx]
            e = df["end_us"].to_numpy()[idx]
            j = np.searchsorted(starts, s, side="right") - 1
            ok = j >= 0
            contained = np.zeros(len(idx), bool)
            contained[ok] = ends[j[ok]] >= e[ok]
            drop[idx[contained]] = True
    df = df[~drop]
    n = len(df)
    return schemas.conform(
        pa.table(
            {
                "source": pa.array(df["source"].tolist(), pa.string()),
                "rank": pa.array(df["rank"].tolist(), pa.int32()),
                "side": pa.array(["host"] * n, pa.string()),
                "name": pa.array(df["name"].tolist(), pa.string()),
                "direction": pa.array(["unknown"] * n, pa.string()),
                "start_us": pa.array(df["start_us"].to_numpy(), pa.float64()),
                "start_ns": pa.array(df["start_ns"].tolist(), pa.int64()),
                "duration_us": pa.array(df["duration_us"].to_numpy(), pa.float64()),
                "thread_id": pa.array(df["thread_id"].tolist(), pa.int64()),
                "mode": pa.array([copy_mode(x) for x in df["name"]], pa.string()),
                "connection_id": pa.array(df["connection_id"].tolist(), pa.int64()),
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
