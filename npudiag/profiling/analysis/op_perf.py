"""Operator efficiency: how fast each compute kernel runs against the chip's peak, and what bounds it.

One row per compute kernel (``op_perf.parquet``): its floating-point operations from the shapes the
profile records (formulas below, one place), the bytes it moves, achieved TFLOPS, MFU against the
peak, arithmetic intensity, and the bound its pipe ratios say. Nothing is guessed: an op with no
formula, or shapes in a layout the formula cannot read, gets null flops and ``flops_note`` says why.

FLOPs (multiply and add counted as two):

- MatMul, MatMulV2, MatMulV3 (and a BatchMatMul's batch): ``2·B·M·N·K``. The output is ``[..., M, N]``;
  ``K`` is the dimension of input A that is not ``M`` (A may be stored transposed); B is the product of
  the output's leading dimensions. FRACTAL_NZ shapes ``[..., N1, M1, M0, N0]`` are read back to
  ``M = M1·M0``, ``N = N1·N0``.
- Conv2D with NCHW input, weight ``[Cout, Cin/groups, kh, kw]`` and NCHW output:
  ``2·N·Cout·Hout·Wout·(Cin/groups)·kh·kw``.
- FlashAttention, GroupedMatmul and every other op: none. FlashAttention's FLOPs need its input layout
  and sparse mode, attributes the profile does not record.

Bytes: the profile's main-memory read + write where the Memory metrics were collected, else every
input and output tensor's elements × its dtype size (what a kernel must read and write at least once).

Peak TFLOPS: given (``peak_tflops``, or per dtype ``peak_tflops_bf16`` ...), else the AI Cores
(``device_info.ai_core_num``) × the AI Core clock (``device_info.aic_frequency_mhz``, else the
profile's AI Core frequency samples) × the cube's operations per cycle: one 16×16 by 16×16 FP16 matrix
multiply per cycle, 16×32 by 32×16 for INT8 (CANN TBE operator development guide, "计算单元"): 8,192
FP16 / BF16 and 16,384 INT8 operations per core per cycle. Other dtypes have no peak unless given.

Bound, from the pipe ratios, with msprof-analyze's advisor thresholds (its aicore_performance rules):
cube operators (AI Core MatMul) cube at ``aic_mac_ratio`` ≥ 0.8, memory (mte2) at ``aic_mte2_ratio`` ≥
0.95; FlashAttention memory at ``aic_mte2_ratio`` ≥ 0.8, fixpipe at ``aic_fixpipe_ratio`` ≥ 0.75,
vector at ``aiv_vec_ratio`` ≥ 0.75; vector operators vector+memory when vec + mte2 + mte3 ≥ 0.9, else
mte2 / mte3 / vector at ≥ 0.7; any other kernel scalar at a scalar ratio ≥ 0.8 (its
operator_bound_ratio). A kernel with none of these and shorter than 20 µs (the advisor's shortest
task it judges) is ``latency``; longer, ``none``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling import tasks

# operations per AI Core per cycle by dtype class (the cube's 16x16x16 FP16 / 16x32x16 INT8 multiply)
OPS_PER_CYCLE = {"fp16": 2 * 16 * 16 * 16, "int8": 2 * 16 * 32 * 16}
DTYPE_CLASS = {"FLOAT16": "fp16", "BF16": "fp16", "INT8": "int8", "UINT8": "int8", "FLOAT": "fp32", "HIFLOAT32": "fp32",
               "FLOAT32": "fp32", "INT32": "int32", "DOUBLE": "fp64"}  # fmt: skip
DTYPE_BYTES = {"FLOAT16": 2, "BF16": 2, "FLOAT": 4, "FLOAT32": 4, "DOUBLE": 8, "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2,
               "INT32": 4, "UINT32": 4, "INT64": 8, "UINT64": 8, "BOOL": 1, "COMPLEX64": 8, "HIFLOAT32": 4}  # fmt: skip
# msprof-analyze advisor thresholds (aicore_performance.yaml, config.ini operator_bound_ratio, operator_bound_checker)
OPTIONS = {"cube_mac": 0.8, "cube_mte2": 0.95, "fa_mte2": 0.8, "fa_fixpipe": 0.75, "fa_vec": 0.75, "vector_total": 0.9,
           "vector_pipe": 0.7, "scalar": 0.8, "latency_us": 20.0}  # fmt: skip
MATMUL_TYPES = ("MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
FA_TYPES = ("FlashAttentionScore", "FlashAttentionScoreGrad")
_RATIOS = ("aic_mac_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio", "aic_scalar_ratio", "aiv_vec_ratio", "aiv_mte2_ratio",
           "aiv_mte3_ratio", "aiv_scalar_ratio")  # fmt: skip
_READ = ("read_main_memory_datas_kb", "aic_main_mem_read_kb", "aiv_main_mem_read_kb")
_WRITE = ("write_main_memory_datas_kb", "aic_main_mem_write_kb", "aiv_main_mem_write_kb")


def _dims(text: str) -> list[list[int]] | None:
    """``"4096,1024;4096,1024"`` -> [[4096, 1024], [4096, 1024]]; None where a dim is not a whole number."""
    out = []
    for part in text.strip().strip('"').split(";"):
        part = part.strip()
        if not part:
            out.append([])
            continue
        try:
            dims = [int(d) for d in part.split(",")]
        except ValueError:
            return None
        if any(d < 0 for d in dims):
            return None
        out.append(dims)
    return out


def _dtype(name: str) -> str:
    return name.strip().upper().removeprefix("DT_")


def _matmul(inputs: list[list[int]], outputs: list[list[int]], fmt: list[str]) -> tuple[int | None, str | None]:
    if not inputs or not outputs or len(outputs[0]) < 2 or len(inputs[0]) < 2:
        return None, "shapes of fewer than two dimensions"
    out, a = outputs[0], inputs[0]
    if fmt and fmt[0].upper().startswith("FRACTAL_NZ"):
        if len(out) < 4 or len(a) < 4:
            return None, "FRACTAL_NZ shapes of fewer than four dimensions"
        m, n = out[-3] * out[-2], out[-4] * out[-1]
        a_rows, a_cols = a[-3] * a[-2], a[-4] * a[-1]
        batch = math.prod(out[:-4])
    else:
        m, n = out[-2], out[-1]
        a_rows, a_cols = a[-2], a[-1]
        batch = math.prod(out[:-2])
    if a_rows == m:
        k = a_cols
    elif a_cols == m:
        k = a_rows
    else:
        return None, f"input A {a} has no dimension equal to M = {m}"
    return 2 * batch * m * n * k, None


def _conv2d(inputs: list[list[int]], outputs: list[list[int]], fmt: list[str]) -> tuple[int | None, str | None]:
    if len(inputs) < 2 or not outputs or any(f.upper() not in ("NCHW", "ND") for f in fmt[:2]):
        return None, "Conv2D shapes not in NCHW"
    x, w, y = inputs[0], inputs[1], outputs[0]
    if len(x) != 4 or len(w) != 4 or len(y) != 4:
        return None, "Conv2D shapes not 4-D"
    return 2 * y[0] * y[1] * y[2] * y[3] * w[1] * w[2] * w[3], None


FORMULAS: dict[str, Callable[[list[list[int]], list[list[int]], list[str]], tuple[int | None, str | None]]] = {
    **dict.fromkeys(MATMUL_TYPES, _matmul),
    "Conv2D": _conv2d,
}


def shape_flops(op_type: str | None, in_shapes: str | None, out_shapes: str | None, in_formats: str | None) -> tuple[int | None, str]:
    """(flops, note) of one op type and its recorded shapes; the note says why flops is None."""
    formula = FORMULAS.get(op_type or "")
    if formula is None:
        if op_type in FA_TYPES:
            return None, "FlashAttention: its layout and sparse mode are not in the profile"
        return None, "no formula for this op type"
    if not in_shapes or not out_shapes:
        return None, "no shapes recorded (record_shapes=True / --aicore-shape)"
    inputs, outputs = _dims(in_shapes), _dims(out_shapes)
    if inputs is None or outputs is None:
        return None, "shapes not whole numbers"
    flops, why = formula(inputs, outputs, (in_formats or "").split(";"))
    if flops is not None and flops >= 1 << 62:
        return None, "shapes too large for any real kernel"
    return flops, why or ""


def tensor_bytes(in_shapes: str | None, in_dtypes: str | None, out_shapes: str | None, out_dtypes: str | None) -> float | None:
    """Every input and output tensor's elements × dtype size; None where a dtype or shape is unknown."""
    total = 0
    for shapes, dtypes in ((in_shapes, in_dtypes), (out_shapes, out_dtypes)):
        if not shapes or not dtypes:
            return None
        dims, types = _dims(shapes), dtypes.split(";")
        if dims is None or len(dims) != len(types):
            return None
        for d, t in zip(dims, types, strict=True):
            size = DTYPE_BYTES.get(_dtype(t))
            if size is None:
                return None
            total += math.prod(d) * size
    return float(total)


