"""Mann–Whitney U test, written here so the gate needs no SciPy.

Why this test: step times are not normal (warm-up outliers, long tails from host jitter), and
the test only asks whether one side's values tend to be larger, on ranks. asv decides "changed"
with it (p < 0.002 on top of a ratio factor) and Google Benchmark's compare.py uses it too.

Method: the exact null distribution of U when there are no ties (the coefficients of the
Gaussian binomial coefficient, built by polynomial multiply/divide in O(n1 * n1 * n2)), otherwise
the normal approximation with tie correction and continuity correction. Two-sided by default,
as asv does.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, erfc, sqrt

import numpy as np

# n1 * n2 up to which the exact distribution is built: the multiply step subtracts, and beyond
# about 1e4 cancellation costs digits (at 300 x 300 the p-value is wrong), where the normal
# approximation is already within 1e-3 of exact.
EXACT_LIMIT = 10_000


@dataclass(frozen=True)
class MannWhitney:
    u: float  # U of the first sample: pairs (x, y) with x > y, ties counting one half
    p: float
    method: str  # exact or normal


def _rank(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mid-ranks (1-based) and the sizes of the tie groups."""
    order = np.argsort(values, kind="mergesort")
    sorted_v = values[order]
    boundaries = np.flatnonzero(np.diff(sorted_v)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(values)]])
    mid = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks_sorted = np.repeat(mid, ends - starts)
    ranks = np.empty(len(values))
    ranks[order] = ranks_sorted
    return ranks, ends - starts


def u_distribution(n1: int, n2: int) -> np.ndarray:
    """Number of orderings giving each U = 0 .. n1*n2 (coefficients of [n1+n2 choose n1]_q)."""
    if n1 > n2:
        n1, n2 = n2, n1
    m = n1 * n2
    c = np.zeros(m + 1)
    c[0] = 1.0
    for i in range(1, n1 + 1):
        k = n2 + i
        if k <= m:
            c[k:] -= c[: m + 1 - k].copy()
        # division by (1 - q^i) is a running sum with stride i
        for r in range(i):
            c[r::i] = np.cumsum(c[r::i])
    return c


# below this a tail of the float counts may be mostly rounding noise (its terms are 1e-16 of the largest)
_NOISY = 1e-9


def _tail_exact(n1: int, n2: int, t: int) -> float:
    """P(U <= t) exactly: the orderings with U <= t (the coefficients up to q^t of the Gaussian
    binomial [n1 + n2 choose n1]_q, in Python integers) over C(n1 + n2, n1). Cheap where it is used,
    a tail of a few orderings: O(n1 * t)."""
    if t < 0:
        return 0.0
    if n1 > n2:
        n1, n2 = n2, n1
    c = np.zeros(t + 1, dtype=object)  # Python integers, added in C loops
    c[0] = 1
    for i in range(1, n1 + 1):
        k = n2 + i
        if k <= t:  # times (1 - q^k)
            c[k:] = c[k:] - c[: t + 1 - k]
        for r in range(min(i, t + 1)):  # divided by (1 - q^i): a running sum with stride i
            c[r::i] = np.cumsum(c[r::i])
    return min(1.0, int(c.sum()) / comb(n1 + n2, n1))


def mann_whitney_u(x: np.ndarray, y: np.ndarray, alternative: str = "two-sided") -> MannWhitney:
    """Test whether ``x`` and ``y`` come from the same distribution.

    ``alternative``: ``two-sided``, ``greater`` (x tends to be larger) or ``less``.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples need at least one value")
    ranks, ties = _rank(np.concatenate([x, y]))
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    has_ties = bool((ties > 1).any())
    if not has_ties and n1 * n2 <= EXACT_LIMIT:
        dist = u_distribution(n1, n2)
        total = dist.sum()
        k = int(round(u1))
        upper = float(dist[k:].sum() / total)  # P(U >= u1)
        lower = float(dist[: k + 1].sum() / total)  # P(U <= u1)
        # the subtractions that build the counts leave a tiny tail as noise (complete separation at
        # 100 x 100 summed to -4e-15): such a tail is counted again exactly, in integers
        m = n1 * n2
        if upper < _NOISY:
            upper = _tail_exact(n1, n2, m - k)  # U is symmetric: P(U >= k) = P(U <= m - k)
        if lower < _NOISY:
            lower = _tail_exact(n1, n2, k)
        p = {"greater": upper, "less": lower}.get(alternative, min(1.0, 2.0 * min(upper, lower)))
        return MannWhitney(u1, p, "exact")
    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie_term = float((ties**3 - ties).sum()) / (n * (n - 1)) if n > 1 else 0.0
    sigma = sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return MannWhitney(u1, 1.0, "normal")

    def sf(z: float) -> float:
        return 0.5 * erfc(z / sqrt(2.0))

    if alternative == "greater":
        p = sf((u1 - mu - 0.5) / sigma)
    elif alternative == "less":
        p = sf((mu - u1 - 0.5) / sigma)
    else:
        p = min(1.0, 2.0 * sf((abs(u1 - mu) - 0.5) / sigma))
    return MannWhitney(u1, p, "normal")


def smallest_p(n1: int, n2: int, alternative: str = "two-sided") -> float:
    """The smallest p-value the test can give for these sample sizes: what :func:`mann_whitney_u`
    gives for complete separation without ties, by the same method (exact up to EXACT_LIMIT, the
    normal approximation beyond, where 1 / C(n1 + n2, n1) no longer fits a float: 520 steps a side
    once raised OverflowError).

    If it is not below the significance level, the test cannot decide and the gate falls back to
    the ratio threshold alone.
    """
    if n1 == 0 or n2 == 0:
        return 1.0
    if n1 * n2 <= EXACT_LIMIT:
        one = 1.0 / comb(n1 + n2, n1)
        return one if alternative in ("greater", "less") else min(1.0, 2.0 * one)
    n = n1 + n2
    sigma = sqrt(n1 * n2 / 12.0 * (n + 1))
    one = 0.5 * erfc((n1 * n2 / 2.0 - 0.5) / sigma / sqrt(2.0))
    return one if alternative in ("greater", "less") else min(1.0, 2.0 * one)
