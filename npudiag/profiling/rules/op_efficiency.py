"""op_efficiency: operator types that spend much of the kernel time far below the chip's peak.

From op_perf (npudiag.profiling.analysis.op_perf: FLOPs from shapes, MFU against the peak, the bound
from the pipe ratios): per rank and op type with a FLOPs formula, the kernels whose MFU is below
``low_mfu``; a type whose such kernels hold at least ``min_share`` of the rank's kernel time is named,
with its time-weighted MFU, its bound verdicts and the shapes that are not cube-affine: a MatMul whose
inner axes (the last dimension of both inputs, ND) are not multiples of 256, as msprof-analyze's
aicore_performance advisor checks (its "inner axis is not divisible by 256"). The peak comes from
``peak_tflops`` (``--peak-tflops``) or per dtype class (``peak_tflops_fp16`` ...), else from the
profile's AI Core count and clock; without either the rule is skipped and says which option fixes it.
No time-lost estimate: MFU says how far from the peak, not how much faster the op could run."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.analysis.op_perf import MATMUL_TYPES, group_mfu
from npudiag.profiling.analysis.op_perf import OPTIONS as PERF_OPTIONS
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "op_efficiency"
OPTIONS = {
    "low_mfu": 0.5,
    "min_share": 0.05,
    "top": 5.0,
    "peak_tflops": 0.0,
    "peak_tflops_fp16": 0.0,
    "peak_tflops_int8": 0.0,
    "peak_tflops_fp32": 0.0,
    **PERF_OPTIONS,
}
MSPROF_ANALYZE = "AI Core performance (cube / FA / vector operator bound and shape affinity)"
_ADVICE = {
    "cube": "Cube-bound at low MFU: the cube is busy but does little per cycle; check the dtype (BF16 / FP16), "
    "HF32 where allowed, and shapes that fill 16x16 fractals.",
    "mte2": "Memory-bound (mte2): the op waits on loads from main memory; fuse it with its neighbours or use "
    "bigger tiles so each byte is used more.",
    "latency": "Short kernels: launch and setup dominate; fuse small ops or batch the work.",
    "none": "No pipe is saturated: the op neither computes nor moves data at full rate; check block dim against "
    "the core count and the tiling (msprof-analyze's operator tuning).",
}
_AFFINITY = "inner axis not a multiple of 256 (msprof-analyze: cube operators are affine when it is)"


def _affine(shapes: str | None) -> bool | None:
    """ND MatMul inputs whose last dimensions are both multiples of 256; None when not two ND 2-D+ shapes."""
    if not shapes:
        return None
    parts = [p.split(",") for p in shapes.strip('"').split(";")]
    if len(parts) < 2 or len(parts[0]) < 2 or len(parts[1]) < 2:
        return None
    try:
        return int(parts[0][-1]) % 256 == 0 and int(parts[1][-1]) % 256 == 0
    except ValueError:
        return None


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    perf = ctx.table("op_perf")
    if perf.num_rows == 0:
        raise Skipped("no compute kernels in this profile")
    known = perf.filter(pc.is_valid(perf["flops"]))
    if known.num_rows == 0:
        raise Skipped("no kernel of an op type with a FLOPs formula (MatMul, BatchMatMul, Conv2D) and recorded shapes")
    if not pc.any(pc.is_valid(known["mfu_pct"])).as_py():
        raise Skipped(
            "no peak: give --peak-tflops (or op_efficiency.peak_tflops), or collect device info (msprof's info.json)"
        )
    kernels = ctx.table("kernels")
    out: list[Finding] = []
    for rank in pc.unique(known["rank"]).to_pylist():
        mine = (
            known.filter(pc.equal(known["rank"], rank)) if rank is not None else known.filter(pc.is_null(known["rank"]))
        )
        k = kernels.filter(pc.equal(kernels["rank"], rank)) if rank is not None else kernels
        total = pc.sum(k["duration_us"]).as_py() or 0.0
        if total <= 0:
            continue
        low = mine.filter(pc.fill_null(pc.less(mine["mfu_pct"], 100.0 * opts["low_mfu"]), False))
        if not low.num_rows:
            continue
        g = low.group_by("op_type", use_threads=False).aggregate([("duration_us", "sum"), ("duration_us", "count")])
        ranked = sorted(
            zip(
                g["op_type"].to_pylist(),
                g["duration_us_sum"].to_pylist(),
                g["duration_us_count"].to_pylist(),
                strict=True,
            ),
            key=lambda r: -r[1],
        )
        for op_type, low_us, n in ranked[: int(opts["top"])]:
            if low_us < opts["min_share"] * total:
                continue
            out.append(
                _finding(rank, op_type, low_us, n, total, mine.filter(pc.equal(mine["op_type"], op_type)), k, opts)
            )
    return out


def _finding(
    rank, op_type: str, low_us: float, n: int, total: float, rows: pa.Table, kernels: pa.Table, opts: dict[str, float]
) -> Finding:
    whole = group_mfu(rows, pa.repeat(pa.scalar(0), rows.num_rows))["mfu_pct"]  # the op type's MFU, as everywhere
    weighted = (whole[0].as_py() if len(whole) else 0.0) / 100.0
    low = rows.filter(pc.fill_null(pc.less(rows["mfu_pct"], 100.0 * opts["low_mfu"]), False))
    bounds = (
        low.group_by("bound", use_threads=False)
        .aggregate([("duration_us", "sum")])
        .sort_by([("duration_us_sum", "descending")])
    )
    pairs = zip(bounds["bound"].to_pylist(), bounds["duration_us_sum"].to_pylist(), strict=True)
    by_bound = {b or "unknown": round(v, 3) for b, v in pairs}
    main = next(iter(by_bound), "unknown")
    evidence = {
        "op_type": op_type,
        "kernels_low": n,
        "low_mfu_us": round(low_us, 3),
        "share_of_kernel_time": round(low_us / total, 4),
        "mfu_time_weighted": round(weighted, 4),
        "low_mfu": opts["low_mfu"],
        "bound_us": by_bound,
        "peak_tflops": sorted(set(v for v in rows["peak_tflops"].to_pylist() if v is not None)),
    }
    advice = _ADVICE.get(main, _ADVICE["none"])
    if op_type in MATMUL_TYPES:
        k = (
            kernels.filter(pc.equal(kernels["op_type"], op_type))
            if "input_shapes" in kernels.column_names
            else kernels.slice(0, 0)
        )
        shapes = pc.unique(k["input_shapes"]).to_pylist() if k.num_rows else []
        unaffine = [s for s in shapes if _affine(s) is False]
        if unaffine:
            evidence["unaffine_shapes"] = unaffine[:10]
            advice += f" {len(unaffine)} of its {len(shapes)} shapes have an {_AFFINITY}; pad the inner axis to 256."
    title = (
        f"{op_type}: {low_us / 1000:.2f} ms ({100 * low_us / total:.1f}% of kernel time) "
        f"below {opts['low_mfu']:.0%} MFU; "
        f"MFU {weighted:.0%} over its kernels, mostly {main}-bound"
    )
    return Finding(RULE_ID, "warning" if low_us / total >= 0.2 else "info", title, advice, None, n, rank, evidence)


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
