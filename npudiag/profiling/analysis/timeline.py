"""Interval arithmetic over device tasks, vectorised with numpy (n log n for the sort).

Absolute float64 microseconds have a 0.25 us resolution at today's epoch, enough to merge
back-to-back kernels wrongly; ``intervals`` therefore works in microseconds relative to a base,
from the exact ``start_ns`` column where the table has it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def base_ns(*tables: pa.Table) -> int:
    """A common origin for the tables' times (the earliest start), in ns."""
    starts = []
    for t in tables:
        if t.num_rows:
            m = pc.min(t["start_ns"]).as_py() if "start_ns" in t.column_names else None
            if m is None and pc.min(t["start_us"]).as_py() is not None:
                m = int(pc.min(t["start_us"]).as_py() * 1000)
            if m is not None:
                starts.append(m)
    return min(starts) if starts else 0


def intervals(table: pa.Table, base: int, *, keep_null: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in us relative to ``base`` ns; rows without a start dropped (or NaN with ``keep_null``)."""
    if table.num_rows == 0:
        return np.array([], float), np.array([], float)
    s_us = pc.fill_null(table["start_us"], np.nan).to_numpy()
    s = s_us - base / 1000.0
    if "start_ns" in table.column_names:
        exact = table["start_ns"]
        rel = pc.divide(pc.subtract(exact, base).cast(pa.float64(), safe=False), 1000.0)
        s = np.where(pc.is_valid(exact).to_numpy(zero_copy_only=False), pc.fill_null(rel, np.nan).to_numpy(), s)
    e = s + pc.fill_null(table["duration_us"], 0.0).to_numpy()
    if keep_null:
        return s, e
    ok = ~np.isnan(s)
    return s[ok], e[ok]


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint segments covered by the intervals, sorted."""
    if len(starts) == 0:
        return np.array([], float), np.array([], float)
    if bool(np.all(starts[1:] >= starts[:-1])):  # already in order (no NaN), as most task tables are: no sort, no copy
        s, e = starts, np.maximum(ends, starts)
    else:
        order = np.argsort(starts, kind="stable")
        s = starts[order]
        e = np.maximum(ends[order], s)
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    idx = np.nonzero(new)[0]
    return s[new], reach[np.append(idx[1:] - 1, len(s) - 1)]


def covered_before(seg_start: np.ndarray, seg_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time in ``t``, how much of the segments lies before it (vectorised, log n each)."""
    if len(seg_start) == 0:
        return np.zeros(len(t))
    lengths = seg_end - seg_start
    cum = np.concatenate([[0.0], np.cumsum(lengths)])
    i = np.searchsorted(seg_start, t, side="right") - 1
    inside = np.where(i >= 0, np.minimum(t, seg_end[np.maximum(i, 0)]) - seg_start[np.maximum(i, 0)], 0.0)
    return np.where(i >= 0, cum[np.maximum(i, 0)] + np.maximum(inside, 0.0), 0.0)


def overlap_with(seg_start: np.ndarray, seg_end: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per interval, how long it overlaps the (disjoint, sorted) segments."""
    return covered_before(seg_start, seg_end, ends) - covered_before(seg_start, seg_end, starts)


def grouped_merge(group: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`merge` within each group at once: the merged segments (group, start, end), sorted by
    group then start, every group's segments its own (intervals of two groups never merge). One
    sort; a cumulative maximum carries over groups that begin after all earlier ones end (the usual
    case: steps follow each other), and a group that begins before that is merged on its own."""
    if len(starts) == 0:
        empty = np.array([], float)
        return np.array([], np.int64), empty, empty
    order = np.lexsort((starts, group))
    g, s = group[order], starts[order]
    e = np.maximum(ends[order], s)
    first = np.concatenate([[0], np.flatnonzero(g[1:] != g[:-1]) + 1])
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    new[first] = True  # a group never continues the one before
    # a group whose first start lies before an earlier group's reach would take that reach for its own
    before = np.concatenate([[-np.inf], reach[first[1:] - 1]])
    late = np.flatnonzero(s[first] < before)
    if len(late):
        bounds = np.append(first, len(s))
        for j in late:  # rare: groups that overlap in time (a step's work running into the next)
            a, b = bounds[j], bounds[j + 1]
            r = np.maximum.accumulate(e[a:b])
            new[a + 1 : b] = s[a + 1 : b] > r[:-1]
            reach[a:b] = r
    idx = np.flatnonzero(new)
    seg_end = np.maximum.reduceat(e, idx)
    return g[idx], s[idx], seg_end


def grouped_length(seg_group: np.ndarray, seg_start: np.ndarray, seg_end: np.ndarray, n: int) -> np.ndarray:
    """The summed length of each group's segments (groups 0 .. n-1)."""
    return np.bincount(seg_group, weights=seg_end - seg_start, minlength=n)[:n] if len(seg_group) else np.zeros(n)
