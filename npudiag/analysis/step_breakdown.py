"""Per-step breakdown of device time, with step_trace_time.csv's definitions.

computing: time covered by tasks that are not communication (as torch_npu counts it); communication: time covered by communication tasks
(HCCL / COMMUNICATION, or hcom_* names); overlapped: both at once; communication not overlapped:
communication − overlapped; copy not overlapped: device copy time covered by neither; free: step
time − computing − communication not overlapped (the identity step_trace_time.csv follows, where
copies count as free). Step time is the step_trace table's Stage / Iteration Time where it
exists, else the span of the step's tasks. Without step ids the whole window is one row (step null).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.analysis.timeline import base_ns, intervals, merge, overlap_with

SCHEMA = schemas.STEP_BREAKDOWN
COMM_TYPES = ["HCCL", "COMMUNICATION"]


def _comm_mask(kernels: pa.Table) -> np.ndarray:
    is_comm = pc.or_(
        pc.fill_null(pc.is_in(kernels["task_type"], pa.array(COMM_TYPES)), False),
        pc.fill_null(pc.starts_with(kernels["op_name"], "hcom_"), False),
    )
    return is_comm.to_numpy(zero_copy_only=False)


def _length(s: np.ndarray, e: np.ndarray) -> float:
    return float((e - s).sum())


def _row(kernels: pa.Table, copies: pa.Table, step_time: float | None) -> dict:
    # masks over one interval array, not filtered copies of a table that may hold millions of rows
    base = base_ns(kernels, copies)
    s, e = intervals(kernels, base, keep_null=True)
    ok = ~np.isnan(s)
    comm = _comm_mask(kernels)
    ms, me = merge(s[comm & ok], e[comm & ok])
    # torch_npu's Computing is every task that is not communication
    cs, ce = merge(s[~comm & ok], e[~comm & ok])
    computing = _length(cs, ce)
    communication = _length(ms, me)
    overlapped = float(overlap_with(cs, ce, ms, me).sum())
    ys, ye = merge(*intervals(copies, base))
    both_s, both_e = merge(np.concatenate([cs, ms]), np.concatenate([ce, me]))
    copy_exposed = _length(ys, ye) - float(overlap_with(both_s, both_e, ys, ye).sum()) if len(ys) else 0.0
    every_s, every_e = np.concatenate([s[ok], ys]), np.concatenate([e[ok], ye])
    span = float(every_e.max() - every_s.min()) if len(every_s) else 0.0
    total = step_time if step_time is not None else span
    return {
        "step_time_us": total,
        "computing_us": computing,
        "communication_us": communication,
        "overlapped_us": overlapped,
        "communication_not_overlapped_us": communication - overlapped,
        "copy_not_overlapped_us": copy_exposed,
        # torch_npu's identity: Stage = Computing + Communication(Not Overlapped) + Free
        "free_us": max(total - computing - (communication - overlapped), 0.0),
        "step_time_source": "step_trace" if step_time is not None else "kernels",
    }


def step_breakdown(tables: dict[str, pa.Table]) -> pa.Table:
    kernels, copies, steps = tables["kernels"], tables["copies"], tables["steps"]
    rows = []
    if kernels.num_rows == 0:
        return SCHEMA.empty_table()
    for rank in sorted(set(kernels["rank"].to_pylist()), key=lambda r: (r is None, r)):
        single = kernels["rank"].null_count == 0 and pc.count_distinct(kernels["rank"]).as_py() == 1
        k = kernels if single or rank is None else kernels.filter(pc.fill_null(pc.equal(kernels["rank"], rank), False))
        c = copies.filter(pc.fill_null(pc.and_(pc.equal(copies["rank"], rank), pc.equal(copies["side"], "device")), False))
        st = steps.filter(pc.fill_null(pc.equal(steps["rank"], rank), False)) if steps.num_rows else steps
        stage = dict(zip(st["step"].to_pylist(), st["step_time_us"].to_pylist())) if st.num_rows else {}
        step_ids = sorted(set(pc.drop_null(k["step"]).to_pylist()))
        if not step_ids:
            rows.append({"rank": rank, "step": None, **_row(k, c, None)})
            continue
        for step in step_ids:
            ks = k.filter(pc.fill_null(pc.equal(k["step"], step), False))
            s, e = (ks["start_us"].to_numpy(), ks["start_us"].to_numpy() + pc.fill_null(ks["duration_us"], 0.0).to_numpy())
            lo, hi = (float(s.min()), float(e.max())) if len(s) else (0.0, 0.0)
            cs = c.filter(pc.and_(pc.greater_equal(c["start_us"], lo), pc.less_equal(c["start_us"], hi))) if c.num_rows else c
            rows.append({"rank": rank, "step": step, **_row(ks, cs, stage.get(step))})
    return pa.Table.from_pylist(rows, schema=SCHEMA)
