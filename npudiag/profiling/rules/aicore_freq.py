"""aicore_freq: device compute that ran while the AI Core clock was below its highest rate.

The clock's samples (the "AI Core Freq" counter of the trace, or the .db's AICORE_FREQ) each hold
from their time until the next sample (the last one to the end of the rank's span). A stretch is
slow when its frequency is more than ``min_drop`` below the highest frequency seen (msprof-analyze
flags a drop of 5 %); a drop while nothing computes (the driver lowering an idle clock) is not a
finding. Time lost: in each slow stretch, the compute time in it × (1 − frequency / highest), what
that work would have saved at full clock if it is bound by the core clock (an estimate: memory-
bound work slows less). The finding owns, of each compute segment in a slow stretch, its last
(1 − frequency / highest) part: ranges that add up to the time lost. Usual causes: power capping
or thermal throttling (check npu-smi's power and temperature), a frequency set by the
administrator, or the clock still ramping up when work arrives after an idle spell."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from npudiag.profiling.analysis.timeline import overlap_with
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, absolute
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "aicore_freq"
OPTIONS = {"min_drop": 0.05, "warning_share": 0.01, "critical_share": 0.05}
MSPROF_ANALYZE = "computation: AI Core frequency (operators run below the rated frequency, drop >= 5 %)"


def _owned(
    compute: tuple[np.ndarray, np.ndarray], s: np.ndarray, e: np.ndarray, share: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The last ``share`` of each compute segment clipped to each stretch [s, e) (stretches are disjoint)."""
    cs, ce = compute
    starts, ends = [], []
    for a, b, k in zip(s, e, share):
        lo, hi = np.searchsorted(ce, a, side="right"), np.searchsorted(cs, b, side="left")
        seg_s, seg_e = np.maximum(cs[lo:hi], a), np.minimum(ce[lo:hi], b)
        starts.append(seg_e - (seg_e - seg_s) * k)
        ends.append(seg_e)
    return (np.concatenate(starts), np.concatenate(ends)) if starts else (np.zeros(0), np.zeros(0))


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    freq = ctx.table("aicore_freq")
    if freq.num_rows == 0:
        raise Skipped("no AI Core frequency samples (the trace's AI Core Freq counter or the .db's AICORE_FREQ)")
    out = []
    for rank in ctx.ranks():
        f = ctx.for_rank("aicore_freq", rank)
        f = f.filter(pc.and_(pc.is_valid(f["ts_us"]), pc.is_valid(f["freq_mhz"]))).sort_by([("ts_us", "ascending")])
        tl = ctx.timeline(rank)
        if f.num_rows == 0 or tl.last is None:
            continue
        mhz = f["freq_mhz"].to_numpy(zero_copy_only=False)
        top = float(mhz.max())
        if top <= 0:
            continue
        exact = f["ts_ns"].to_numpy(zero_copy_only=False) if f["ts_ns"].null_count == 0 else None
        t = (
            (exact - tl.base) / 1000.0
            if exact is not None
            else f["ts_us"].to_numpy(zero_copy_only=False) - tl.base / 1000.0
        )
        ends = np.append(t[1:], max(tl.last, t[-1]))
        slow = mhz < (1.0 - opts["min_drop"]) * top
        if not slow.any():
            continue
        s, e, m = t[slow], ends[slow], mhz[slow]
        busy = overlap_with(*tl.compute, s, e)
        hit = busy > 0
        if not hit.any():
            continue
        lost = busy[hit] * (1.0 - m[hit] / top)
        lost_us = float(lost.sum())
        stretches = [
            {
                "from_us": round(float(a) + tl.base / 1000.0, 3),
                "to_us": round(float(b) + tl.base / 1000.0, 3),
                "mhz": float(x),
                "compute_us": round(float(c), 3),
            }
            for a, b, x, c in zip(s[hit], e[hit], m[hit], busy[hit])
        ][:5]
        low = float(m[hit].min())
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, lost_us, opts),
                f"{float(busy[hit].sum()) / 1e3:.2f} ms of compute ran with the AI Core clock at {low:g} MHz "
                f"({100.0 * (1 - low / top):.0f}% below {top:g} MHz)",
                "Check power capping and temperature (npu-smi info -t power / temp) and any frequency setting on the "
                "device; compare with a run on another device of the same host.",
                lost_us,
                int(hit.sum()),
                rank,
                {
                    "highest_mhz": top,
                    "lowest_mhz": low,
                    "compute_at_low_clock_us": float(busy[hit].sum()),
                    "stretches": stretches,
                },
                absolute(tl, *_owned(tl.compute, s[hit], e[hit], 1.0 - m[hit] / top)),
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
