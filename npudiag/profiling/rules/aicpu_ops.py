"""aicpu_ops: operators running on AI_CPU for longer than ``min_us`` (msprof-analyze's advisor uses 20 µs).

Operators are grouped by op type, or by op name where the profile has no type (never merged under a
null). Time lost: the AI_CPU time of those operators, an upper bound on what moving them to AI
Core saves; severity is that time's share of the rank's span, as for every rule. The finding owns
the ranges of those AI_CPU tasks."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, spans_of
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "aicpu_ops"
OPTIONS = {"min_us": 20.0, "warning_share": 0.03, "critical_share": 0.10}
MSPROF_ANALYZE = "AICPU operator analysis (same 20 µs limit)"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0 or pc.all(pc.is_null(kernels["task_type"])).as_py():
        raise Skipped("no task types in the kernel table (torch_npu Level0 writes N/A)")
    out = []
    for rank in ctx.ranks():
        k = ctx.for_rank("kernels", rank).select(
            ["task_type", "op_type", "op_name", "start_us", "start_ns", "duration_us"]
        )
        a = k.filter(pc.fill_null(pc.is_in(k["task_type"], pa.array(["AI_CPU", "AICPU", "KERNEL_AICPU"])), False))
        if a.num_rows == 0:
            continue
        key = pc.coalesce(a["op_type"], a["op_name"], "(unnamed AI_CPU task)")
        a = a.append_column("_key", key)
        g = a.group_by("_key", use_threads=False).aggregate(
            [("duration_us", "count"), ("duration_us", "sum"), ("duration_us", "max")]
        )
        span = ctx.span_us(rank)
        for row in g.sort_by([("duration_us_sum", "descending"), ("_key", "ascending")]).to_pylist():
            if (row["duration_us_max"] or 0.0) <= opts["min_us"]:
                continue
            lost = row["duration_us_sum"] or 0.0
            mine = a.filter(pc.equal(a["_key"], row["_key"]))
            out.append(
                Finding(
                    RULE_ID,
                    ctx.severity(rank, lost, opts, span_us=span),
                    f"{row['_key']} runs on AI_CPU: {row['duration_us_count']} tasks, {lost / 1e3:.2f} ms",
                    "Check why this operator falls back to AI_CPU (input dtype or shape "
                    "not supported by the AI Core kernel, "
                    "e.g. int64 or double); cast inputs or pick an equivalent operator with an AI Core implementation.",
                    lost,
                    row["duration_us_count"],
                    rank,
                    {
                        "op": row["_key"],
                        "max_us": row["duration_us_max"],
                        "span_us": span,
                        "share_of_span_pct": 100.0 * lost / span if span else None,
                    },
                    spans_of(mine),
                )
            )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
