"""unoverlapped_copy: device time during which a copy runs and no compute task runs on any stream.

Exposed time = |union(copies) − union(compute)|, by interval arithmetic over the whole device
timeline of each rank (n log n). It is what overlapping those copies with compute would save."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from npudiag.analysis.rules.base import Finding, RuleContext, Skipped, compute_intervals, device_copies
from npudiag.analysis.timeline import base_ns, intervals, merge, overlap_with

RULE_ID = "unoverlapped_copy"
OPTIONS = {"min_exposed_us": 100.0, "warning_share": 0.02, "critical_share": 0.10, "worst": 5.0}


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    copies = ctx.table("copies")
    if copies.num_rows == 0 or pc.sum(pc.equal(copies["side"], "device")).as_py() in (0, None):
        raise Skipped("no device-side copy tasks (needs the trace JSON or MEMCPY rows in the kernel table)")
    out = []
    for rank in ctx.ranks():
        c = device_copies(ctx, rank)
        if c.num_rows == 0:
            continue
        k = ctx.for_rank("kernels", rank)
        base = base_ns(k, c)
        seg_s, seg_e = merge(*intervals(c, base))
        ks, ke = merge(*compute_intervals(k, base))
        hidden = overlap_with(ks, ke, seg_s, seg_e)
        exposed = (seg_e - seg_s) - hidden
        total = float(exposed.sum())
        if total < opts["min_exposed_us"]:
            continue
        order = np.argsort(-exposed)[: int(opts["worst"])]
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, total, opts),
                f"{total / 1e3:.2f} ms of copies run with no compute beside them",
                "Issue copies on a separate stream ahead of the compute that needs them (double-buffer inputs), "
                "so transfers hide under kernels.",
                total,
                int((exposed > 0).sum()),
                rank,
                {
                    "copy_time_us": float(pc.sum(c["duration_us"]).as_py() or 0.0),
                    "exposed_us": total,
                    "worst_ranges": [
                        {
                            "start_us": base / 1000.0 + float(seg_s[i]),
                            "end_us": base / 1000.0 + float(seg_e[i]),
                            "exposed_us": float(exposed[i]),
                        }
                        for i in order
                    ],
                },
            )
        )
    return out
