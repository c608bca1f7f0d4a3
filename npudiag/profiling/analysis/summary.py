"""The summary of one analysis: one plain dict (what ``--format json`` prints) built from the canonical tables.

Renderers take this dict (JSON) or its typed blocks (:class:`npudiag.summary_model.Summary`: terminal,
Markdown, HTML) and nothing else, so ``npudiag report DIR`` rebuilds exactly the same summary from the
Parquet files of an earlier run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.context import rank_rows, sort_findings
from npudiag.profiling.analysis.hot_ops import hot_ops_table, merge_hot_ops
from npudiag.profiling.analysis.idle_causes import top_causes
from npudiag.profiling.analysis.memory import memory_by_rank
from npudiag.profiling.analysis.quantities import clipped_union_us, copy_totals, phases, timeline
from npudiag.profiling.analysis.ranges import range_summary
from npudiag.summary_model import BUSY_PARTS  # what device busy is made of; they add up to it on every rank

# the tables that say a rank holds data, and what kind (a rank of only step / comm files counts)
DATA_TABLES = (
    "kernels",
    "copies",
    "api_calls",
    "steps",
    "op_statistic",
    "api_statistic",
    "comm_ops",
    "comm_links",
    "comm_tasks",
    "comm_bandwidth",
    "memory_timeline",
    "op_memory",
)


def _ranks_of(table: pa.Table) -> list:
    return pc.unique(table["rank"]).to_pylist() if table.num_rows and "rank" in table.column_names else []


def ranks_present(tables: dict[str, pa.Table]) -> dict[str, list[str]]:
    """Rank (as text, for JSON) -> the tables holding rows of it."""
    out: dict[str, list[str]] = {}
    for name in DATA_TABLES:
        t = tables.get(name)
        if t is None:
            continue
        for r in _ranks_of(t):
            out.setdefault("none" if r is None else str(r), []).append(name)
    return out


def per_rank(tables: dict[str, pa.Table]) -> list[dict[str, Any]]:
    """The glossary's per-rank figures (npudiag.profiling.analysis.quantities), one row per rank with device tasks."""
    kernels = tables["kernels"]
    copies = tables["copies"]
    device = copies.filter(pc.fill_null(pc.equal(copies["side"], "device"), False)) if copies.num_rows else copies
    owned = tables.get("finding_intervals", schemas.empty("finding_intervals"))
    ranks = sorted(set(_ranks_of(kernels)) | set(_ranks_of(device)), key=lambda r: (r is None, r))
    single = len(ranks) == 1
    out: list[dict[str, Any]] = []
    for rank in ranks:
        k = kernels if single else rank_rows(kernels, rank)
        c = device if single else rank_rows(device, rank)
        tl = timeline(k, c)
        span, busy = tl.span_us, tl.busy_us
        ph = phases(tl)  # device busy = computing + communication not overlapped + copy not overlapped
        start = tl.start_us()
        mine = owned if single else rank_rows(owned, rank)
        lost = 0.0
        if mine.num_rows and tl.first is not None:
            rel_s = pc.subtract(mine["start_ns"], tl.base).to_numpy(zero_copy_only=False) / 1000.0
            rel_e = pc.subtract(mine["end_ns"], tl.base).to_numpy(zero_copy_only=False) / 1000.0
            lost = clipped_union_us(rel_s, rel_e, tl.first, tl.last)
        out.append(
            {
                "rank": rank,
                "kernels": k.num_rows,
                "start_us": start,
                "start_ns": tl.start_ns(),
                "end_ns": tl.end_ns(),
                "span_us": span,
                "busy_us": busy,
                "busy_pct": 100.0 * busy / span if span > 0 else None,
                **{key: ph[key] for key in BUSY_PARTS},
                "kernel_time_us": float(pc.sum(pc.fill_null(k["duration_us"], 0.0)).as_py() or 0.0)
                if k.num_rows
                else 0.0,
                "time_lost_us": lost,
            }
        )
    return out


def task_type_totals(kernels: pa.Table) -> pa.Table:
    """Count and summed duration per task type: the mergeable part of the task-type table."""
    t = pa.table(
        {"task_type": pc.coalesce(kernels["task_type"], "unknown"), "d": pc.coalesce(kernels["duration_us"], 0.0)}
    )
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
        return {**copy_totals(copies), "device_time_us": 0.0, "by_direction": []}
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
    totals = copy_totals(copies)  # each copy once: device tasks, host calls apart
    return {**totals, "device_time_us": totals["time_us"], "by_direction": rows}


