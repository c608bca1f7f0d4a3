"""The glossary: every time quantity npudiag reports, defined once, with its formula.

``analyze``, ``report``, ``compare``, ``gate``, ``cluster``, the rules and every renderer take these
numbers from here (or from the tables built here), so no two views of one profile disagree.

All are per rank (one device); a multi-rank figure is labelled as a sum or a wall time. A *device
task* is a kernel (compute or communication op, :mod:`npudiag.profiling.tasks`) or a device copy; stream
sync and bookkeeping tasks are not device work and count in none of these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling import tasks
from npudiag.profiling.analysis.timeline import base_ns, intervals, merge, overlap_with

GLOSSARY: dict[str, str] = {
    "span_us": "first device task start to last device task end on the rank (kernels and device copies); "
    "for several ranks, `wall_time_us` is the first start to the last end over all ranks",
    "device_busy_us": "time covered by at least one device task: |compute ∪ communication ∪ copies|",
    "computing_us": "time covered by compute kernels: |compute| (torch_npu's Computing)",
    "communication_us": "time covered by communication ops: |communication|",
    "overlapped_us": "communication hidden under compute: |compute ∩ communication|",
    "communication_not_overlapped_us": "communication − overlapped (torch_npu's Communication(Not Overlapped))",
    "copy_not_overlapped_us": (
        "device copy time with no compute and no communication running: |copies − (compute ∪ communication)|"
    ),
    "free_us": "the step's first to last device task, minus device busy: gaps between device tasks "
    "(torch_npu's Free also holds the exposed copies)",
    "step_time_us": "the step's recorded range (ProfilerStep#N in the trace, STEP_TIME in the .db, "
    "msprof's Iteration), "
    "extended to its device tasks where they run past it (with a warning); where only a duration is recorded (Stage), "
    "the larger of it and the span of the step's tasks; without steps, the rank's span. It is before first task + "
    "computing + communication not overlapped + copy not overlapped + free + after last task",
    "before_first_task_us": "the step's recorded start to its first device task: host time before the device starts",
    "after_last_task_us": "the step's last device task end to the step's end",
    "stage_us": "torch_npu's Stage where the profile records it, else the step's first to last device task",
    "preparing_us": "torch_npu's Preparing where the profile records it, else before_first_task_us",
    "device_idle_us": "span − device busy",
    "copies": (
        "device copy tasks (memcpy tasks on the device); the host calls that issued them are counted apart (host_calls)"
    ),
    "copy_time_us": "summed duration of the device copy tasks (host call time is host_time_us)",
    "copy_bytes": (
        "summed size of the copies whose size is recorded (device tasks, else the host calls); null when none is"
    ),
    "time_lost_us": "union of the time ranges the findings own (each range counted once, whatever rules name it), "
    "clipped to the rank's span",
}


@dataclass
class Timeline:
    """One rank's device activity as merged segments (µs after ``base`` ns)."""

    base: int
    compute: tuple[np.ndarray, np.ndarray]
    communication: tuple[np.ndarray, np.ndarray]
    copies: tuple[np.ndarray, np.ndarray]
    busy: tuple[np.ndarray, np.ndarray]
    first: float | None
    last: float | None

    @property
    def span_us(self) -> float:
        return float(self.last - self.first) if self.first is not None and self.last is not None else 0.0

    @property
    def busy_us(self) -> float:
        return _length(*self.busy)

    def start_us(self) -> float | None:
        return None if self.first is None else self.base / 1000.0 + self.first

    def start_ns(self) -> int | None:
        """The first task's start, exact (the segments are µs after ``base``; an absolute µs float
        resolves only 0.25 µs at today's epoch)."""
        return None if self.first is None else self.base + round(self.first * 1000.0)

    def end_ns(self) -> int | None:
        return None if self.last is None else self.base + round(self.last * 1000.0)


def _length(s: np.ndarray, e: np.ndarray) -> float:
    return float((e - s).sum())


