"""small_copies: many copies below a size threshold in one step and direction, which could be one.

Saving if merged, per group: the group's copy time minus the time of one copy of all its bytes,
modelled as one of its copies' median time plus the bytes at the best bandwidth seen on that rank
for copies of at least 1 MiB (or the group's own best when there are none). The finding owns the
same share of each of its copies, at the copy's end: the part a merged copy would not take."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, spans_of, step_starts
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "small_copies"
OPTIONS = {"max_bytes": 65536.0, "min_count": 100.0, "warning_share": 0.01, "critical_share": 0.05}
MSPROF_ANALYZE = "none for memory copies (its small-packet check is for communication transfers)"


_SOURCE_WORDS = {"trace": "the trace's copy events", "db": "the .db's copy tasks and API calls"}


def _steps_of(ctx: RuleContext, rank, starts: np.ndarray) -> np.ndarray:
    """Step of each time; -1 where the profile has no steps."""
    bounds, steps = step_starts(ctx, rank)
    if len(steps) == 0:
        return np.full(len(starts), -1, np.int64)
    i = np.searchsorted(bounds, starts, side="right") - 1
    return np.where(i >= 0, steps[np.maximum(i, 0)], steps[0])


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    copies = ctx.table("copies")
    if copies.num_rows == 0:
        raise Skipped("no memory copies in this profile")
    if pc.sum(pc.is_valid(copies["size_bytes"])).as_py() in (0, None):
        kinds = ", ".join(_SOURCE_WORDS.get(x, x) for x in sorted(set(copies["source"].drop_null().to_pylist())))
        raise Skipped(
            f"copy sizes are not recorded ({kinds or 'the copies'}: no size per copy; msprof's timeline export, "
            "msprof_*.json, gives each MEMCPY_ASYNC event a size(B))"
        )
    out = []
    for rank in ctx.ranks_of("copies"):
        c = ctx.for_rank("copies", rank)
        c = c.filter(pc.is_valid(c["size_bytes"]))
        # one copy shows up as a device task and as the host call that launched it: count one side
        device = c.filter(pc.equal(c["side"], "device"))
        c = device if device.num_rows else c
        if c.num_rows == 0:
            continue
        size = c["size_bytes"].to_numpy().astype(float)
        dur = pc.fill_null(c["duration_us"], 0.0).to_numpy()
        big = (size >= 1 << 20) & (dur > 0)
        best_bw = float((size[big] / dur[big]).max()) if big.any() else 0.0  # bytes per us
        small = size < opts["max_bytes"]
        if small.sum() < opts["min_count"]:
            continue
        starts = pc.fill_null(c["start_us"], np.nan).to_numpy()
        small_rows = c.filter(pa.array(small))
        t = pa.table(
            {
                "step": _steps_of(ctx, rank, starts)[small],
                "direction": c["direction"].filter(pa.array(small)),
                "side": c["side"].filter(pa.array(small)),
                "size": size[small],
                "dur": dur[small],
            }
        )
        g = t.group_by(["step", "direction", "side"]).aggregate(
            [("dur", "count"), ("dur", "sum"), ("size", "sum"), ("dur", "approximate_median")]
        )
        span = ctx.span_us(rank) or 1.0
        for row in g.to_pylist():
            if row["dur_count"] < opts["min_count"]:
                continue
            sel = t["step"].to_numpy() == row["step"]
            bw = best_bw or float(np.max(t["size"].to_numpy()[sel] / np.maximum(t["dur"].to_numpy()[sel], 1e-9)))
            merged = row["dur_approximate_median"] + (row["size_sum"] / bw if bw > 0 else 0.0)
            saving = max(row["dur_sum"] - merged, 0.0)
            step = None if row["step"] == -1 else row["step"]
            mine = sel & (t["direction"].to_numpy(zero_copy_only=False) == row["direction"])
            mine &= t["side"].to_numpy(zero_copy_only=False) == row["side"]
            share = saving / row["dur_sum"] if row["dur_sum"] else 0.0
            out.append(
                Finding(
                    RULE_ID,
                    ctx.severity(rank, saving, opts, span_us=span),
                    f"{row['dur_count']} {row['direction']} copies under {int(opts['max_bytes'])} B"
                    + (f" in step {step}" if step is not None else ""),
                    "Pack small tensors into one buffer and copy it once (or keep them "
                    "on the device); each copy pays a fixed "
                    "launch and DMA set-up cost.",
                    saving,
                    row["dur_count"],
                    rank,
                    {
                        "step": step,
                        "direction": row["direction"],
                        "side": row["side"],
                        "bytes": row["size_sum"],
                        "copy_time_us": row["dur_sum"],
                        "merged_estimate_us": merged,
                    },
                    spans_of(small_rows.filter(pa.array(mine)), share),
                )
            )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