_STEP_KEYS = [
    "rank",
    "step",
    "step_time_us",
    "before_first_task_us",
    "computing_us",
    "communication_not_overlapped_us",
    "copy_not_overlapped_us",
    "free_us",
    "after_last_task_us",
]


def _steps(breakdown: pa.Table, limit: int = 50) -> list[dict[str, Any]]:
    """The step phases, from the step breakdown (the one definition), first ``limit`` rows."""
    return breakdown.select(_STEP_KEYS).slice(0, limit).to_pylist()


def _findings(findings: pa.Table) -> list[dict[str, Any]]:
    rows = findings.to_pylist()
    for r in rows:
        r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
    return rows


_COPY_COLUMNS = ["side", "direction", "mode", "size_bytes", "duration_us"]


_SUMS = ("duration_us", "flops", "flops_us", "roofline_flops", "flops_moved_bytes", "mfu_us", "mfu_weight_us")
_EFFICIENCY = pa.schema(
    [
        ("op_type", pa.string()),
        ("bound", pa.string()),
        ("kernels", pa.int64()),
        *((n, pa.float64()) for n in _SUMS),
        ("peak_tflops", pa.float64()),
    ]
)


def efficiency_sums(perf: pa.Table) -> pa.Table:
    """Per op type and bound, sums that add up over ranks: kernels, time, FLOPs (and the time of the
    kernels they are known for), MFU x time and the time of the kernels MFU is known for."""
    if not perf.num_rows:
        return _EFFICIENCY.empty_table()
    dur = pc.fill_null(perf["duration_us"], 0.0)
    known_f, known_m = pc.is_valid(perf["flops"]), pc.is_valid(perf["mfu_pct"])
    both = pc.and_(known_f, pc.is_valid(perf["moved_bytes"]))
    t = pa.table(
        {
            "op_type": pc.fill_null(perf["op_type"], "(none)"),
            "bound": perf["bound"],
            "duration_us": dur,
            "flops": pc.fill_null(pc.cast(perf["flops"], pa.float64()), 0.0),
            "flops_us": pc.if_else(known_f, dur, 0.0),
            "mfu_us": pc.if_else(known_m, pc.multiply(pc.fill_null(perf["mfu_pct"], 0.0), dur), 0.0),
            "mfu_weight_us": pc.if_else(known_m, dur, 0.0),
            # the bytes of the kernels whose FLOPs are known and bytes too: their FLOPs per byte (the roofline's x)
            "roofline_flops": pc.if_else(both, pc.fill_null(pc.cast(perf["flops"], pa.float64()), 0.0), 0.0),
            "flops_moved_bytes": pc.if_else(both, pc.fill_null(perf["moved_bytes"], 0.0), 0.0),
            "peak_tflops": perf["peak_tflops"],
        }
    )
    g = t.group_by(["op_type", "bound"], use_threads=False).aggregate(
        [("duration_us", "count"), *((n, "sum") for n in _SUMS), ("peak_tflops", "max")]
    )
    cols = {
        "op_type": g["op_type"],
        "bound": g["bound"],
        "kernels": g["duration_us_count"],
        **{n: g[f"{n}_sum"] for n in _SUMS},
        "peak_tflops": g["peak_tflops_max"],
    }
    return pa.table(cols, schema=_EFFICIENCY)


def op_efficiency(sums: pa.Table, top: int) -> list[dict[str, Any]]:
    """Per op type whose FLOPs or bound are known, most time first: kernels, time, achieved TFLOPS over
    the kernels with FLOPs, MFU weighted by time (null without a peak), and the bound holding most time."""
    if not sums.num_rows:
        return []
    g = sums.group_by("op_type", use_threads=False).aggregate(
        [("kernels", "sum"), *((n, "sum") for n in _SUMS), ("peak_tflops", "max")]
    )
    bounds = (
        sums.filter(pc.is_valid(sums["bound"]))
        .group_by(["op_type", "bound"], use_threads=False)
        .aggregate([("duration_us", "sum")])
    )
    main: dict[str, tuple[str, float]] = {}
    for op, b, us in zip(
        bounds["op_type"].to_pylist(), bounds["bound"].to_pylist(), bounds["duration_us_sum"].to_pylist(), strict=True
    ):
        if op not in main or us > main[op][1]:
            main[op] = (b, us)
    rows = []
    for r in g.sort_by([("duration_us_sum", "descending")]).to_pylist():
        if not r["flops_us_sum"] and r["op_type"] not in main:
            continue
        rows.append(
            {
                "op_type": r["op_type"],
                "kernels": r["kernels_sum"],
                "total_us": r["duration_us_sum"],
                "tflops": r["flops_sum"] / (r["flops_us_sum"] * 1e6) if r["flops_us_sum"] else None,
                "mfu_pct": r["mfu_us_sum"] / r["mfu_weight_us_sum"] if r["mfu_weight_us_sum"] else None,
                # FLOPs per byte over the kernels whose FLOPs and bytes are known, and the peak they ran against
                "flops_per_byte": r["roofline_flops_sum"] / r["flops_moved_bytes_sum"]
                if r["flops_moved_bytes_sum"]
                else None,
                "peak_tflops": r["peak_tflops_max"],
                "bound": main.get(r["op_type"], (None, 0.0))[0],
            }
        )
    return rows[:top]


