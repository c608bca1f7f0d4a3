"""Interval arithmetic over device tasks, vectorised with numpy (n log n for the sort)."""

from __future__ import annotations

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total time covered by at least one interval (overlaps counted once)."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = np.maximum(ends[order], s)
    reach = np.maximum.accumulate(e)
    # an interval opens a new segment when it starts after everything before it has ended
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    seg_start = s[new]
    idx = np.nonzero(new)[0]
    seg_end = reach[np.append(idx[1:] - 1, len(s) - 1)]
    return float(np.sum(seg_end - seg_start))


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint segments covered by the intervals, sorted."""
    if len(starts) == 0:
        return np.array([], float), np.array([], float)
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
