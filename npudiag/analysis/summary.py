"""The summary every renderer draws from: one plain dict built from the canonical tables.

Renderers (terminal, JSON) take this dict and nothing else, so ``npudiag report DIR`` can rebuild
exactly the same summary from the Parquet files of an earlier run.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.analysis.hot_ops import hot_ops_table, merge_hot_ops
from npudiag.analysis.rules import sort_findings
from npudiag.analysis.timeline import base_ns, intervals, union_length


def _f(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if x != x else x


def _per_rank(kernels: pa.Table) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if kernels.num_rows == 0:
        return out
    ranks = pc.fill_null(kernels["rank"], -1).to_numpy()
    base = base_ns(kernels)
    starts_all, ends_all = intervals(kernels, base) if not pc.any(pc.is_null(kernels["start_us"])).as_py() else (None, None)
    for rank in np.unique(ranks).tolist():
        mask = ranks == rank
        if starts_all is not None:
            s, e = starts_all[mask], ends_all[mask]
        else:
            s, e = intervals(kernels.filter(pa.array(mask)), base)
        d = e - s
        span = float(e.max() - s.min()) if len(s) else 0.0
        busy = union_length(s, e)
        out.append(
            {
                "rank": None if rank == -1 else int(rank),
                "kernels": int(mask.sum()),
                "start_us": base / 1000.0 + float(s.min()) if len(s) else None,
                "span_us": span,
                "busy_us": busy,
                "busy_pct": 100.0 * busy / span if span > 0 else None,
                "kernel_time_us": float(d.sum()),
            }
        )
    return out


def task_type_totals(kernels: pa.Table) -> pa.Table:
    """Count and summed duration per task type: the mergeable part of the task-type table."""
    t = pa.table({"task_type": pc.coalesce(kernels["task_type"], "unknown"), "d": pc.coalesce(kernels["duration_us"], 0.0)})
    g = t.group_by("task_type", use_threads=False).aggregate([("d", "count"), ("d", "sum")])
    return pa.table({"task_type": g["task_type"], "count": g["d_count"], "total_us": g["d_sum"]})


def _task_types(totals: pa.Table) -> list[dict[str, Any]]:
    if totals.num_rows == 0:
        return []
    g = (
        totals.group_by("task_type", use_threads=False)
        .aggregate([("count", "sum"), ("total_us", "sum")])
        .sort_by([("total_us_sum", "descending")])
    )
    total = sum(g["total_us_sum"].to_pylist()) or 0.0
    return [
        {"task_type": tt, "count": c, "total_us": s, "share_pct": 100.0 * s / total if total else None}
        for tt, c, s in zip(g["task_type"].to_pylist(), g["count_sum"].to_pylist(), g["total_us_sum"].to_pylist())
    ]


def _copies(copies: pa.Table) -> dict[str, Any]:
    if copies.num_rows == 0:
        return {"count": 0, "bytes": 0, "time_us": 0.0, "by_direction": []}
    t = pa.table(
        {
            "side": copies["side"],
            "direction": copies["direction"],
            "mode": copies["mode"],
            "size": copies["size_bytes"],
            "d": pc.coalesce(copies["duration_us"], 0.0),
        }
    )
    g = t.group_by(["side", "direction", "mode"], use_threads=False).aggregate(
        [("d", "count"), ("d", "sum"), ("size", "sum"), ("size", "count")]
    )
    g = g.sort_by([("d_sum", "descending")])
    rows = []
    side_totals: dict[str, float] = {}
    for row in g.to_pylist():
        side_totals[row["side"]] = side_totals.get(row["side"], 0.0) + row["d_sum"]
    for row in g.to_pylist():
        st = side_totals[row["side"]]
        rows.append(
            {
                "side": row["side"],
                "direction": row["direction"],
                "mode": row["mode"],
                "count": row["d_count"],
                "bytes": row["size_sum"] if row["size_count"] else None,
                "bytes_known": row["size_count"],
                "time_us": row["d_sum"],
                "share_pct": 100.0 * row["d_sum"] / st if st else None,
            }
        )
    sizes = copies["size_bytes"]
    return {
        "count": copies.num_rows,
        "bytes": pc.sum(sizes).as_py() or 0,
        "time_us": pc.sum(t["d"]).as_py() or 0.0,
        "device_time_us": side_totals.get("device", 0.0),
        "host_time_us": side_totals.get("host", 0.0),
        "by_direction": rows,
    }


def _steps(steps: pa.Table, limit: int = 50) -> list[dict[str, Any]]:
    cols = ["rank", "step", "step_time_us", "computing_us", "communication_not_overlapped_us", "free_us"]
    rows = steps.select(cols).to_pylist()
    return rows[:limit]


def _findings(findings: pa.Table) -> list[dict[str, Any]]:
    rows = findings.to_pylist()
    for r in rows:
        r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
    return rows


_COPY_COLUMNS = ["side", "direction", "mode", "size_bytes", "duration_us"]


def summary_parts(tables: dict[str, pa.Table]) -> dict[str, Any]:
    """What the summary needs from a table set, in a form that adds up over ranks (``merge_parts``),
    so ranks analysed apart (process pool, Dask) give the summary one process would."""
    kernels = tables["kernels"]
    hot = tables.get("hot_ops")
    if hot is None or (hot.num_rows == 0 and kernels.num_rows):
        hot = hot_ops_table(kernels)
    return {
        "per_rank": _per_rank(kernels),
        "kernels": kernels.num_rows,
        "kernel_time_us": float(pc.sum(pc.coalesce(kernels["duration_us"], 0.0)).as_py() or 0.0) if kernels.num_rows else 0.0,
        "task_types": task_type_totals(kernels),
        "hot_ops": hot,
        "copies": tables["copies"].select(_COPY_COLUMNS),
        "api_calls": tables["api_calls"].num_rows,
        "steps": tables["steps"],
        "step_breakdown": tables.get("step_breakdown", schemas.empty("step_breakdown")),
        "findings": tables.get("findings", schemas.empty("findings")),
    }


def merge_parts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``summary_parts`` from those of several ranks (given in rank order)."""
    if len(parts) == 1:
        return parts[0]
    per_rank = [r for p in parts for r in p["per_rank"]]
    per_rank.sort(key=lambda r: (r["rank"] is None, r["rank"]))
    findings = sort_findings(schemas.concat([p["findings"] for p in parts]))
    return {
        "per_rank": per_rank,
        "kernels": sum(p["kernels"] for p in parts),
        "kernel_time_us": sum(p["kernel_time_us"] for p in parts),
        "task_types": schemas.concat([p["task_types"] for p in parts]),
        "hot_ops": merge_hot_ops([p["hot_ops"] for p in parts]),
        "copies": schemas.concat([p["copies"] for p in parts]),
        "api_calls": sum(p["api_calls"] for p in parts),
        "steps": schemas.concat([p["steps"] for p in parts]),
        "step_breakdown": schemas.concat([p["step_breakdown"] for p in parts]),
        "findings": findings,
    }


