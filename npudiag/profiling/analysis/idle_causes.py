"""Why the device was idle: for every gap between device tasks inside a step (the gaps whose sum is the
step's ``free_us``), what the host was doing.

The host calls are the recorded CANN API calls at every level the profile holds (AscendCL, runtime,
node, HCCL ...). A gap's cause is, in this order:

1. the innermost host call running across the gap's middle (of those covering it, the shortest; the
   first of equals in table order);
2. else a synchronising call that returned inside the gap (the last to return): the host waited for
   the device to drain, so when it came back nothing was queued and the device stayed idle until the
   host issued new work;
3. else nothing (null).

Its kind says what to do about it:

- ``sync``: a stream / device / event synchronisation or a synchronous copy, running across the gap
  or returning inside it. Remove the synchronisation from the loop (``.item()``, ``.cpu()``,
  blocking copies) or move it out of the step.
- ``host_api``: the host was inside another CANN call (a launch, an allocation): the host could not
  issue work fast enough (launch-bound). Fuse small operators, capture the step as a graph.
- ``none``: no host call was running: host-side work the profile does not record as CANN calls
  (Python, data loading, the framework), or a level that was not collected.

Each gap is given whole to the call across its middle, so per step the idle time of the causes adds
up to the step's ``free_us`` exactly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.context import rank_rows
from npudiag.profiling.analysis.quantities import idle_gaps, timeline
from npudiag.profiling.analysis.step_breakdown import step_parts

SCHEMA = schemas.IDLE_CAUSES
# CANN calls that make the host wait for the device
SYNC_CALLS = ("Synchronize", "StreamSync", "DeviceSync", "EventSync", "QueryEvent", "MemCopySync", "aclrtMemcpy")
KINDS = ("sync", "host_api", "none")
ADVICE = {
    "sync": "the host waited on the device: remove synchronisations from the step (.item(), .cpu(), blocking copies, stream syncs)",
    "host_api": "the host was busy in other CANN calls (launch-bound): fuse small operators or capture the step as a graph",
    "none": "no host call was recorded: Python, data loading or framework work (a higher profiler level records CANN calls)",
}
_PAIRS = 8_000_000  # (gap, call) pairs expanded at once: memory stays bounded when long calls span many gaps


def kind_of(name: str | None) -> str:
    """The kind of the host call ``name`` (``level@api`` or an API name); ``none`` for no call."""
    if name is None:
        return "none"
    return "sync" if any(k in name for k in SYNC_CALLS) else "host_api"


def innermost(times_ns: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """For each time, the index of the shortest call with start <= time <= end (the first of
    equals), -1 where none covers it. Time and memory linear in the (time, covering call) pairs."""
    best = np.full(len(times_ns), -1, np.int64)
    if not len(times_ns) or not len(start_ns):
        return best
    order = np.argsort(times_ns, kind="stable")
    ts = times_ns[order]
    lo = np.searchsorted(ts, start_ns, "left")
    hi = np.searchsorted(ts, end_ns, "right")
    counts = np.maximum(hi - lo, 0)
    calls = np.nonzero(counts)[0]
    best_len = np.full(len(ts), np.iinfo(np.int64).max, np.int64)
    best_call = np.full(len(ts), -1, np.int64)
    cum = np.cumsum(counts[calls])
    begin = 0
    while begin < len(calls):
        # the calls whose pairs fit the budget (at least one)
        end = max(begin + 1, int(np.searchsorted(cum, (cum[begin - 1] if begin else 0) + _PAIRS, "right")))
        batch = calls[begin:end]
        n = counts[batch]
        call_of = np.repeat(batch, n)
        pos = np.repeat(lo[batch], n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
        length = (end_ns - start_ns)[call_of]
        # per position, the shortest of this batch (then the earliest call), against the best so far
        pick = np.lexsort((call_of, length, pos))
        pos, call_of, length = pos[pick], call_of[pick], length[pick]
        first = np.concatenate([[True], pos[1:] != pos[:-1]])
        pos, call_of, length = pos[first], call_of[first], length[first]
        better = (length < best_len[pos]) | ((length == best_len[pos]) & ((best_call[pos] < 0) | (call_of < best_call[pos])))
        best_len[pos[better]] = length[better]
        best_call[pos[better]] = call_of[better]
        begin = end
    best[order] = best_call
    return best


def returned_inside(gap_start_ns: np.ndarray, gap_end_ns: np.ndarray, end_ns: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """For each gap, the index of the eligible call that returned last inside it (start <= end <= gap
    end), -1 where none did."""
    idx = np.nonzero(eligible)[0]
    out = np.full(len(gap_start_ns), -1, np.int64)
    if not len(idx) or not len(gap_start_ns):
        return out
    order = idx[np.argsort(end_ns[idx], kind="stable")]
    ends = end_ns[order]
    last = np.searchsorted(ends, gap_end_ns, "right") - 1  # the last return at or before the gap's end
    ok = last >= 0
    ok[ok] = ends[last[ok]] >= gap_start_ns[ok]
    out[ok] = order[last[ok]]
    return out


def _ns(t: pa.Table) -> np.ndarray:
    exact = t["start_ns"]
    approx = np.rint(pc.fill_null(t["start_us"], np.nan).to_numpy(zero_copy_only=False) * 1000.0)
    approx = np.where(np.isfinite(approx), approx, 0).astype(np.int64)
    return np.where(pc.is_valid(exact).to_numpy(zero_copy_only=False), pc.fill_null(exact, 0).to_numpy(zero_copy_only=False), approx)


def idle_causes(tables: dict[str, pa.Table]) -> pa.Table:
    """The ``idle_causes`` table: per rank, step, cause (the innermost host call, ``level@name``; null
    when none ran) and kind, the idle time and the number of gaps."""
    gaps: dict = {}  # rank -> (steps, gap µs, gap middle ns)
    for rank, step, ks, cs, base, _rec in step_parts(tables):
        s, e = idle_gaps(timeline(ks, cs, base))
        if not len(s):
            continue
        g = gaps.setdefault(rank, ([], [], []))
        g[0].append(np.full(len(s), -1 if step is None else step, np.int64))
        g[1].append(e - s)
        g[2].append(base + np.rint((s + e) / 2.0 * 1000.0).astype(np.int64))
    api = tables.get("api_calls", schemas.empty("api_calls"))
    parts = []
    for rank, (steps, lengths, mids) in gaps.items():
        step, length, mid = np.concatenate(steps), np.concatenate(lengths), np.concatenate(mids)
        calls = rank_rows(api, rank) if api.num_rows else api
        if calls.num_rows:
            start = _ns(calls)
            dur = pc.fill_null(calls["duration_us"], 0.0).to_numpy(zero_copy_only=False)
            end = start + np.rint(np.where(np.isfinite(dur) & (dur > 0), dur, 0.0) * 1000.0).astype(np.int64)
            which = innermost(mid, start, end)
            names_py = None
            if (which < 0).any():  # gaps with no call across them: a sync that returned inside the gap
                names_py = pc.binary_join_element_wise(pc.fill_null(calls["level"], ""), calls["name"], "@").to_pylist()
                sync = np.array([kind_of(n) == "sync" for n in names_py], bool)
                after = returned_inside(mid - np.rint(length * 500.0).astype(np.int64), mid + np.rint(length * 500.0).astype(np.int64),
                                        end, sync)  # fmt: skip
                which = np.where(which >= 0, which, after)
            names = pc.binary_join_element_wise(pc.fill_null(calls["level"], ""), calls["name"], "@")
            cause = pc.take(names, pa.array(np.where(which >= 0, which, 0)))
            cause = pc.if_else(pa.array(which >= 0), cause, pa.nulls(len(which), pa.string()))
        else:
            cause = pa.nulls(len(mid), pa.string())
        kinds = _kinds(cause)
        t = pa.table({"step": pa.array(step, pa.int64()), "cause": cause, "kind": kinds, "idle_us": length})
        t = t.group_by(["step", "cause", "kind"], use_threads=False).aggregate([("idle_us", "sum"), ("idle_us", "count")])
        parts.append(
            pa.table(
                {
                    "rank": pa.array([rank] * t.num_rows, pa.int32()),
                    "step": pc.if_else(pc.equal(t["step"], -1), pa.nulls(t.num_rows, pa.int64()), t["step"]),
                    "cause": t["cause"],
                    "kind": t["kind"],
                    "idle_us": t["idle_us_sum"],
                    "count": t["idle_us_count"],
                },
                schema=SCHEMA,
            )  # fmt: skip
        )
    if not parts:
        return SCHEMA.empty_table()
    out = pa.concat_tables(parts)
    return out.sort_by([("rank", "ascending"), ("step", "ascending"), ("idle_us", "descending"), ("cause", "ascending")])


def _kinds(cause: pa.Array | pa.ChunkedArray) -> pa.Array:
    distinct = pc.unique(cause).to_pylist()
    kinds = [kind_of(c) for c in distinct]
    index = pc.index_in(cause, value_set=pa.array(distinct, pa.string()), skip_nulls=False)
    return pc.take(pa.array(kinds, pa.string()), index)


def top_causes(table: pa.Table, limit: int = 5) -> dict:
    """The whole profile's idle time by cause (every rank and step summed), largest first, and by kind."""
    if table.num_rows == 0:
        return {"idle_us": 0.0, "causes": [], "by_kind_us": {}, "advice": None}
    by = table.group_by(["cause", "kind"], use_threads=False).aggregate([("idle_us", "sum"), ("count", "sum")])
    by = by.sort_by([("idle_us_sum", "descending"), ("cause", "ascending")])
    kinds = table.group_by("kind", use_threads=False).aggregate([("idle_us", "sum")])
    by_kind = {r["kind"]: r["idle_us_sum"] for r in kinds.to_pylist()}
    largest = max(by_kind, key=lambda k: (by_kind[k], k))
    return {
        "idle_us": float(pc.sum(table["idle_us"]).as_py() or 0.0),
        "causes": [
            {"cause": r["cause"], "kind": r["kind"], "idle_us": r["idle_us_sum"], "gaps": r["count_sum"]}
            for r in by.slice(0, limit).to_pylist()
        ],  # fmt: skip
        "by_kind_us": by_kind,
        "advice": ADVICE[largest],  # for the kind with the most idle time
    }