def _per_distinct(keys: pa.Table, fn: Callable[..., Any], out_type: pa.DataType) -> pa.Array:
    """``fn`` once per distinct row of ``keys`` (text columns; a null is passed as ""), taken back to every row."""
    cols = [pc.fill_null(keys[c], "") for c in keys.column_names]
    joined = pc.binary_join_element_wise(*cols, _SEP) if len(cols) > 1 else cols[0]
    enc = pc.dictionary_encode(joined).combine_chunks() if isinstance(joined, pa.ChunkedArray) else pc.dictionary_encode(joined)
    n = len(cols)
    parts = [key.split(_SEP) for key in enc.dictionary.to_pylist()]
    values = pa.array([fn(*p) if len(p) == n else None for p in parts], out_type)  # a separator inside a value: unread
    return values.take(enc.indices)


_SEP = "\x1f"  # between the key columns of one row (a unit separator: no shape, dtype or op name holds one)


def _col(t: pa.Table, name: str, type_: pa.DataType = pa.float64()) -> pa.Array:
    return pc.cast(t[name], type_).combine_chunks() if name in t.column_names else pa.nulls(t.num_rows, type_)


_PEAK_CLASSES = {"bf16": "fp16", "float16": "fp16", "fp16": "fp16", "int8": "int8", "fp32": "fp32", "float32": "fp32"}


