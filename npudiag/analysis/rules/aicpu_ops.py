"""aicpu_ops: operators running on AI_CPU for longer than ``min_us`` (msprof-analyze's advisor uses 20 µs).

Time lost: the AI_CPU time of those operators, an upper bound on what moving them to AI Core saves."""

from __future__ import annotations

import pyarrow.compute as pc

from npudiag.analysis.rules.base import Finding, RuleContext, Skipped, severity_for

RULE_ID = "aicpu_ops"
OPTIONS = {"min_us": 20.0, "warning_share": 0.03, "critical_share": 0.10}


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0 or pc.all(pc.is_null(kernels["task_type"])).as_py():
        raise Skipped("no task types in the kernel table (torch_npu Level0 writes N/A)")
    out = []
    for rank in ctx.ranks():
        k = ctx.for_rank("kernels", rank)
        total = float(pc.sum(pc.fill_null(k["duration_us"], 0.0)).as_py() or 0.0)
        a = k.filter(pc.fill_null(pc.equal(k["task_type"], "AI_CPU"), False))
        if a.num_rows == 0:
            continue
        g = a.group_by("op_type").aggregate([("duration_us", "count"), ("duration_us", "sum"), ("duration_us", "max")])
        for row in g.to_pylist():
            if (row["duration_us_max"] or 0.0) <= opts["min_us"]:
                continue
            share = row["duration_us_sum"] / total if total else 0.0
            out.append(
                Finding(
                    RULE_ID,
                    severity_for(share, opts["warning_share"], opts["critical_share"]),
                    f"{row['op_type']} runs on AI_CPU: {row['duration_us_count']} tasks, {row['duration_us_sum'] / 1e3:.2f} ms",
                    "Check why this operator falls back to AI_CPU (input dtype or shape not supported by the AI Core kernel, "
                    "e.g. int64 or double); cast inputs or pick an equivalent operator with an AI Core implementation.",
                    row["duration_us_sum"],
                    row["duration_us_count"],
                    rank,
                    {"op_type": row["op_type"], "max_us": row["duration_us_max"], "share_pct": 100.0 * share},
                )
            )
    return out
