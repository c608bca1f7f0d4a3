"""Tensor-by-tensor accuracy comparison of two dumps, with msaccucmp's metric definitions.

x is MY_DUMP's tensor, y the golden one, both flattened to float64:

- cosine similarity Σ(x/‖x‖)(y/‖y‖), capped at 1; a scalar compares as 1; both zero 1; one zero NaN
- max / mean absolute error, root mean square error
- relative error |x/y − 1| where |y| > ε (else 0): max, mean, accumulated (sum)
- relative Euclidean distance √(Σ(x−y)² / Σy²), 0 when ‖y‖ ≤ ε
- KL divergence: each side min-max normalised, clamped to ≥ float32 ε, divided by its sum; Σ p·log(p/q) with p golden
- mean and standard deviation of both sides
- share of elements with relative error |x−y|/|y| (ε where y = 0) below 1/1000 and 1/100 (msprobe's ratios)

Elements that are NaN or ±Inf on either side are left out of the numbers and counted; a NaN or Inf
that only MY_DUMP has fails the tensor. A tensor passes when cosine ≥ 0.99, relative Euclidean
distance < 0.05 and KL < 0.005 (the MindStudio documentation's thresholds; configurable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

EPS = float(np.finfo(np.float64).eps)
F32_EPS = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class Thresholds:
    cosine: float = 0.99
    relative_euclidean: float = 0.05
    kl: float = 0.005


def _kl(x: np.ndarray, y: np.ndarray) -> float:
    def norm(v: np.ndarray) -> np.ndarray | None:
        if not np.any(v):
            return None
        lo, hi = v.min(), v.max()
        w = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
        w = np.maximum(w, F32_EPS)
        return w / w.sum()

    q, p = norm(x), norm(y)
    if p is None or q is None:
        return math.nan
    return float(np.sum(p * np.log(p / q)))


def _metrics(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """msaccucmp's metrics of two finite, non-empty float64 vectors of one length (mine ``x``, golden ``y``)."""
    d = x - y
    ad = np.abs(d)
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if x.size == 1 or nx == 0 and ny == 0:
        cos = 1.0
    elif nx == 0 or ny == 0:
        cos = math.nan
    else:
        cos = min(float(np.dot(x / nx, y / ny)), 1.0)
    big = np.abs(y) > EPS
    rel = np.zeros_like(x)
    rel[big] = np.abs(x[big] / y[big] - 1.0)
    re_ratio = ad / np.where(y == 0, EPS, np.abs(y))
    sy2 = float(np.dot(y, y))
    return {
        "cosine_similarity": cos,
        "max_absolute_error": float(ad.max()),
        "mean_absolute_error": float(ad.mean()),
        "root_mean_square_error": math.sqrt(float(np.mean(d * d))),
        "max_relative_error": float(rel.max()),
        "mean_relative_error": float(rel.mean()),
        "accumulated_relative_error": float(rel.sum()),
        "relative_euclidean_distance": 0.0 if ny <= EPS else math.sqrt(float(np.dot(d, d)) / sy2),
        "kl_divergence": _kl(x, y),
        "my_mean": float(x.mean()),
        "my_std": float(x.std()),
        "golden_mean": float(y.mean()),
        "golden_std": float(y.std()),
        "one_thousandth_ratio": float(np.mean(re_ratio < 0.001)),
        "one_hundredth_ratio": float(np.mean(re_ratio < 0.01)),
    }


def compare_arrays(mine: np.ndarray, golden: np.ndarray, thresholds: Thresholds | None = None) -> dict[str, Any]:
    t = thresholds or Thresholds()
    x = np.asarray(mine, dtype=np.float64).reshape(-1) if not np.iscomplexobj(mine) else np.abs(mine).reshape(-1)
    y = np.asarray(golden, dtype=np.float64).reshape(-1) if not np.iscomplexobj(golden) else np.abs(golden).reshape(-1)
    out: dict[str, Any] = {"fail_reason": None}
    if x.size != y.size:
        return {**out, "passed": False, "fail_reason": f"element counts differ: {x.size} vs {y.size}"}
    fx, fy = np.isfinite(x), np.isfinite(y)
    out["my_nan_count"] = int(np.isnan(x).sum())
    out["golden_nan_count"] = int(np.isnan(y).sum())
    reasons = []
    only_mine = int((~fx & fy).sum())
    if only_mine:
        reasons.append(f"{only_mine} NaN/Inf elements only in my dump")
    if (~fy).any():
        reasons.append(f"{int((~fy).sum())} NaN/Inf elements in the golden data (left out)")
    both = fx & fy
    if not both.all():
        x, y = x[both], y[both]
    if x.size == 0:
        return {**out, "passed": False, "fail_reason": "; ".join(reasons) or "empty tensor"}
    out.update(_metrics(x, y))
    cos, red, kl = out["cosine_similarity"], out["relative_euclidean_distance"], out["kl_divergence"]
    failed = []
    if not (cos >= t.cosine):  # NaN fails too
        failed.append(f"cosine {cos:.4f} < {t.cosine}")
    if red >= t.relative_euclidean:
        failed.append(f"relative Euclidean distance {red:.4f} >= {t.relative_euclidean}")
    if not math.isnan(kl) and kl >= t.kl:
        failed.append(f"KL {kl:.4g} >= {t.kl}")
    if only_mine:
        failed.insert(0, reasons[0])
    out["passed"] = not failed
    notes = failed + [r for r in reasons if r not in failed]
    out["fail_reason"] = "; ".join(notes) or None
    return out