def peak_option(text: str) -> dict[str, float]:
    """``--peak-tflops``: ``"295"`` (every dtype class) or ``"fp16=295,int8=590"`` (bf16 is fp16's class)
    as op_efficiency's options; ValueError names what is wrong."""

    def number(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"--peak-tflops {text!r}: {v!r} is not a number") from None
        if not math.isfinite(x) or x <= 0:
            raise ValueError(f"--peak-tflops {text!r}: expected a number above 0")
        return x

    if "=" not in text:
        return {"peak_tflops": number(text.strip())}
    out = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        cls = _PEAK_CLASSES.get(key.strip().lower())
        if cls is None:
            raise ValueError(f"--peak-tflops {text!r}: {key.strip()!r} is not a dtype class (fp16 / bf16, int8, fp32)")
        out[f"peak_tflops_{cls}"] = number(value.strip())
    return out


def peaks(tables: dict[str, pa.Table], options: dict[str, float]) -> dict[Any, dict[str, float]]:
    """Peak TFLOPS per rank and dtype class: given, else AI Cores × clock × ops per cycle from the profile."""
    given = {k.removeprefix("peak_tflops_"): float(v) for k, v in options.items() if k.startswith("peak_tflops_") and v}
    flat = options.get("peak_tflops")
    info = tables.get("device_info", schemas.empty("device_info"))
    freq = tables.get("aicore_freq", schemas.empty("aicore_freq"))
    ranks = set(pc.unique(tables["kernels"]["rank"]).to_pylist()) if tables["kernels"].num_rows else set()
    out: dict[Any, dict[str, float]] = {}
    for rank in ranks:
        peak: dict[str, float] = {}
        mine = info.filter(pc.equal(info["rank"], rank)) if rank is not None and info.num_rows else info
        cores = pc.max(mine["ai_core_num"]).as_py() if mine.num_rows else None
        mhz = pc.max(mine["aic_frequency_mhz"]).as_py() if mine.num_rows else None
        if not mhz and freq.num_rows:
            f = freq.filter(pc.equal(freq["rank"], rank)) if rank is not None else freq
            mhz = float(np.median(f["freq_mhz"].to_numpy(zero_copy_only=False))) if f.num_rows else None
        if cores and mhz:
            peak = {cls: cores * mhz * 1e6 * ops / 1e12 for cls, ops in OPS_PER_CYCLE.items()}
        if flat:
            peak = dict.fromkeys(("fp16", "int8", "fp32", "int32", "fp64"), float(flat))
        peak.update(given)
        out[rank] = peak
    return out


