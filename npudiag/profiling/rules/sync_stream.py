"""sync_stream: the host waits for the device (stream / device / event synchronise calls) inside the step loop.

A synchronise call blocks the host until the device's queue drains; the device then sits idle
until the host has launched the next task. Calls counted: aclrtSynchronizeStream / Device / Event
(and their WithTimeout forms) at the AscendCL level when the timeline has it, else the runtime's
StreamSynchronize / DeviceSynchronize / rtStreamSynchronize... (the runtime calls nested in an
AscendCL call are the same wait). It fires when such calls recur in every step after the first
(warm-up) one, or, as msprof-analyze's check does, when most kernel launches (Node@launch) are
followed directly by a stream synchronise: ASCEND_LAUNCH_BLOCKING=1 makes every launch wait.
Time lost: the device idle the waits leave, that is each device gap that a synchronise call
overlaps or ends in, from the later of the gap's start and the call's start to the gap's end; in
the steps after the first (all of them for launch blocking). The finding owns those ranges.
Without step markers (an AscendCL program's loop under msprof), synchronise calls of one API made
at least ``min_steps`` + 1 times with device work between them are the loop's, and all count."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, host_api, idle_after, prefer_acl, recurring, step_starts
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "sync_stream"
OPTIONS = {"min_steps": 2.0, "launch_ratio": 0.5, "min_launches": 20.0, "warning_share": 0.01, "critical_share": 0.05}
MSPROF_ANALYZE = "schedule: synchronize stream (Node@launch followed by aclrtSynchronizeStream, ratio > 0.5)"
SYNC_API = re.compile(
    r"^(aclrtSynchronize(Stream|Device|Event)\w*|StreamSynchronize\w*|DeviceSynchronize\w*|EventSynchronize\w*"
    r"|rtStreamSynchronize\w*|rtDeviceSynchronize\w*|rtEventSynchronize\w*)$"
)
_STREAM_SYNC = re.compile(r"^(aclrtSynchronizeStream\w*|StreamSynchronize\w*|rtStreamSynchronize\w*)$")


def _sync_calls(api: pa.Table) -> pa.Table:
    return prefer_acl(api.filter(pc.fill_null(pc.match_substring_regex(api["name"], SYNC_API.pattern), False)))


def _is_launch(api: pa.Table):
    return pc.and_(pc.equal(api["level"], "node"), pc.equal(api["name"], "launch"))


def launch_ratio(api: pa.Table) -> tuple[int, int, float]:
    """(launches, launches followed directly by a stream synchronise, their ratio), in start order
    over the launch and stream-synchronise calls, as msprof-analyze counts them."""
    is_launch = _is_launch(api)
    is_sync = pc.match_substring_regex(api["name"], _STREAM_SYNC.pattern)
    both = api.filter(pc.fill_null(pc.or_(is_launch, is_sync), False))
    if both.num_rows == 0:
        return 0, 0, 0.0
    both = both.sort_by([("start_us", "ascending")])
    launch = pc.fill_null(_is_launch(both), False).to_numpy(zero_copy_only=False)
    n = int(launch.sum())
    followed = int((launch[:-1] & ~launch[1:]).sum())
    return n, followed, (followed / n if n else 0.0)


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    host_api(ctx)
    out = []
    for rank in ctx.ranks():
        a = ctx.for_rank("api_calls", rank)
        calls = _sync_calls(a)
        if calls.num_rows == 0:
            continue
        launches, followed, ratio = launch_ratio(a)
        blocking = launches >= opts["min_launches"] and ratio > opts["launch_ratio"]
        bounds, steps = step_starts(ctx, rank)
        per_step: dict[int, int] = {}
        in_loop = False
        sel = np.ones(calls.num_rows, bool)
        by_recurrence = False
        if len(steps) >= opts["min_steps"] + 1:
            i = np.searchsorted(bounds, calls["start_us"].to_numpy(zero_copy_only=False), side="right") - 1
            step_of = np.where(i >= 0, steps[np.maximum(i, 0)], -1)
            per_step = {int(s): int((step_of == s).sum()) for s in steps[1:]}
            in_loop = min(per_step.values()) > 0
            if not blocking:
                sel = np.isin(step_of, steps[1:])
        elif len(steps) == 0:  # no step markers: the loop found by the calls recurring between device tasks
            starts = pc.fill_null(calls["start_us"], np.nan).to_numpy(zero_copy_only=False)
            looped = recurring(ctx, rank, starts, calls["name"].to_pylist(), int(opts["min_steps"]) + 1)
            in_loop = by_recurrence = bool(looped.any())
            if not blocking:
                sel = looped
        if not (in_loop or blocking):
            continue
        counted = calls.filter(pa.array(sel))
        idle_us, ranges = idle_after(ctx, rank, counted)
        names = sorted(set(counted["name"].to_pylist()))
        host_wait_us = float(pc.sum(pc.fill_null(counted["duration_us"], 0.0)).as_py() or 0.0)
        if blocking:
            title = (
                f"{followed} of {launches} kernel launches are followed by a stream synchronise "
                f"(ratio {ratio:.2f}): launch blocking; {idle_us / 1e3:.2f} ms device idle"
            )
            advice = (
                "Unset ASCEND_LAUNCH_BLOCKING (it makes every launch wait for the "
                "device; use it only to find a failing "
                "op), then remove any remaining synchronise calls from the loop."
            )
        else:
            title = (
                f"{counted.num_rows} synchronise calls recur in every step after the first "
                f"({idle_us / 1e3:.2f} ms device idle after them)"
            )
            if by_recurrence:
                title = (
                    f"{counted.num_rows} synchronise calls recur between device tasks "
                    f"({idle_us / 1e3:.2f} ms device idle "
                    "after them): the profile has no step markers, so the loop was found by the calls recurring"
                )
            advice = (
                "Remove host-device synchronisation from the step loop: .item(), .cpu(), printing or checking a "
                "device tensor, or an explicit synchronize; synchronise once per step at most, with events "
                "(aclrtRecordEvent / aclrtStreamWaitEvent) between streams instead of waiting on the host."
            )
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, idle_us, opts),
                title,
                advice,
                idle_us,
                counted.num_rows,
                rank,
                {
                    "apis": names,
                    "calls_per_step": per_step,
                    "host_wait_us": host_wait_us,
                    "launches": launches,
                    "launches_then_sync": followed,
                    "launch_sync_ratio": round(ratio, 4),
                },
                ranges,
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
