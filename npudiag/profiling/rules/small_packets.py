"""small_packets: most communication ops of a rank move little data per op over SDMA (on-node) or
RDMA (between nodes), so per-op costs (launch, notify, synchronisation) outweigh the transfer.

Method (msprof-analyze's packet analysis, same thresholds): from each op's Communication Bandwidth
Info (communication.json, or analysis.db's CommAnalyzerBandwidth), the ops that moved anything over
the transport are counted; those under ``sdma_min_mb`` (16 MB; MB of 10^6 bytes, as the files
write them) over SDMA, or under ``rdma_min_mb`` (1 MB) over RDMA, are small. A finding per rank and
transport when the small ones are more than ``min_ratio`` (20 %) of them. Time lost: none is
claimed, since the cost of a transfer's size is not in the files; the small transfers' transit time
is in the evidence, and severity follows its share of the rank's span (info for a rank with no kernels)."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, transfers
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "small_packets"
OPTIONS = {"sdma_min_mb": 16.0, "rdma_min_mb": 1.0, "min_ratio": 0.2, "warning_share": 0.05, "critical_share": 0.20}
MSPROF_ANALYZE = "packet analysis (same 16 MB SDMA / 1 MB RDMA limits and 20 % ratio)"
ADVICE = (
    "Send fewer, larger transfers: bucket gradients into larger all-reduces (DDP bucket_cap_mb, Megatron's "
    "--overlap-grad-reduce buckets), raise the batch size or gradient accumulation in data parallelism, prefer "
    "ZeRO-1/2 to ZeRO-3 where memory allows, and use fused optimizers that communicate once per bucket."
)


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    transfers(ctx)
    out = []
    for rank in ctx.ranks_of("comm_bandwidth"):
        b = ctx.for_rank("comm_bandwidth", rank)
        span = ctx.span_us(rank)
        for transport, limit in (("SDMA", opts["sdma_min_mb"]), ("RDMA", opts["rdma_min_mb"])):
            t = b.filter(pc.and_(pc.equal(b["transport"], transport), pc.greater(pc.fill_null(b["size_bytes"], 0), 0)))
            if t.num_rows == 0:
                continue
            small = t.filter(pc.less(t["size_bytes"], limit * 1e6))
            ratio = small.num_rows / t.num_rows
            if ratio <= opts["min_ratio"]:
                continue
            small_us = pc.sum(small["time_us"]).as_py() or 0.0
            out.append(
                Finding(
                    RULE_ID,
                    ctx.severity(rank, small_us, opts, span_us=span)
                    if span
                    else "info",  # no kernels: nothing to weigh it by
                    (
                        f"{small.num_rows} of {t.num_rows} {transport} transfers "
                        f"({100 * ratio:.0f}%) move under {limit:g} MB each"
                    ),
                    ADVICE,
                    None,
                    small.num_rows,
                    rank,
                    {
                        "transport": transport,
                        "ops": t.num_rows,
                        "small_ops": small.num_rows,
                        "ratio": ratio,
                        "min_mb": limit,
                        "small_transit_us": small_us,
                        "small_bytes": pc.sum(small["size_bytes"]).as_py(),
                        "median_small_bytes": float(np.median(small["size_bytes"].to_numpy())),
                        "span_us": span,
                    },
                )
            )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
