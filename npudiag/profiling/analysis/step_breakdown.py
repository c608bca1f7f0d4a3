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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.context import rank_rows
from npudiag.profiling.analysis.quantities import Timeline, phases, timeline
from npudiag.profiling.analysis.timeline import base_ns

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
    return np.where(pc.is_valid(exact).to_numpy(zero_copy_only=False), pc.fill_null(exact, 0).to_numpy(zero_copy_only=False), a)


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
    kpos = pc.fill_null(pc.index_in(kstep, value_set=pa.array(ids, pa.int64())), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    # a step starts where the steps table says, else at its first kernel
    starts = np.full(len(ids), 2**62, np.int64)
    has = kpos >= 0
    np.minimum.at(starts, kpos[has], k_ns[has])
    if steps.num_rows:
        at = pc.fill_null(pc.index_in(steps["step"], value_set=pa.array(ids, pa.int64())), -1).to_numpy(zero_copy_only=False)
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


def _profiler_times(steps: pa.Table) -> dict[int, dict]:
    """What the profile records of each step: its range (start, end µs), a duration, torch_npu's
    Stage and Preparing."""
    if steps.num_rows == 0:
        return {}
    out: dict[int, dict] = {}
    cols = [steps[c].to_pylist() for c in ("step", "start_us", "end_us", "start_ns", "end_ns", "step_time_us", "stage_us", "preparing_us")]
    for s, start, end, start_ns, end_ns, dur, stage, prep in zip(*cols):
        if s is None or s in out:
            continue
        rec = {"stage": _ok(stage), "preparing": _ok(prep), "duration": _ok(dur)}
        if start_ns is not None and end_ns is not None and end_ns >= start_ns:  # exact: the .db, a trace's text ts
            rec["range_ns"] = (start_ns, end_ns)
            rec["duration"] = (end_ns - start_ns) / 1000.0
        elif _ok(start) is not None and end is not None and end == end and end >= start:
            rec["range_ns"] = (round(start * 1000), round(end * 1000))
            rec["duration"] = float(end) - float(start)
        out[s] = rec
    return out


def _ok(v) -> float | None:
    return float(v) if v is not None and v == v and v >= 0 and abs(v) < 9e15 else None


def _row(rank, step, k: pa.Table, c: pa.Table, base: int, rec: dict | None, tl: Timeline | None = None) -> dict:
    tl = tl if tl is not None else timeline(k, c, base)
    span = tl.span_us
    before = 0.0
    rec = rec or {}
    if "range_ns" in rec and tl.first is not None:
        # the recorded range, in µs after base like the tasks (exact integer ns first); widened to tasks outside it
        lo, hi = (rec["range_ns"][0] - base) / 1000.0, (rec["range_ns"][1] - base) / 1000.0
        start, end = min(lo, tl.first), max(hi, tl.last)
        outside = tl.last > hi + TOLERANCE_US or tl.first < lo - TOLERANCE_US
        step_time, source = (end - start, "extended") if outside else (hi - lo, "profiler_range")
        before = tl.first - start
    elif rec.get("duration") is not None:
        profiler = rec["duration"]
        step_time, source = (max(profiler, span), "step_trace") if profiler + TOLERANCE_US >= span else (span, "task_span")
    else:
        step_time, source = span, "kernels"
    row = {
        "rank": rank,
        "step": step,
        "start_us": tl.start_us(),
        **phases(tl, step_time, before),
        "stage_us": rec["stage"] if rec.get("stage") is not None else span,
        "preparing_us": rec["preparing"] if rec.get("preparing") is not None else (before if "range_ns" in rec else None),
        "kernels": k.num_rows,
        "kernel_time_us": float(pc.sum(pc.fill_null(k["duration_us"], 0.0)).as_py() or 0.0) if k.num_rows else 0.0,
        "profiler_step_time_us": rec.get("duration"),
        "step_time_source": source,
    }
    return row


def _ranks(*tables: pa.Table) -> list:
    seen: set = set()
    for t in tables:
        if t.num_rows:
            seen |= set(pc.unique(t["rank"]).to_pylist())
    return sorted(seen, key=lambda r: (r is None, r))


def step_breakdown(tables: dict[str, pa.Table]) -> pa.Table:
    return breakdown_and_timelines(tables)[0]


def breakdown_and_timelines(tables: dict[str, pa.Table]) -> tuple[pa.Table, list[tuple[Any, int | None, Timeline]]]:
    """The breakdown, and each (rank, step)'s device timeline it was computed from (the idle causes
    split the same timelines' gaps, so they add up to the same free time)."""
    rows, timelines = [], []
    for rank, step, k, c, base, rec in step_parts(tables):
        tl = timeline(k, c, base)
        rows.append(_row(rank, step, k, c, base, rec, tl))
        timelines.append((rank, step, tl))
    return (pa.Table.from_pylist(rows, schema=SCHEMA) if rows else SCHEMA.empty_table()), timelines


def step_parts(tables: dict[str, pa.Table]) -> Iterator[tuple[Any, int | None, pa.Table, pa.Table, int, dict | None]]:
    """Per rank and step: (rank, step, its kernels, its device copies, the rank's base ns, what the
    profile records of the step). The partition every per-step quantity is computed over (the
    breakdown, the idle causes), so they add up to the same steps."""
    # only the columns the phases read: taking rows of the whole kernels table copied every string
    kernels = tables["kernels"].select(["rank", "step", "start_us", "start_ns", "duration_us", "task_class"])
    steps = tables["steps"]
    copies = tables["copies"].select(["rank", "side", "start_us", "start_ns", "duration_us"])
    if copies.num_rows:
        copies = copies.filter(pc.fill_null(pc.equal(copies["side"], "device"), False))
    for rank in _ranks(kernels, copies):
        k, c, st = rank_rows(kernels, rank), rank_rows(copies, rank), rank_rows(steps, rank)
        base = base_ns(k, c)
        ids, kpos, cpos = assign_steps(k, c, st)
        if not ids:
            yield rank, None, k, c, base, None
            continue
        profiler = _profiler_times(st)
        korder = np.argsort(kpos, kind="stable")
        kcut = np.searchsorted(kpos[korder], np.arange(len(ids) + 1))
        corder = np.argsort(cpos, kind="stable")
        ccut = np.searchsorted(cpos[corder], np.arange(len(ids) + 1))
        for j, step in enumerate(ids):
            ks = k.take(pa.array(korder[kcut[j] : kcut[j + 1]]))
            cs = c.take(pa.array(corder[ccut[j] : ccut[j + 1]])) if c.num_rows else c
            yield rank, step, ks, cs, base, profiler.get(step)


def step_time_warnings(breakdown: pa.Table, limit: int = 3) -> list[str]:
    """One line when some steps' recorded time was shorter than the tasks inside them, one when some
    steps' device tasks ran past their recorded range."""
    if breakdown.num_rows == 0:
        return []
    out = []
    for source, what in (("task_span", "whose profiler step time is shorter than the span of their device tasks; the task span is used"),
                         ("extended", "whose device tasks run past the step's recorded range; the step is extended to them")):  # fmt: skip
        hit = breakdown.filter(pc.fill_null(pc.equal(breakdown["step_time_source"], source), False))
        if hit.num_rows == 0:
            continue
        shown = "; ".join(
            f"rank {r['rank']} step {r['step']}: {r['profiler_step_time_us'] / 1e3:.3f} ms < {r['step_time_us'] / 1e3:.3f} ms"
            for r in hit.slice(0, limit).to_pylist()
        )
        more = f" (+{hit.num_rows - limit} more)" if hit.num_rows > limit else ""
        out.append(f"{hit.num_rows} step(s) {what}: {shown}{more}")
    return out
