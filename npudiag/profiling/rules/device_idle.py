"""device_idle: gaps on a rank's device timeline longer than ``min_gap_us`` between tasks.

The gaps are those between device tasks (kernels and device copies, as the glossary's device busy
counts them). Time lost: the sum of those gaps (an upper bound: the device could not have been
busier); the finding owns the gaps. Each gap is given to what delayed the launch of the task that
ends it, by the idle causes' rule (``idle_gaps.parquet``, in this order): a compile call on the
thread that launched that task (``op_compile``), another CANN call there (``host_api``), a
synchronising call overlapping at least half the gap (``sync``), a DataLoader fetch across its
middle (``dataloader``), the framework op that issued the task (``dispatch``), else ``none``.

Worked example (corpus msinsight-pytorch-text-2025, Level1 rank 0, step 50): the largest gap inside
the step, 3,199 µs, ends at ``trans_TransData_0``, launched by ``Node@launch`` on thread 3099702
(torch_npu's task-queue thread) and issued by ``aten::conv2d``; across the gap's middle that thread
is inside ``AscendCL@aclopCompileAndExecute`` (with ``opCompile`` nested): ``op_compile``. A 669 µs
gap before ``aclnnDropoutDoMask`` has its launching thread inside ``AscendCL@aclrtStreamWaitEvent``
across its middle: ``host_api``. Gaps of about 1.2 ms before ``aclnnAddmm`` kernels, their launching
thread idle, go to the op that issued them, ``aten::linear``: ``dispatch``.

A gap between the last task of one step and the first of the next lies in neither step (the step
breakdown counts it as the one's after-last-task and the other's before-first-task time), so the
finding says how much of the idle time is between steps. msprof records that gap itself as the
next iteration's Data_aug Bound (FP Start minus the previous Iteration End; CANN Profiling
documentation, step_trace), whose advice is to check whether data reading makes it long."""

from __future__ import annotations

import numpy as np

from npudiag.profiling.analysis.idle_causes import ADVICE, SOURCES, rank_attribution
from npudiag.profiling.analysis.quantities import idle_gaps
from npudiag.profiling.analysis.step_breakdown import step_slots
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, absolute
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "device_idle"
OPTIONS = {"min_gap_us": 1000.0, "warning_share": 0.05, "critical_share": 0.20, "worst": 5.0}
MSPROF_ANALYZE = "overall summary's free time; npudiag gives each gap to what delayed the launch of the task ending it"
SOURCE = (
    "CANN Profiling documentation, step_trace: Data_aug Bound = this iteration's FP Start - the previous Iteration End"
)
_BETWEEN_ADVICE = (
    "Most of it lies between steps, before the next step's first task: msprof counts this gap as the next "
    "iteration's Data_aug Bound, and the CANN Profiling documentation (step_trace) says to check whether "
    "data reading makes it long. Prefetch the next batch while the device runs (more data workers, "
    "pinned memory) and keep host work between steps off the critical path."
)


def _advice(by_kind: dict[str, float]) -> str:
    """The advice of the kind holding the most of the idle time, with its source."""
    kind = max(by_kind, key=lambda k: (by_kind[k], k))
    source = f" (source: {SOURCES[kind]})" if SOURCES.get(kind) else ""
    return f"Most of it ({kind}): {ADVICE[kind]}{source}."


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
        idx = np.nonzero(long)[0]
        base = tl.base
        found = rank_attribution(ctx, rank).of(
            base + np.rint(rel_s[idx] * 1000.0).astype(np.int64),
            base + np.rint(rel_e[idx] * 1000.0).astype(np.int64),
        )
        causes, kinds = found["cause"].to_pylist(), found["kind"].to_pylist()
        by_kind: dict[str, float] = {}
        for i, kind in zip(idx, kinds):
            by_kind[kind] = by_kind.get(kind, 0.0) + float(gaps[i])
        order = np.argsort(-gaps[idx])[: int(opts["worst"])]
        worst = [
            {
                "start_us": float(gap_start[idx[j]]),
                "gap_us": float(gaps[idx[j]]),
                "cause": causes[j],
                "kind": kinds[j],
                "next_task": found["next_task"][j].as_py(),
                "launched_by": found["launched_by"][j].as_py(),
            }
            for j in order
        ]
        between = _between_steps(ctx, rank, tl.base, rel_s, rel_e)
        for w, j in zip(worst, order):
            w["where"] = "between_steps" if between[idx[j]] else "inside_step"
        between_us = float(gaps[long & between].sum())
        n_gaps = int(long.sum())
        title = (
            f"device idle {total / 1e3:.2f} ms in {n_gaps} gap{'' if n_gaps == 1 else 's'} "
            f"over {opts['min_gap_us'] / 1e3:g} ms"
        )
        if between_us:
            title += f" ({between_us / 1e3:.2f} ms between steps)"
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, total, opts, span_us=span),
                title,
                _BETWEEN_ADVICE if between_us * 2 > total else _advice(by_kind),
                total,
                int(long.sum()),
                rank,
                {"span_us": span, "idle_by_kind_us": by_kind, "between_steps_us": between_us, "worst_gaps": worst},
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


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
