"""Per rank and step: the step's time split into phases that add up to it.

step time = before first task + computing + communication not overlapped + copy not overlapped +
free + after last task, each ≥ 0, with the definitions of :mod:`npudiag.profiling.analysis.quantities`.
Every device task of the rank belongs to
exactly one step: kernels by their Step Id; kernels without one and device copies by time, to the
step whose window (its start in the steps table, else its first kernel, up to the next step's
start) holds their start; tasks before the first step go to the first. So per-step counts and
kernel time add up to the rank's totals.

Step time is the step's recorded range (ProfilerStep#N, STEP_TIME, msprof's Iteration), widened to
its device tasks where they fall outside it (``extended``, with a warning); where the profile records
only a duration (torch_npu's Stage) it is that duration when at least the span of the step's tasks,
else the span (``task_span``). Without step ids the whole window is one row (step null) whose step
time is the rank's span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling import tasks
from npudiag.profiling.analysis.context import rank_rows
from npudiag.profiling.analysis.timeline import base_ns, grouped_length, grouped_merge, intervals

SCHEMA = schemas.STEP_BREAKDOWN
# torch_npu computes Stage from absolute float64 µs, which resolve 0.25 µs at today's epoch: a Stage this
# much under the exact task span is that rounding, not tasks the profiler left out
TOLERANCE_US = 0.5


def row_ns(t: pa.Table, exact_col: str = "start_ns", approx_col: str = "start_us") -> np.ndarray:
    """Start of each row in exact ns where known (else from the µs column); -2**62 where unknown."""
    exact = t[exact_col] if exact_col in t.column_names else pa.nulls(t.num_rows, pa.int64())
    approx = pc.cast(pc.round(pc.multiply(pc.fill_null(t[approx_col], np.nan), 1000.0)), pa.float64())
    a = approx.to_numpy(zero_copy_only=False)
    a = np.where(np.isfinite(a) & (np.abs(a) < 9e18), a, -(2.0**62)).astype(np.int64)
    return np.where(
        pc.is_valid(exact).to_numpy(zero_copy_only=False), pc.fill_null(exact, 0).to_numpy(zero_copy_only=False), a
    )


@dataclass(frozen=True)
class StepSlots:
    """One rank's steps as the partition of its time that every per-step figure uses: a kernel
    belongs to its Step Id; anything else (a kernel without one, a copy, a host call, a memory
    record) to the step whose slot holds its time. A step's slot runs from its start (the steps
    table's, else its first kernel's) to the next step's start; the first slot reaches back to
    the beginning of the profile and the last one to its end, so every instant has one step."""

    ids: list[int]  # the rank's step ids, sorted
    kpos: np.ndarray  # per kernel: index into ids
    starts: np.ndarray  # the slots' starts (ns), sorted
    order: np.ndarray  # index into ids of each sorted start

    def at(self, ns: np.ndarray) -> np.ndarray:
        """Index into ``ids`` of the step whose slot holds each instant (ns)."""
        i = np.searchsorted(self.starts, ns, side="right") - 1
        return self.order[np.maximum(i, 0)]

    def slot_rank(self, ns: np.ndarray) -> np.ndarray:
        """Position of each instant's slot in time order (0 = the first slot)."""
        return np.maximum(np.searchsorted(self.starts, ns, side="right") - 1, 0)


def step_slots(kernels: pa.Table, steps: pa.Table) -> StepSlots:
    """The step slots of one rank (no ids when its kernels carry no step)."""
    kstep = kernels["step"] if kernels.num_rows else pa.chunked_array([pa.array([], pa.int64())])
    ids = sorted(pc.unique(pc.drop_null(kstep)).to_pylist()) if kernels.num_rows else []
    if not ids:
        none = np.zeros(0, np.int64)
        return StepSlots([], np.zeros(kernels.num_rows, np.int64), none, none)
    k_ns = row_ns(kernels)
    kpos = (
        pc.fill_null(pc.index_in(kstep, value_set=pa.array(ids, pa.int64())), -1)
        .to_numpy(zero_copy_only=False)
        .astype(np.int64)
    )
    # a step starts where the steps table says, else at its first kernel
    starts = np.full(len(ids), 2**62, np.int64)
    has = kpos >= 0
    np.minimum.at(starts, kpos[has], k_ns[has])
    if steps.num_rows:
        at = pc.fill_null(pc.index_in(steps["step"], value_set=pa.array(ids, pa.int64())), -1).to_numpy(
            zero_copy_only=False
        )
        rec = pc.fill_null(steps["start_us"], np.nan).to_numpy(zero_copy_only=False)
        ok = np.flatnonzero((at >= 0) & np.isfinite(rec) & (np.abs(rec) < 9e15))[::-1]
        last = ok[np.unique(at[ok], return_index=True)[1]]  # a step the table repeats: its last row
        starts[at[last]] = np.round(rec[last] * 1000).astype(np.int64)
    order = np.argsort(starts, kind="stable")
    slots = StepSlots(ids, kpos, starts[order], order)
    return StepSlots(ids, np.where(kpos >= 0, kpos, slots.at(k_ns)), slots.starts, order)


