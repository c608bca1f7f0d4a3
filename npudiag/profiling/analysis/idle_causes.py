"""Why the device was idle: every gap of a step's device timeline (before its first task, between
tasks, after its last), given to what delayed the launch of the task that ends it.

The task ending a gap (the first device task, kernel or copy, starting at or after the gap's end)
was launched by a host call: the CANN call carrying its connection id (``Node@launch``,
``aclrtMemcpyAsync`` ...), on its launching thread (with torch_npu's task queue, the dequeue
thread); and it was issued by a framework op (the profile's flows: torch_npu's ``async_npu`` flow, the
.db's CONNECTION_IDS). Each gap is given, in this order, to:

1. ``op_compile``: a compile call in progress on the launching thread across the gap's middle
   (``aclopCompileAndExecute``, ``aclopCompile``, ``opCompile``, graph compiles: any CANN call
   whose name says "compile"); the outermost one is named. Where the profile does not say which
   call launched the task (no host call carries its connection id), a compile on any thread;
2. ``host_api``: else another CANN call in progress there (not a synchronising one): the launching
   thread was busy in the CANN runtime (an HCCL call, a long aclnn call); the outermost is named;
3. ``sync``: a synchronising call (a CANN stream / device / event synchronisation or blocking copy,
   or a framework op that reads a device value: ``aten::item``, ``aten::_local_scalar_dense`` ...),
   on any thread, that overlaps at least half the gap; of those, the one overlapping most. (A call
   covering half a gap covers its middle, so only the calls across the middle are candidates.);
4. ``dataloader``: torch's ``enumerate(DataLoader)#...`` range across the gap's middle: the host was
   fetching the next batch;
5. ``dispatch``: the framework op that issued the task ending the gap (the outermost op of the
   framework ops around its launch, aten::conv2d rather than the aten::_convolution inside): the
   device waited for the framework to issue it;
6. ``none``: nothing recorded says why (no launch link, no host call across it).

Each gap goes whole to one cause, so per step the gaps add up to the step breakdown's
before-first-task + free + after-last-task time exactly. The advice of each kind names its public
source (``SOURCES``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.context import RuleContext
from npudiag.profiling.analysis.step_breakdown import WHERE, StepGaps, row_ns
from npudiag.profiling.analysis.timeline import merge

SCHEMA = schemas.IDLE_CAUSES
GAPS = schemas.IDLE_GAPS
# CANN calls that make the host wait for the device
SYNC_CALLS = ("Synchronize", "StreamSync", "DeviceSync", "EventSync", "QueryEvent", "MemCopySync", "aclrtMemcpy")
# framework ops that read a device value on the host, so they wait for the device to get there
SYNC_OPS = (
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "aten::nonzero",
    "aten::equal",
    "aten::masked_select",
)
# a CANN call whose name holds this (any case) compiles: aclopCompile, aclopCompileAndExecute(V2), opCompile, graph
# compiles
COMPILE = "compile"
# torch's DataLoader wraps each __next__ in a range of this name
# ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")
DATALOADER = "enumerate(DataLoader)"
KINDS = ("op_compile", "host_api", "sync", "dataloader", "dispatch", "none")
_HOST_BOUND = "MindStudio practical cases, 'Host Bound issue classification'"
SOURCES = {
    "op_compile": "Ascend Extension for PyTorch migration guide, 'operator binary configuration' (set_compile_mode)",
    "host_api": _HOST_BOUND,
    "sync": _HOST_BOUND,
    "dataloader": "PyTorch Performance Tuning Guide, 'enable async data loading'",
    "dispatch": _HOST_BOUND,
    "none": None,
}
ADVICE = {
    "op_compile": "the host compiled operators online while the device waited: where shapes change from step to step, use the "
                  "precompiled binary operators (torch_npu.npu.set_compile_mode(jit_compile=False), with the binary operator "
                  "package installed) or keep shapes static; compiles in the first steps only are warm-up",
    "host_api": "the launching thread was inside another CANN call: look at that call (a collective, a long aclnn call) and "
                "move it off the critical path",
    "sync": "the host waited on the device: take synchronisations out of the step (.item(), .cpu(), blocking copies, "
            "stream syncs) or merge them into one",
    "dataloader": "the host was waiting for the next batch: more DataLoader workers, pin_memory=True, prefetching, lighter transforms",
    "dispatch": "the device waited for the framework to issue work (host bound): fewer and fused operators, "
                "TASK_QUEUE_ENABLE=2, CPU_AFFINITY_CONF=1 (core binding), graph mode",
    "none": "nothing recorded says why: no launch link and no host call across the gap",
}  # fmt: skip
_PAIRS = 8_000_000  # (point, call) pairs expanded at once: memory stays bounded when long calls span many points


def kind_of(name: str | None) -> str:
    """The kind of a host call named ``name`` (``level@api`` or an API name) across a gap: compile,
    sync or another CANN call; ``none`` for no call."""
    if name is None:
        return "none"
    if COMPILE in name.lower():
        return "op_compile"
    return "sync" if any(k in name for k in SYNC_CALLS) else "host_api"


def _covering_pairs(times: np.ndarray, start: np.ndarray, end: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Batches of (point, call) index pairs with start <= times[point] <= end, at most _PAIRS a batch
    (at least one call's pairs). Time and memory linear in the pairs."""
    if not len(times) or not len(start):
        return
    order = np.argsort(times, kind="stable")
    ts = times[order]
    lo = np.searchsorted(ts, start, "left")
    hi = np.searchsorted(ts, end, "right")
    counts = np.maximum(hi - lo, 0)
    calls = np.nonzero(counts)[0]
    cum = np.cumsum(counts[calls])
    begin = 0
    while begin < len(calls):
        stop = max(begin + 1, int(np.searchsorted(cum, (cum[begin - 1] if begin else 0) + _PAIRS, "right")))
        batch = calls[begin:stop]
        n = counts[batch]
        call_of = np.repeat(batch, n)
        pos = np.repeat(lo[batch], n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
        yield order[pos], call_of
        begin = stop


Score = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (points, calls) -> a score per pair


def best_covering(times: np.ndarray, start: np.ndarray, end: np.ndarray, score: Score) -> np.ndarray:
    """For each time, the index of the call covering it (start <= time <= end) with the highest
    ``score(points, calls)`` (the first call of equals), -1 where none covers it (a NaN bound covers
    nothing). Any one unit for the three."""
    best = np.full(len(times), -1, np.int64)
    best_score = np.full(len(times), -np.inf)
    for point, call in _covering_pairs(times, start, end):
        s = np.asarray(score(point, call), float)
        pick = np.lexsort((call, -s, point))  # per point: the highest score, then the earliest call
        point, call, s = point[pick], call[pick], s[pick]
        first = np.concatenate([[True], point[1:] != point[:-1]])
        point, call, s = point[first], call[first], s[first]
        better = (s > best_score[point]) | ((s == best_score[point]) & ((best[point] < 0) | (call < best[point])))
        best_score[point[better]] = s[better]
        best[point[better]] = call[better]
    return best


def innermost(times: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each time, the index of the shortest call covering it (the first of equals), -1 where none."""
    length = end - start
    return best_covering(times, start, end, lambda _p, c: -length[c])


def _ranges_ns(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each row's [start, end] in ns (a missing or negative duration: an instant)."""
    start = row_ns(t)
    dur = pc.fill_null(t["duration_us"], 0.0).to_numpy(zero_copy_only=False)
    return start, start + np.rint(np.where(np.isfinite(dur) & (dur > 0), dur, 0.0) * 1000.0).astype(np.int64)


def _col(t: pa.Table, name: str, type_: pa.DataType) -> pa.ChunkedArray | pa.Array:
    return t[name] if name in t.column_names else schemas.nulls(t.num_rows, type_)


def _ints(col: pa.ChunkedArray | pa.Array, missing: int = -1) -> np.ndarray:
    return pc.fill_null(col, missing).to_numpy(zero_copy_only=False).astype(np.int64)


class DeviceTasks:
    """One rank's device tasks that can end a gap (kernels and device copies): their [start, end] (ns) in
    order of start, and their name, connection id and issuing framework op, taken only where a gap asks
    (a sorted copy of every task's text held a string per task for as long as the rank's attribution)."""

    def __init__(self, rows: pa.Table, start_ns: np.ndarray, end_ns: np.ndarray) -> None:
        ordered = bool((start_ns[1:] >= start_ns[:-1]).all())  # the usual case: no copy among the kernels
        self.order = None if ordered else np.argsort(start_ns, kind="stable")  # None: in order of start already
        self.rows = rows
        self.start_ns = start_ns if ordered else start_ns[self.order]
        self.end_ns = end_ns if ordered else end_ns[self.order]

    def __len__(self) -> int:
        return len(self.start_ns)

    def take(self, column: str, at: np.ndarray) -> pa.Array | pa.ChunkedArray:
        """``column`` (``_DEVICE``'s) of the tasks at ``at``, positions in order of start."""
        return pc.take(self.rows[column], pa.array(at if self.order is None else self.order[at]))


def device_tasks(kernels: pa.Table, copies: pa.Table) -> DeviceTasks:
    """One rank's :class:`DeviceTasks`."""
    if copies.num_rows:
        copies = copies.filter(pc.fill_null(pc.equal(copies["side"], "device"), False))
    parts, starts, ends = [], [], []
    for t, name in ((kernels, "op_name"), (copies, "name")):
        if t.num_rows:
            start, end = _ranges_ns(t)
            starts.append(start)
            ends.append(end)
            parts.append(
                pa.table(
                    {
                        "name": _col(t, name, pa.string()),
                        "connection_id": _col(t, "connection_id", pa.int64()),
                        "launched_by": _col(t, "launched_by", pa.string()),
                    },
                    schema=_DEVICE,
                )
            )
    if not parts:
        return DeviceTasks(_DEVICE.empty_table(), np.zeros(0, np.int64), np.zeros(0, np.int64))
    return DeviceTasks(pa.concat_tables(parts), np.concatenate(starts), np.concatenate(ends))


_DEVICE = pa.schema([("name", pa.string()), ("connection_id", pa.int64()), ("launched_by", pa.string())])


class _Calls:
    """One rank's host calls of one source as ns ranges, with their labels and threads."""

    def __init__(self, table: pa.Table, labels: pa.Array | pa.ChunkedArray) -> None:
        self.start, self.end = _ranges_ns(table)
        self.labels = labels
        self.thread = _ints(_col(table, "thread_id", pa.int64()))

    def label(self, which: np.ndarray) -> pa.Array:
        found = which >= 0
        if not found.any():
            return schemas.nulls(len(which), pa.string())
        taken = pc.take(self.labels, pa.array(np.where(found, which, 0)))
        return taken if found.all() else pc.if_else(pa.array(found), taken, pa.nulls(len(which), pa.string()))


def _marks(labels: pa.Array | pa.ChunkedArray, test: Callable[[str], bool]) -> np.ndarray:
    """``test`` of each label, called once per distinct label."""
    hit = [n for n in pc.unique(labels).to_pylist() if n is not None and test(n)]
    return pc.fill_null(pc.is_in(labels, pa.array(hit, pa.string())), False).to_numpy(zero_copy_only=False)


def _by_start(calls: _Calls, idx: np.ndarray) -> np.ndarray:
    """The calls ``idx`` in order of start (a search's first of equals is then the earliest)."""
    return idx[np.argsort(calls.start[idx], kind="stable")]


def _on_thread(points: np.ndarray, point_thread: np.ndarray, calls: _Calls, idx: np.ndarray) -> np.ndarray:
    """For each point (ns) and its thread (-1: unknown), the longest of the calls ``idx`` of that
    thread covering it, as an index into the calls; -1 where none."""
    out = np.full(len(points), -1, np.int64)
    known = point_thread >= 0
    if not len(idx) or not known.any():
        return out
    # (thread, time) as one sortable key: the thread's code above the time's rank among all times (sorted
    # arrays and binary search: np.unique's inverse cost 0.4 s for 300,000 gaps)
    times = np.sort(np.concatenate([points[known], calls.start[idx], calls.end[idx]]))
    threads = np.sort(calls.thread[idx])
    threads = threads[np.r_[True, threads[1:] != threads[:-1]]]
    width = len(times) + 1
    p_code = np.searchsorted(threads, point_thread[known])
    c_code = np.searchsorted(threads, calls.thread[idx])
    no_call = (
        threads[np.minimum(p_code, len(threads) - 1)] != point_thread[known]
    )  # a thread with no call: a code no call has
    p_code = np.where(no_call, len(threads) + 1, p_code)
    p_key = p_code * width + np.searchsorted(times, points[known])
    s_key = c_code * width + np.searchsorted(times, calls.start[idx])
    e_key = c_code * width + np.searchsorted(times, calls.end[idx])
    length = (calls.end - calls.start)[idx]
    found = best_covering(p_key, s_key, e_key, lambda _p, c: length[c])
    out[known] = np.where(found >= 0, idx[np.maximum(found, 0)], -1)
    return out


class Attribution:
    """What the attribution of one rank's gaps reads, prepared once (the calls by thread and by kind, the
    launch call of each connection id), so every set of gaps of that rank costs only its own points.
    ``device``: the rank's :func:`device_tasks`; ``api``, ``host_ops``: its CANN calls and framework ops."""

    def __init__(self, device: DeviceTasks, api: pa.Table, host_ops: pa.Table) -> None:
        self.device = device
        self.dev_ns = device.start_ns
        self.cann = (
            _Calls(api, pc.binary_join_element_wise(pc.fill_null(api["level"], ""), api["name"], "@"))
            if api.num_rows
            else None
        )
        # the launch call of a connection id: of several CANN calls with it, the one starting last (the launch)
        self.launch_ids = self.launch_calls = None
        self.is_compile = self.sync_api = np.zeros(0, bool)
        if self.cann is not None:
            ids = _ints(_col(api, "connection_id", pa.int64()), -(2**62))
            has = np.flatnonzero(ids != -(2**62))
            if len(has):
                order = has[np.lexsort((self.cann.start[has], ids[has]))]
                self.launch_calls = order[np.r_[ids[order][1:] != ids[order][:-1], True]]
                self.launch_ids = pa.array(ids[self.launch_calls], pa.int64())
            self.is_compile = _marks(self.cann.labels, lambda s: COMPILE in s.lower())
            self.sync_api = _marks(self.cann.labels, lambda s: any(k in s for k in SYNC_CALLS))
            self.compiles = _by_start(self.cann, np.flatnonzero(self.is_compile))
        self.ops = self.loader = None
        sync_ops = None
        if host_ops.num_rows:
            named = pc.fill_null(host_ops["name"], "")
            self.ops = _Calls(host_ops, named)
            not_step = ~pc.starts_with(named, "ProfilerStep#").to_numpy(zero_copy_only=False)  # steps cover all
            sync_ops = _marks(self.ops.labels, lambda s: s in SYNC_OPS)
            self.loader = np.flatnonzero(
                pc.starts_with(self.ops.labels, DATALOADER).to_numpy(zero_copy_only=False) & not_step
            )
        sources = ((self.cann, self.sync_api), (self.ops, sync_ops))
        self.sync_calls = [
            (c, _by_start(c, np.flatnonzero(m))) for c, m in sources if c is not None and m is not None and m.any()
        ]

    def of(self, gap_s: np.ndarray, gap_e: np.ndarray) -> dict[str, pa.Array]:
        """For the gaps [start, end] (ns): cause, kind, the task ending each gap, the CANN call that launched
        it, its thread and the framework op that issued it (the module's docstring)."""
        n = len(gap_s)
        gap_s, gap_e = np.asarray(gap_s, np.int64), np.asarray(gap_e, np.int64)
        mid = gap_s + (gap_e - gap_s) // 2
        half = (gap_e - gap_s) / 2.0
        next_task, conn, launched_by = self._next_tasks(gap_e)
        cann, ops = self.cann, self.ops
        launch = np.full(n, -1, np.int64)
        if self.launch_ids is not None:
            found = pc.fill_null(pc.index_in(conn, value_set=self.launch_ids), -1)
            found = found.to_numpy(zero_copy_only=False).astype(np.int64)
            launch = np.where(found >= 0, self.launch_calls[np.maximum(found, 0)], -1)
        thread = np.where(launch >= 0, cann.thread[np.maximum(launch, 0)], -1) if cann is not None else launch
        # (1, 2) the launching thread busy in a CANN call: a compile, else another call that is no sync
        compiling = on_api = np.full(n, -1, np.int64)
        if cann is not None:
            compiling = _on_thread(mid, thread, cann, np.flatnonzero(self.is_compile))
            if (thread < 0).any() and self.is_compile.any():  # the launch call unknown: a compile on any thread
                idx = self.compiles
                length = (cann.end - cann.start)[idx]
                anywhere = best_covering(mid, cann.start[idx], cann.end[idx], lambda _p, c: length[c])
                compiling = np.where(thread < 0, np.where(anywhere >= 0, idx[np.maximum(anywhere, 0)], -1), compiling)
            on_api = _on_thread(mid, thread, cann, np.flatnonzero(~self.sync_api))
        # (3) a synchronising call overlapping at least half the gap (so across its middle), the one overlapping
        # most; of equal overlaps the CANN call, then the earliest to start
        sync_label = pa.nulls(n, pa.string())
        sync_overlap = np.full(n, -np.inf)
        for calls, idx in self.sync_calls:
            s_, e_ = calls.start[idx], calls.end[idx]
            found = best_covering(
                mid, s_, e_, lambda p, c, s_=s_, e_=e_: np.minimum(e_[c], gap_e[p]) - np.maximum(s_[c], gap_s[p])
            )
            ov = np.where(
                found >= 0,
                np.minimum(e_[np.maximum(found, 0)], gap_e) - np.maximum(s_[np.maximum(found, 0)], gap_s),
                -np.inf,
            )
            better = (found >= 0) & (ov > sync_overlap)
            sync_overlap = np.where(better, ov, sync_overlap)
            sync_label = pc.if_else(
                pa.array(better), calls.label(np.where(found >= 0, idx[np.maximum(found, 0)], -1)), sync_label
            )
        syncing = sync_overlap >= half
        # (4) inside a DataLoader fetch
        loading = np.full(n, -1, np.int64)
        if self.loader is not None and len(self.loader):
            found = innermost(mid, ops.start[self.loader], ops.end[self.loader])
            loading = np.where(found >= 0, self.loader[np.maximum(found, 0)], -1)
        dispatch = pc.is_valid(launched_by).to_numpy(zero_copy_only=False)
        code = np.select([compiling >= 0, on_api >= 0, syncing, loading >= 0, dispatch], [0, 1, 2, 3, 4], 5)
        on_thread = np.where(code == 0, compiling, np.where(code == 1, on_api, -1))
        none = pa.nulls(n, pa.string())
        cause = pc.coalesce(
            cann.label(on_thread) if cann is not None else none,
            pc.if_else(pa.array(code == 2), sync_label, none),
            ops.label(np.where(code == 3, loading, -1)) if ops is not None else none,
            pc.if_else(pa.array(code == 4), launched_by, none),
        )
        return {
            "cause": cause,
            "kind": _kinds(code),
            "next_task": next_task,
            "launch_call": cann.label(launch) if cann is not None else none,
            "launch_thread_id": pa.array(thread, pa.int64(), mask=thread < 0),
            "launched_by": launched_by,
        }

    def _next_tasks(self, gap_e: np.ndarray) -> tuple[pa.Array, pa.Array, pa.Array]:
        """Name, connection id and issuing framework op of the task ending each gap: the first device task
        starting at or after the gap's end (nulls where none does)."""
        n, device = len(gap_e), self.device
        nxt = np.searchsorted(self.dev_ns, gap_e, "left")
        has_next = nxt < len(self.dev_ns)
        cols = (("name", pa.string()), ("connection_id", pa.int64()), ("launched_by", pa.string()))
        if not len(device):
            return tuple(pa.nulls(n, t) for _, t in cols)
        if has_next.all():  # the usual case: a task after every gap
            return tuple(device.take(c, nxt) for c, _ in cols)
        take, mask = np.where(has_next, nxt, 0), pa.array(~has_next)
        return tuple(pc.if_else(mask, pa.nulls(n, t), device.take(c, take)) for c, t in cols)


def rank_attribution(ctx: RuleContext, rank: int | None) -> Attribution:
    """The :class:`Attribution` of one rank's tables in ``ctx``, prepared once for the idle-gap table and
    the rules alike."""
    return ctx.cached(
        ("attribution", rank),
        lambda: Attribution(
            device_tasks(ctx.for_rank("kernels", rank), ctx.for_rank("copies", rank)),
            ctx.for_rank("api_calls", rank),
            ctx.for_rank("host_ops", rank),
        ),
    )


def attribute(
    device: DeviceTasks, api: pa.Table, host_ops: pa.Table, gap_s: np.ndarray, gap_e: np.ndarray
) -> dict[str, pa.Array]:
    """:meth:`Attribution.of` the gaps [start, end] (ns) of one rank, for one set of gaps."""
    return Attribution(device, api, host_ops).of(gap_s, gap_e)


def _one(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _kinds(code: np.ndarray) -> pa.Array:
    """The kind names of ``code`` (indices into KINDS)."""
    return pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int8)), pa.array(KINDS)).cast(pa.string())


