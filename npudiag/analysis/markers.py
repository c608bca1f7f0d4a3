"""Time ranges worth marking on a timeline: exposed copies and device idle gaps, per rank.

The same interval arithmetic as the unoverlapped_copy and device_idle rules, but every range
rather than the worst few, for renderers that draw tracks (Chrome trace)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.analysis.rules.base import compute_intervals
from npudiag.analysis.timeline import base_ns, intervals, merge

SCHEMA = pa.schema([("rank", pa.int32()), ("kind", pa.string()), ("start_us", pa.float64()), ("duration_us", pa.float64())])


def _subtract(seg_s: np.ndarray, seg_e: np.ndarray, cov_s: np.ndarray, cov_e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parts of the segments not covered by the (disjoint, sorted) cover, as disjoint ranges."""
    # boundaries of the uncovered complement, intersected with each segment
    comp_s = np.concatenate([[-np.inf], cov_e])
    comp_e = np.concatenate([cov_s, [np.inf]])
    out_s, out_e = [], []
    j0 = np.searchsorted(comp_e, seg_s, side="right")
    j1 = np.searchsorted(comp_s, seg_e, side="left")
    for s, e, a, b in zip(seg_s, seg_e, j0, j1):
        for j in range(a, b):
            lo, hi = max(s, comp_s[j]), min(e, comp_e[j])
            if hi > lo:
                out_s.append(lo)
                out_e.append(hi)
    return np.array(out_s, float), np.array(out_e, float)


def markers(tables: dict[str, pa.Table], min_gap_us: float = 1000.0) -> pa.Table:
    kernels, copies = tables["kernels"], tables["copies"]
    rows: dict[str, list] = {"rank": [], "kind": [], "start_us": [], "duration_us": []}
    if kernels.num_rows == 0:
        return SCHEMA.empty_table()
    for rank in sorted(set(kernels["rank"].to_pylist()), key=lambda r: (r is None, r)):
        k = kernels.filter(pc.fill_null(pc.equal(kernels["rank"], rank), False))
        c = copies.filter(pc.fill_null(pc.and_(pc.equal(copies["rank"], rank), pc.equal(copies["side"], "device")), False))
        base = base_ns(k, c)
        ks, ke = merge(*compute_intervals(k, base))
        cs, ce = merge(*intervals(c, base))
        es, ee = _subtract(cs, ce, ks, ke)
        all_s, all_e = merge(*[np.concatenate(x) for x in zip(intervals(k, base), (cs, ce))])
        gaps_s, gaps_e = all_e[:-1], all_s[1:]
        long = (gaps_e - gaps_s) >= min_gap_us
        for kind, s, e in (("exposed copy", es, ee), ("device idle", gaps_s[long], gaps_e[long])):
            rows["rank"] += [rank] * len(s)
            rows["kind"] += [kind] * len(s)
            rows["start_us"] += (s + base / 1000.0).tolist()
            rows["duration_us"] += (e - s).tolist()
    return pa.table(rows, schema=SCHEMA)