def _valid(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = np.isfinite(s) & np.isfinite(e)
    return s[ok], np.maximum(e[ok], s[ok])


def timeline(kernels: pa.Table, copies: pa.Table, base: int | None = None) -> Timeline:
    """``kernels`` and the device side of ``copies`` of one rank."""
    if copies.num_rows and "side" in copies.column_names:
        copies = copies.filter(pc.fill_null(pc.equal(copies["side"], "device"), False))
    base = base_ns(kernels, copies) if base is None else base
    if kernels.num_rows:
        s_all, e_all = intervals(kernels, base, keep_null=True)
        ok = np.isfinite(s_all) & np.isfinite(e_all)
        comm = tasks.communication_mask(kernels)[ok]
        ks, ke = s_all[ok], np.maximum(e_all[ok], s_all[ok])
    else:
        ks, ke, comm = np.array([], float), np.array([], float), np.zeros(0, bool)
    cs, ce = _valid(*intervals(copies, base, keep_null=True))
    compute = merge(ks[~comm], ke[~comm])
    communication = merge(ks[comm], ke[comm])
    copy_segs = merge(cs, ce)
    all_s, all_e = np.concatenate([ks, cs]), np.concatenate([ke, ce])
    busy = merge(all_s, all_e)
    first = float(all_s.min()) if len(all_s) else None
    last = float(all_e.max()) if len(all_e) else None
    return Timeline(base, compute, communication, copy_segs, busy, first, last)


def phases(tl: Timeline, step_time_us: float | None = None, before_us: float = 0.0) -> dict[str, float]:
    """The breakdown of one step (or of the whole window): before the first task, computing,
    communication not overlapped, copy not overlapped, free (gaps between the first and the last
    task) and after the last task add up to ``step_time_us`` (default: the span), each ≥ 0, whenever
    the step time is at least ``before_us`` + the tasks' span."""
    cs, ce = tl.compute
    ms, me = tl.communication
    computing = _length(cs, ce)
    communication = _length(ms, me)
    overlapped = float(overlap_with(cs, ce, ms, me).sum())
    busy = tl.busy_us
    # copy time under neither compute nor communication: busy − |compute ∪ communication|
    compute_or_comm = computing + communication - overlapped
    span = tl.span_us
    step = span if step_time_us is None else step_time_us
    return {
        "step_time_us": step,
        "before_first_task_us": before_us,
        "computing_us": computing,
        "communication_us": communication,
        "overlapped_us": overlapped,
        "communication_not_overlapped_us": communication - overlapped,
        "copy_not_overlapped_us": max(busy - compute_or_comm, 0.0),
        "free_us": max(span - busy, 0.0),
        "after_last_task_us": max(step - before_us - span, 0.0),
        "device_busy_us": busy,
    }


def exposed_copy_segments(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """The parts of device copies with no compute and no communication running (disjoint, sorted)."""
    cover = merge(
        np.concatenate([tl.compute[0], tl.communication[0]]), np.concatenate([tl.compute[1], tl.communication[1]])
    )
    return subtract(*tl.copies, *cover)


def subtract(
    seg_s: np.ndarray, seg_e: np.ndarray, cov_s: np.ndarray, cov_e: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Parts of the (disjoint, sorted) segments not covered by the (disjoint, sorted) cover."""
    if len(seg_s) == 0:
        return seg_s, seg_e
    if len(cov_s) == 0:
        return seg_s.copy(), seg_e.copy()
    # the complement of the cover, as gaps; intersect every segment with the gaps it meets
    gap_s = np.concatenate([[-np.inf], cov_e])
    gap_e = np.concatenate([cov_s, [np.inf]])
    j0 = np.searchsorted(gap_e, seg_s, side="right")
    j1 = np.searchsorted(gap_s, seg_e, side="left")
    counts = np.maximum(j1 - j0, 0)
    if counts.sum() == 0:
        return np.array([], float), np.array([], float)
    seg_idx = np.repeat(np.arange(len(seg_s)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    gap_idx = np.repeat(j0, counts) + offsets
    lo = np.maximum(seg_s[seg_idx], gap_s[gap_idx])
    hi = np.minimum(seg_e[seg_idx], gap_e[gap_idx])
    keep = hi > lo
    return lo[keep], hi[keep]


def idle_gaps(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """Gaps between device tasks inside the span (start, end), in µs after ``tl.base``."""
    s, e = tl.busy
    return e[:-1], s[1:]


def clipped_union_us(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> float:
    """|∪ [starts, ends]| ∩ [lo, hi]: time lost counted once, inside the rank's span."""
    if len(starts) == 0 or hi <= lo:
        return 0.0
    s = np.clip(starts, lo, hi)
    e = np.clip(ends, lo, hi)
    ms, me = merge(s, e)
    return _length(ms, me)


def copy_totals(copies: pa.Table) -> dict[str, float | int | None]:
    """The copies of a table, each counted once: device tasks, with the host calls apart."""
    side = copies["side"] if copies.num_rows else pa.array([], pa.string())
    device = copies.filter(pc.fill_null(pc.equal(side, "device"), False)) if copies.num_rows else copies
    host = copies.filter(pc.fill_null(pc.equal(side, "host"), False)) if copies.num_rows else copies

    def total(t: pa.Table) -> float:
        return float(pc.sum(pc.fill_null(t["duration_us"], 0.0)).as_py() or 0.0) if t.num_rows else 0.0

    def size(t: pa.Table) -> int | None:
        return (
            None
            if t.num_rows == 0 or t["size_bytes"].null_count == t.num_rows
            else int(pc.sum(t["size_bytes"]).as_py() or 0)
        )

    dev_bytes = size(device)
    return {
        "count": device.num_rows,
        "host_calls": host.num_rows,
        "time_us": total(device),
        "host_time_us": total(host),
        "bytes": dev_bytes if dev_bytes is not None else size(host),
    }
