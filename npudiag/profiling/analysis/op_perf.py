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
- FlashAttentionScore: ``2·B·N·Sq·Skv·(D + Dv)`` (Q·Kᵀ and P·V); FlashAttentionScoreGrad
  ``2·B·N·Sq·Skv·(3·D + 2·Dv)`` (the backward's five products: Q·Kᵀ recomputed, dO·Vᵀ, Pᵀ·dO, dS·K,
  dSᵀ·Q). B, N (query heads) and Sq from softmax_max ``[B, N, Sq, 8]``; the layout (BNSD / BSND / BSH /
  SBH) where q's dimensions match them unambiguously; Skv, D, Dv from k / v in that layout (BSH / SBH:
  D = H / N, the key / value heads Hk / D). Only for a call without an atten_mask: then sparse_mode 0 computes
  every block; with a mask the sparse mode and pre / next tokens (not in the profile) decide, and flops
  is null. TND (varlen) needs actual_seq_qlen, not recorded either.
- GroupedMatmul and every other op: none (GroupedMatmul's group sizes are values, not shapes).

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
DTYPE_CLASS = {
    "FLOAT16": "fp16",
    "BF16": "fp16",
    "INT8": "int8",
    "UINT8": "int8",
    "FLOAT": "fp32",
    "HIFLOAT32": "fp32",
    "FLOAT32": "fp32",
    "INT32": "int32",
    "DOUBLE": "fp64",
}
DTYPE_BYTES = {
    "FLOAT16": 2,
    "BF16": 2,
    "FLOAT": 4,
    "FLOAT32": 4,
    "DOUBLE": 8,
    "INT8": 1,
    "UINT8": 1,
    "INT16": 2,
    "UINT16": 2,
    "INT32": 4,
    "UINT32": 4,
    "INT64": 8,
    "UINT64": 8,
    "BOOL": 1,
    "COMPLEX64": 8,
    "HIFLOAT32": 4,
}
# msprof-analyze advisor thresholds (aicore_performance.yaml, config.ini operator_bound_ratio, operator_bound_checker)
OPTIONS = {
    "cube_mac": 0.8,
    "cube_mte2": 0.95,
    "fa_mte2": 0.8,
    "fa_fixpipe": 0.75,
    "fa_vec": 0.75,
    "vector_total": 0.9,
    "vector_pipe": 0.7,
    "scalar": 0.8,
    "latency_us": 20.0,
}
MATMUL_TYPES = ("MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
FA_TYPES = ("FlashAttentionScore", "FlashAttentionScoreGrad")
_RATIOS = (
    "aic_mac_ratio",
    "aic_mte2_ratio",
    "aic_fixpipe_ratio",
    "aic_scalar_ratio",
    "aiv_vec_ratio",
    "aiv_mte2_ratio",
    "aiv_mte3_ratio",
    "aiv_scalar_ratio",
)
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


def _matmul(
    inputs: list[list[int]], outputs: list[list[int]], fmt: list[str], _dt: list[str]
) -> tuple[int | None, str | None]:
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


def _conv2d(
    inputs: list[list[int]], outputs: list[list[int]], fmt: list[str], _dt: list[str]
) -> tuple[int | None, str | None]:
    if len(inputs) < 2 or not outputs or any(f.upper() not in ("NCHW", "ND") for f in fmt[:2]):
        return None, "Conv2D shapes not in NCHW"
    x, w, y = inputs[0], inputs[1], outputs[0]
    if len(x) != 4 or len(w) != 4 or len(y) != 4:
        return None, "Conv2D shapes not 4-D"
    return 2 * y[0] * y[1] * y[2] * y[3] * w[1] * w[2] * w[3], None


def _attention_dims(q: list[int], k: list[int], v: list[int], b: int, n: int, sq: int) -> tuple[int, int, int] | str:
    """(Skv, D, Dv) from q / k / v in the layout q shows against B, N and Sq (softmax_max); or why not."""
    if len(q) == 4 and len(k) == 4 and len(v) == 4:  # BNSD [B, N, S, D] or BSND [B, S, N, D]
        bnsd, bsnd = q[1:3] == [n, sq], q[1:3] == [sq, n]
        if bnsd == bsnd:
            return (
                "query's layout (BNSD or BSND) is ambiguous"
                if bnsd
                else f"query {q} does not hold N = {n} and Sq = {sq}"
            )
        return (k[2] if bnsd else k[1]), q[3], v[3]
    if len(q) == 3 and len(k) == 3 and len(v) == 3:  # BSH [B, S, H] or SBH [S, B, H]; H = N x D
        bsh, sbh = q[:2] == [b, sq], q[:2] == [sq, b]
        if bsh == sbh:
            return (
                "query's layout (BSH or SBH) is ambiguous"
                if bsh
                else "query is not in BSH / SBH (TND: varlen, needs actual_seq_qlen)"
            )
        skv, d = (k[1] if bsh else k[0]), q[2] // n if q[2] % n == 0 else 0
        if not d or k[2] % d or not k[2]:
            return f"hidden sizes {q[2]} / {k[2]} do not split into N = {n} heads of one size"
        return skv, d, v[2] // (k[2] // d)
    return "query / key / value are not all 3-D or all 4-D"


def _flash_attention(
    inputs: list[list[int]], outputs: list[list[int]], _fmt: list[str], dtypes: list[str], grad: bool
) -> tuple[int | None, str | None]:
    """FlashAttentionScore (grad): 2·B·N·Sq·Skv·(D + Dv) forward, the two matrix products of Q·Kᵀ and P·V; the
    backward's five (Q·Kᵀ again, dO·Vᵀ, Pᵀ·dO, dS·K, dSᵀ·Q) 2·B·N·Sq·Skv·(3·D + 2·Dv). B, N and Sq come from
    softmax_max / softmax_sum ([B, N, Sq, 8], FlashAttentionScore's IR), the layout from matching them in q.
    Only without an atten_mask is every block computed (sparse_mode 0 ignores pre / next tokens then, the op's
    sparse-mode reference); with a mask the sparse mode and tokens decide, and they are not in the profile."""
    if len(inputs) < 3:
        return None, "FlashAttention without query, key and value shapes"
    mask = [i for i, (dims, dt) in enumerate(zip(inputs, dtypes)) if len(dims) >= 2 and _dtype(dt) in ("BOOL", "UINT8")]
    if mask:
        return None, (
            f"FlashAttention with an atten_mask {inputs[mask[0]]}: the sparse mode and pre / next tokens that decide "
            "how much of Q·Kᵀ is computed are not in the profile"
        )
    stats = [d for d in (*outputs, *inputs[3:]) if len(d) == 4 and d[3] == 8]
    if not stats:
        return None, "FlashAttention without softmax_max [B, N, Sq, 8] (TND / varlen layout)"
    b, n, sq = stats[0][:3]
    dims = _attention_dims(inputs[0], inputs[1], inputs[2], b, n, sq)
    if isinstance(dims, str):
        return None, f"FlashAttention: {dims}"
    skv, d, dv = dims
    return 2 * b * n * sq * skv * ((3 * d + 2 * dv) if grad else (d + dv)), None


FORMULAS: dict[
    str, Callable[[list[list[int]], list[list[int]], list[str], list[str]], tuple[int | None, str | None]]
] = {
    **dict.fromkeys(MATMUL_TYPES, _matmul),
    "Conv2D": _conv2d,
    "FlashAttentionScore": lambda i, o, f, d: _flash_attention(i, o, f, d, grad=False),
    "FlashAttentionScoreGrad": lambda i, o, f, d: _flash_attention(i, o, f, d, grad=True),
}


def shape_flops(
    op_type: str | None,
    in_shapes: str | None,
    out_shapes: str | None,
    in_formats: str | None,
    in_dtypes: str | None = None,
) -> tuple[int | None, str]:
    """(flops, note) of one op type and its recorded shapes; the note says why flops is None."""
    formula = FORMULAS.get(op_type or "")
    if formula is None:
        return None, "no formula for this op type"
    if not in_shapes or not out_shapes:
        return None, "no shapes recorded (record_shapes=True / --aicore-shape)"
    inputs, outputs = _dims(in_shapes), _dims(out_shapes)
    if inputs is None or outputs is None:
        return None, "shapes not whole numbers"
    flops, why = formula(inputs, outputs, (in_formats or "").split(";"), (in_dtypes or "").split(";"))
    if flops is not None and flops >= 1 << 62:
        return None, "shapes too large for any real kernel"
    return flops, why or ""


def tensor_bytes(
    in_shapes: str | None, in_dtypes: str | None, out_shapes: str | None, out_dtypes: str | None
) -> float | None:
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


def _encoded(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """A text column as dictionary codes (int32; a null is "") and its distinct values: one hash pass over the
    column as it is (filling its nulls and joining its chunks first copied its text, twice)."""
    enc = pc.dictionary_encode(arr)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.unify_dictionaries()
        values = enc.chunk(0).dictionary if enc.num_chunks else pa.array([], pa.string())
        codes = pa.chunked_array([c.indices for c in enc.chunks], pa.int32())
    else:
        values, codes = enc.dictionary, enc.indices
    values = values.to_pylist()
    if codes.null_count:
        codes = pc.fill_null(codes, len(values))
        values.append("")
    return codes.to_numpy(), values


def _per_distinct(cols: list[tuple[np.ndarray, list[Any]]], fn: Callable[..., Any]) -> tuple[np.ndarray, list[Any]]:
    """``fn`` once per distinct combination of the encoded ``cols``: per row the index of its combination, and
    the values of ``fn`` by combination (one hash pass per column, never a Python loop over rows)."""
    key = np.zeros(len(cols[0][0]), np.int64)
    distinct = 1
    for idx, values in cols:
        key = key * max(len(values), 1) + idx
        # dense again (the product stays below rows x distinct values), by a hash: a sort costs 7x as much
        dense = pc.dictionary_encode(pa.array(key))
        key, distinct = dense.indices.to_numpy().astype(np.int64), len(dense.dictionary)
    firsts = np.zeros(distinct, np.int64)
    firsts[key[::-1]] = np.arange(len(key) - 1, -1, -1)  # a row of each combination
    out = [fn(*(values[idx[i]] for idx, values in cols)) for i in firsts.tolist()]
    return key, out


def _take(values: list[Any], at: np.ndarray, type_: pa.DataType) -> pa.Array:
    return pa.array(values, type_).take(pa.array(at))


def _num(t: pa.Table, name: str) -> np.ndarray:
    """A float column as numpy, NaN for null or absent."""
    if name not in t.column_names:
        return np.full(t.num_rows, np.nan)
    return pc.cast(t[name], pa.float64()).to_numpy().astype(float)


def _col(t: pa.Table, name: str, type_: pa.DataType = pa.float64()) -> pa.Array | pa.ChunkedArray:
    return pc.cast(t[name], type_) if name in t.column_names else schemas.nulls(t.num_rows, type_)


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


def _peak_per_row(
    rank: np.ndarray, dclass: np.ndarray, classes: list[Any], peak_of: dict[Any, dict[str, float]]
) -> np.ndarray:
    out = np.full(len(rank), np.nan)
    for r, by in peak_of.items():
        on_rank = rank == (-1 if r is None else r)
        for c, v in by.items():
            if c in classes:
                out[on_rank & (dclass == classes.index(c))] = v
    return out


def _flops(k: pa.Table, enc: dict[str, pa.DictionaryArray]) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """Each kernel's FLOPs (the PMU's aic_cube_fops where collected, else from its shapes), where they came
    from, why they are null where they are, and the shapes' own count."""
    at, by_shape = _per_distinct(
        [enc[c] for c in ("op_type", "input_shapes", "output_shapes", "input_formats", "input_dtypes")], shape_flops
    )
    shape_f = _take([f for f, _ in by_shape], at, pa.int64())
    if "aic_cube_fops" in k.column_names:  # the PMU's count, where collected
        cube_fops = pc.cast(pc.round(_col(k, "aic_cube_fops")), pa.int64())
        flops = pc.coalesce(cube_fops, shape_f)
    else:
        cube_fops, flops = schemas.nulls(k.num_rows, pa.int64()), shape_f
    has_cube = pc.is_valid(cube_fops).to_numpy(zero_copy_only=False)
    has_shape = pc.is_valid(shape_f).to_numpy(zero_copy_only=False)
    source = _labels(np.where(has_cube, 0, np.where(has_shape, 1, -1)), ["cube_fops", "shape"])
    notes = [n or None for _, n in by_shape]
    note = _labels(np.where(pc.is_valid(flops).to_numpy(zero_copy_only=False), -1, at), notes)  # one take, no copy
    return flops, source, note, shape_f


def _bytes(k: pa.Table, enc: dict[str, pa.DictionaryArray]) -> tuple[np.ndarray, pa.Array]:
    """Each kernel's moved bytes (the memory metrics' read + write where collected, else its tensors' sizes)
    and where they came from."""
    read, write = (
        np.fmax.reduce([_num(k, c) for c in names]) for names in (_READ, _WRITE)
    )  # whichever the export names
    measured = (read + write) * 1024.0
    bat, by_tensors = _per_distinct(
        [enc[c] for c in ("input_shapes", "input_dtypes", "output_shapes", "output_dtypes")], tensor_bytes
    )
    shaped = np.array([np.nan if b is None else b for b in by_tensors], float)[bat]
    nbytes = np.where(np.isnan(measured), shaped, measured)
    source = _labels(np.where(~np.isnan(measured), 0, np.where(~np.isnan(shaped), 1, -1)), ["memory_metrics", "shapes"])
    return nbytes, source


_CODED = ("input_shapes", "output_shapes", "input_formats", "input_dtypes", "output_dtypes")  # read as codes only


def op_perf(tables: dict[str, pa.Table], options: dict[str, float] | None = None) -> pa.Table:
    """OP_PERF: one row per compute kernel of ``tables["kernels"]``."""
    opts = {**OPTIONS, **(options or {})}
    k = tables["kernels"]
    if not k.num_rows:
        return schemas.empty("op_perf")
    # the columns read as values (the _CODED ones are read as codes, below)
    wanted = {
        *("rank", "step", "start_ns", "op_name", "op_type", "task_type", "duration_us", "aic_cube_fops"),
        *_RATIOS,
        *_READ,
        *_WRITE,
    }
    compute = pc.fill_null(pc.equal(k["task_class"], tasks.COMPUTE), False)
    every = pc.all(compute).as_py()  # every kernel computes (no copies among them): nothing to filter
    if not every and not pc.any(compute).as_py():
        return schemas.empty("op_perf")
    # the text columns read only as codes are encoded on every kernel and their codes kept for the compute
    # ones: filtering their text first copied each of them
    enc = {c: _encoded(_col(k, c, pa.string())) for c in (*_CODED, "op_type", "task_type")}
    if not every:
        keep = compute.to_numpy(zero_copy_only=False)
        enc = {c: (idx[keep], values) for c, (idx, values) in enc.items()}
    k = k.select([c for c in k.column_names if c in wanted])  # a filter copies each
    if not every:
        k = k.filter(compute)
    flops, source, note, shape_f = _flops(k, enc)
    nbytes, bytes_source = _bytes(k, enc)
    dur = _num(k, "duration_us")
    ops = pc.cast(flops, pa.float64()).to_numpy(zero_copy_only=False).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops = np.where(dur > 0, ops / (dur * 1e6), np.nan)
        dat, dclasses = _per_distinct(
            [enc["input_dtypes"]], lambda d: DTYPE_CLASS.get(_dtype(d.split(";")[0])) if d else None
        )
        cls_values = sorted({c for c in dclasses if c})
        dcode = np.array([cls_values.index(c) if c else -1 for c in dclasses], np.int64)[dat]
        rank = pc.fill_null(_col(k, "rank", pa.int32()), -1).to_numpy().astype(np.int64)
        peak = _peak_per_row(rank, dcode, cls_values, peaks(tables, opts))
        mfu = np.where(peak > 0, 100.0 * tflops / peak, np.nan)
        intensity = np.where(nbytes > 0, ops / nbytes, np.nan)
    ratios = {r: _num(k, r) for r in _RATIOS}
    bound = _bound(enc["op_type"], enc["task_type"], dur, ratios, opts)
    out = pa.table(
        {
            "rank": _col(k, "rank", pa.int32()),
            "step": _col(k, "step", pa.int64()),
            "start_ns": _col(k, "start_ns", pa.int64()),
            "op_name": _col(k, "op_name", pa.string()),
            "op_type": _col(k, "op_type", pa.string()),
            "task_type": _col(k, "task_type", pa.string()),
            "dtype_class": _labels(dcode, cls_values),
            "duration_us": _floats(dur),
            "flops": flops,
            "flops_source": source,
            "flops_note": note,
            "shape_flops": shape_f,
            "moved_bytes": _floats(nbytes),
            "bytes_source": bytes_source,
            "achieved_tflops": _floats(tflops),
            "peak_tflops": _floats(peak),
            "mfu_pct": _floats(mfu),
            "flops_per_byte": _floats(intensity),
            "bound": bound,
            **{n: _floats(v) for n, v in ratios.items()},
        }
    )
    return schemas.conform(out, schemas.OP_PERF)


def group_mfu(perf: pa.Table, keys: pa.Array | pa.ChunkedArray) -> pa.Table:
    """MFU of groups of kernels (``keys``, one per row of ``perf``): the time-weighted mean of the kernels'
    ``mfu_pct`` over those whose MFU is known, i.e. 100 x their FLOPs / (their time x their peak). The one
    definition of an op group's MFU: compare's base / cur_mfu_pct, gate's mfu:KEY and the op_efficiency
    rule take it from here; the summary keeps its two sums (summary.efficiency_sums: MFU x time and the time
    of the kernels with a known MFU) so ranks add up, and divides them the same way. A group none of whose
    kernels has a known MFU has no row."""
    known = pc.is_valid(perf["mfu_pct"])
    t = pa.table({"key": keys, "w": pc.fill_null(perf["duration_us"], 0.0), "m": perf["mfu_pct"]}).filter(known)
    t = t.append_column("mw", pc.multiply(t["m"], t["w"]))
    g = t.group_by("key", use_threads=False).aggregate([("mw", "sum"), ("w", "sum")])
    g = g.filter(pc.greater(g["w_sum"], 0.0))
    return pa.table({"key": g["key"], "mfu_pct": pc.divide(g["mw_sum"], g["w_sum"]), "weight_us": g["w_sum"]})


def _floats(v: np.ndarray) -> pa.Array:
    return pa.array(v, pa.float64(), mask=np.isnan(v))


def _labels(codes: np.ndarray, labels: list[str]) -> pa.Array:
    """Text from small codes (-1: null), one take from the labels."""
    return pa.array(labels, pa.string()).take(pa.array(codes, pa.int64(), mask=codes < 0))


_VERDICTS = ["cube", "cube+mte2", "mte2", "mte3", "fixpipe", "vector", "vector+memory", "scalar", "latency", "none"]


def _bound(
    op_type: tuple[np.ndarray, list[Any]],
    task_type: tuple[np.ndarray, list[Any]],
    dur: np.ndarray,
    r: dict[str, np.ndarray],
    o: dict[str, float],
) -> pa.Array:
    """The bound verdict per kernel (the module docstring's thresholds); null where no ratio is recorded."""
    any_ratio = np.any([~np.isnan(r[n]) for n in _RATIOS], axis=0)
    if not any_ratio.any():  # no PipeUtilization collected (most traces): no verdict to work out
        return pa.nulls(len(dur), pa.string())
    v = {name: i for i, name in enumerate(_VERDICTS)}

    def ge(name: str, key: str) -> np.ndarray:
        return np.nan_to_num(r[name], nan=-1.0) >= o[key]

    t_idx, t_values = task_type
    o_idx, o_values = op_type
    is_cube = (
        np.array([t == "AI_CORE" for t in t_values], bool)[t_idx]
        & np.array(["matmul" in x.lower() for x in o_values], bool)[o_idx]
    )
    is_fa = np.array([x in FA_TYPES for x in o_values], bool)[o_idx]
    is_vec = np.array([t in ("AI_VECTOR_CORE", "MIX_AIV") for t in t_values], bool)[t_idx]
    vec_total = sum(np.nan_to_num(r[n]) for n in ("aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio"))
    mac, mte2 = ge("aic_mac_ratio", "cube_mac"), ge("aic_mte2_ratio", "cube_mte2")
    cube = np.select([mac & mte2, mac, mte2], [v["cube+mte2"], v["cube"], v["mte2"]], -1)
    fa = np.select(
        [ge("aic_mte2_ratio", "fa_mte2"), ge("aic_fixpipe_ratio", "fa_fixpipe"), ge("aiv_vec_ratio", "fa_vec")],
        [v["mte2"], v["fixpipe"], v["vector"]],
        -1,
    )
    vec = np.select(
        [
            vec_total >= o["vector_total"],
            ge("aiv_mte2_ratio", "vector_pipe"),
            ge("aiv_mte3_ratio", "vector_pipe"),
            ge("aiv_vec_ratio", "vector_pipe"),
        ],
        [v["vector+memory"], v["mte2"], v["mte3"], v["vector"]],
        -1,
    )
    scalar = np.where(ge("aic_scalar_ratio", "scalar") | ge("aiv_scalar_ratio", "scalar"), v["scalar"], -1)
    verdict = np.select([is_cube, is_fa, is_vec], [cube, fa, vec], -1)
    verdict = np.where(verdict >= 0, verdict, scalar)
    rest = np.where(np.nan_to_num(dur, nan=np.inf) < o["latency_us"], v["latency"], v["none"])
    verdict = np.where(verdict >= 0, verdict, rest)
    return _labels(np.where(any_ratio, verdict, -1), _VERDICTS)
