"""Time ranges worth marking on a timeline: exposed copies and device idle gaps (with what the host
was doing: the idle causes' attribution), per rank, and the late ranks of collectives (the stretch
the others waited for the last one, on the late rank, with what its host was doing).

The glossary's definitions (:mod:`npudiag.profiling.analysis.quantities`), the same as the unoverlapped_copy
and device_idle rules, but every range rather than the worst few, for renderers that draw tracks
(Chrome trace)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.cluster import comm_waits
from npudiag.profiling.analysis.context import rank_rows
from npudiag.profiling.analysis.idle_causes import device_tasks, gap_causes
from npudiag.profiling.analysis.quantities import exposed_copy_segments, idle_gaps, timeline

SCHEMA = pa.schema(
    [
        ("rank", pa.int32()),
        ("kind", pa.string()),
        ("start_us", pa.float64()),
        ("duration_us", pa.float64()),
        ("cause", pa.string()),
        ("cause_kind", pa.string()),
    ]
)


def markers(tables: dict[str, pa.Table], min_gap_us: float = 1000.0) -> pa.Table:
    kernels, copies = tables["kernels"], tables["copies"]
    rows: dict[str, list] = {"rank": [], "kind": [], "start_us": [], "duration_us": [], "cause": [], "cause_kind": []}
    api = tables.get("api_calls", schemas.empty("api_calls"))
    host_ops = tables.get("host_ops", schemas.empty("host_ops"))
    if kernels.num_rows == 0:
        return SCHEMA.empty_table()
    for rank in sorted(pc.unique(kernels["rank"]).to_pylist(), key=lambda r: (r is None, r)):
        k, c = rank_rows(kernels, rank), rank_rows(copies, rank)
        tl = timeline(k, c)
        es, ee = exposed_copy_segments(tl)
        gs, ge = idle_gaps(tl)
        long = (ge - gs) >= min_gap_us
        for kind, s, e in (("exposed copy", es, ee), ("device idle", gs[long], ge[long])):
            rows["rank"] += [rank] * len(s)
            rows["kind"] += [kind] * len(s)
            rows["start_us"] += (s + tl.base / 1000.0).tolist()
            rows["duration_us"] += (e - s).tolist()
            if kind == "device idle" and len(s):
                ns_s = tl.base + np.rint(s * 1000.0).astype(np.int64)
                ns_e = tl.base + np.rint(e * 1000.0).astype(np.int64)
                cause, ckind = gap_causes(
                    device_tasks(k, c), rank_rows(api, rank), rank_rows(host_ops, rank), ns_s, ns_e
                )
                rows["cause"] += cause
                rows["cause_kind"] += ckind
            else:
                rows["cause"] += [None] * len(s)
                rows["cause_kind"] += [None] * len(s)
    late = late_ranks(tables, min_gap_us)
    for key in rows:
        rows[key] += late[key]
    return pa.table(rows, schema=SCHEMA)


def late_ranks(tables: dict[str, pa.Table], min_wait_us: float = 1000.0) -> dict[str, list]:
    """Every collective some rank waited ``min_wait_us`` or more for (comm_waits over the profile's
    comm_ops): a "late rank" mark on the rank that came last, from the earliest entry to its own, its
    cause naming the op, how many ranks waited and what the late rank's host was doing."""
    out: dict[str, list] = {"rank": [], "kind": [], "start_us": [], "duration_us": [], "cause": [], "cause_kind": []}
    ops = tables.get("comm_ops", schemas.empty("comm_ops"))
    if ops.num_rows == 0 or pc.count_distinct(ops["rank"]).as_py() < 2:
        return out
    kernels = tables["kernels"]
    api, host_ops = (
        tables.get("api_calls", schemas.empty("api_calls")),
        tables.get("host_ops", schemas.empty("host_ops")),
    )

    def of(t: pa.Table, ranks: list[int]) -> pa.Table:
        return t.filter(pc.fill_null(pc.is_in(t["rank"], pa.array(ranks, pa.int32())), False))

    waits = comm_waits(ops, lambda r: of(kernels, r), lambda r: (of(api, r), of(host_ops, r)))
    if waits.num_rows == 0:
        return out
    keys = ["step", "op_name", "occurrence"]
    sizes = waits.group_by(keys, use_threads=False).aggregate([("rank", "count")])
    late = waits.filter(
        pc.and_(pc.equal(waits["rank"], waits["late_rank"]), pc.greater_equal(waits["late_by_us"], min_wait_us))
    )
    late = late.join(sizes, keys, join_type="left outer").sort_by([("start_us", "ascending")])
    for w in late.to_pylist():
        host = f"; its host: {w['late_host_cause']} ({w['late_host_kind']})" if w["late_host_cause"] else ""
        out["rank"].append(w["rank"])
        out["kind"].append("late rank")
        out["start_us"].append(w["start_us"] - w["late_by_us"])
        out["duration_us"].append(w["late_by_us"])
        out["cause"].append(f"{w['op_name']} in {w['step']}: {w['rank_count'] - 1} rank(s) waited{host}")
        out["cause_kind"].append(None)
    return out
