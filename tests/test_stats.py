"""Mann-Whitney U against brute force and against SciPy's published values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from npudiag.profiling.analysis.stats import mann_whitney_u, smallest_p, u_distribution


@pytest.mark.parametrize(("n1", "n2"), [(1, 1), (1, 4), (3, 3), (4, 5), (5, 2), (6, 6)])
def test_exact_distribution_matches_enumeration(n1: int, n2: int) -> None:
    counts = np.zeros(n1 * n2 + 1)
    n = n1 + n2
    for first in itertools.combinations(range(n), n1):
        rest = [j for j in range(n) if j not in first]
        counts[sum(1 for i in first for j in rest if i > j)] += 1
    assert np.array_equal(u_distribution(n1, n2), counts)


def test_complete_separation() -> None:
    assert mann_whitney_u([4, 5, 6], [1, 2, 3], "greater").p == pytest.approx(1 / 20)
    assert mann_whitney_u([4, 5, 6], [1, 2, 3]).p == pytest.approx(2 / 20)
    r = mann_whitney_u(np.arange(7) + 10.0, np.arange(7.0))
    assert r.u == 49 and r.method == "exact" and r.p == pytest.approx(2 / 3432)


def test_reference_values_from_scipy() -> None:
    # scipy.stats.mannwhitneyu(x, y, method="exact") -> U=53, p=0.0021756021756021756
    x = [10.2, 11.5, 9.8, 12.1, 10.9, 11.7, 10.4, 12.6]
    y = [9.1, 9.9, 8.7, 10.0, 9.5, 9.3, 10.1]
    r = mann_whitney_u(x, y)
    assert (r.u, r.method) == (53.0, "exact")
    assert r.p == pytest.approx(0.0021756021756021756, rel=1e-12)
    # with ties: method="asymptotic", continuity correction -> U=13.5, p=0.03175895714806371 (less: 0.015879478574031856)
    x2, y2 = [1, 2, 2, 3, 3, 3, 4, 5], [2, 3, 4, 4, 5, 5, 6, 6, 7]
    r2 = mann_whitney_u(x2, y2)
    assert (r2.u, r2.method) == (13.5, "normal")
    assert r2.p == pytest.approx(0.03175895714806371, rel=1e-12)
    assert mann_whitney_u(x2, y2, "less").p == pytest.approx(0.015879478574031856, rel=1e-12)


def test_identical_samples_are_not_different() -> None:
    assert mann_whitney_u([5.0] * 8, [5.0] * 8).p == 1.0


def test_smallest_p_decides_when_the_test_can_be_used() -> None:
    assert smallest_p(6, 6) > 0.002 > smallest_p(7, 7)
    assert smallest_p(1, 1) == 1.0
    assert smallest_p(0, 5) == 1.0


def test_exact_up_to_100_by_100_then_normal() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.3, 1, 100), rng.normal(0, 1, 100)
    r = mann_whitney_u(x, y)
    # scipy.stats.mannwhitneyu(x, y, method="exact").pvalue for these draws
    assert r.method == "exact" and r.p == pytest.approx(0.009428533695719015, rel=1e-9)
    big = mann_whitney_u(rng.normal(0.3, 1, 300), rng.normal(0, 1, 300))
    assert big.method == "normal" and 0 < big.p < 0.05


@pytest.mark.parametrize(
    ("n1", "n2", "scipy_p"),
    [  # scipy.stats.mannwhitneyu(arange(n1) + 1e6, arange(n2)), method "exact" up to n1 * n2 = 10,000, else "asymptotic"
        (7, 7, 0.0005827505827505828),
        (50, 60, 3.186853303986417e-32),
        (100, 100, 2.2087606931992335e-59),
        (101, 100, 1.7597532545035921e-34),
        (520, 520, 1.7565281736228056e-171),
        (5000, 3, 0.002712224214446987),
    ],
)
def test_complete_separation_of_any_size_against_scipy(n1: int, n2: int, scipy_p: float) -> None:
    """520 steps a side raised OverflowError in smallest_p (1 / C(1040, 520)); at 100 x 100 the exact
    tail summed to -4e-15. Both now equal SciPy's p to 1e-12 (relative)."""
    r = mann_whitney_u(np.arange(n1) + 1e6, np.arange(n2, dtype=float))
    assert r.p == pytest.approx(scipy_p, rel=1e-12)
    assert smallest_p(n1, n2) == pytest.approx(r.p, rel=1e-12)


def test_tails_are_exact_wherever_they_are() -> None:
    from npudiag.profiling.analysis.stats import _tail_exact

    for n1, n2 in ((3, 4), (5, 5), (6, 9), (9, 6)):
        d = u_distribution(n1, n2)
        for t in range(n1 * n2 + 1):
            assert _tail_exact(n1, n2, t) == pytest.approx(d[: t + 1].sum() / d.sum(), rel=1e-12)
