"""Device memory per rank, from ``memory_timeline`` and ``op_memory``: one definition of each figure.

- The *allocator* is the most inclusive component the profile has: ``PTA+GE`` (torch_npu's caching
  allocator and the graph engine together), else ``PTA``, else ``GE`` (msprof's own files).
- *Peak allocated*: the largest Total Allocated of the allocator's samples, and the first sample
  that reaches it (its time, its step, the op whose allocation it records).
- *Fragmentation at the peak*: Total Reserved − Total Allocated at that sample: memory the cache
  holds from the device that no tensor uses.
- *Held at the peak*: the ``op_memory`` blocks allocated at or before the peak and not released
  before it (a block with no release was held to the end; a release-only row, CANN's negative Size,
  was allocated before the profile), summed by op name.
- *Reservation growths*: samples where Total Reserved rises (the cache took memory from the device),
  and *returns* where it falls (it gave memory back), counted per step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.analysis.context import RuleContext, step_starts

ALLOCATORS = ("PTA+GE", "PTA", "GE")
BEFORE_PROFILE = "(allocated before the profile)"


def allocator_samples(timeline: pa.Table) -> tuple[str | None, pa.Table]:
    """The allocator component of one rank's timeline and its samples in time order."""
    if timeline.num_rows == 0:
        return None, timeline
    alloc = timeline.filter(pc.fill_null(pc.equal(timeline["kind"], "allocator"), False))
    present = set(pc.unique(alloc["component"]).to_pylist()) if alloc.num_rows else set()
    for comp in ALLOCATORS:
        if comp in present:
            t = alloc.filter(pc.fill_null(pc.equal(alloc["component"], comp), False))
            t = t.filter(pc.is_valid(t["ts_ns"]))
            return comp, t.sort_by([("ts_ns", "ascending")])
    return None, alloc.slice(0, 0)