@dataclass
class SummaryParts:
    """What the summary needs from a table set, in a form that adds up over ranks
    (:meth:`combine`), so ranks analysed apart (process pool, Dask) give the summary one process would."""

    per_rank: list[dict[str, Any]]
    ranks_present: dict[str, list[str]]
    kernels: int
    kernel_time_us: float
    task_types: pa.Table
    hot_ops: pa.Table
    copies: pa.Table
    api_calls: int
    steps: pa.Table
    step_breakdown: pa.Table
    findings: pa.Table
    memory: list[dict[str, Any]]
    idle_causes: pa.Table
    ranges: pa.Table
    efficiency: pa.Table = field(default_factory=lambda: efficiency_sums(schemas.empty("op_perf")))

    @classmethod
    def of(cls, tables: dict[str, pa.Table]) -> SummaryParts:
        kernels = tables["kernels"]
        hot = tables.get("hot_ops")
        if hot is None or (hot.num_rows == 0 and kernels.num_rows):
            hot = hot_ops_table(kernels)
        return cls(
            per_rank=per_rank(tables),
            ranks_present=ranks_present(tables),
            kernels=kernels.num_rows,
            kernel_time_us=float(pc.sum(pc.coalesce(kernels["duration_us"], 0.0)).as_py() or 0.0)
            if kernels.num_rows
            else 0.0,
            task_types=task_type_totals(kernels),
            hot_ops=hot,
            copies=tables["copies"].select(_COPY_COLUMNS),
            api_calls=tables["api_calls"].num_rows,
            steps=tables["steps"],
            step_breakdown=tables.get("step_breakdown", schemas.empty("step_breakdown")),
            findings=tables.get("findings", schemas.empty("findings")),
            memory=memory_by_rank(tables),
            idle_causes=tables.get("idle_causes", schemas.empty("idle_causes")),
            ranges=tables.get("ranges", schemas.empty("ranges")),
            efficiency=efficiency_sums(tables.get("op_perf", schemas.empty("op_perf"))),
        )

    @classmethod
    def combine(cls, parts: list[SummaryParts]) -> SummaryParts:
        """One set of parts from those of several ranks (given in rank order)."""
        if len(parts) == 1:
            return parts[0]
        ranks = sorted((r for p in parts for r in p.per_rank), key=lambda r: (r["rank"] is None, r["rank"]))
        present: dict[str, list[str]] = {}
        for p in parts:
            for r, names in p.ranks_present.items():
                present[r] = sorted(set(present.get(r, [])) | set(names))
        return cls(
            per_rank=ranks,
            ranks_present=present,
            kernels=sum(p.kernels for p in parts),
            kernel_time_us=sum(p.kernel_time_us for p in parts),
            task_types=schemas.concat([p.task_types for p in parts]),
            hot_ops=merge_hot_ops([p.hot_ops for p in parts]),
            copies=schemas.concat([p.copies for p in parts]),
            api_calls=sum(p.api_calls for p in parts),
            steps=schemas.concat([p.steps for p in parts]),
            step_breakdown=_by_rank(schemas.concat([p.step_breakdown for p in parts])),
            findings=sort_findings(schemas.concat([p.findings for p in parts])),
            memory=sorted((m for p in parts for m in p.memory), key=lambda m: (m["rank"] is None, m["rank"])),
            idle_causes=schemas.concat([p.idle_causes for p in parts]),
            ranges=schemas.concat([p.ranges for p in parts]),
            efficiency=pa.concat_tables([p.efficiency for p in parts]),
        )


