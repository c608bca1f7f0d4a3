"""Time ranges worth marking on a timeline: exposed copies and device idle gaps (with what the host
was doing: the idle causes' attribution), per rank.

The glossary's definitions (:mod:`npudiag.profiling.analysis.quantities`), the same as the unoverlapped_copy
and device_idle rules, but every range rather than the worst few, for renderers that draw tracks
(Chrome trace)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.context import rank_rows
from npudiag.profiling.analysis.idle_causes import gap_causes
from npudiag.profiling.analysis.quantities import exposed_copy_segments, idle_gaps, timeline

SCHEMA = pa.schema([("rank", pa.int32()), ("kind", pa.string()), ("start_us", pa.float64()), ("duration_us", pa.float64()),
                    ("cause", pa.string()), ("cause_kind", pa.string())])  # fmt: skip


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
                cause, ckind = gap_causes(rank_rows(api, rank), rank_rows(host_ops, rank), ns_s, ns_e)
                rows["cause"] += cause
                rows["cause_kind"] += ckind
            else:
                rows["cause"] += [None] * len(s)
                rows["cause_kind"] += [None] * len(s)
    return pa.table(rows, schema=SCHEMA)