def _peak_per_row(rank: pa.Array, dclass: pa.Array, peak_of: dict[Any, dict[str, float]]) -> pa.Array:
    rows = [(r, c, v) for r, by in peak_of.items() for c, v in by.items()]
    table = pa.table({"rank": pa.array([r for r, _, _ in rows], pa.int32()), "cls": pa.array([c for _, c, _ in rows], pa.string()),
                      "peak": pa.array([v for _, _, v in rows], pa.float64())})  # fmt: skip
    idx = pa.table({"rank": rank, "cls": dclass, "_i": np.arange(len(rank))})
    return idx.join(table, ["rank", "cls"], join_type="left outer").sort_by("_i")["peak"].combine_chunks()


def op_perf(tables: dict[str, pa.Table], options: dict[str, float] | None = None) -> pa.Table:
    """OP_PERF: one row per compute kernel of ``tables["kernels"]``."""
    opts = {**OPTIONS, **(options or {})}
    k = tables["kernels"]
    if not k.num_rows:
        return schemas.empty("op_perf")
    k = k.filter(pc.fill_null(pc.equal(k["task_class"], tasks.COMPUTE), False))
    if not k.num_rows:
        return schemas.empty("op_perf")
    text = {c: _col(k, c, pa.string()) for c in ("op_type", "input_shapes", "output_shapes", "input_formats", "input_dtypes",
                                                   "output_dtypes", "task_type")}  # fmt: skip
    keys = pa.table({c: text[c] for c in ("op_type", "input_shapes", "output_shapes", "input_formats")})
    by_shape = _per_distinct(keys, shape_flops, pa.struct([("f", pa.int64()), ("n", pa.string())]))
    shape_f, note = pc.struct_field(by_shape, "f"), pc.struct_field(by_shape, "n")
    cube_fops = pc.cast(pc.round(_col(k, "aic_cube_fops")), pa.int64())
    flops = pc.coalesce(cube_fops, shape_f)
    source = pc.if_else(pc.is_valid(cube_fops), "cube_fops", pc.if_else(pc.is_valid(shape_f), "shape", pa.scalar(None, pa.string())))
    read, write = (pc.coalesce(*[_col(k, c) for c in names]) for names in (_READ, _WRITE))
    measured = pc.multiply(pc.add(read, write), 1024.0)
    by_tensors = _per_distinct(pa.table({c: text[c] for c in ("input_shapes", "input_dtypes", "output_shapes", "output_dtypes")}),
                               tensor_bytes, pa.float64())  # fmt: skip
    nbytes = pc.coalesce(measured, by_tensors)
    none = pa.scalar(None, pa.string())
    bytes_source = pc.if_else(pc.is_valid(measured), "memory_metrics", pc.if_else(pc.is_valid(by_tensors), "shapes", none))
    dur = _col(k, "duration_us")
    ops = pc.cast(flops, pa.float64())
    tflops = pc.if_else(pc.greater(dur, 0), pc.divide(ops, pc.multiply(dur, 1e6)), pa.scalar(None, pa.float64()))
    dclass = _per_distinct(pa.table({"d": text["input_dtypes"]}), lambda d: DTYPE_CLASS.get(_dtype(d.split(";")[0])) if d else None,
                           pa.string())  # fmt: skip
    peak = _peak_per_row(_col(k, "rank", pa.int32()), dclass, peaks(tables, opts))
    mfu = pc.if_else(pc.greater(peak, 0), pc.multiply(pc.divide(tflops, peak), 100.0), pa.scalar(None, pa.float64()))
    intensity = pc.if_else(pc.greater(nbytes, 0), pc.divide(ops, nbytes), pa.scalar(None, pa.float64()))
    ratios = {r: _col(k, r) for r in _RATIOS}
    bound = _bound(text["op_type"], text["task_type"], dur, ratios, opts)
    out = pa.table({
        "rank": _col(k, "rank", pa.int32()), "step": _col(k, "step", pa.int64()), "start_ns": _col(k, "start_ns", pa.int64()),
        "op_name": _col(k, "op_name", pa.string()), "op_type": text["op_type"], "task_type": text["task_type"],
        "dtype_class": dclass, "duration_us": dur, "flops": flops, "flops_source": source,
        "flops_note": pc.if_else(pc.is_valid(flops), pa.scalar(None, pa.string()), note), "shape_flops": shape_f,
        "moved_bytes": nbytes, "bytes_source": bytes_source, "achieved_tflops": tflops, "peak_tflops": peak, "mfu_pct": mfu,
        "flops_per_byte": intensity, "bound": bound, **ratios,
    })  # fmt: skip
    return schemas.conform(out, schemas.OP_PERF)


