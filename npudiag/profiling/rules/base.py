"""What every rule shares: the finding record and the helpers over the context of tables
(:mod:`npudiag.profiling.analysis.context`, re-exported here for the rules).

Imports no rule module (the registry is ``npudiag.profiling.rules``), so the package has no import circle."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.context import RuleContext, severity_for, sort_findings, step_starts
from npudiag.profiling.analysis.quantities import Timeline, idle_gaps
from npudiag.profiling.analysis.timeline import merge

__all__ = ["Finding", "RuleContext", "Skipped", "severity_for", "sort_findings", "step_starts"]


@dataclass
class Finding:
    rule_id: str
    severity: str  # info, warning, critical
    title: str
    advice: str
    time_lost_us: float | None
    count: int
    rank: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    # the time ranges this finding owns (absolute ns start, end): what ``time_lost_us`` is made of,
    # so a summary counts a range once however many findings name it
    intervals: tuple[np.ndarray, np.ndarray] | None = None
    finding_id: str = ""


class Skipped(Exception):
    """Raised by a rule whose inputs are not in this profile; the message says which."""


def findings_table(findings: list[Finding]) -> pa.Table:
    return pa.table(
        {
            "finding_id": pa.array(
                [
                    f.finding_id or f"{f.rule_id}:{'all' if f.rank is None else f.rank}:{i + 1}"
                    for i, f in enumerate(findings)
                ],
                pa.string(),
            ),
            "rule_id": pa.array([f.rule_id for f in findings], pa.string()),
            "severity": pa.array([f.severity for f in findings], pa.string()),
            "rank": pa.array([f.rank for f in findings], pa.int32()),
            "title": pa.array([f.title for f in findings], pa.string()),
            "time_lost_us": pa.array([f.time_lost_us for f in findings], pa.float64()),
            "count": pa.array([f.count for f in findings], pa.int64()),
            "evidence": pa.array([json.dumps(f.evidence, default=str) for f in findings], pa.string()),
            "advice": pa.array([f.advice for f in findings], pa.string()),
        },
        schema=schemas.FINDINGS,
    )


def intervals_table(findings: list[Finding]) -> pa.Table:
    """The ``finding_intervals`` rows: every range each finding owns."""
    parts = []
    for f in findings:
        if f.intervals is None or len(f.intervals[0]) == 0:
            continue
        s, e = (np.asarray(x, np.int64) for x in f.intervals)
        n = len(s)
        parts.append(
            pa.table(
                {
                    "finding_id": pa.repeat(pa.scalar(f.finding_id), n),
                    "rule_id": pa.repeat(pa.scalar(f.rule_id), n),
                    "rank": pa.repeat(pa.scalar(f.rank, pa.int32()), n),
                    "start_ns": pa.array(s, pa.int64()),
                    "end_ns": pa.array(e, pa.int64()),
                    "duration_us": pa.array((e - s) / 1000.0, pa.float64()),
                },
                schema=schemas.FINDING_INTERVALS,
            )
        )
    return pa.concat_tables(parts) if parts else schemas.empty("finding_intervals")


def absolute(tl: Timeline, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Timeline-relative segments (µs after ``tl.base``) as absolute ns, as findings store them."""
    return tl.base + np.round(np.asarray(s) * 1000.0).astype(np.int64), tl.base + np.round(
        np.asarray(e) * 1000.0
    ).astype(np.int64)


def row_spans(table: pa.Table, share: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end) absolute ns of every row of a table with start_ns / start_us and duration_us, and
    which rows have a usable start; with ``share`` < 1, the last ``share`` of each row's duration."""
    if table.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
    us = pc.fill_null(table["start_us"], np.nan).to_numpy(zero_copy_only=False).astype(float)
    ok = np.isfinite(us) & (np.abs(us) < 9e15)
    start = np.where(ok, np.round(np.where(ok, us, 0.0) * 1000.0), 0).astype(np.int64)
    if "start_ns" in table.column_names:
        exact = table["start_ns"]
        valid = pc.is_valid(exact).to_numpy(zero_copy_only=False)
        start = np.where(valid, pc.fill_null(exact, 0).to_numpy(zero_copy_only=False), start)
        ok |= valid
    d = pc.fill_null(table["duration_us"], 0.0).to_numpy(zero_copy_only=False).astype(float)
    d = np.where(np.isfinite(d) & (d > 0) & (d < 9e12), d, 0.0)
    end = start + np.round(d * 1000.0).astype(np.int64)
    return end - np.round(d * share * 1000.0).astype(np.int64), end, ok


