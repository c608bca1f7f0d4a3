"""Why the device was idle: for every gap between device tasks inside a step (the gaps whose sum is the
step's ``free_us``), what the host was doing.

Two kinds of host calls are looked at: framework ops (``host_ops``: torch_npu's cpu_op events, the
.db's PYTORCH_API ops) and CANN API calls (``api_calls``, every level the profile holds: AscendCL,
runtime, node, HCCL ...). For each gap:

1. the innermost framework op and the innermost CANN call running across the gap's middle (of those
   covering it, the shortest; the first of equals in table order);
2. where nothing runs there: a wait on the device that returned inside the gap (the last to return):
   a synchronising CANN call, or a framework op that reads a device value (``aten::item`` ...),
   together with the framework op across the CANN call's return (the op that issued it). The host
   waited for the device to drain, so nothing was queued when it came back;
3. else nothing.

The cause is the framework op where there is one (what the user wrote), else the CANN call
(``level@name``), else null. The kind says what to do about it:

- ``sync``: a synchronisation, a synchronous copy or a framework op that reads a device value.
  Remove it from the loop (``.item()``, ``.cpu()``, blocking copies) or move it out of the step.
- ``dataloader``: the host was inside a DataLoader fetch (torch's ``enumerate(DataLoader)#...``
  range; the cause is that range, whatever ran within it). More workers, pinned memory, prefetching.
- ``framework_op``: the host was inside a framework op that queued no device work in time.
- ``host_api``: the host was inside another CANN call (a launch, an allocation): launch-bound.
  Fuse small operators, capture the step as a graph.
- ``none``: no host call was running: Python, data loading, or a level that was not collected.

Each gap is given whole to one cause, so per step the idle time of the causes adds up to the step's
``free_us`` exactly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.context import rank_rows
from npudiag.profiling.analysis.step_breakdown import StepGaps
from npudiag.profiling.analysis.timeline import merge

SCHEMA = schemas.IDLE_CAUSES
# CANN calls that make the host wait for the device
SYNC_CALLS = ("Synchronize", "StreamSync", "DeviceSync", "EventSync", "QueryEvent", "MemCopySync", "aclrtMemcpy")
# framework ops that read a device value on the host, so they wait for the device to get there
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero", "aten::equal", "aten::masked_select")
# torch's DataLoader wraps each __next__ in a range of this name ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")
DATALOADER = "enumerate(DataLoader)"
KINDS = ("sync", "dataloader", "framework_op", "host_api", "none")
ADVICE = {
    "sync": "the host waited on the device: remove synchronisations from the step (.item(), .cpu(), blocking copies, stream syncs)",
    "dataloader": "the host was waiting for the next batch: more DataLoader workers, pin_memory=True, prefetch_factor, lighter transforms",
    "framework_op": "the host was inside framework ops that queued no device work in time: fuse ops, capture the step as a graph",
    "host_api": "the host was busy in other CANN calls (launch-bound): fuse small operators or capture the step as a graph",
    "none": "no host call was recorded: Python, data loading or framework work",
}
_PAIRS = 8_000_000  # (gap, call) pairs expanded at once: memory stays bounded when long calls span many gaps


def kind_of(name: str | None) -> str:
    """The kind of the host call ``name`` (``level@api`` or an API name); ``none`` for no call."""
    if name is None:
        return "none"
    return "sync" if any(k in name for k in SYNC_CALLS) else "host_api"


def innermost(times_ns: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """For each time, the index of the shortest call with start <= time <= end (the first of
    equals), -1 where none covers it (a NaN bound covers nothing). Any one unit for all three (ns
    integers, us floats). Time and memory linear in the (time, covering call) pairs."""
    best = np.full(len(times_ns), -1, np.int64)
    if not len(times_ns) or not len(start_ns):
        return best
    order = np.argsort(times_ns, kind="stable")
    ts = times_ns[order]
    lo = np.searchsorted(ts, start_ns, "left")
    hi = np.searchsorted(ts, end_ns, "right")
    counts = np.maximum(hi - lo, 0)
    calls = np.nonzero(counts)[0]
    best_len = np.full(len(ts), np.inf)  # ns or us: the lengths compare the same
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
    """Each row's start in exact ns where known, else from start_us."""
    approx = np.rint(pc.fill_null(t["start_us"], np.nan).to_numpy(zero_copy_only=False) * 1000.0)
    approx = np.where(np.isfinite(approx), approx, 0).astype(np.int64)
    if "start_ns" not in t.column_names:
        return approx
    exact = t["start_ns"]
    return np.where(pc.is_valid(exact).to_numpy(zero_copy_only=False), pc.fill_null(exact, 0).to_numpy(zero_copy_only=False), approx)