def assign_steps(kernels: pa.Table, copies: pa.Table, steps: pa.Table) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(step ids, index into them per kernel, per copy) for one rank; empty ids when it has no steps."""
    slots = step_slots(kernels, steps)
    if not slots.ids:
        return [], slots.kpos, np.zeros(copies.num_rows, np.int64)
    return slots.ids, slots.kpos, (slots.at(row_ns(copies)) if copies.num_rows else np.zeros(0, np.int64))


@dataclass(frozen=True)
class _Recorded:
    """What the profile records of each step of one rank (arrays over its step ids; NaN / False where
    it records nothing): its range in ns (exact where the file has ns), a duration, torch_npu's Stage
    and Preparing. A step the table repeats: its first row."""

    has_range: np.ndarray
    lo_ns: np.ndarray
    hi_ns: np.ndarray
    duration: np.ndarray
    stage: np.ndarray
    preparing: np.ndarray


def _ok(v: np.ndarray) -> np.ndarray:
    """A recorded duration that can be one: finite, not negative, not absurd (NaN otherwise)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(v) & (v >= 0) & (np.abs(v) < 9e15), v, np.nan)


def _recorded(steps: pa.Table, ids: list) -> _Recorded:
    n = len(ids)
    out = _Recorded(
        np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, np.int64), *(np.full(n, np.nan) for _ in range(3))
    )
    if steps.num_rows == 0 or ids == [None]:
        return out
    at = pc.fill_null(pc.index_in(steps["step"], value_set=pa.array(ids, pa.int64())), -1).to_numpy(
        zero_copy_only=False
    )
    rows = np.flatnonzero(at >= 0)
    rows = rows[np.unique(at[rows], return_index=True)[1]]  # the first row of each step
    j = at[rows]
    col = {
        c: pc.fill_null(steps[c], np.nan).to_numpy(zero_copy_only=False)[rows].astype(float)
        for c in ("start_us", "end_us", "step_time_us", "stage_us", "preparing_us")
    }
    start_ns, end_ns = (steps[c].take(pa.array(rows)) for c in ("start_ns", "end_ns"))
    exact = pc.is_valid(start_ns).to_numpy(zero_copy_only=False) & pc.is_valid(end_ns).to_numpy(zero_copy_only=False)
    sn, en = (pc.fill_null(x, 0).to_numpy(zero_copy_only=False).astype(np.int64) for x in (start_ns, end_ns))
    exact &= en >= sn  # exact: the .db, a trace's text ts
    start_ok = ~np.isnan(_ok(col["start_us"]))
    with np.errstate(invalid="ignore"):
        approx = ~exact & start_ok & np.isfinite(col["end_us"]) & (col["end_us"] >= col["start_us"])
    out.stage[j], out.preparing[j], out.duration[j] = (
        _ok(col["stage_us"]),
        _ok(col["preparing_us"]),
        _ok(col["step_time_us"]),
    )
    out.has_range[j] = exact | approx
    # in integers throughout: a float on the way would round today's ns timestamps to 256 ns
    lo_approx = np.round(np.where(approx, col["start_us"], 0.0) * 1000).astype(np.int64)
    hi_approx = np.round(np.where(approx, col["end_us"], 0.0) * 1000).astype(np.int64)
    out.lo_ns[j] = np.where(exact, sn, np.where(approx, lo_approx, 0))
    out.hi_ns[j] = np.where(exact, en, np.where(approx, hi_approx, 0))
    out.duration[j] = np.where(
        exact, (en - sn) / 1000.0, np.where(approx, col["end_us"] - col["start_us"], out.duration[j])
    )
    return out


def _ranks(*tables: pa.Table) -> list:
    seen: set = set()
    for t in tables:
        if t.num_rows:
            seen |= set(pc.unique(t["rank"]).to_pylist())
    return sorted(seen, key=lambda r: (r is None, r))


# where a device gap lies in its step
WHERE = ("before_first_task", "between_tasks", "after_last_task")


@dataclass(frozen=True)
class StepGaps:
    """One rank's device idle gaps in its steps: before each step's first device task, between its
    tasks (their sum is the step's ``free_us``) and after its last; per step they add up to
    before_first_task + free + after_last_task. Sorted by step, then time."""

    rank: Any
    step: np.ndarray  # the step of each gap (-1: a profile without steps)
    start_ns: np.ndarray
    end_ns: np.ndarray
    length_us: np.ndarray
    where: np.ndarray  # index into WHERE
    placed: np.ndarray  # False: a step recorded as a duration only, whose after-last-task time has no place in time


