"""memory_peak_op: one operator's blocks hold a large share of the memory peak.

At the first sample of peak Total Allocated, the ``op_memory`` blocks still held are summed by op
name (``npudiag.profiling.analysis.memory``). It fires when one op holds at least ``min_share`` of the
allocated bytes and at least ``min_bytes``; critical from ``critical_share``. Memory allocated
before the profile started is no op's. No time is lost; the peak decides the largest batch that fits."""

from __future__ import annotations

from npudiag.profiling.analysis.memory import BEFORE_PROFILE, at_peak, memory_by_rank
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, severity_for
from npudiag.profiling.rules.registry import Rule, register
from npudiag.units import format_bytes

RULE_ID = "memory_peak_op"
OPTIONS = {"min_share": 0.3, "min_bytes": float(1 << 30), "critical_share": 0.6}
MSPROF_ANALYZE = "none"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    if ctx.table("op_memory").num_rows == 0 or ctx.table("memory_timeline").num_rows == 0:
        raise Skipped(
            "no per-operator memory (needs operator_memory.csv and memory_record.csv, or "
            "OP_MEMORY and MEMORY_RECORD in the .db)"
        )
    out = []
    for m in memory_by_rank(ctx.tables):
        total = m.get("peak_allocated_bytes")
        held = [h for h in m.get("held_at_peak", []) if h["op_name"] != BEFORE_PROFILE]
        if not total or not held:
            continue
        top = held[0]
        share = top["bytes"] / total
        if share < opts["min_share"] or top["bytes"] < opts["min_bytes"]:
            continue
        out.append(
            Finding(
                RULE_ID,
                severity_for(share, opts["min_share"], opts["critical_share"]),
                f"{top['op_name']} holds {format_bytes(top['bytes'])} in {top['blocks']} "
                f"block(s), {100 * share:.0f}% of the "
                f"{format_bytes(total)} allocated at the memory peak{at_peak(m)}",
                "These tensors make the peak: free them as soon as they are used (drop "
                "references kept across the step), "
                "compute them in chunks, or recompute them in the backward pass (activation checkpointing) instead of "
                "keeping them; a smaller micro-batch lowers them in proportion.",
                None,
                top["blocks"],
                m["rank"],
                {
                    "op": top["op_name"],
                    "bytes": top["bytes"],
                    "share_pct": 100 * share,
                    "peak_allocated_bytes": total,
                    "peak_ts_us": m.get("peak_ts_us"),
                    "peak_step": m.get("peak_step"),
                    "held_at_peak": held,
                },
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