def _ranges_ns(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each row's [start, end] in ns (a missing or negative duration: an instant)."""
    start = _ns(t)
    dur = pc.fill_null(t["duration_us"], 0.0).to_numpy(zero_copy_only=False)
    return start, start + np.rint(np.where(np.isfinite(dur) & (dur > 0), dur, 0.0) * 1000.0).astype(np.int64)


class _Calls:
    """One rank's host calls of one source as ns ranges, with their labels and which of them wait on the device."""

    def __init__(self, table: pa.Table, labels: pa.Array | pa.ChunkedArray, sync: np.ndarray, loader: np.ndarray | None = None) -> None:
        self.start, self.end = _ranges_ns(table)
        self.labels = labels
        self.sync = sync
        self.loader = np.zeros(len(sync), bool) if loader is None else loader

    def label(self, which: np.ndarray) -> pa.Array:
        taken = pc.take(self.labels, pa.array(np.where(which >= 0, which, 0)))
        return pc.if_else(pa.array(which >= 0), taken, pa.nulls(len(which), pa.string()))


def _cann_calls(api: pa.Table) -> _Calls | None:
    if api.num_rows == 0:
        return None
    labels = pc.binary_join_element_wise(pc.fill_null(api["level"], ""), api["name"], "@")
    waiting = [n for n in pc.unique(labels).to_pylist() if kind_of(n) == "sync"]  # per distinct label, not per call
    sync = pc.fill_null(pc.is_in(labels, pa.array(waiting, pa.string())), False).to_numpy(zero_copy_only=False)
    return _Calls(api, labels, sync)


def _framework_ops(ops: pa.Table) -> _Calls | None:
    """The framework ops, less torch's ProfilerStep#N ranges (step markers that cover every gap)."""
    if ops.num_rows:
        ops = ops.filter(pc.invert(pc.fill_null(pc.starts_with(ops["name"], "ProfilerStep#"), False)))
    if ops.num_rows == 0:
        return None
    names = pc.fill_null(ops["name"], "")
    loader = pc.starts_with(names, DATALOADER).to_numpy(zero_copy_only=False)
    return _Calls(ops, names, pc.is_in(names, pa.array(SYNC_OPS)).to_numpy(zero_copy_only=False), loader)


def _attribute(mid: np.ndarray, gap_s: np.ndarray, gap_e: np.ndarray, cann: _Calls | None, ops: _Calls | None) -> tuple[pa.Array, pa.Array]:
    """Each gap's cause and kind (see the module's docstring), ``mid`` its middle."""
    n = len(mid)
    if cann is None and ops is None:  # no host call recorded: every gap's cause is none
        return pa.nulls(n, pa.string()), _kinds(np.full(n, KINDS.index("none")))
    none = np.full(n, -1, np.int64)
    api_at = innermost(mid, cann.start, cann.end) if cann else none
    op_at = innermost(mid, ops.start, ops.end) if ops else none
    running = (api_at >= 0) | (op_at >= 0)
    # nothing running across the middle: a wait on the device that returned inside the gap
    api_ret = returned_inside(gap_s, gap_e, cann.end, cann.sync) if cann and not running.all() else none
    op_ret = returned_inside(gap_s, gap_e, ops.end, ops.sync) if ops and not running.all() else none
    api_ret, op_ret = np.where(running, -1, api_ret), np.where(running, -1, op_ret)
    # the framework op that issued a CANN wait returning in the gap: the one across the wait's return
    op_of_ret = np.full(n, -1, np.int64)
    if cann and ops and (api_ret >= 0).any():
        op_of_ret[api_ret >= 0] = innermost(cann.end[api_ret[api_ret >= 0]], ops.start, ops.end)
    op_pick = np.where(op_at >= 0, op_at, np.where(op_ret >= 0, op_ret, op_of_ret))
    api_pick = np.where(api_at >= 0, api_at, api_ret)
    sync = np.zeros(n, bool)
    if cann:
        sync |= (api_pick >= 0) & cann.sync[np.maximum(api_pick, 0)]
    if ops:
        sync |= (op_pick >= 0) & ops.sync[np.maximum(op_pick, 0)]
    # inside a DataLoader fetch (torch wraps __next__ in an "enumerate(DataLoader)#..." op): that op, whatever ran within it
    loading = np.full(n, -1, np.int64)
    if ops is not None and ops.loader.any():
        idx = np.nonzero(ops.loader)[0]
        found = innermost(mid, ops.start[idx], ops.end[idx])
        loading = np.where(found >= 0, idx[np.maximum(found, 0)], -1)
    loading = np.where(sync, -1, loading)
    op_pick = np.where(loading >= 0, loading, op_pick)
    op_label = ops.label(op_pick) if ops else pa.nulls(n, pa.string())
    api_label = cann.label(api_pick) if cann else pa.nulls(n, pa.string())
    cause = pc.coalesce(op_label, api_label)  # the framework op says what the user wrote
    return cause, _kinds(np.select([sync, loading >= 0, op_pick >= 0, api_pick >= 0], [0, 1, 2, 3], 4))


def _kinds(code: np.ndarray) -> pa.Array:
    """The kind names of ``code`` (indices into KINDS)."""
    return pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int8)), pa.array(KINDS)).cast(pa.string())


