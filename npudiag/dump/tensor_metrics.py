"""How far one saved tensor is from another: msprobe's tensor-mode metrics (26.x), by their definitions.

Both arrays are squeezed (size-1 axes dropped) as msprobe reads them. Nothing is computed (every
metric None) for an empty tensor, shapes that differ, or NaN / Inf at different places on the two
sides; NaN / Inf at the same places are set to 0 on both first. A scalar (a 0-d tensor, or one
element) gets only the two largest errors, as is; dtypes that differ are compared all the same.
Then, with the arrays flattened to float64 where msprobe flattens them:

- ``cosine``: the cosine similarity; 1.0 when both are all zero (norms at most float64's epsilon),
  NaN when one side is; None for a single element. Kept to 12 decimals, to 6 above 0.9999;
- ``euc_dist``: the L2 norm of mine - golden;
- ``max_abs_err``: the largest |mine - golden|;
- ``max_relative_err``: the largest |(mine - golden) / golden|, computed in the wider of the two
  dtypes and float32 (integer and bool tensors in float64), with that dtype's epsilon added to both
  sides where golden is 0;
- ``one_thousandth_err_ratio`` / ``five_thousandths_err_ratio``: the share of elements whose
  relative error is below 0.001 / 0.005.
"""

from __future__ import annotations

import numpy as np

METRICS = (
    "cosine",
    "euc_dist",
    "max_abs_err",
    "max_relative_err",
    "one_thousandth_err_ratio",
    "five_thousandths_err_ratio",
)
ONE_THOUSANDTH, FIVE_THOUSANDTHS = 0.001, 0.005
COSINE_ROUNDED = 0.9999  # a cosine above this is kept to 6 decimals
_FLOATS = (np.float16, np.float32, np.float64, np.longdouble)


def _fmt(v: float) -> float:
    """A value as msprobe writes it: 12 decimals (NaN stays NaN)."""
    return float(f"{v:.12f}")


def _relative(n: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = n if n.dtype.type in _FLOATS else n.astype(np.float64)
    b = b if b.dtype.type in _FLOATS else b.astype(np.float64)
    zero = b == 0
    kind = np.result_type(n, b, np.float32)
    n, b = n.astype(kind), b.astype(kind)
    eps = np.finfo(kind).eps
    n[zero] += eps
    b[zero] += eps
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.abs((n - b) / b)


def tensor_metrics(mine: np.ndarray, golden: np.ndarray) -> tuple[dict[str, float | None], str | None]:
    """The metrics of ``mine`` against ``golden`` and, where none could be computed, why."""
    none: dict[str, float | None] = dict.fromkeys(METRICS)
    n, b = np.squeeze(mine), np.squeeze(golden)
    if n.size == 0:
        return none, "empty tensor"
    if n.shape != b.shape:
        return none, "shapes differ"
    if n.shape == ():  # a 0-d tensor: the largest errors only, NaN / Inf as they are
        out = dict(none)
        fn, fb = (v.astype(np.float64) if v.dtype == np.bool_ else v for v in (n, b))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out["max_abs_err"] = _fmt(float(np.abs(fn - fb)))
            out["max_relative_err"] = _fmt(float(np.max(_relative(n, b))))
        return out, "scalar"
    if n.dtype.kind in "fc" or b.dtype.kind in "fc":
        bad_n, bad_b = ~np.isfinite(n), ~np.isfinite(b)
        if bad_n.any() or bad_b.any():
            if not (np.array_equal(np.isnan(n), np.isnan(b)) and np.array_equal(np.isinf(n), np.isinf(b))):
                return none, "NaN / Inf at different places"
            n, b = np.where(bad_n, 0, n).astype(n.dtype), np.where(bad_b, 0, b).astype(b.dtype)
    out = dict(none)
    fn, fb = n.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if fn.size > 1:
            eps = np.finfo(float).eps
            na, nb = np.linalg.norm(fn), np.linalg.norm(fb)
            if na <= eps and nb <= eps:
                out["cosine"] = 1.0
            elif na <= eps or nb <= eps:
                out["cosine"] = float("nan")
            else:
                cos = float(np.dot(fn, fb) / (na * nb))
                cos = _fmt(cos) if cos == cos else cos
                out["cosine"] = round(cos, 6) if cos > COSINE_ROUNDED else cos
        out["euc_dist"] = float(np.linalg.norm(fn - fb, ord=2))
        out["max_abs_err"] = _fmt(float(np.max(np.abs(fn - fb))))
        rel = _relative(n, b)
        out["max_relative_err"] = _fmt(float(np.max(rel)))
        out["one_thousandth_err_ratio"] = _fmt(float(np.count_nonzero(rel < ONE_THOUSANDTH) / rel.size))
        out["five_thousandths_err_ratio"] = _fmt(float(np.count_nonzero(rel < FIVE_THOUSANDTHS) / rel.size))
    return out, None
