"""device_idle: gaps on a rank's device timeline longer than ``min_gap_us`` between tasks.

The gaps are those between device tasks (kernels and device copies, as the glossary's device busy
counts them). Time lost: the sum of those gaps (an upper bound: the device could not have been
busier); the finding owns the gaps. Each of
the worst gaps names the host API call running across its middle, when the timeline has them,
which says whether the host (launch-bound) or something else kept the device waiting.

A gap between the last task of one step and the first of the next lies in neither step (the step
breakdown counts it as the one's after-last-task and the other's before-first-task time), so the
finding says how much of the idle time is between steps. msprof records that gap itself as the
next iteration's Data_aug Bound (FP Start minus the previous Iteration End; CANN Profiling
documentation, step_trace), whose advice is to check whether data reading makes it long."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.analysis.idle_causes import SYNC_CALLS, innermost
from npudiag.profiling.analysis.quantities import idle_gaps
from npudiag.profiling.analysis.step_breakdown import step_slots
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, absolute

RULE_ID = "device_idle"
OPTIONS = {"min_gap_us": 1000.0, "warning_share": 0.05, "critical_share": 0.20, "worst": 5.0}
MSPROF_ANALYZE = "overall summary's free time; npudiag splits each gap by the host API across it"
SOURCE = "CANN Profiling documentation, step_trace: Data_aug Bound = this iteration's FP Start - the previous Iteration End"
_ADVICE = ("Find what the host does in the gaps (data loading, synchronisation, Python overhead): prefetch inputs, "
           "remove stream/device synchronisations from the loop, or capture the step as a graph.")  # fmt: skip
_BETWEEN_ADVICE = ("Most of it lies between steps, before the next step's first task: msprof counts this gap as the next "
                   "iteration's Data_aug Bound, and the CANN Profiling documentation (step_trace) says to check whether "
                   "data reading makes it long. Prefetch the next batch while the device runs (more data workers, "
                   "pinned memory) and keep host work between steps off the critical path.")  # fmt: skip


def _host_calls_at(api, s: np.ndarray, e: np.ndarray, times: np.ndarray) -> list[str | None]:
    """For each time, the innermost (shortest; the first of equals) host API call running across it."""
    which = innermost(times, s, e)
    picked = api.select(["level", "name"]).take(pa.array(which[which >= 0])).to_pylist()  # only the calls named
    labels = iter(f"{r['level']}@{r['name']}" for r in picked)
    return [None if j < 0 else next(labels) for j in which.tolist()]


def cause_of(call: str | None) -> str:
    """HTA-style split of idle time: the host waiting on the device, the host busy elsewhere, or untraced."""
    if call is None:
        return "other (no host API running: host-side work such as Python, data loading, or untraced)"
    if any(k in call for k in SYNC_CALLS):  # the list the idle causes use
        return "host wait (a synchronising call was running)"
    return "host busy (an API call was running: launch/host-bound)"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    if ctx.table("kernels").num_rows == 0:
        raise Skipped("no device tasks in this profile")
    out = []
    for rank in ctx.ranks():
        tl = ctx.timeline(rank)
        rel_s, rel_e = idle_gaps(tl)
        if len(rel_s) == 0:
            continue
        gaps = rel_e - rel_s
        gap_start = rel_s + tl.base / 1000.0
        long = gaps >= opts["min_gap_us"]
        if not long.any():
            continue
        total = float(gaps[long].sum())
        span = tl.span_us
        api = ctx.for_rank("api_calls", rank)
        a_s = pc.fill_null(api["start_us"], np.nan).to_numpy() if api.num_rows else np.array([])
        a_e = a_s + (pc.fill_null(api["duration_us"], 0.0).to_numpy() if api.num_rows else 0.0)
        idx = np.nonzero(long)[0]
        mids = np.array([float(gap_start[i] + gaps[i] / 2) for i in idx])
        calls = _host_calls_at(api, a_s, a_e, mids) if api.num_rows else [None] * len(idx)
        by_cause: dict[str, float] = {}
        for i, call in zip(idx, calls):
            by_cause[cause_of(call)] = by_cause.get(cause_of(call), 0.0) + float(gaps[i])
        order = np.argsort(-gaps[idx])[: int(opts["worst"])]
        worst = [
            {"start_us": float(gap_start[idx[j]]), "gap_us": float(gaps[idx[j]]), "host_call": calls[j], "cause": cause_of(calls[j])}
            for j in order
        ]
        between = _between_steps(ctx, rank, tl.base, rel_s, rel_e)
        for w, j in zip(worst, order):
            w["where"] = "between_steps" if between[idx[j]] else "inside_step"
        between_us = float(gaps[long & between].sum())
        n_gaps = int(long.sum())
        title = f"device idle {total / 1e3:.2f} ms in {n_gaps} gap{'' if n_gaps == 1 else 's'} over {opts['min_gap_us'] / 1e3:g} ms"
        if between_us:
            title += f" ({between_us / 1e3:.2f} ms between steps)"
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, total, opts, span_us=span),
                title,
                _BETWEEN_ADVICE if between_us * 2 > total else _ADVICE,
                total,
                int(long.sum()),
                rank,
                {"span_us": span, "idle_by_cause_us": by_cause, "between_steps_us": between_us, "worst_gaps": worst},
                absolute(tl, rel_s[long], rel_e[long]),
            )
        )
    return out


def _between_steps(ctx: RuleContext, rank, base_ns: int, rel_s: np.ndarray, rel_e: np.ndarray) -> np.ndarray:
    """Which gaps have the tasks of two different steps on their sides (the step partition of
    :class:`StepSlots`); none where the rank has no steps."""
    slots = step_slots(ctx.for_rank("kernels", rank), ctx.for_rank("steps", rank))
    if len(slots.ids) < 2:
        return np.zeros(len(rel_s), bool)
    start = base_ns + np.round(rel_s * 1000.0).astype(np.int64)
    end = base_ns + np.round(rel_e * 1000.0).astype(np.int64)
    return slots.at(start) != slots.at(end)
