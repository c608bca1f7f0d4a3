"""hot_op: operator types above ``min_share`` of kernel time, all kernels' summed duration (msprof-analyze: High at 5%).

Where the kernel table has PMU ratios, the mean pipe ratios say whether the operator is bound by
memory moves (mte2), by compute (mac / vec) or by scalar code: every pipe whose mean ratio reaches
``bound_ratio`` is named, so an op with both mac and mte2 above it is "compute- and memory-bound"
(msprof-analyze's mac_and_mte2_bound) rather than one picked. The ratios behind the verdict are
in the evidence. No time-lost estimate: it is where to look first."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "hot_op"
OPTIONS = {"min_share": 0.05, "bound_ratio": 0.8}
MSPROF_ANALYZE = "operator analysis: top operators, bound type (its High priority at 5 %)"
_COMM = "Communication dominates: check it overlaps compute (step breakdown) and compare ranks for a slow rank or link."
_NO_PMU = "Large share of kernel time: collect with --aic-metrics PipeUtilization to see which pipe bounds it."
_NO_BOUND = "No pipe is above the bound ratio: likely latency- or launch-bound; check block dim, tiling and fusion."
_RATIOS = ("aic_mac_ratio", "aic_mte2_ratio", "aiv_vec_ratio", "aiv_mte2_ratio", "aic_scalar_ratio", "aiv_scalar_ratio")

_KIND = {
    "aic_mac_ratio": "compute",
    "aiv_vec_ratio": "compute",
    "aic_mte2_ratio": "memory",
    "aiv_mte2_ratio": "memory",
    "aic_scalar_ratio": "scalar",
    "aiv_scalar_ratio": "scalar",
}
_ADVICE = {
    "memory": "Memory-bound: reduce data moved (fuse with neighbours, avoid TransData/format changes, bigger tiles).",
    "compute": "Compute-bound: check the dtype (bf16/fp16, HF32 where allowed) and that block dim fills the cores.",
    "scalar": "Scalar-bound: time goes to scalar code; dynamic shapes or small tiles are the usual cause.",
}


def _bound_text(kinds: list[str], pipes: list[str]) -> str:
    """ "memory-bound (mte2)", "compute-bound (mac)", or "compute- and memory-bound (mac, mte2)"."""
    short = ", ".join(dict.fromkeys(n.split("_")[1] for n in pipes))
    if len(kinds) == 1:
        return f"{kinds[0]}-bound ({short})"
    return ", ".join(f"{k}-" for k in kinds[:-1]) + f" and {kinds[-1]}-bound ({short})"


def ratio_sums(kernels: pa.Table) -> pa.Table:
    """Per op type and PMU ratio column: the sum and count of known values. Adds up over ranks, so
    the rule can run once over a whole cluster from each rank's sums."""
    cols = [n for n in _RATIOS if n in kernels.column_names and pa.types.is_floating(kernels[n].type)]
    if not cols or kernels.num_rows == 0:
        return pa.table(
            {
                "key": pa.array([], pa.string()),
                "ratio": pa.array([], pa.string()),
                "sum": pa.array([], pa.float64()),
                "count": pa.array([], pa.int64()),
            }
        )
    t = pa.table({"key": pc.coalesce(kernels["op_type"], kernels["op_name"]), **{n: kernels[n] for n in cols}})
    g = t.group_by("key", use_threads=False).aggregate([(n, agg) for n in cols for agg in ("sum", "count")])
    parts = [
        pa.table(
            {
                "key": g["key"],
                "ratio": pa.repeat(pa.scalar(n, pa.string()), g.num_rows),
                "sum": g[f"{n}_sum"],
                "count": g[f"{n}_count"],
            }
        )
        for n in cols
    ]
    return pa.concat_tables(parts)


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0:
        raise Skipped("no device tasks in this profile")
    return findings_from(ctx.hot_ops("type"), ratio_sums(kernels), opts)


def partial(tables: dict[str, pa.Table]) -> pa.Table:
    """What one rank contributes where ranks are analysed apart: its PMU ratio sums."""
    return ratio_sums(tables["kernels"])


def combine(kernels: int, hot: pa.Table, partials: list[pa.Table], opts: dict[str, float]) -> list[Finding]:
    """The rule over a whole profile analysed rank by rank: from its kernel count, its hot ops summed over
    the ranks (both from the summary's parts) and each rank's :func:`partial`."""
    if kernels == 0:
        raise Skipped("no device tasks in this profile")
    return findings_from(hot.filter(pc.equal(hot["group_by"], "type")), pa.concat_tables(partials), opts)


def findings_from(hot_by_type: pa.Table, sums: pa.Table, opts: dict[str, float]) -> list[Finding]:
    """The findings from the op-type aggregate and the PMU ratio sums (of one rank or of all)."""
    means: dict[str, dict[str, float]] = {}
    if sums.num_rows:
        g = sums.group_by(["key", "ratio"], use_threads=False).aggregate([("sum", "sum"), ("count", "sum")])
        for key, ratio, total, n in zip(
            g["key"].to_pylist(), g["ratio"].to_pylist(), g["sum_sum"].to_pylist(), g["count_sum"].to_pylist()
        ):
            if n:
                means.setdefault(key, {})[ratio] = total / n
    out = []
    for row in hot_by_type.to_pylist():
        if (row["share_pct"] or 0.0) < 100.0 * opts["min_share"]:
            continue
        known = means.get(row["key"], {})
        ratios = {name: round(known[name], 3) for name in _RATIOS if name in known}
        pipes = sorted((n for n in ratios if ratios[n] >= opts["bound_ratio"]), key=lambda n: -ratios[n])
        kinds = list(dict.fromkeys(_KIND[n] for n in pipes))  # most loaded pipe's kind first
        bound = _bound_text(kinds, pipes) if kinds else None
        advice = " ".join(_ADVICE[k] for k in kinds) if kinds else (_NO_BOUND if ratios else _NO_PMU)
        if any(t in (row["task_types"] or "") for t in ("HCCL", "COMMUNICATION")):
            advice = _COMM
        out.append(
            Finding(
                RULE_ID,
                "info",
                f"{row['key']} takes {row['share_pct']:.1f}% of kernel time" + (f", {bound}" if bound else ""),
                advice,
                None,
                row["count"],
                None,
                {
                    "op_type": row["key"],
                    "task_types": row["task_types"],
                    "total_us": row["total_us"],
                    "ratios": ratios,
                    "bound": bound,
                    "bound_pipes": pipes,
                },
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or "", partial=partial, combine=combine))