def step_of(times_us: np.ndarray, bounds_us: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The step each time falls in (the last step starting at or before it); -1 before the first."""
    if len(steps) == 0:
        return np.full(len(times_us), -1, np.int64)
    i = np.searchsorted(bounds_us, times_us, side="right") - 1
    return np.where(i >= 0, steps[np.maximum(i, 0)], -1)


def held_at(blocks: pa.Table, t_ns: int) -> pa.Table:
    """Bytes and blocks held at ``t_ns`` by op name, most bytes first."""
    if blocks.num_rows == 0:
        return pa.table(
            {
                "op_name": pa.array([], pa.string()),
                "bytes": pa.array([], pa.int64()),
                "blocks": pa.array([], pa.int64()),
            }
        )
    alloc = pc.fill_null(blocks["alloc_ns"], np.iinfo(np.int64).min)
    release = pc.fill_null(blocks["release_ns"], np.iinfo(np.int64).max)
    held = blocks.filter(pc.and_(pc.less_equal(alloc, t_ns), pc.greater(release, t_ns)))
    t = pa.table(
        {"op_name": pc.fill_null(held["op_name"], BEFORE_PROFILE), "b": pc.abs(pc.fill_null(held["size_bytes"], 0))}
    )
    g = t.group_by("op_name", use_threads=False).aggregate([("b", "sum"), ("b", "count")])
    g = pa.table({"op_name": g["op_name"], "bytes": g["b_sum"], "blocks": g["b_count"]})
    return g.take(pc.sort_indices(g, sort_keys=[("bytes", "descending"), ("op_name", "ascending")]))


def reservation_changes(samples: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time us, time ns, change in bytes) of each allocator sample whose Total Reserved differs from the previous
    one."""
    if samples.num_rows < 2:
        return np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    valid = samples.filter(pc.is_valid(samples["reserved_bytes"]))
    r = valid["reserved_bytes"].to_numpy(zero_copy_only=False).astype(np.int64)
    d = np.diff(r)
    nz = np.flatnonzero(d) + 1
    ts_us = valid["ts_us"].to_numpy(zero_copy_only=False)
    ts_ns = valid["ts_ns"].to_numpy(zero_copy_only=False)
    return ts_us[nz], ts_ns[nz], d[nz - 1]


def _max_of(t: pa.Table, col: str) -> int | None:
    v = pc.max(t[col]).as_py() if t.num_rows else None
    return None if v is None else int(v)


def rank_memory(
    timeline: pa.Table, blocks: pa.Table, bounds_us: np.ndarray, steps: np.ndarray, rank, top: int = 5
) -> dict[str, Any] | None:
    """The memory figures of one rank (the module docstring defines each); None without memory data."""
    if timeline.num_rows == 0 and blocks.num_rows == 0:
        return None
    comp, samples = allocator_samples(timeline)
    out: dict[str, Any] = {"rank": rank, "allocator": comp}
    peak_ns = _peak(out, comp, samples, blocks, bounds_us, steps)
    app = (
        timeline.filter(pc.fill_null(pc.equal(timeline["component"], "APP"), False)) if timeline.num_rows else timeline
    )
    out["process_peak_reserved_bytes"] = _max_of(app, "reserved_bytes")
    if blocks.num_rows:
        _allocations(out, blocks, peak_ns, bounds_us, steps, top)
    if comp is not None and len(steps):
        ts_us, _, delta = reservation_changes(samples)
        s = step_of(ts_us, bounds_us, steps)
        out["reservation_changes_per_step"] = [
            {
                "step": int(k),
                "growths": int(((s == k) & (delta > 0)).sum()),
                "returns": int(((s == k) & (delta < 0)).sum()),
                "grown_bytes": int(delta[(s == k) & (delta > 0)].sum()),
            }
            for k in steps
        ]
    return out


def _peak(
    out: dict[str, Any], comp: str | None, samples: pa.Table, blocks: pa.Table, bounds_us: np.ndarray, steps: np.ndarray
) -> int | None:
    """The allocator's peak into ``out`` (when, in which step, by which op, what was reserved and fragmented);
    its time in ns, None without allocator samples."""
    if comp is None or not samples.num_rows or not pc.sum(pc.is_valid(samples["allocated_bytes"])).as_py():
        out.update(
            {"peak_allocated_bytes": None, "peak_reserved_bytes": _max_of(samples, "reserved_bytes") if comp else None}
        )
        return None
    alloc = pc.fill_null(samples["allocated_bytes"], -1)
    i = int(pc.index(alloc, pc.max(alloc)).as_py())
    row = samples.slice(i, 1).to_pylist()[0]
    peak_ns = row["ts_ns"]
    reserved = row["reserved_bytes"]
    frag = reserved - row["allocated_bytes"] if reserved is not None else None
    at = blocks.filter(pc.fill_null(pc.equal(blocks["alloc_ns"], peak_ns), False)) if blocks.num_rows else blocks
    step = int(step_of(np.array([row["ts_us"]]), bounds_us, steps)[0]) if len(steps) else None
    out.update(
        {
            "peak_allocated_bytes": row["allocated_bytes"],
            "peak_ts_us": row["ts_us"],
            "peak_step": None if step == -1 else step,
            "peak_op": at["op_name"][0].as_py() if at.num_rows else None,
            "reserved_at_peak_bytes": reserved,
            "active_at_peak_bytes": row["active_bytes"],
            "fragmentation_bytes": frag,
            "fragmentation_pct": 100.0 * frag / reserved if frag is not None and reserved else None,
            "peak_reserved_bytes": _max_of(samples, "reserved_bytes"),
            "peak_active_bytes": _max_of(samples, "active_bytes"),
        }
    )
    return peak_ns


def _allocations(
    out: dict[str, Any], blocks: pa.Table, peak_ns: int | None, bounds_us: np.ndarray, steps: np.ndarray, top: int
) -> None:
    """The allocations into ``out``: how many and how many bytes, the blocks held at the peak (the ``top`` by
    bytes, and what no block accounts for), and each step's allocations."""
    allocated_here = blocks.filter(pc.fill_null(pc.greater(blocks["size_bytes"], 0), False))
    out["allocations"] = allocated_here.num_rows
    out["allocated_bytes"] = int(pc.sum(allocated_here["size_bytes"]).as_py() or 0)
    if peak_ns is not None:
        held = held_at(blocks, peak_ns)
        total = out["peak_allocated_bytes"] or 0
        out["unattributed_at_peak_bytes"] = max(total - int(pc.sum(held["bytes"]).as_py() or 0), 0)
        out["held_at_peak"] = [
            {**r, "share_pct": 100.0 * r["bytes"] / total if total else None} for r in held.slice(0, top).to_pylist()
        ]
    if len(steps):
        t = allocated_here.filter(pc.is_valid(allocated_here["alloc_us"]))
        s = step_of(t["alloc_us"].to_numpy(zero_copy_only=False), bounds_us, steps)
        sizes = t["size_bytes"].to_numpy(zero_copy_only=False)
        per = [(int(k), int((s == k).sum()), int(sizes[s == k].sum())) for k in steps]
        out["per_step"] = [{"step": k, "allocations": c, "allocated_bytes": b} for k, c, b in per]


def at_peak(m: dict[str, Any]) -> str:
    """`` (step N)`` for a rank's peak, as finding titles say it; empty without steps."""
    return f" (step {m['peak_step']})" if m.get("peak_step") is not None else ""


def memory_ranks(tables: dict[str, pa.Table]) -> list:
    """Ranks with memory data, in rank order (null last)."""
    seen: set = set()
    for name in ("memory_timeline", "op_memory"):
        t = tables.get(name)
        if t is not None and t.num_rows:
            seen |= set(pc.unique(t["rank"]).to_pylist())
    return sorted(seen, key=lambda r: (r is None, r))


def memory_by_rank(tables: dict[str, pa.Table], top: int = 5) -> list[dict[str, Any]]:
    """:func:`rank_memory` of every rank with memory data."""
    ctx = RuleContext(tables)
    out = []
    for rank in memory_ranks(tables):
        bounds, steps = step_starts(ctx, rank)
        row = rank_memory(
            ctx.for_rank("memory_timeline", rank), ctx.for_rank("op_memory", rank), bounds, steps, rank, top
        )
        if row is not None:
            out.append(row)
    return out