def idle_gaps(
    tables: dict[str, pa.Table], gaps: list[StepGaps], attribution: Callable[[int | None], Attribution] | None = None
) -> pa.Table:
    """The ``idle_gaps`` table: one row per device gap of each step (before its first task, between
    tasks, after its last), with its cause, kind and the launch path of the task that ends it.
    ``gaps``: each rank's gaps as the step breakdown found them (``step_breakdown.breakdown_and_gaps``);
    ``attribution``: each rank's :class:`Attribution` where one is kept (:func:`rank_attribution`)."""
    if attribution is None:
        ctx = RuleContext(tables)
        attribution = lambda rank: rank_attribution(ctx, rank)  # noqa: E731
    parts = []
    for g in gaps:
        n = len(g.step)
        if not n:
            continue
        placed = g.placed
        found = attribution(g.rank).of(g.start_ns[placed], g.end_ns[placed])
        cols = {}
        for (
            name,
            arr,
        ) in found.items():  # a gap with no place in time (a step recorded as a duration only): nothing said of it
            arr = _one(arr)
            if placed.all():  # every gap has its place (the usual case): the column as it was found
                cols[name] = arr
                continue
            full = pa.nulls(n, arr.type) if name != "kind" else pa.repeat(pa.scalar("none", pa.string()), n)
            cols[name] = pc.replace_with_mask(full, pa.array(placed), arr) if placed.any() else full
        start = pa.array(g.start_ns, pa.int64(), mask=~placed)
        parts.append(
            pa.table(
                {
                    "rank": pa.repeat(pa.scalar(g.rank, pa.int32()), n),
                    "step": pa.array(g.step, pa.int64(), mask=g.step == -1),
                    "place": pa.DictionaryArray.from_arrays(pa.array(g.where), pa.array(WHERE)).cast(pa.string()),
                    "start_ns": start,
                    "start_us": pa.array(g.start_ns / 1000.0, pa.float64(), mask=~placed),
                    "idle_us": pa.array(g.length_us, pa.float64()),
                    **cols,
                },
                schema=GAPS,
            )
        )
    if not parts:
        return GAPS.empty_table()
    return pa.concat_tables(parts)


