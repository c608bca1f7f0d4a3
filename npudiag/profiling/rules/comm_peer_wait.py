"""comm_peer_wait: collectives that spent most of their time waiting for a peer, not moving data.

Method: a collective's tasks on each of its planes (the HCCL sub-tasks of ``comm_tasks``: torch_npu's
trace "Plane N" threads, the .db's COMMUNICATION_TASK_INFO) include notify waits (``Notify_Wait``,
``Notify Wait``): the rank waits there until its peer signals that it has arrived or that its data
is in place. Per communication op of a rank (the op rows of ``kernels``), the plane with the most
wait time is taken; where that wait is more than ``min_share`` (half) of the op's duration (and at
least ``min_wait_us``), the op waited on a peer. The peer is the rank at the other end of that
plane's longest wait (``src_rank`` / ``dst_rank``, the one that is not this rank), when the data
names it. Corpus msinsight-pytorch-text-2025 Level1 rank 0: ``hcom_allReduce__586_0_1`` lasts
79.09 ms, 78.76 ms of it one Notify_Wait on plane 5 for rank 5, which the profile does not hold. Time lost: the waits
of those
planes, counted once (their union); the finding owns them. A transfer is not slow when its time is a
wait: the peer came late (look at that rank's host: the late ranks of ``npudiag cluster``), not the
link. msprof-analyze's advisor reports the same time as transmit time."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling import tasks
from npudiag.profiling.analysis.timeline import merge
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, row_spans
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "comm_peer_wait"
OPTIONS = {"min_share": 0.5, "min_wait_us": 1000.0, "warning_share": 0.05, "critical_share": 0.20, "worst": 5.0}
MSPROF_ANALYZE = "none (its advisor counts the same time as transmit time)"
WAITS = ("Notify_Wait", "Notify Wait")
ADVICE = (
    "The collective waited for a peer to arrive, not for the link: make the peer come sooner. Look at what that rank "
    "did before the collective (npudiag cluster names the late rank of each collective and what held it up: load "
    "imbalance, a slower step, host work or data loading on that rank), not at the network."
)


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    comm = ctx.table("comm_tasks")
    if comm.num_rows == 0 or "plane_id" not in comm.column_names:
        raise Skipped("no communication sub-tasks (HCCL planes) in this profile")
    out = []
    for rank in ctx.ranks_of("comm_tasks"):
        k = ctx.for_rank("kernels", rank)
        ops = k.filter(tasks.communication_mask(k)) if k.num_rows else k
        t = ctx.for_rank("comm_tasks", rank)
        t = t.filter(pc.and_(pc.is_in(t["task_type"], pa.array(WAITS)), pc.is_valid(t["op_name"])))
        if ops.num_rows == 0 or t.num_rows == 0:
            continue
        found = _waiting_ops(rank, ops, t, opts)
        if found is None:
            continue
        rows, s, e = found
        lost = float((e - s).sum()) / 1000.0
        worst = rows[: int(opts["worst"])]
        top = worst[0]
        peer = f" for rank {top['peer_rank']}" if top["peer_rank"] is not None else " for a peer"
        more = f" (+{len(rows) - 1} more collective(s), {lost / 1e3:.2f} ms in all)" if len(rows) > 1 else ""
        plane = f", plane {top['plane_id']}" if top["plane_id"] >= 0 else ""
        title = (
            f"{top['op_name']} waited {top['wait_us'] / 1e3:.2f} ms of its {top['duration_us'] / 1e3:.2f} ms{peer} "
            f"({top['wait_type']}{plane}){more}"
        )
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, lost, opts),
                title,
                ADVICE,
                lost,
                len(rows),
                rank,
                {"ops": worst, "min_share": opts["min_share"]},
                (s, e),
            )
        )
    return out


def _waiting_ops(rank, ops: pa.Table, waits: pa.Table, opts: dict[str, float]):
    """The op occurrences whose busiest plane waited more than min_share of the op (largest wait first),
    and the union of those planes' wait intervals (absolute ns). A wait belongs to the occurrence of
    its op name whose time holds its start (a name repeats from step to step)."""
    s, e, ok = row_spans(waits)
    o_s, o_e, o_ok = row_spans(ops)
    order = np.flatnonzero(o_ok)[np.argsort(o_s[o_ok], kind="stable")]
    if not len(order):
        return None
    at = np.searchsorted(o_s[order], s, side="right") - 1
    occ = np.where(at >= 0, order[np.maximum(at, 0)], -1)
    inside = ok & (occ >= 0) & (s <= o_e[np.maximum(occ, 0)])
    op_of = ops["op_name"].take(pa.array(np.maximum(occ, 0)))
    named = pc.fill_null(pc.equal(op_of, waits["op_name"]), False).to_numpy(zero_copy_only=False)
    same = inside & named
    # a plane the data does not name is -1
    w = pa.table(
        {
            "occ": occ,
            "plane_id": pc.fill_null(waits["plane_id"], -1),
            "task_type": waits["task_type"],
            "us": pc.fill_null(waits["duration_us"], 0.0),
            "src": waits["src_rank"],
            "dst": waits["dst_rank"],
            "i": np.arange(waits.num_rows),
        }
    ).filter(pa.array(same))
    if w.num_rows == 0:
        return None
    per_plane = w.group_by(["occ", "plane_id"], use_threads=False).aggregate([("us", "sum")])
    per_plane = per_plane.sort_by([("occ", "ascending"), ("us_sum", "descending"), ("plane_id", "ascending")])
    occs = per_plane["occ"].to_numpy()
    busiest = per_plane.filter(pa.array(np.r_[True, occs[1:] != occs[:-1]]))  # per op: the plane that waited most
    b_occ = busiest["occ"].to_numpy()
    wait = busiest["us_sum"].to_numpy(zero_copy_only=False)
    length = pc.fill_null(ops["duration_us"], 0.0).to_numpy(zero_copy_only=False)[b_occ]
    keep = (wait > opts["min_share"] * length) & (wait >= opts["min_wait_us"]) & (length > 0)
    if not keep.any():
        return None
    j = busiest.filter(pa.array(keep)).sort_by([("us_sum", "descending"), ("occ", "ascending")])
    chosen = w.join(j.select(["occ", "plane_id"]), ["occ", "plane_id"], join_type="inner")
    rows = []
    for r in j.to_pylist():  # one row per flagged collective (a few): its wait, its type and its peer
        mine = chosen.filter(pc.and_(pc.equal(chosen["occ"], r["occ"]), pc.equal(chosen["plane_id"], r["plane_id"])))
        longest = (
            mine.sort_by([("us", "descending"), ("i", "ascending")]).slice(0, 1).to_pylist()[0]
        )  # the wait holding the most
        peers = [p for p in (longest["src"], longest["dst"]) if p is not None and p != rank]
        duration = float(length[b_occ == r["occ"]][0])
        rows.append(
            {
                "op_name": waits["op_name"][longest["i"]].as_py(),
                "start_ns": int(o_s[r["occ"]]),
                "plane_id": r["plane_id"],
                "wait_us": r["us_sum"],
                "duration_us": duration,
                "share": r["us_sum"] / duration,
                "wait_type": longest["task_type"],
                "peer_rank": peers[0] if peers else None,
            }
        )
    idx = chosen["i"].to_numpy()
    ms, me = merge(s[idx], e[idx])
    return rows, ms, me


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
