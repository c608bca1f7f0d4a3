"""memory_fragmentation: at the memory peak the allocator holds far more than it hands out.

At the first sample of peak Total Allocated (``npudiag.profiling.analysis.memory``), Total Reserved − Total
Allocated is memory the caching allocator took from the device that no tensor uses: freed blocks
too small or too split for the next requests. It fires when that gap is at least ``min_bytes`` and
``warning_share`` of the reservation (critical from ``critical_share``). No time is lost; the cost
is the headroom (an out-of-memory error with memory still "reserved")."""

from __future__ import annotations

from npudiag.profiling.analysis.memory import at_peak, memory_by_rank
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, severity_for
from npudiag.profiling.rules.registry import Rule, register
from npudiag.units import format_bytes

RULE_ID = "memory_fragmentation"
OPTIONS = {"min_bytes": float(1 << 30), "warning_share": 0.2, "critical_share": 0.4}
MSPROF_ANALYZE = "none"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    if ctx.table("memory_timeline").num_rows == 0:
        raise Skipped(
            "no allocator timeline (needs memory_record.csv, or MEMORY_RECORD in the "
            ".db; torch_npu profile_memory=True)"
        )
    out = []
    for m in memory_by_rank(ctx.tables):
        frag, reserved = m.get("fragmentation_bytes"), m.get("reserved_at_peak_bytes")
        if frag is None or not reserved or frag < opts["min_bytes"]:
            continue
        share = frag / reserved
        if share < opts["warning_share"]:
            continue
        out.append(
            Finding(
                RULE_ID,
                severity_for(share, opts["warning_share"], opts["critical_share"]),
                f"{format_bytes(frag)} reserved but unused at the memory peak{at_peak(m)}: {100 * share:.0f}% of the "
                f"{format_bytes(reserved)} the {m['allocator']} allocator holds",
                "Freed blocks are too split to serve new requests. Set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True "
                "(segments grow in place), keep tensor sizes steady (pad varying lengths "
                "to a few buckets), and look at "
                "torch.npu.memory_summary() for the split blocks.",
                None,
                1,
                m["rank"],
                {
                    k: m.get(k)
                    for k in (
                        "allocator",
                        "peak_allocated_bytes",
                        "reserved_at_peak_bytes",
                        "fragmentation_bytes",
                        "fragmentation_pct",
                        "peak_ts_us",
                        "peak_step",
                        "peak_op",
                    )
                },
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
