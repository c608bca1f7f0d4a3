"""device_idle: gaps on a rank's device timeline longer than ``min_gap_us`` between tasks.

Time lost: the sum of those gaps (an upper bound: the device could not have been busier). Each of
the worst gaps names the host API call running across its middle, when the timeline has them,
which says whether the host (launch-bound) or something else kept the device waiting."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from npudiag.analysis.rules.base import Finding, RuleContext, Skipped, device_copies, severity_for
from npudiag.analysis.timeline import base_ns, intervals, merge

RULE_ID = "device_idle"
OPTIONS = {"min_gap_us": 1000.0, "warning_share": 0.05, "critical_share": 0.20, "worst": 5.0}


def _host_call_at(api, t: float) -> str | None:
    if api.num_rows == 0:
        return None
    s = api["start_us"].to_numpy()
    e = s + pc.fill_null(api["duration_us"], 0.0).to_numpy()
    inside = np.nonzero((s <= t) & (e >= t))[0]
    if not len(inside):
        return None
    # the innermost call (shortest) says most about what the host was doing
    j = inside[np.argmin((e - s)[inside])]
    return f"{api['level'][int(j)].as_py()}@{api['name'][int(j)].as_py()}"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    if ctx.table("kernels").num_rows == 0:
        raise Skipped("no device tasks in this profile")
    out = []
    for rank in ctx.ranks():
        k = ctx.for_rank("kernels", rank)
        c = device_copies(ctx, rank)
        base = base_ns(k, c)
        ks, ke = intervals(k, base)
        cs, ce = intervals(c, base)
        seg_s, seg_e = merge(np.concatenate([ks, cs]), np.concatenate([ke, ce]))
        if len(seg_s) < 2:
            continue
        gap_start, gaps = seg_e[:-1] + base / 1000.0, seg_s[1:] - seg_e[:-1]
        long = gaps >= opts["min_gap_us"]
        if not long.any():
            continue
        total = float(gaps[long].sum())
        span = float(seg_e[-1] - seg_s[0])
        api = ctx.for_rank("api_calls", rank)
        order = np.argsort(-gaps)[: int(opts["worst"])]
        worst = [
            {"start_us": float(gap_start[i]), "gap_us": float(gaps[i]), "host_call": _host_call_at(api, float(gap_start[i] + gaps[i] / 2))}
            for i in order
            if long[i]
        ]
        out.append(
            Finding(
                RULE_ID,
                severity_for(total / span if span else 0.0, opts["warning_share"], opts["critical_share"]),
                f"device idle {total / 1e3:.2f} ms in {int(long.sum())} gaps over {opts['min_gap_us'] / 1e3:g} ms",
                "Find what the host does in the gaps (data loading, synchronisation, Python overhead): prefetch inputs, "
                "remove stream/device synchronisations from the loop, or capture the step as a graph.",
                total,
                int(long.sum()),
                rank,
                {"span_us": span, "worst_gaps": worst},
            )
        )
    return out
