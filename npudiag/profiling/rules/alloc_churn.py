"""alloc_churn: the caching allocator gives memory back and takes it again every step.

From the allocator's samples (``npudiag.profiling.analysis.memory``): Total Reserved rises (the cache took
memory from the device: a device malloc on the critical path) in every step after the first
(warm-up) one, and falls (the cache returned it: ``empty_cache``, or a free of whole segments)
between them. It fires when at least ``min_steps`` later steps re-reserve on average at least
``min_bytes``. The torch_npu half of alloc_in_loop (which sees aclrtMalloc calls on the host
timeline). No time is claimed: the mallocs' host time, where the timeline has it, is alloc_in_loop's."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow.compute as pc

from npudiag.profiling.analysis.memory import allocator_samples, reservation_changes, step_of
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, step_starts
from npudiag.profiling.rules.registry import Rule, register
from npudiag.units import format_bytes

RULE_ID = "alloc_churn"
OPTIONS = {"min_steps": 2.0, "min_bytes": float(64 << 20)}
MSPROF_ANALYZE = "none"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    if ctx.table("memory_timeline").num_rows == 0:
        raise Skipped(
            "no allocator timeline (needs memory_record.csv, or MEMORY_RECORD in the "
            ".db; torch_npu profile_memory=True)"
        )
    ranks = sorted(set(pc.unique(ctx.table("memory_timeline")["rank"]).to_pylist()), key=lambda r: (r is None, r))
    out = []
    for rank in ranks:
        bounds, steps = step_starts(ctx, rank)
        later = steps[1:]
        if len(later) < opts["min_steps"]:
            continue
        comp, samples = allocator_samples(ctx.for_rank("memory_timeline", rank))
        if comp is None:
            continue
        ts_us, ts_ns, delta = reservation_changes(samples)
        s = step_of(ts_us, bounds, steps)
        grows = {int(k): int(((s == k) & (delta > 0)).sum()) for k in later}
        grown = {int(k): int(delta[(s == k) & (delta > 0)].sum()) for k in later}
        returns = int(((delta < 0) & (s >= steps[0])).sum())
        if min(grows.values()) == 0 or returns < len(later) - 1:
            continue
        mean = float(np.mean(list(grown.values())))
        if mean < opts["min_bytes"]:
            continue
        sel = np.isin(s, later) & (delta > 0)
        blocks = ctx.for_rank("op_memory", rank)
        by_op: Counter[str] = Counter()
        if blocks.num_rows:
            at = blocks.filter(
                pc.fill_null(
                    pc.is_in(blocks["alloc_ns"], value_set=pc.cast(ts_ns[sel], blocks["alloc_ns"].type)), False
                )
            )
            by_op.update(n or "?" for n in at["op_name"].to_pylist())
        out.append(
            Finding(
                RULE_ID,
                "warning",
                f"the {comp} allocator re-reserves {format_bytes(mean)} a step on average "
                f"({int(sel.sum())} device mallocs in "
                f"{len(later)} steps after the first) and returns it between steps",
                "Each re-reservation is a device malloc inside the loop. Remove "
                "torch.npu.empty_cache() (and whatever calls it) "
                "from the training loop, and keep tensor sizes steady; "
                "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True lets "
                "the cache grow in place.",
                None,
                int(sel.sum()),
                rank,
                {
                    "allocator": comp,
                    "growths_per_step": grows,
                    "grown_bytes_per_step": grown,
                    "returns": returns,
                    "ops_at_growth": dict(by_op.most_common(5)),
                },
            )
        )
    return out


# compares steps with each other (memory given back and taken again every step): a window of fewer steps may not show it
register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or "", across_steps=True))
