"""single_stream: copies and compute serialised on one stream while no other stream has work.

No separate time-lost figure: what a second stream can give back is the exposed copy time that
``unoverlapped_copy`` already reports, and counting it twice would overstate the total."""

from __future__ import annotations

import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, device_copies
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "single_stream"
OPTIONS = {"min_copies": 1.0}
MSPROF_ANALYZE = "none"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0 or pc.all(pc.is_null(kernels["stream_id"])).as_py():
        raise Skipped("no stream ids in the kernel table (torch_npu Level0 and HCCL rows have none)")
    out = []
    for rank in ctx.ranks():
        k = ctx.for_rank("kernels", rank)
        c = device_copies(ctx, rank)
        if c.num_rows < opts["min_copies"]:
            continue
        streams = set(pc.unique(pc.drop_null(k["stream_id"])).to_pylist()) | set(
            pc.unique(pc.drop_null(c["stream_id"])).to_pylist()
        )
        if len(streams) != 1:
            continue
        (stream,) = streams
        out.append(
            Finding(
                RULE_ID,
                "warning",
                f"all {k.num_rows:,} kernels and {c.num_rows:,} copies run on stream {stream}",
                "Create a second stream for copies (aclrtCreateStream) and order it against compute with events "
                "(aclrtRecordEvent / aclrtStreamWaitEvent), so transfers and kernels run side by side.",
                None,
                c.num_rows,
                rank,
                {"stream_id": stream, "kernels": k.num_rows, "copies": c.num_rows},
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
