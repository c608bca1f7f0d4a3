"""unoverlapped_copy: device time during which a copy runs and neither compute nor communication does.

Exposed time = |copies − (compute ∪ communication)|, by interval arithmetic over the whole device
timeline of each rank (n log n): the glossary's copy-not-overlapped, the same number the step
breakdown shows. It is what overlapping those copies with other device work would save. The
finding owns those exposed ranges."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from npudiag.profiling.analysis.quantities import exposed_copy_segments, phases
from npudiag.profiling.analysis.timeline import overlap_with
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, absolute, device_copies
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "unoverlapped_copy"
OPTIONS = {"min_exposed_us": 100.0, "warning_share": 0.02, "critical_share": 0.10, "worst": 5.0}
MSPROF_ANALYZE = "none"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    copies = ctx.table("copies")
    if copies.num_rows == 0 or pc.sum(pc.equal(copies["side"], "device")).as_py() in (0, None):
        raise Skipped("no device-side copy tasks (needs the trace JSON, the .db, or task_time rows with MEMCPY tasks)")
    out = []
    for rank in ctx.ranks():
        c = device_copies(ctx, rank)
        if c.num_rows == 0:
            continue
        tl = ctx.timeline(rank)
        es, ee = exposed_copy_segments(tl)
        total = phases(tl)["copy_not_overlapped_us"]  # the figure the header and breakdown show, to the last bit
        if total < opts["min_exposed_us"]:
            continue
        seg_s, seg_e = tl.copies
        exposed = overlap_with(es, ee, seg_s, seg_e)  # per merged copy range: how much of it is exposed
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
                            "start_us": tl.base / 1000.0 + float(seg_s[i]),
                            "end_us": tl.base / 1000.0 + float(seg_e[i]),
                            "exposed_us": float(exposed[i]),
                        }
                        for i in order
                    ],
                },
                absolute(tl, es, ee),
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