def spans_of(table: pa.Table, share: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`row_spans` of the rows with a usable start."""
    begin, end, ok = row_spans(table, share)
    return begin[ok], end[ok]


def device_copies(ctx: RuleContext, rank: int | None) -> pa.Table:
    c = ctx.for_rank("copies", rank)
    return c.filter(pc.equal(c["side"], "device")) if c.num_rows else c


def recurring(
    ctx: RuleContext, rank: int | None, starts_us: np.ndarray, names: list[str], min_times: int
) -> np.ndarray:
    """For a profile without step markers (an AscendCL program's loop under msprof): which calls
    recur in a loop, found by recurrence. The calls of one API name that have device work (a kernel or
    a device copy starting) between one and the next form runs; a name whose calls recur so at least
    ``min_times`` times is in the loop, and all its calls from the first of them on count. A name
    whose calls all come together (a burst at start-up, before the device works) is not."""
    k = ctx.for_rank("kernels", rank)
    c = device_copies(ctx, rank)
    work = np.sort(
        np.concatenate(
            [pc.fill_null(t["start_us"], np.nan).to_numpy(zero_copy_only=False) for t in (k, c) if t.num_rows]
            or [np.array([], float)]
        )
    )
    work = work[np.isfinite(work)]
    out = np.zeros(len(starts_us), bool)
    _, which = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True)
    for j in range(int(which.max()) + 1 if len(which) else 0):  # one pass per API name, not per call
        idx = np.flatnonzero(which == j)
        t = starts_us[idx]
        known = np.isfinite(t)
        idx, t = idx[known], t[known]
        if len(t) < min_times:
            continue
        order = np.argsort(t, kind="stable")
        idx, t = idx[order], t[order]
        done = np.searchsorted(work, t, side="left")  # device tasks started before each call
        times = 1 + int((done[1:] > done[:-1]).sum())  # runs of the name's calls separated by device work
        if times >= min_times:
            out[idx] = True
    return out


def host_api(ctx: RuleContext) -> pa.Table:
    """The host API timeline; Skipped (saying what would provide it) when the profile has none."""
    api = ctx.table("api_calls")
    if api.num_rows == 0:
        raise Skipped("no host API timeline (needs msprof_*.json / trace_view.json with CANN events, or the .db)")
    return api


def transfers(ctx: RuleContext) -> pa.Table:
    """Per-op transfer sizes by transport (comm_bandwidth); Skipped, saying what gives them, when there are none."""
    bw = ctx.table("comm_bandwidth")
    if bw.num_rows == 0:
        raise Skipped(
            "no per-op transfer sizes (communication.json or analysis.db from a torch_npu profile of Level1 or more)"
        )
    return bw


def prefer_acl(calls: pa.Table) -> pa.Table:
    """The AscendCL-level calls when there are any: the runtime calls nested in them are the same ones."""
    acl = calls.filter(pc.fill_null(pc.equal(calls["level"], "acl"), False))
    return acl if acl.num_rows else calls


def idle_after(ctx: RuleContext, rank, calls: pa.Table) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
    """The device idle host calls leave (the device waits for the host): each gap a call overlaps,
    from max(gap start, call start) to the gap's end; their union in µs, and the ranges as absolute ns."""
    tl = ctx.timeline(rank)
    gs, ge = idle_gaps(tl)
    cs, ce = spans_of(calls)
    if len(gs) == 0 or len(cs) == 0:
        return 0.0, (np.zeros(0, np.int64), np.zeros(0, np.int64))
    cs_us, ce_us = (cs - tl.base) / 1000.0, (ce - tl.base) / 1000.0
    order = np.argsort(gs)
    gs, ge = gs[order], ge[order]
    # the last gap starting before each call ends; it is the call's gap when it ends after the call starts
    j = np.searchsorted(gs, ce_us, side="right") - 1
    ok = j >= 0
    j = np.maximum(j, 0)
    ok &= ge[j] > cs_us
    lo = np.maximum(gs[j], cs_us)[ok]
    hi = ge[j][ok]
    if len(lo) == 0:
        return 0.0, (np.zeros(0, np.int64), np.zeros(0, np.int64))
    ms, me = merge(lo, hi)
    return float((me - ms).sum()), absolute(tl, ms, me)
