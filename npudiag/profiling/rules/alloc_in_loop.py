"""alloc_in_loop: device memory allocated and freed in every step after the first (warm-up) one.

aclrtMalloc / aclrtFree (and the runtime's DevMalloc / DevFree, rtMalloc / rtFree) inside the loop
cost host time every iteration; CANN's guidance is to allocate once before the loop. Calls are
counted at the AscendCL level when the timeline has it (the runtime calls nested in them are the
same allocations). Time lost: their host time in the steps after the first (the finding owns those
call ranges)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, host_api, prefer_acl, spans_of, step_starts

RULE_ID = "alloc_in_loop"
OPTIONS = {"min_steps": 2.0, "warning_share": 0.01, "critical_share": 0.05}
MSPROF_ANALYZE = "memory: slow `aclMallocMemInner` / `aclrtFree` calls (> 10 ms)"
ALLOC_API = re.compile(r"^(aclrtMalloc\w*|aclrtFree\w*|rtMalloc\w*|rtFree\w*|DevMalloc\w*|DevFree\w*|aclMallocMemInner)$")


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    host_api(ctx)
    out = []
    for rank in ctx.ranks():
        bounds, steps = step_starts(ctx, rank)
        if len(steps) < opts["min_steps"] + 1:
            continue
        a = ctx.for_rank("api_calls", rank)
        calls = a.filter(pc.fill_null(pc.match_substring_regex(a["name"], ALLOC_API.pattern), False))
        if calls.num_rows == 0:
            continue
        calls = prefer_acl(calls)
        starts = calls["start_us"].to_numpy()
        i = np.searchsorted(bounds, starts, side="right") - 1
        in_step = i >= 0
        step_of = np.where(in_step, steps[np.maximum(i, 0)], -1)
        later = steps[1:]
        per_step = {int(s): int((step_of == s).sum()) for s in later}
        if min(per_step.values()) == 0:
            continue  # not in every step after the first: warm-up allocations, not a loop pattern
        sel = np.isin(step_of, later)
        host_us = float(pc.fill_null(calls["duration_us"], 0.0).to_numpy()[sel].sum())
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, host_us, opts),
                f"{int(sel.sum())} malloc/free calls recur in every step after the first ({host_us / 1e3:.2f} ms host time)",
                "Allocate device buffers once before the loop and reuse them (or let the caching allocator keep them: "
                "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True for torch_npu).",
                host_us,
                int(sel.sum()),
                rank,
                {"apis": sorted(set(calls["name"].to_pylist())), "calls_per_step": per_step},
                spans_of(calls.filter(pa.array(sel))),
            )
        )
    return out