def idle_causes(gaps: pa.Table) -> pa.Table:
    """The ``idle_causes`` table: ``idle_gaps`` summed per rank, step, cause and kind (the idle time
    and the number of gaps), largest first in each step."""
    if gaps.num_rows == 0:
        return SCHEMA.empty_table()
    t = gaps.select(["rank", "step", "cause", "kind", "idle_us"])
    t = t.group_by(["rank", "step", "cause", "kind"], use_threads=False).aggregate(
        [("idle_us", "sum"), ("idle_us", "count")]
    )
    out = pa.table(
        {
            "rank": t["rank"],
            "step": t["step"],
            "cause": t["cause"],
            "kind": t["kind"],
            "idle_us": t["idle_us_sum"],
            "count": t["idle_us_count"],
        },
        schema=SCHEMA,
    )
    return out.sort_by(
        [("rank", "ascending"), ("step", "ascending"), ("idle_us", "descending"), ("cause", "ascending")]
    )


def gap_causes(
    device: DeviceTasks, api: pa.Table, host_ops: pa.Table, gap_s_ns: np.ndarray, gap_e_ns: np.ndarray
) -> tuple[list, list]:
    """Cause and kind of each gap [start, end] (ns) on one rank (the attribution above), as lists."""
    found = attribute(device, api, host_ops, gap_s_ns, gap_e_ns)
    return found["cause"].to_pylist(), found["kind"].to_pylist()


