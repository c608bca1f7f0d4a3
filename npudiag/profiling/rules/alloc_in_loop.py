"""alloc_in_loop: device memory allocated and freed in every step after the first (warm-up) one.

Without step markers (an AscendCL program's loop under msprof records none) the loop is found by
recurrence: an allocation API called at least ``min_steps`` + 1 times with device work (a kernel
or device copy starting) between its calls is in the loop, and every such call counts (no iteration
can be told to be the warm-up); start-up allocations made before the device works are not.

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

from npudiag.profiling.rules.base import Finding, RuleContext, host_api, prefer_acl, recurring, spans_of, step_starts
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "alloc_in_loop"
OPTIONS = {"min_steps": 2.0, "warning_share": 0.01, "critical_share": 0.05}
MSPROF_ANALYZE = "memory: slow `aclMallocMemInner` / `aclrtFree` calls (> 10 ms)"
ALLOC_API = re.compile(
    r"^(aclrtMalloc\w*|aclrtFree\w*|rtMalloc\w*|rtFree\w*|DevMalloc\w*|DevFree\w*|aclMallocMemInner)$"
)


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    host_api(ctx)
    out = []
    for rank in ctx.ranks():
        a = ctx.for_rank("api_calls", rank)
        calls = a.filter(pc.fill_null(pc.match_substring_regex(a["name"], ALLOC_API.pattern), False))
        if calls.num_rows == 0:
            continue
        calls = prefer_acl(calls)
        bounds, steps = step_starts(ctx, rank)
        if len(steps) == 0:  # no step markers: the loop found by recurrence
            found = _in_loop(ctx, rank, calls, opts)
            if found is not None:
                out.append(found)
            continue
        if len(steps) < opts["min_steps"] + 1:
            continue
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
                (
                    f"{int(sel.sum())} malloc/free calls recur in every step after the first "
                    f"({host_us / 1e3:.2f} ms host time)"
                ),
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


def _in_loop(ctx: RuleContext, rank, calls: pa.Table, opts: dict[str, float]) -> Finding | None:
    """Allocations in a loop without step markers: an allocation API called again and again with
    device work between its calls (found by recurrence). Every such call counts: without steps no
    iteration can be told to be the warm-up."""
    names = calls["name"].to_pylist()
    sel = recurring(
        ctx,
        rank,
        pc.fill_null(calls["start_us"], np.nan).to_numpy(zero_copy_only=False),
        names,
        int(opts["min_steps"]) + 1,
    )
    if not sel.any():
        return None
    host_us = float(pc.fill_null(calls["duration_us"], 0.0).to_numpy()[sel].sum())
    count = int(sel.sum())
    apis, counts = np.unique(np.asarray(names, dtype=object)[sel].astype(str), return_counts=True)
    by_api = {str(a): int(c) for a, c in zip(apis, counts)}
    shown = ", ".join(f"{n} ×{c}" for n, c in sorted(by_api.items()))
    return Finding(
        RULE_ID,
        ctx.severity(rank, host_us, opts),
        f"{count} malloc/free calls recur between device tasks ({shown}; "
        f"{host_us / 1e3:.2f} ms host time): the profile has no "
        "step markers, so the loop was found by the calls recurring",
        "Allocate device buffers once before the loop and reuse them (aclrtMalloc before "
        "it, aclrtFree after it; a memory "
        "pool where sizes change).",
        host_us,
        count,
        rank,
        {"apis": sorted(by_api), "calls_by_api": by_api, "found_by": "recurrence"},
        spans_of(calls.filter(pa.array(sel))),
    )


# compares steps with each other (allocations repeated in every step after the first): a window of fewer steps may
# not show it
register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or "", across_steps=True))
