"""dynamic_shape: operators whose input shapes change from one step to the next.

Method. Over the steps after the first (warm-up) one, each op type's input shapes (kernel_details /
op_summary ``Input Shapes``) are compared step by step: an op type whose set of shapes is not the
same in every step where it runs has dynamic shapes (a sequence length or batch that varies). A
finding per rank names those op types, how many distinct shapes each ran with, and their share of
the kernel time of those steps; it fires when that share is at least ``min_share``. With dynamic
shapes every new shape may compile an operator (jit_compile) or pick a generic tiling, so where
the host timeline has operator compile calls (aclopCompile*, in those steps) the device idle they
leave is the time lost (the finding owns those ranges) and severity follows it; without them no
time is claimed, and the finding is a warning when the ops take a fifth of the kernel time or more.

msprof-analyze's own check reads only ``OP State``: when no operator is static it reports dynamic
shape. Every torch_npu profile with binary kernels (jit_compile=False, the default since torch_npu
2.1) has every operator in the dynamic state, so that check fires on every such profile whether
shapes change or not; npudiag counts the states in the evidence but does not fire on them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, idle_after, step_starts
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "dynamic_shape"
OPTIONS = {"min_steps": 2.0, "min_share": 0.02, "warning_share": 0.01, "critical_share": 0.05}
MSPROF_ANALYZE = "dynamic shape operator (no static op in OP State)"
COMPILE_API = r"^aclopCompile\w*$"
ADVICE = (
    "Keep shapes fixed from step to step: pad or bucket the varying dimension (sequence length, batch) to a few "
    "sizes, drop the last incomplete batch (drop_last=True); with torch_npu use binary kernels "
    "(torch_npu.npu.set_compile_mode(jit_compile=False)) so a new shape does not compile an operator, and in graph "
    "mode (torchair) mark the varying dimensions dynamic once instead of recompiling the graph."
)


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0 or pc.all(pc.is_null(kernels["input_shapes"])).as_py():
        raise Skipped("no input shapes in the kernel table (torch_npu Level0 and task_time do not record them)")
    if pc.all(pc.is_null(kernels["step"])).as_py():
        raise Skipped("no step ids: shapes cannot be compared step by step (profile with a torch_npu schedule)")
    found = (_rank_finding(ctx, rank, opts) for rank in ctx.ranks())
    return [f for f in found if f is not None]


def _rank_finding(ctx: RuleContext, rank: Any, opts: dict[str, float]) -> Finding | None:
    """One rank's finding: the op types whose input shapes change between the steps after the first,
    their share of kernel time, and the compile calls and idle time in those steps; None below the limits."""
    k = ctx.for_rank("kernels", rank).select(
        ["step", "task_class", "op_type", "op_state", "input_shapes", "duration_us"]
    )
    steps = sorted(s for s in pc.unique(k["step"]).to_pylist() if s is not None)
    later = steps[1:] if len(steps) > opts["min_steps"] else []
    if len(later) < opts["min_steps"]:
        return None
    in_steps = pc.and_(pc.is_in(k["step"], pa.array(later, pa.int64())), pc.not_equal(k["task_class"], "communication"))
    k = k.filter(pc.fill_null(in_steps, False))
    total_us = pc.sum(k["duration_us"]).as_py() or 0.0
    has_shape = pc.and_(pc.is_valid(k["op_type"]), pc.invert(pc.is_in(k["input_shapes"], pa.array(["", "N/A"]))))
    shaped = k.filter(pc.fill_null(has_shape, False))
    if shaped.num_rows == 0 or not total_us:
        return None
    ops = _varying_ops(shaped)
    if ops is None:
        return None
    varying_us = pc.sum(ops["duration_us_sum"]).as_py() or 0.0
    share = varying_us / total_us
    if share < opts["min_share"]:
        return None
    calls = _compile_calls(ctx, rank, later)
    idle_us, ranges = idle_after(ctx, rank, calls) if calls.num_rows else (0.0, None)
    states = k.group_by("op_state", use_threads=False).aggregate([("op_state", "count")])
    names = ", ".join(
        f"{r['op_type']} ({r['input_shapes_count_distinct']} shapes)" for r in ops.slice(0, 4).to_pylist()
    )
    compile_us = float(pc.sum(pc.fill_null(calls["duration_us"], 0.0)).as_py() or 0.0) if calls.num_rows else 0.0
    evidence = {
        "ops": [
            {
                "op_type": r["op_type"],
                "shapes": r["input_shapes_count_distinct"],
                "kernels": r["duration_us_count"],
                "kernel_us": r["duration_us_sum"],
            }
            for r in ops.to_pylist()
        ],
        "steps": later,
        "kernel_us": varying_us,
        "share_of_kernel_time": share,
        "compile_calls": calls.num_rows,
        "compile_us": compile_us,
        "op_state": {str(r["op_state"]): r["op_state_count"] for r in states.to_pylist()},
    }
    return Finding(
        RULE_ID,
        ctx.severity(rank, idle_us, opts) if idle_us else ("warning" if share >= 0.2 else "info"),
        f"{ops.num_rows} op types change input shapes from step to step ({100 * share:.0f}% of kernel time): {names}",
        ADVICE,
        idle_us if calls.num_rows else None,
        int(pc.sum(ops["duration_us_count"]).as_py()),
        rank,
        evidence,
        ranges,
    )


def _varying_ops(shaped: pa.Table) -> pa.Table | None:
    """The op types some of whose (op type, shapes) pairs ran in fewer steps than the op type did, with their
    shape counts and kernel time, most time first; None when every op type kept its shapes."""
    pairs = shaped.group_by(["op_type", "input_shapes"], use_threads=False).aggregate([("step", "count_distinct")])
    per_op = shaped.group_by("op_type", use_threads=False).aggregate(
        [
            ("step", "count_distinct"),
            ("input_shapes", "count_distinct"),
            ("duration_us", "sum"),
            ("duration_us", "count"),
        ]
    )
    op_steps = dict(zip(per_op["op_type"].to_pylist(), per_op["step_count_distinct"].to_pylist()))
    need = pc.take(pa.array(list(op_steps.values())), pc.index_in(pairs["op_type"], pa.array(list(op_steps))))
    varying = set(pairs.filter(pc.less(pairs["step_count_distinct"], need))["op_type"].to_pylist())
    if not varying:
        return None
    return per_op.filter(pc.is_in(per_op["op_type"], pa.array(sorted(varying)))).sort_by(
        [("duration_us_sum", "descending")]
    )


def _compile_calls(ctx: RuleContext, rank, steps: list[int]) -> pa.Table:
    """Operator compile calls of the host timeline inside ``steps`` (empty without a timeline)."""
    api = ctx.for_rank("api_calls", rank)
    if api.num_rows == 0:
        return api
    calls = api.filter(pc.fill_null(pc.match_substring_regex(api["name"], COMPILE_API), False))
    bounds, ids = step_starts(ctx, rank)
    if calls.num_rows == 0 or len(ids) == 0:
        return calls.slice(0, 0)
    i = np.searchsorted(bounds, calls["start_us"].to_numpy(zero_copy_only=False), side="right") - 1
    step_of = np.where(i >= 0, ids[np.maximum(i, 0)], -1)
    return calls.filter(pa.array(np.isin(step_of, steps)))


# compares steps with each other (shapes that change from one step to the next): a window of fewer steps may not show it
register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or "", across_steps=True))