def summary_from_parts(
    parts: SummaryParts,
    *,
    top: int = 20,
    by: str = "type",
    meta: dict[str, Any] | None = None,
    rules_skipped: dict[str, str] | None = None,
) -> dict[str, Any]:
    if by not in ("type", "name"):
        raise ValueError(f"by must be 'type' or 'name', not {by!r}")
    per_rank = parts.per_rank
    rank_spans = sum(r["span_us"] for r in per_rank)
    busy = sum(r["busy_us"] for r in per_rank)
    starts = [r["start_ns"] for r in per_rank if r["start_ns"] is not None]
    ends = [r["end_ns"] for r in per_rank if r["end_ns"] is not None]
    wall = (max(ends) - min(starts)) / 1000.0 if starts and ends else 0.0  # exact ns, as each rank's span
    hot_all = parts.hot_ops
    hot = hot_all.filter(pc.equal(hot_all["group_by"], by))
    present = parts.ranks_present
    with_kernels = {str(r["rank"]) for r in per_rank if r["kernels"]}
    partial = {
        r: names for r, names in sorted(present.items(), key=lambda kv: _rank_key(kv[0])) if r not in with_kernels
    }
    return {
        **(meta or {}),
        "profile": {
            "ranks": len(present),
            "ranks_with_kernels": len(with_kernels),
            "ranks_without_kernels": partial,
            "kernels": parts.kernels,
            "kernel_time_us": parts.kernel_time_us,
            "span_us": wall,
            "rank_span_sum_us": rank_spans,
            "device_busy_us": busy,
            "device_busy_pct": 100.0 * busy / rank_spans if rank_spans > 0 else None,
            # busy split as the glossary defines it (sums over ranks, as device_busy_us); a per-rank
            # mean divides by ranks_with_device_tasks
            **{key: sum(r.get(key) or 0.0 for r in per_rank) for key in BUSY_PARTS},
            "ranks_with_device_tasks": sum(1 for r in per_rank if r["span_us"] > 0 or r["busy_us"] > 0),
            "time_lost_us": sum(r["time_lost_us"] for r in per_rank),
            "api_calls": parts.api_calls,
            # steps with device tasks (the breakdown's rows); a profile may record more (msprof's
            # step_trace lists every iteration, its timeline only those exported)
            "steps": _distinct_steps(parts.step_breakdown),
            "steps_recorded": _distinct_steps(parts.steps, parts.step_breakdown),
        },
        "per_rank": per_rank,
        "task_types": _task_types(parts.task_types),
        "hot_ops": {"by": by, "total_groups": hot.num_rows, "top": hot.slice(0, top).to_pylist()},
        "op_efficiency": op_efficiency(parts.efficiency, top),
        "copies": _copies(parts.copies),
        "steps": _steps(parts.step_breakdown),
        "step_breakdown": parts.step_breakdown.slice(0, 50).to_pylist(),
        "findings": _findings(parts.findings),
        "memory": _memory(parts.memory),
        "idle_causes": top_causes(parts.idle_causes, host_calls=parts.api_calls > 0),
        "ranges": range_summary(parts.ranges),
        "rules_skipped": rules_skipped or {},
    }


def _memory(ranks: list[dict[str, Any]], limit: int = 50) -> dict[str, Any]:
    """Per rank memory (npudiag.profiling.analysis.memory), per-step lists cut to their first ``limit`` steps."""
    out = []
    for r in ranks:
        r = dict(r)
        for key in ("per_step", "reservation_changes_per_step"):
            if key in r:
                r[key] = r[key][:limit]
        out.append(r)
    peaks = [r["peak_allocated_bytes"] for r in ranks if r.get("peak_allocated_bytes") is not None]
    return {"ranks": out, "peak_allocated_bytes": max(peaks) if peaks else None}


def _by_rank(table: pa.Table) -> pa.Table:
    """Rows in rank order (ranks analysed apart come back in the order they were found)."""
    if table.num_rows < 2:
        return table
    return table.take(
        pc.sort_indices(table, sort_keys=[("rank", "ascending"), ("step", "ascending")])
    )  # nulls last (the default)


def _rank_key(r: str) -> tuple:
    return (not r.lstrip("-").isdigit(), int(r) if r.lstrip("-").isdigit() else 0, r)


def _distinct_steps(*tables: pa.Table) -> int:
    """How many distinct step ids the tables have (a step on 8 ranks is one step)."""
    ids = [pc.drop_null(t["step"]) for t in tables if t.num_rows]
    return len(pc.unique(pa.concat_arrays([c.combine_chunks() for c in ids]))) if ids else 0