def main_cause(
    device: DeviceTasks, api: pa.Table, host_ops: pa.Table, lo_us: float, hi_us: float
) -> tuple[str | None, str | None]:
    """Of one rank's device idle time inside [lo_us, hi_us] (the stretch's gaps between its
    ``device`` tasks (:func:`device_tasks`), ends included), the cause and kind holding the most,
    by the attribution above; (None, None) without idle time or a cause."""
    if hi_us <= lo_us:
        return None, None
    lo, hi = round(lo_us * 1000), round(hi_us * 1000)
    start, end = device.start_ns, device.end_ns
    keep = (end > lo) & (start < hi)
    busy_s, busy_e = merge(np.clip(start[keep], lo, hi), np.clip(end[keep], lo, hi))
    # the stretch's gaps: the complement of the busy segments inside [lo, hi]
    gap_s = np.concatenate([[lo], busy_e]).astype(np.int64)
    gap_e = np.concatenate([busy_s, [hi]]).astype(np.int64)
    ok = gap_e > gap_s
    gap_s, gap_e = gap_s[ok], gap_e[ok]
    if not len(gap_s):
        return None, None
    found = attribute(device, api, host_ops, gap_s, gap_e)
    t = pa.table({"cause": found["cause"], "kind": found["kind"], "idle": gap_e - gap_s})
    t = t.filter(pc.is_valid(t["cause"]))
    if t.num_rows == 0:
        return None, None
    by = t.group_by(["cause", "kind"], use_threads=False).aggregate([("idle", "sum")])
    by = by.sort_by([("idle_sum", "descending"), ("cause", "ascending")])
    return by["cause"][0].as_py(), by["kind"][0].as_py()


# said of kind "none" only where no CANN call at all was read (torch_npu's Level0, or a Level1+ export without its
# trace)
NO_CALLS = (
    " (no CANN call was read from this profile: torch_npu records them from profiler_level "
    "Level1, in trace_view.json or the .db)"
)


def top_causes(table: pa.Table, limit: int = 5, *, host_calls: bool = True) -> dict:
    """The whole profile's idle time by cause (every rank and step summed), largest first, and by
    kind; ``host_calls``: whether the profile records CANN calls (else the advice says so)."""
    if table.num_rows == 0:
        return {"idle_us": 0.0, "causes": [], "by_kind_us": {}, "advice": None, "source": None}
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
        ],
        "by_kind_us": by_kind,
        "advice": ADVICE.get(largest, "")
        + (NO_CALLS if largest == "none" and not host_calls else ""),  # the kind with the most idle time
        "source": SOURCES.get(largest),
    }