def _causes(api: pa.Table, host_ops: pa.Table, gap_s: np.ndarray, gap_e: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """Cause and kind of each gap [start, end] (ns) on one rank, whose CANN calls and framework ops these are."""
    return _attribute(gap_s + (gap_e - gap_s) // 2, gap_s, gap_e, _cann_calls(api), _framework_ops(host_ops))


def idle_causes(tables: dict[str, pa.Table], gaps: list[StepGaps]) -> pa.Table:
    """The ``idle_causes`` table: per rank, step, cause and kind (see the module's docstring), the
    idle time and the number of gaps. ``gaps``: each rank's gaps inside its steps, as the step
    breakdown found them (``step_breakdown.breakdown_and_gaps``), so the causes add up to its free time."""
    api = tables.get("api_calls", schemas.empty("api_calls"))
    host_ops = tables.get("host_ops", schemas.empty("host_ops"))
    parts = []
    for g in gaps:
        if not len(g.step):
            continue
        rank, step, length, gap_s, gap_e = g.rank, g.step, g.length_us, g.start_ns, g.end_ns
        cause, kinds = _causes(rank_rows(api, rank), rank_rows(host_ops, rank), gap_s, gap_e)
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


def gap_causes(api: pa.Table, host_ops: pa.Table, gap_s_ns: np.ndarray, gap_e_ns: np.ndarray) -> tuple[list, list]:
    """Cause and kind of each gap [start, end] (ns) on one rank, whose CANN calls and framework ops
    these are (the attribution above), as lists."""
    cause, kinds = _causes(api, host_ops, gap_s_ns, gap_e_ns)
    return cause.to_pylist(), kinds.to_pylist()


def main_cause(kernels: pa.Table, api: pa.Table, host_ops: pa.Table, lo_us: float, hi_us: float) -> tuple[str | None, str | None]:
    """Of one rank's device idle time inside [lo_us, hi_us] (the stretch's gaps between its
    ``kernels``, ends included), the cause and kind holding the most, by the attribution above;
    (None, None) without idle time or host calls."""
    if hi_us <= lo_us or (api.num_rows == 0 and host_ops.num_rows == 0):
        return None, None
    lo, hi = round(lo_us * 1000), round(hi_us * 1000)
    start, end = _ranges_ns(kernels)
    keep = (end > lo) & (start < hi)
    busy_s, busy_e = merge(np.clip(start[keep], lo, hi), np.clip(end[keep], lo, hi))
    # the stretch's gaps: the complement of the busy segments inside [lo, hi]
    gap_s = np.concatenate([[lo], busy_e]).astype(np.int64)
    gap_e = np.concatenate([busy_s, [hi]]).astype(np.int64)
    ok = gap_e > gap_s
    gap_s, gap_e = gap_s[ok], gap_e[ok]
    if not len(gap_s):
        return None, None
    cause, kinds = _causes(api, host_ops, gap_s, gap_e)
    t = pa.table({"cause": cause, "kind": kinds, "idle": gap_e - gap_s})
    t = t.filter(pc.is_valid(t["cause"]))
    if t.num_rows == 0:
        return None, None
    by = t.group_by(["cause", "kind"], use_threads=False).aggregate([("idle", "sum")])
    by = by.sort_by([("idle_sum", "descending"), ("cause", "ascending")])
    return by["cause"][0].as_py(), by["kind"][0].as_py()


# said of kind "none" only where no CANN call at all was read (torch_npu's Level0, or a Level1+ export without its trace)
NO_CALLS = " (no CANN call was read from this profile: torch_npu records them from profiler_level Level1, in trace_view.json or the .db)"


def top_causes(table: pa.Table, limit: int = 5, *, host_calls: bool = True) -> dict:
    """The whole profile's idle time by cause (every rank and step summed), largest first, and by
    kind; ``host_calls``: whether the profile records CANN calls (else the advice says so)."""
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
        "advice": ADVICE[largest] + (NO_CALLS if largest == "none" and not host_calls else ""),  # the kind with the most idle time
    }
