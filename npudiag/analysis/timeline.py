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
