"""bandwidth: communication transfers far slower than their link can carry, and RDMA transfers so
long they point to retransmission.

Method (msprof-analyze's bandwidth contention and retransmission checks, same thresholds): from
each op's Communication Bandwidth Info (comm_bandwidth), SDMA transfers of at least ``min_mb`` (so
the small ones, which ``small_packets`` covers, do not count) whose bandwidth is under
``ratio`` x ``sdma_gbps`` (0.8 x 18 GB/s, msprof-analyze's SDMA baseline) are slow; one finding per
rank with their count, bytes and bandwidth. Time lost, an estimate: each slow transfer's transit
time minus the time its bytes take at the baseline bandwidth; the finding owns that much of the end
of the op's time range (communication.json's Start Timestamp and Elapse Time), so it is only
counted where the op's times are known. RDMA transfers of one op taking more than
``retransmission_ms`` (4,000 ms) are a separate, critical finding: a single transfer that long
means the NIC retransmitted; no time is claimed for them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, transfers
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "bandwidth"
OPTIONS = {
    "sdma_gbps": 18.0,
    "ratio": 0.8,
    "min_mb": 16.0,
    "retransmission_ms": 4000.0,
    "warning_share": 0.03,
    "critical_share": 0.10,
}
MSPROF_ANALYZE = "bandwidth contention (SDMA < 0.8 x 18 GB/s) and communication retransmission (RDMA > 4,000 ms)"


def _owned(ctx: RuleContext, rank, slow: pa.Table, lost_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The last ``lost_us`` of each slow op's time range, as absolute ns (ops without times are left out)."""
    ops = ctx.for_rank("comm_ops", rank)
    if ops.num_rows == 0 or slow.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = pa.table(
        {"step": ops["step"], "op_name": ops["op_name"], "start_us": ops["start_us"], "elapse_us": ops["elapse_us"]}
    )
    want = pa.table({"step": slow["step"], "op_name": slow["op_name"], "lost": lost_us})
    j = want.join(keys, ["step", "op_name"], join_type="inner")
    j = j.filter(pc.and_(pc.is_valid(j["start_us"]), pc.is_valid(j["elapse_us"])))
    if j.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    end = np.round((j["start_us"].to_numpy() + j["elapse_us"].to_numpy()) * 1000.0).astype(np.int64)
    take = np.minimum(j["lost"].to_numpy(), j["elapse_us"].to_numpy())
    return end - np.round(take * 1000.0).astype(np.int64), end


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    transfers(ctx)
    out = []
    limit = opts["ratio"] * opts["sdma_gbps"]
    for rank in ctx.ranks_of("comm_bandwidth"):
        b = ctx.for_rank("comm_bandwidth", rank)
        size = pc.fill_null(b["size_bytes"], 0)
        sdma = b.filter(pc.and_(pc.equal(b["transport"], "SDMA"), pc.greater_equal(size, opts["min_mb"] * 1e6)))
        slow = sdma.filter(pc.fill_null(pc.less(sdma["bandwidth_gbps"], limit), False))
        if slow.num_rows:
            ideal_us = slow["size_bytes"].to_numpy().astype(float) / (opts["sdma_gbps"] * 1e9) * 1e6
            lost_each = np.maximum(pc.fill_null(slow["time_us"], 0.0).to_numpy() - ideal_us, 0.0)
            s, e = _owned(ctx, rank, slow, lost_each)
            lost = float((e - s).sum() / 1000.0)
            moved = int(pc.sum(slow["size_bytes"]).as_py())
            t_us = float(pc.sum(slow["time_us"]).as_py() or 0.0)
            out.append(
                Finding(
                    RULE_ID,
                    ctx.severity(rank, lost, opts),
                    f"{slow.num_rows} of {sdma.num_rows} SDMA transfers of "
                    f"{opts['min_mb']:g} MB or more run under {limit:g} GB/s "
                    f"({moved / max(t_us, 1e-9) / 1e3:.1f} GB/s on average)",
                    "SDMA shares the HBM with the compute running beside it: check whether compute and communication "
                    "overlap on purpose (overlapped gradient reduction, tensor-parallel "
                    "overlap) and compare a run without "
                    "the overlap; check that the communication stays on-node over HCCS "
                    "(HCCL_INTRA_ROCE_ENABLE unset) and "
                    "that HCCL_BUFFSIZE is large enough for the transfers.",
                    lost if len(s) else None,
                    slow.num_rows,
                    rank,
                    {
                        "transport": "SDMA",
                        "transfers": sdma.num_rows,
                        "slow": slow.num_rows,
                        "limit_gbps": limit,
                        "slow_bytes": moved,
                        "slow_transit_us": t_us,
                        "estimated_loss_us": float(lost_each.sum()),
                        "ops_with_times": int(len(s)),
                    },
                    (s, e),
                )
            )
        long = pc.greater(pc.fill_null(b["time_us"], 0.0), opts["retransmission_ms"] * 1e3)
        rdma = b.filter(pc.and_(pc.equal(b["transport"], "RDMA"), long))
        if rdma.num_rows:
            out.append(
                Finding(
                    RULE_ID,
                    "critical",
                    (
                        f"{rdma.num_rows} RDMA transfers take over "
                        f"{opts['retransmission_ms'] / 1e3:g} s each: retransmission"
                    ),
                    "A single RDMA transfer that long means packets were lost and resent: check the NIC and switch "
                    "(link errors, PFC / ECN settings, the RoCE network's MTU), the HCCL_RDMA_TIMEOUT / "
                    "HCCL_RDMA_RETRY_CNT settings, and whether one node's port is degraded.",
                    None,
                    rdma.num_rows,
                    rank,
                    {
                        "transport": "RDMA",
                        "ops": sorted(set(rdma["op_name"].to_pylist()))[:10],
                        "max_transit_us": float(pc.max(rdma["time_us"]).as_py()),
                    },
                )
            )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
