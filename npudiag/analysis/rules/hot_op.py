"""hot_op: operator types above ``min_share`` of device time (msprof-analyze ranks High at 5%).

Where the kernel table has PMU ratios, the mean pipe ratios say whether the operator is bound by
memory moves (mte2) or by compute (mac / vec). No time-lost estimate: it is where to look first."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from npudiag.analysis.hot_ops import hot_ops
from npudiag.analysis.rules.base import Finding, RuleContext, Skipped

RULE_ID = "hot_op"
OPTIONS = {"min_share": 0.05, "bound_ratio": 0.8}
_COMM = "Communication dominates: check it overlaps compute (step breakdown) and compare ranks for a slow rank or link."
_NO_PMU = "Largest share of device time: collect with --aic-metrics PipeUtilization to see which pipe bounds it."
_NO_BOUND = "No pipe is above the bound ratio: likely latency- or launch-bound; check block dim, tiling and fusion."
_RATIOS = ("aic_mac_ratio", "aic_mte2_ratio", "aiv_vec_ratio", "aiv_mte2_ratio", "aic_scalar_ratio", "aiv_scalar_ratio")


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0:
        raise Skipped("no device tasks in this profile")
    out = []
    for row in hot_ops(kernels, "type").to_pylist():
        if (row["share_pct"] or 0.0) < 100.0 * opts["min_share"]:
            continue
        sel = kernels.filter(pc.fill_null(pc.equal(pc.coalesce(kernels["op_type"], kernels["op_name"]), row["key"]), False))
        ratios = {}
        for name in _RATIOS:
            if name in sel.column_names and pa.types.is_floating(sel[name].type):
                mean = pc.mean(sel[name]).as_py()
                if mean is not None:
                    ratios[name] = round(mean, 3)
        bound = None
        if ratios:
            top = max(ratios, key=ratios.get)
            if ratios[top] >= opts["bound_ratio"]:
                bound = "memory-bound (mte2)" if "mte2" in top else "compute-bound" if ("mac" in top or "vec" in top) else "scalar-bound"
        advice = {
            "memory-bound (mte2)": "Memory-bound: reduce data moved (fuse with neighbours, avoid TransData/format changes, bigger tiles).",
            "compute-bound": "Compute-bound: check the dtype (bf16/fp16, HF32 where allowed) and that block dim fills the cores.",
            "scalar-bound": "Scalar-bound: time goes to scalar code; dynamic shapes or small tiles are the usual cause.",
        }.get(bound or "", _NO_BOUND if ratios else _NO_PMU)
        if any(t in (row["task_types"] or "") for t in ("HCCL", "COMMUNICATION")):
            advice = _COMM
        out.append(
            Finding(
                RULE_ID,
                "info",
                f"{row['key']} takes {row['share_pct']:.1f}% of device time" + (f", {bound}" if bound else ""),
                advice,
                None,
                row["count"],
                None,
                {"op_type": row["key"], "task_types": row["task_types"], "total_us": row["total_us"], "ratios": ratios, "bound": bound},
            )
        )
    return out