def summary_from_parts(
    parts: dict[str, Any],
    *,
    top: int = 20,
    by: str = "type",
    meta: dict[str, Any] | None = None,
    rules_skipped: dict[str, str] | None = None,
) -> dict[str, Any]:
    if by not in ("type", "name"):
        raise ValueError(f"by must be 'type' or 'name', not {by!r}")
    per_rank = parts["per_rank"]
    span = sum(r["span_us"] for r in per_rank)
    busy = sum(r["busy_us"] for r in per_rank)
    hot_all = parts["hot_ops"]
    hot = hot_all.filter(pc.equal(hot_all["group_by"], by))
    return {
        **(meta or {}),
        "profile": {
            "ranks": len(per_rank),
            "kernels": parts["kernels"],
            "kernel_time_us": parts["kernel_time_us"],
            "span_us": span,
            "device_busy_us": busy,
            "device_busy_pct": 100.0 * busy / span if span > 0 else None,
            "api_calls": parts["api_calls"],
            "steps": parts["steps"].num_rows,
        },
        "per_rank": per_rank,
        "task_types": _task_types(parts["task_types"]),
        "hot_ops": {"by": by, "total_groups": hot.num_rows, "top": hot.slice(0, top).to_pylist()},
        "copies": _copies(parts["copies"]),
        "steps": _steps(parts["steps"]),
        "step_breakdown": parts["step_breakdown"].slice(0, 50).to_pylist(),
        "findings": _findings(parts["findings"]),
        "rules_skipped": rules_skipped or {},
    }


def build_summary(
    tables: dict[str, pa.Table],
    *,
    top: int = 20,
    by: str = "type",
    meta: dict[str, Any] | None = None,
    rules_skipped: dict[str, str] | None = None,
) -> dict[str, Any]:
    return summary_from_parts(summary_parts(tables), top=top, by=by, meta=meta, rules_skipped=rules_skipped)