def _bound(op_type: pa.Array, task_type: pa.Array, dur: pa.Array, r: dict[str, pa.Array], o: dict[str, float]) -> pa.Array:
    """The bound verdict per kernel (the module docstring's thresholds); null where no ratio is recorded."""

    def ge(name: str, key: str) -> pa.Array:
        return pc.fill_null(pc.greater_equal(r[name], o[key]), False)

    is_cube = pc.and_(pc.fill_null(pc.equal(task_type, "AI_CORE"), False),
                      pc.fill_null(pc.match_substring(pc.utf8_lower(op_type), "matmul"), False))  # fmt: skip
    is_fa = pc.fill_null(pc.is_in(op_type, pa.array(FA_TYPES)), False)
    is_vec = pc.fill_null(pc.is_in(task_type, pa.array(["AI_VECTOR_CORE", "MIX_AIV"])), False)
    vec_total = pc.add(pc.add(pc.fill_null(r["aiv_vec_ratio"], 0.0), pc.fill_null(r["aiv_mte2_ratio"], 0.0)),
                       pc.fill_null(r["aiv_mte3_ratio"], 0.0))  # fmt: skip
    any_ratio = pc.is_valid(r["aic_mac_ratio"])
    for name in _RATIOS[1:]:
        any_ratio = pc.or_(any_ratio, pc.is_valid(r[name]))
    none = pa.scalar(None, pa.string())
    mac, mte2 = ge("aic_mac_ratio", "cube_mac"), ge("aic_mte2_ratio", "cube_mte2")
    cube = pc.if_else(pc.and_(mac, mte2), "cube+mte2", pc.if_else(mac, "cube", pc.if_else(mte2, "mte2", none)))
    fa = pc.if_else(ge("aic_mte2_ratio", "fa_mte2"), "mte2", pc.if_else(ge("aic_fixpipe_ratio", "fa_fixpipe"), "fixpipe",
                    pc.if_else(ge("aiv_vec_ratio", "fa_vec"), "vector", none)))  # fmt: skip
    vec = pc.if_else(pc.greater_equal(vec_total, o["vector_total"]), "vector+memory",
                     pc.if_else(ge("aiv_mte2_ratio", "vector_pipe"), "mte2", pc.if_else(ge("aiv_mte3_ratio", "vector_pipe"), "mte3",
                                pc.if_else(ge("aiv_vec_ratio", "vector_pipe"), "vector", none))))  # fmt: skip
    scalar = pc.if_else(pc.or_(ge("aic_scalar_ratio", "scalar"), ge("aiv_scalar_ratio", "scalar")), "scalar", none)
    verdict = pc.if_else(is_cube, cube, pc.if_else(is_fa, fa, pc.if_else(is_vec, vec, none)))
    verdict = pc.coalesce(verdict, scalar)
    short = pc.fill_null(pc.less(dur, o["latency_us"]), False)
    rest = pc.if_else(short, "latency", "none")
    return pc.if_else(any_ratio, pc.coalesce(verdict, rest), none)
