"""Statistics of one tensor, computed block by block so a memory-mapped tensor of any size is
summarised in bounded memory (one block of BLOCK elements in RAM at a time)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

BLOCK = 1 << 23  # elements per block (32 MB of float32)


def _no_values(out: dict[str, Any], nan: int, pinf: int, ninf: int, zero: int) -> dict[str, Any]:
    """The statistics of a tensor without a finite element: only the counts mean anything."""
    none = dict.fromkeys(("min", "max", "mean", "std", "l2norm"))
    return {**out, **none, "nan_count": nan, "pos_inf_count": pinf, "neg_inf_count": ninf, "zero_count": zero}


def tensor_stats(a: np.ndarray) -> dict[str, Any]:
    flat = a.reshape(-1)
    n = flat.size
    out: dict[str, Any] = {"element_count": int(n)}
    if n == 0:
        return _no_values(out, 0, 0, 0, 0)
    if np.iscomplexobj(flat):
        flat = np.abs(flat)
    is_float = flat.dtype.kind == "f"
    lo, hi = math.inf, -math.inf
    s = sq = 0.0
    finite_n = nan = pinf = ninf = zero = 0
    for start in range(0, n, BLOCK):
        b = np.asarray(flat[start : start + BLOCK])
        if b.dtype == np.bool_:
            b = b.astype(np.uint8)
        zero += int(np.count_nonzero(b == 0))
        if is_float:
            fin = np.isfinite(b)
            if not fin.all():
                nan += int(np.isnan(b).sum())
                pinf += int(np.isposinf(b).sum())
                ninf += int(np.isneginf(b).sum())
                b = b[fin]
        if b.size == 0:
            continue
        finite_n += b.size
        lo = min(lo, float(b.min()))
        hi = max(hi, float(b.max()))
        b64 = b.astype(np.float64, copy=False)
        s += float(np.add.reduce(b64))
        sq += float(np.dot(b64, b64))
    if finite_n == 0:
        return _no_values(out, nan, pinf, ninf, zero)
    mean = s / finite_n
    var = max(sq / finite_n - mean * mean, 0.0)
    return {
        **out,
        "min": lo,
        "max": hi,
        "mean": mean,
        "std": math.sqrt(var),
        "l2norm": math.sqrt(sq),
        "nan_count": nan,
        "pos_inf_count": pinf,
        "neg_inf_count": ninf,
        "zero_count": zero,
    }
