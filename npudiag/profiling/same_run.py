"""One run, one reading: two exports of the same collection found side by side are read once.

A collection exported twice (a torch_npu trace renamed and copied beside the text export of the same
run, the same folder given under two names) holds the same device tasks at the same nanosecond. Ranks
never do: two processes' tasks do not start at identical ns by the hundred, even when each process sees
its card as device 0 (ASCEND_RT_VISIBLE_DEVICES) and they run the same program in step. So units whose
kernel starts coincide for most of the smaller's tasks are one collection; the richer reading is kept
(more kinds of data, then more kernel columns, then more kernels) and a line names both. Units on
distinct devices, or declaring distinct ranks, are never one collection.

Not merged: exports whose times differ (msprof's timeline JSON and its task_time CSV of one run place
each task 1 - 2 µs apart on the corpus tilelang profile). Matching those by stream and task id within
a tolerance would also merge in-step ranks that each see device 0, so they stay two units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SAME = 0.9  # the share of the smaller unit's kernel starts the other must hold to be the same collection
MIN_TASKS = 2  # a unit with fewer kernels says nothing either way


@dataclass(frozen=True)
class Repeat:
    dropped: int  # unit index
    kept: int
    shared: int  # kernel starts both hold
    of: int  # kernel starts of the smaller


@dataclass
class _Unit:
    starts: np.ndarray  # unique kernel start ns
    devices: frozenset[int]
    rank: int | None  # declared


def may_repeat(ranks: list[int | None]) -> bool:
    """Whether two of the units whose declared ranks these are could be one collection: never when each
    declares a rank of its own (every torch_npu rank folder does), so callers skip reading for the check."""
    declared = [r for r in ranks if r is not None]
    return len(declared) < len(ranks) or len(set(declared)) < len(declared)


def _unit(kernels: list[pa.Table], rank: int | None) -> _Unit | None:
    parts = [t for t in kernels if t.num_rows and "start_ns" in t.column_names]
    if not parts:
        return None
    starts = np.unique(np.concatenate([t["start_ns"].drop_null().to_numpy() for t in parts]))
    if len(starts) < MIN_TASKS:
        return None
    devices = {
        d
        for t in parts
        if "device_id" in t.column_names
        for d in pc.unique(t["device_id"]).to_pylist()
        if d is not None
    }
    return _Unit(starts, frozenset(devices), rank)


def repeated_exports(
    kernels: list[list[pa.Table]], richness: list[tuple[int, ...]], ranks: list[int | None]
) -> list[Repeat]:
    """For units given by their kernel tables (and the ranks they declare), the units that repeat another's
    collection, each paired with the one kept (the greatest ``richness``, then the first)."""
    units = [_unit(k, r) for k, r in zip(kernels, ranks, strict=True)]
    parent = list(range(len(units)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    found: dict[tuple[int, int], tuple[int, int]] = {}
    for a, b in sorted(_common_starts(units)):
        ua, ub = units[a], units[b]
        if ua is None or ub is None:
            continue
        if (ua.devices and ub.devices and ua.devices != ub.devices) or (
            ua.rank is not None and ub.rank is not None and ua.rank != ub.rank
        ):
            continue  # two devices, or two ranks by their own records
        shared = len(np.intersect1d(ua.starts, ub.starts, assume_unique=True))
        of = min(len(ua.starts), len(ub.starts))
        if shared >= SAME * of:
            found[(a, b)] = (shared, of)
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in range(len(units)):
        groups.setdefault(root(i), []).append(i)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        kept = max(members, key=lambda i: (richness[i], -i))
        for i in members:
            if i != kept:
                u, k = units[i], units[kept]
                assert u is not None and k is not None
                shared, of = found.get((min(i, kept), max(i, kept)), (0, 0))
                if not of:  # joined through a third export: counted against the kept one
                    shared, of = (
                        len(np.intersect1d(u.starts, k.starts, assume_unique=True)),
                        min(len(u.starts), len(k.starts)),
                    )
                out.append(Repeat(i, kept, shared, of))
    return sorted(out, key=lambda r: r.dropped)


def _common_starts(units: list[_Unit | None]) -> set[tuple[int, int]]:
    """Pairs of units sharing at least a tenth of the smaller's kernel starts to the ns (one sort of every
    unit's starts; the exact count is taken for these pairs only)."""
    have = [(i, u.starts) for i, u in enumerate(units) if u is not None]
    if len(have) < 2:
        return set()
    values = np.concatenate([s for _, s in have])
    owner = np.concatenate([np.full(len(s), i, np.int64) for i, s in have])
    order = np.argsort(values, kind="stable")
    values, owner = values[order], owner[order]
    same = np.flatnonzero((values[1:] == values[:-1]) & (owner[1:] != owner[:-1]))
    if not len(same):
        return set()
    a, b = np.minimum(owner[same], owner[same + 1]), np.maximum(owner[same], owner[same + 1])
    pairs, counts = np.unique(np.stack([a, b], axis=1), axis=0, return_counts=True)
    sizes = {i: len(s) for i, s in have}
    return {
        (int(x), int(y))
        for (x, y), n in zip(pairs, counts, strict=True)
        if n >= 0.1 * min(sizes[int(x)], sizes[int(y)])
    }


def same_collection_note(dropped: object, kept: object, rep: Repeat) -> str:
    """The line that says two exports were read as one."""
    return (
        f"{dropped} and {kept} are two exports of one collection ({rep.shared:,} of "
        f"{rep.of:,} device tasks start at the "
        f"same ns): read once, from {kept}"
    )
