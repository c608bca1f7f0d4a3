"""fusion_candidates: the same short run of small AI Core / vector operators, again and again, with
the device mostly waiting between them: one fused kernel would do the work without the launches.

Method. Per rank and stream, the compute kernels in start order (communication and AI_CPU tasks
break a run, as in msprof-analyze's fusible-operator check) are cut into runs of consecutive
*small* kernels (each at most ``max_op_us``; a gap over ``max_gap_us`` also cuts, since that is
host work, not launch cost); runs longer than ``max_len`` are cut into pieces of ``max_len``.
A run's key is its op types in order (op names where there is no type). A run that is one shorter
sequence several times over (``A > B > A > B``) is folded to that sequence (its *root*, ``A > B``)
and counts as that many occurrences, so a loop is reported once, not under each multiple of it.
Only a root of at least ``min_len`` ops of at least two different types is a sequence to fuse (a run
of one op type, ``Slice > Slice > Slice``, folds to ``Slice`` and is not reported). A root is a candidate when
it ran at least ``min_count`` times (msprof-analyze: more than 5), its kernels were busy less than
``max_busy_ratio`` of its runs' wall time (msprof-analyze's host-bound ratio, 0.4) and the gaps
inside its runs add up to at least ``min_share`` of the span (msprof-analyze: 1 % of the step).
Time lost: those gaps, from the end of each kernel to the start of the next one in the run, which
a fused kernel would not have; the finding owns exactly them. The ``top`` candidates by time lost
are reported, one finding each.

Unlike msprof-analyze, which counts every window of 2 to 10 tasks (so one repeated sequence is
reported under many overlapping windows), a kernel here belongs to one run only, so the findings
never count a gap twice; a sequence whose neighbours differ from one occurrence to the next is
counted under each neighbourhood separately."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, row_spans
from npudiag.profiling.rules.registry import Rule, register
from npudiag.profiling.tasks import communication_mask

RULE_ID = "fusion_candidates"
OPTIONS = {
    "max_op_us": 50.0,
    "min_len": 2.0,
    "max_len": 10.0,
    "min_count": 6.0,
    "max_busy_ratio": 0.4,
    "max_gap_us": 1000.0,
    "min_share": 0.01,
    "top": 5.0,
    "warning_share": 0.03,
    "critical_share": 0.10,
}
MSPROF_ANALYZE = "fusible operator analysis (host-bound sequences: busy < 0.4 of wall, > 5 times, ≥ 1 % of the step)"
BREAKS = ("AI_CPU", "AICPU", "KERNEL_AICPU", "HCCL", "COMMUNICATION", "HCCL_AI_CPU")
SEP = " > "


def _runs(k: pa.Table, opts: dict[str, float]) -> pa.Table | None:
    """One row per kernel that is part of a run: run id, key, start and end ns, in run order.
    Communication kernels are left out by index, not by filtering ``k``: a filter would copy every
    column (op names included) of a table that may hold millions of rows."""
    comp = np.flatnonzero(~communication_mask(k))
    if len(comp) < 2:
        return None
    start, end, ok = (a[comp] for a in row_spans(k))
    stream = pc.fill_null(k["stream_id"], -1).to_numpy(zero_copy_only=False)[comp]
    order = np.lexsort((start, stream))
    start, end, ok, stream = start[order], end[order], ok[order], stream[order]
    src = comp[order]  # the row of k of each kernel, in stream and start order
    breaks = pc.fill_null(pc.is_in(k["task_type"], pa.array(BREAKS)), False).to_numpy(zero_copy_only=False)[src]
    dur_ns = end - start
    small = ok & (dur_ns <= opts["max_op_us"] * 1000.0) & ~breaks
    gap = np.empty(len(start), np.int64)
    gap[0] = 0
    gap[1:] = start[1:] - end[:-1]
    joined = np.zeros(len(start), bool)  # this kernel continues the run of the one before it
    joined[1:] = small[1:] & small[:-1] & (stream[1:] == stream[:-1]) & (gap[1:] <= opts["max_gap_us"] * 1000.0)
    first = np.flatnonzero(small & ~joined)
    if len(first) == 0:
        return None
    run_of = np.cumsum(small & ~joined) - 1  # valid on small kernels only
    pos = np.arange(len(start)) - first[np.maximum(run_of, 0)]
    max_len = max(int(opts["max_len"]), 1)
    piece = run_of.astype(np.int64) * (len(start) + 1) + pos // max_len  # runs longer than max_len cut in pieces
    idx = np.flatnonzero(small)
    piece = piece[idx]
    _, inv, length = np.unique(piece, return_inverse=True, return_counts=True)
    keep = length[inv] >= max(int(opts["min_len"]), 2)
    idx, inv = idx[keep], inv[keep]
    if len(idx) == 0:
        return None
    inv = np.unique(inv, return_inverse=True)[1]  # the runs kept, numbered 0.. in order
    at = pa.array(src[idx])
    names = pc.coalesce(k["op_type"].take(at), k["op_name"].take(at), pa.scalar("(unnamed)"))
    return pa.table({"run": pa.array(inv, pa.int64()), "name": names, "start_ns": start[idx], "end_ns": end[idx]})


def _root(key: str) -> tuple[str, int]:
    """``"A > B > A > B"`` -> (``"A > B"``, 2): the shortest sequence the key repeats, and how often."""
    names = key.split(SEP)
    n = len(names)
    for p in range(1, n // 2 + 1):
        if n % p == 0 and names == names[:p] * (n // p):
            return SEP.join(names[:p]), n // p
    return key, 1


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0:
        raise Skipped("no kernels in this profile")
    out = []
    for rank in ctx.ranks():
        k = ctx.for_rank("kernels", rank).select(
            ["task_class", "task_type", "stream_id", "start_us", "start_ns", "duration_us", "op_type", "op_name"]
        )
        rows = _runs(k, opts)
        if rows is None:
            continue
        # per run (rows are in run order): its key, busy time, wall time and the gaps inside it
        s, e = rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy()
        run_ids = rows["run"].to_numpy()
        same = np.zeros(len(s), bool)
        same[1:] = run_ids[1:] == run_ids[:-1]
        gap_s, gap_e = e[:-1][same[1:]], s[1:][same[1:]]  # from each kernel's end to the next one's start
        positive = gap_e > gap_s
        gap_s, gap_e, gap_run = gap_s[positive], gap_e[positive], run_ids[1:][same[1:]][positive]
        # runs are numbered 0.. in row order, each a block of rows: the key is a list view over the
        # names (no group-by, no copy of them), min / max per block by reduceat
        first = np.flatnonzero(~same)
        names_of_run = pa.ListArray.from_arrays(
            pa.array(np.append(first, len(s)), pa.int32()), rows["name"].combine_chunks()
        )
        busy = np.bincount(run_ids, weights=(e - s).astype(float), minlength=len(first))
        gaps = np.bincount(gap_run, weights=(gap_e - gap_s).astype(float), minlength=len(first))
        runs = pa.table(
            {
                "key": pc.binary_join(names_of_run, SEP),
                "busy_ns": busy,
                "wall_ns": (np.maximum.reduceat(e, first) - np.minimum.reduceat(s, first)).astype(float),
                "gap_ns": gaps,
            }
        )
        sums = [("busy_ns", "sum"), ("wall_ns", "sum"), ("gap_ns", "sum")]
        g = runs.group_by("key", use_threads=False).aggregate([("busy_ns", "count"), *sums])
        # a run that is one sequence several times over counts as that many runs of the sequence
        roots = [_root(key) for key in g["key"].to_pylist()]  # one per distinct run, not per kernel
        root_keys = pa.array([r for r, _ in roots], pa.string())
        distinct_of_run = pc.index_in(runs["key"], value_set=g["key"]).to_numpy()  # each run's row of g
        del runs
        times = pa.array([m for _, m in roots], pa.int64())
        g = pa.table(
            {
                "key": root_keys,
                "n": pc.multiply(g["busy_ns_count"], times),
                "busy_ns": g["busy_ns_sum"],
                "wall_ns": g["wall_ns_sum"],
                "gap_ns": g["gap_ns_sum"],
            }
        )
        g = g.group_by("key", use_threads=False).aggregate([("n", "sum"), *sums])
        g = g.rename_columns(["key", "busy_ns_count", "busy_ns_sum", "wall_ns_sum", "gap_ns_sum"])
        span = ctx.span_us(rank)
        ratio = pc.divide(g["busy_ns_sum"], pc.max_element_wise(g["wall_ns_sum"], 1.0))
        # a sequence to fuse: at least min_len ops of at least two types (one op type repeated is no fusion)
        min_len = max(int(opts["min_len"]), 2)
        fusible = pa.array([len(k.split(SEP)) >= min_len and len(set(k.split(SEP))) >= 2 for k in g["key"].to_pylist()])
        cand = g.filter(
            pc.and_(
                pc.and_(
                    pc.and_(
                        pc.greater_equal(g["busy_ns_count"], opts["min_count"]), pc.less(ratio, opts["max_busy_ratio"])
                    ),
                    pc.greater_equal(g["gap_ns_sum"], opts["min_share"] * span * 1000.0),
                ),
                fusible,
            )
        ).sort_by([("gap_ns_sum", "descending"), ("key", "ascending")])
        cand = cand.slice(0, int(opts["top"]))
        # each gap's candidate (by its run's key), -1 for the others
        which = pc.fill_null(pc.index_in(root_keys, value_set=cand["key"]), -1).to_numpy(zero_copy_only=False)[
            distinct_of_run[gap_run]
        ]
        for i, row in enumerate(cand.to_pylist()):
            lost = row["gap_ns_sum"] / 1000.0
            mine = which == i
            n_ops = row["key"].count(SEP) + 1
            busy_pct = 100.0 * row["busy_ns_sum"] / row["wall_ns_sum"] if row["wall_ns_sum"] else 0.0
            out.append(
                Finding(
                    RULE_ID,
                    ctx.severity(rank, lost, opts, span_us=span),
                    f"Fusion candidate, {n_ops} small ops run {row['busy_ns_count']} times with the device idle "
                    f"{lost / 1e3:.2f} ms between them: {row['key']}",
                    "Fuse the sequence into one kernel: a fused torch_npu API where one "
                    "exists (torch_npu.npu_rms_norm, "
                    "npu_swiglu, npu_rotary_mul, npu_add_rms_norm ...), graph mode "
                    "(torchair / torch.compile) so the graph "
                    "compiler fuses it, or a custom Ascend C operator; until then "
                    "TASK_QUEUE_ENABLE=2 shortens each launch.",
                    lost,
                    row["busy_ns_count"],
                    rank,
                    {
                        "sequence": row["key"].split(SEP),
                        "occurrences": row["busy_ns_count"],
                        "kernel_us": row["busy_ns_sum"] / 1000.0,
                        "wall_us": row["wall_ns_sum"] / 1000.0,
                        "busy_pct": busy_pct,
                        "gap_us": lost,
                        "span_us": span,
                    },
                    (gap_s[mine], gap_e[mine]),
                )
            )
    return out


# compares steps with each other (a run of operators repeated min_count times, over all steps):
# a window of fewer steps may not show it
register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or "", across_steps=True))
