"""sync_copy: host threads blocked in synchronous copies (aclrtMemcpy and other non-Async copy APIs).

Time lost: the host time spent inside those calls, which an async copy on a stream overlapped with
compute would give back; the finding owns those call ranges. Copies known to be H2D and smaller than ``min_bytes``
are left out, as
nsys does for small pageable copies (default 64 KiB)."""

from __future__ import annotations

import pyarrow.compute as pc

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, spans_of
from npudiag.profiling.rules.registry import Rule, register

RULE_ID = "sync_copy"
OPTIONS = {"min_bytes": 65536.0, "warning_share": 0.01, "critical_share": 0.10}
MSPROF_ANALYZE = "none (its advisor reports synchronous stream waits, not copy calls)"


def run(ctx: RuleContext, opts: dict[str, float]) -> list[Finding]:
    copies = ctx.table("copies")
    if copies.num_rows == 0:
        raise Skipped("no memory copies in this profile")
    out = []
    for rank in ctx.ranks_of("copies"):
        c = ctx.for_rank("copies", rank)
        host = c.filter(pc.equal(c["side"], "host"))
        side = "host"
        if host.num_rows == 0:  # no host API timeline: fall back to device copies known to be sync
            host, side = c, "device"
        sync = host.filter(pc.fill_null(pc.equal(host["mode"], "sync"), False))
        small_h2d = pc.and_(pc.equal(sync["direction"], "H2D"), pc.less(sync["size_bytes"], opts["min_bytes"]))
        sync = sync.filter(pc.invert(pc.fill_null(small_h2d, False)))
        if sync.num_rows == 0:
            continue
        blocked = float(pc.sum(sync["duration_us"]).as_py() or 0.0)
        nbytes = pc.sum(sync["size_bytes"]).as_py()
        names = sorted(set(sync["name"].to_pylist()))
        worst = sync.sort_by([("duration_us", "descending")]).slice(0, 5)
        out.append(
            Finding(
                RULE_ID,
                ctx.severity(rank, blocked, opts),
                (
                    f"{sync.num_rows} synchronous copies block the "
                    f"{'host' if side == 'host' else 'stream'} for {blocked / 1e3:.2f} ms"
                ),
                "Use aclrtMemcpyAsync on a stream (with pinned host memory from aclrtMallocHost) and synchronise once "
                "where the result is needed, so copies overlap compute instead of stalling the host.",
                blocked,
                sync.num_rows,
                rank,
                {
                    "apis": names,
                    "bytes": nbytes,
                    "side": side,
                    "worst": [
                        {"start_us": r["start_us"], "duration_us": r["duration_us"], "name": r["name"]}
                        for r in worst.to_pylist()
                    ],
                },
                spans_of(sync),
            )
        )
    return out


register(Rule(RULE_ID, run, OPTIONS, MSPROF_ANALYZE, __doc__ or ""))
