"""block_dim: AI Core operators launched on a number of blocks that is not a multiple of the
device's core count, so their last wave leaves cores idle.

Method (msprof-analyze's block dim check): the core count is the device's ``ai_core_num`` for
AI_CORE and MIX_AIC tasks and its ``aiv_num`` for AI_VECTOR_CORE tasks (``ai_core_num`` where the
chip has no separate vector cores), from msprof's info.json.N; a task whose block dim is not a
multiple of it runs ceil(blocks / cores) waves, the last one partly empty (a MIX_AIC task whose mix
block dim is a multiple of the vector cores is not counted, as msprof-analyze does not). Op types
are grouped; those whose tasks add up to at least ``min_share`` of the rank's kernel time are
reported. Time lost, an estimate that assumes the work splits evenly over blocks: per task, its
duration x (1 - blocks / (cores x waves)), the share of core time the empty slots of the last wave
stand for; the finding owns that share of each task, at its end."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, row_spans
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "block_dim"
OPTIONS = {"min_share": 0.01, "top": 5.0, "warning_share": 0.03, "critical_share": 0.10}
MSPROF_ANALYZE = "block dim (task block dim not a multiple of the AI Core / vector core count)"
TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC")


def _cores(ctx: RuleContext, rank) -> tuple[int, int] | None:
    info = ctx.for_rank("device_info", rank)
    if info.num_rows == 0:
        info = ctx.table("device_info")  # a profile's info.json without a rank applies to its ranks
    aic = [v for v in info["ai_core_num"].to_pylist() if v]
    if not aic:
        return None
    aiv = [v for v in info["aiv_num"].to_pylist() if v]
    return aic[0], (aiv[0] if aiv else 0)


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    if ctx.table("device_info").num_rows == 0:
        raise Skipped(
            "no core count (msprof's device_N/info.json.N DeviceInfo ai_core_num; "
            "torch_npu keeps it under PROF_*/device_*)"
        )
    kernels = ctx.table("kernels")
    if kernels.num_rows == 0 or pc.all(pc.is_null(kernels["block_dim"])).as_py():
        raise Skipped("no block dims in the kernel table")
    out = []
    for rank in ctx.ranks():
        cores = _cores(ctx, rank)
        k = ctx.for_rank("kernels", rank)
        k = k.select(
            ["task_type", "block_dim", "mix_block_dim", "duration_us", "start_us", "start_ns", "op_type", "op_name"]
        )
        if cores is None or k.num_rows == 0:
            continue
        aic, aiv = cores
        total_us = pc.sum(pc.fill_null(k["duration_us"], 0.0)).as_py() or 0.0
        k = k.filter(
            pc.fill_null(pc.and_(pc.is_in(k["task_type"], pa.array(TYPES)), pc.greater(k["block_dim"], 0)), False)
        )
        if k.num_rows == 0 or not total_us:
            continue
        vector = pc.equal(k["task_type"], "AI_VECTOR_CORE").to_numpy(zero_copy_only=False)
        n = np.where(vector & (aiv > 0), aiv, aic)
        blocks = k["block_dim"].to_numpy(zero_copy_only=False)
        partial = blocks % n != 0
        if aiv:  # msprof-analyze: a MIX_AIC task whose mix block dim fills the vector cores is fine
            mix = pc.fill_null(k["mix_block_dim"], 0).to_numpy(zero_copy_only=False)
            partial &= ~(
                pc.equal(k["task_type"], "MIX_AIC").to_numpy(zero_copy_only=False) & (mix > 0) & (mix % aiv == 0)
            )
        if not partial.any():
            continue
        waves = -(-blocks // n)
        empty = 1.0 - blocks / (n * waves)
        dur = pc.fill_null(k["duration_us"], 0.0).to_numpy(zero_copy_only=False)
        t = pa.table(
            {
                "op": pc.coalesce(k["op_type"], k["op_name"], pa.scalar("(unnamed)")),
                "dur": dur,
                "lost": dur * empty,
                "blocks": blocks,
                "cores": n,
                "partial": partial,
                "i": np.arange(k.num_rows),
            }
        ).filter(pa.array(partial))
        g = t.group_by("op", use_threads=False).aggregate(
            [("dur", "sum"), ("lost", "sum"), ("dur", "count"), ("blocks", "min"), ("blocks", "max"), ("cores", "max")]
        )
        g = g.filter(pc.greater_equal(g["dur_sum"], opts["min_share"] * total_us))
        g = g.sort_by([("lost_sum", "descending"), ("op", "ascending")])
        start, end, ok = row_spans(k)
        for row in g.slice(0, int(opts["top"])).to_pylist():
            mine = t.filter(pc.equal(t["op"], row["op"]))
            idx = mine["i"].to_numpy()
            share = mine["lost"].to_numpy() / np.maximum(mine["dur"].to_numpy(), 1e-12)
            keep = ok[idx]
            e = end[idx][keep]
            s = e - np.round((e - start[idx][keep]) * share[keep]).astype(np.int64)
            lost = float(row["lost_sum"])
            dims = (
                f"{row['blocks_min']}"
                if row["blocks_min"] == row["blocks_max"]
                else f"{row['blocks_min']}-{row['blocks_max']}"
            )
            out.append(
                Finding(
                    RULE_ID,
                    ctx.severity(rank, lost, opts),
                    f"{row['op']} runs on {dims} blocks with {row['cores_max']} cores: its last wave leaves cores idle "
                    f"({row['dur_count']} tasks, {row['dur_sum'] / 1e3:.2f} ms)",
                    f"Launch {row['op']} with a block dim that is a multiple of {row['cores_max']} (the tiling's core "
                    "count: for a custom Ascend C kernel set blockDim from the platform's core count, e.g. "
                    "GetCoreNumAic / GetCoreNumAiv, and split the work to fill every core); for a built-in operator "
                    "check whether a shape padded to a multiple of the core count tiles evenly.",
                    lost,
                    row["dur_count"],
                    rank,
                    {
                        "op": row["op"],
                        "block_dim_min": row["blocks_min"],
                        "block_dim_max": row["blocks_max"],
                        "cores": row["cores_max"],
                        "ai_core_num": aic,
                        "aiv_num": aiv,
                        "kernel_us": row["dur_sum"],
                        "share_of_kernel_time": row["dur_sum"] / total_us,
                    },
                    (s, e),
                )
            )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