def step_breakdown(tables: dict[str, pa.Table]) -> pa.Table:
    return breakdown_and_gaps(tables)[0]


def breakdown_and_gaps(tables: dict[str, pa.Table]) -> tuple[pa.Table, list[StepGaps]]:
    """The breakdown, and each rank's gaps between device tasks inside its steps (the idle causes
    split the same gaps, so they add up to the same free time). Every step of a rank at once: array
    operations over the rank's tasks grouped by step, whatever the number of steps."""
    # only the columns the phases read: taking rows of the whole kernels table copied every string
    kernels = tables["kernels"].select(["rank", "step", "start_us", "start_ns", "duration_us", "task_class"])
    steps = tables["steps"]
    copies = tables["copies"].select(["rank", "side", "start_us", "start_ns", "duration_us"])
    if copies.num_rows:
        copies = copies.filter(pc.fill_null(pc.equal(copies["side"], "device"), False))
    parts, gaps = [], []
    for rank in _ranks(kernels, copies):
        t, g = _rank_breakdown(rank, rank_rows(kernels, rank), rank_rows(copies, rank), rank_rows(steps, rank))
        parts.append(t)
        gaps.append(g)
    return (pa.concat_tables(parts) if parts else SCHEMA.empty_table()), gaps


def _rank_breakdown(rank: Any, k: pa.Table, c: pa.Table, st: pa.Table) -> tuple[pa.Table, StepGaps]:
    """One rank's rows: the phases of :func:`npudiag.profiling.analysis.quantities.phases` for each of
    its steps (one row, step null, where it has no steps)."""
    base = base_ns(k, c)
    slots = step_slots(k, st)
    ids: list = slots.ids or [None]
    n = len(ids)
    kpos = slots.kpos if slots.ids else np.zeros(k.num_rows, np.int64)
    cpos = (
        (slots.at(row_ns(c)) if slots.ids else np.zeros(c.num_rows, np.int64)) if c.num_rows else np.zeros(0, np.int64)
    )
    ks, ke = intervals(k, base, keep_null=True)
    ok = np.isfinite(ks) & np.isfinite(ke)
    comm = tasks.communication_mask(k) if k.num_rows else np.zeros(0, bool)
    cs, ce = intervals(c, base, keep_null=True)
    cok = np.isfinite(cs) & np.isfinite(ce)
    comp, com = ok & ~comm, ok & comm

    def union(g: np.ndarray, s_: np.ndarray, e_: np.ndarray) -> tuple[np.ndarray, tuple]:
        seg = grouped_merge(g, s_, e_)
        return grouped_length(*seg, n), seg

    computing, _ = union(kpos[comp], ks[comp], ke[comp])
    communication, _ = union(kpos[com], ks[com], ke[com])
    either, _ = union(kpos[ok], ks[ok], ke[ok])
    busy, (seg_g, seg_s, seg_e) = union(
        np.concatenate([kpos[ok], cpos[cok]]), np.concatenate([ks[ok], cs[cok]]), np.concatenate([ke[ok], ce[cok]])
    )
    has = np.zeros(n, bool)
    first, last = np.full(n, np.nan), np.full(n, np.nan)
    if len(seg_g):
        heads = np.concatenate([[0], np.flatnonzero(seg_g[1:] != seg_g[:-1]) + 1])
        has[seg_g[heads]] = True
        first[seg_g[heads]] = seg_s[heads]
        last[seg_g[heads]] = np.maximum.reduceat(seg_e, heads)
    span = np.where(has, last - first, 0.0)
    overlapped = computing + communication - either  # |compute ∩ communication|
    rec = _recorded(st, ids)  # without steps: one row, nothing recorded
    ranged = rec.has_range & has
    lo, hi = (rec.lo_ns - base) / 1000.0, (rec.hi_ns - base) / 1000.0
    with np.errstate(invalid="ignore"):
        outside = ranged & ((last > hi + TOLERANCE_US) | (first < lo - TOLERANCE_US))
        fits = rec.duration + TOLERANCE_US >= span
    start = np.fmin(lo, first)
    timed = ~ranged & ~np.isnan(rec.duration)  # a duration only (torch_npu's Stage), or a range with no task in it
    cases = [ranged & outside, ranged, timed & fits, timed]
    step_time = np.select(cases, [np.fmax(hi, last) - start, hi - lo, np.fmax(rec.duration, span), span], span)
    source = np.select(cases, ["extended", "profiler_range", "step_trace", "task_span"], "kernels")
    before = np.where(ranged, first - start, 0.0)
    count = np.bincount(kpos, minlength=n)[:n] if k.num_rows else np.zeros(n, np.int64)
    dur = pc.fill_null(k["duration_us"], 0.0).to_numpy(zero_copy_only=False) if k.num_rows else np.zeros(0)
    kernel_time = np.bincount(kpos, weights=dur, minlength=n)[:n] if k.num_rows else np.zeros(n)
    cm_union = computing + communication - overlapped
    cols = {
        "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
        "step": pa.array(ids, pa.int64()),
        "start_us": pa.array(np.where(has, base / 1000.0 + np.where(has, first, 0.0), np.nan), pa.float64(), mask=~has),
        "step_time_us": step_time,
        "before_first_task_us": before,
        "computing_us": computing,
        "communication_us": communication,
        "overlapped_us": overlapped,
        "communication_not_overlapped_us": communication - overlapped,
        "copy_not_overlapped_us": np.maximum(busy - cm_union, 0.0),
        "free_us": np.maximum(span - busy, 0.0),
        "after_last_task_us": np.maximum(step_time - before - span, 0.0),
        "device_busy_us": busy,
        "stage_us": np.where(np.isnan(rec.stage), span, rec.stage),
        "preparing_us": pa.array(
            np.where(np.isnan(rec.preparing), before, rec.preparing),
            pa.float64(),
            mask=np.isnan(rec.preparing) & ~rec.has_range,
        ),
        "kernels": count.astype(np.int64),
        "kernel_time_us": kernel_time,
        "profiler_step_time_us": pa.array(rec.duration, pa.float64(), mask=np.isnan(rec.duration)),
        "step_time_source": pa.array(source.tolist(), pa.string()),
    }
    table = pa.table(cols, schema=SCHEMA)
    after = cols["after_last_task_us"]
    gaps = _gaps(rank, ids, base, (seg_g, seg_s, seg_e), first, last, before, after, ranged)
    return table, gaps


def _gaps(
    rank: Any,
    ids: list,
    base: int,
    segments: tuple,
    first: np.ndarray,
    last: np.ndarray,
    before: np.ndarray,
    after: np.ndarray,
    ranged: np.ndarray,
) -> StepGaps:
    """The step's gaps (µs after ``base`` in, exact ns out): between consecutive busy segments of a
    step; before its first task ([first - before, first]); after its last ([last, last + after]),
    placed where the step has a recorded range with tasks in it, else a length only (a step recorded
    as a duration, or one without device tasks)."""
    seg_g, seg_s, seg_e = segments
    inner = np.flatnonzero(seg_g[1:] == seg_g[:-1]) if len(seg_g) else np.zeros(0, np.int64)
    b = np.flatnonzero(ranged & (before > 0))
    a = np.flatnonzero(after > 0)
    group = np.concatenate([seg_g[inner], b, a]).astype(np.int64)
    start = np.concatenate([seg_e[inner], first[b] - before[b], last[a]])
    end = np.concatenate([seg_s[inner + 1], first[b], last[a] + after[a]])
    where = np.concatenate([np.full(len(inner), 1), np.zeros(len(b)), np.full(len(a), 2)]).astype(np.int8)
    placed = np.concatenate([np.ones(len(inner) + len(b), bool), ranged[a]])
    order = np.lexsort((start, group))
    group, start, end, where, placed = group[order], start[order], end[order], where[order], placed[order]
    step_ids = np.array([-1 if x is None else x for x in ids], np.int64)
    start_ns, end_ns = (base + np.rint(np.where(placed, x, 0.0) * 1000.0).astype(np.int64) for x in (start, end))
    length = np.where(placed, end - start, after[group] if len(group) else 0.0)
    return StepGaps(
        rank, step_ids[group] if len(group) else np.zeros(0, np.int64), start_ns, end_ns, length, where, placed
    )


def step_time_warnings(breakdown: pa.Table, limit: int = 3) -> list[str]:
    """One line when some steps' recorded time was shorter than the tasks inside them, one when some
    steps' device tasks ran past their recorded range."""
    if breakdown.num_rows == 0:
        return []
    out = []
    for source, what in (
        ("task_span", "whose profiler step time is shorter than the span of their device tasks; the task span is used"),
        ("extended", "whose device tasks run past the step's recorded range; the step is extended to them"),
    ):
        hit = breakdown.filter(pc.fill_null(pc.equal(breakdown["step_time_source"], source), False))
        if hit.num_rows == 0:
            continue
        shown = "; ".join(
            (
                f"rank {r['rank']} step {r['step']}: {r['profiler_step_time_us'] / 1e3:.3f} "
                f"ms < {r['step_time_us'] / 1e3:.3f} ms"
            )
            for r in hit.slice(0, limit).to_pylist()
        )
        more = f" (+{hit.num_rows - limit} more)" if hit.num_rows > limit else ""
        out.append(f"{hit.num_rows} step(s) {what}: {shown}{more}")
    return out
