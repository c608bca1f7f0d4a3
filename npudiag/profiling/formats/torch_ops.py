"""Framework (aten / torch) operators with the device time of the kernels each one launched.

From torch_npu's trace_view.json: ``cpu_op`` complete events (one per aten / torch op call, nested
on their thread) and the ``async_npu`` flows ``torch_to_npu``, whose start (``ph:"s"``) lies inside
the op that launched a kernel and whose end (``ph:"f"``) is that kernel's start on its stream.
From the .db export: PYTORCH_API (``startNs``, ``endNs``, ``globalTid``, ``connectionId``) with
CONNECTION_IDS (an op's connection ids) and TASK (``connectionId``): the same link.

Each kernel belongs to the innermost framework op (``aten::``, ``npu::`` ...) around its flow start
(the aclnn / CANN node calls torch_npu records inside those are passed over; a launch from its task
queue's worker is followed back to the op that enqueued it). Per op name: calls, host time
(inclusive), host self time (minus the ops nested directly inside), device time and kernels.
Everything is array arithmetic: nesting depth from the starts and ends sorted per thread, the
parent as the last op one level up that started before, self time from per-level cumulative sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.schemas import RANGES, TORCH_OPS


def _composite(keys: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """A sort key of (key, start): the key's rank in the high part, the start's offset below."""
    span = int(starts.max() - starts.min()) + 2 if len(starts) else 2
    _, rank = np.unique(keys, return_inverse=True)
    return rank.astype(np.int64) * span + (starts - (starts.min() if len(starts) else 0)) + 1


def _nesting(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(depth, parent index or -1) of each op, the ops of a thread taken as properly nested."""
    n = len(start)
    order = np.lexsort((-end, start, thread))
    t, s, e = thread[order], start[order], end[order]
    first = np.r_[0, np.flatnonzero(t[1:] != t[:-1]) + 1]
    grp = np.repeat(np.arange(len(first)), np.diff(np.r_[first, n]))
    before = np.arange(n) - first[grp]  # ops of the thread sorted before this one
    span = int(max(e.max(), s.max()) - min(s.min(), e.min())) + 2
    lo = min(s.min(), e.min())
    ends_sorted = np.sort(grp.astype(np.int64) * span + (e - lo))
    ended = np.searchsorted(ends_sorted, grp.astype(np.int64) * span + (s - lo), side="right") - first[grp]
    depth_sorted = np.maximum(before - ended, 0)
    # parent: the last op of the same thread one level up that starts at or before this one
    level = grp.astype(np.int64) * (depth_sorted.max() + 2) + depth_sorted
    key_sorted = level * span + (s - lo)
    idx = np.lexsort((s, level))
    pos = np.searchsorted(key_sorted[idx], (level - 1) * span + (s - lo), side="right") - 1
    parent_sorted = np.full(n, -1, np.int64)
    ok = (depth_sorted > 0) & (pos >= 0)
    cand = idx[np.maximum(pos, 0)]
    ok &= (level[cand] == level - 1) & (e[cand] >= e)
    parent_sorted[ok] = cand[ok]
    depth, parent = np.empty(n, np.int64), np.full(n, -1, np.int64)
    depth[order] = depth_sorted
    parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)
    return depth, parent


@dataclass
class Queue:
    """torch_npu's task queue: an op enqueues its work on its own thread (Enqueue), a worker thread
    dequeues it (Dequeue) and launches the kernels; both carry the same correlation id."""

    deq_thread: np.ndarray
    deq_start: np.ndarray
    deq_end: np.ndarray
    deq_corr: np.ndarray
    enq_thread: np.ndarray
    enq_start: np.ndarray
    enq_corr: np.ndarray

    def relay(self, thread: np.ndarray, ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Points inside a Dequeue moved to its Enqueue (thread, start); others unchanged."""
        if len(self.deq_start) == 0 or len(ns) == 0:
            return thread, ns
        i = _containing(self.deq_thread, self.deq_start, self.deq_end, thread, ns)
        hit = i >= 0
        corr = np.where(hit, self.deq_corr[np.maximum(i, 0)], -1)
        order = np.argsort(self.enq_corr, kind="stable")
        pos = np.searchsorted(self.enq_corr[order], corr)
        j = order[np.minimum(pos, len(order) - 1)] if len(order) else np.zeros(len(corr), np.int64)
        ok = hit & (len(order) > 0) & (self.enq_corr[j] == corr) if len(order) else np.zeros(len(corr), bool)
        return np.where(ok, self.enq_thread[j], thread), np.where(ok, self.enq_start[j], ns)


def _containing(thread: np.ndarray, start: np.ndarray, end: np.ndarray, t: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """For each point (t, ns), the interval of that thread that started last at or before it, when it
    still runs then (-1 otherwise); the intervals of a thread do not overlap."""
    comp = _composite(np.r_[thread, t], np.r_[start, ns])
    n = len(start)
    iv, pt = comp[:n], comp[n:]
    iv_order = np.argsort(iv, kind="stable")
    pos = np.searchsorted(iv[iv_order], pt, side="right") - 1
    cand = np.where(pos >= 0, iv_order[np.maximum(pos, 0)], -1)
    ok = (cand >= 0) & (thread[np.maximum(cand, 0)] == t) & (end[np.maximum(cand, 0)] >= ns)
    return np.where(ok, cand, -1)


@dataclass(frozen=True)
class Launches:
    """Framework op calls nested per thread, and the op each kernel launch belongs to: the innermost
    framework op around its launch point (``owner``, -1 where none), and the outermost framework op of
    the unbroken chain of framework ops above it (``outermost``): the op the user's code called
    (aten::conv2d, not the aten::_convolution inside it)."""

    dur: np.ndarray  # each op's host time, ns
    parent: np.ndarray
    owner: np.ndarray  # per launch
    outermost: np.ndarray  # per launch


def op_launches(
    names: list[str],
    thread: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    launch_thread: np.ndarray,
    launch_ns: np.ndarray,
    owners: np.ndarray | None = None,
    queue: Queue | None = None,
) -> Launches:
    """The ops (``thread`` codes, ``start`` / ``end`` ns) nested, and the op of each launch (the thread
    and time of each kernel's flow start); ``owners`` gives each kernel's op directly (the .db links
    them) instead of the launch points. With a ``queue``, work launched from a worker's Dequeue belongs
    to the op around the matching Enqueue."""
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    thread = np.asarray(thread, np.int64)
    dur = (end - start).astype(float)
    n_launch = len(owners) if owners is not None else len(launch_ns)
    if len(start) == 0:
        none = np.full(n_launch, -1, np.int64)
        return Launches(dur, np.zeros(0, np.int64), none, none)
    start, end, launch_ns, queue = _ranked(start, end, np.asarray(launch_ns, np.int64), queue)
    _depth, parent = _nesting(thread, start, end)
    framework = pc.match_substring(pa.array(names, pa.string()), "::").to_numpy(zero_copy_only=False)
    lt, lns = np.asarray(launch_thread, np.int64), launch_ns
    if (
        owners is not None
    ):  # the op's own start stands for its launch point (-1: the launch point given); inside a Dequeue it is relayed
        owners = np.asarray(owners, np.int64)
        given = owners >= 0
        lt = np.where(given, thread[np.maximum(owners, 0)], lt if len(lt) else -1)
        lns = np.where(given, start[np.maximum(owners, 0)], lns if len(lns) else 0)
    rt, rns = queue.relay(lt, lns) if queue is not None else (lt, lns)
    owner = _owner(thread, start, end, parent, rt, rns)
    if owners is not None:
        moved = (rt != lt) | (rns != lns)
        owner = np.where(moved | ~given, owner, owners)
    owner = _framework_op(owner, parent, framework)
    return Launches(dur, parent, owner, _outermost(owner, parent, framework))


def torch_op_table(
    names: list[str],
    thread: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    launch_thread: np.ndarray,
    launch_ns: np.ndarray,
    kernel_us: np.ndarray,
    rank: int | None,
    owners: np.ndarray | None = None,
    queue: Queue | None = None,
) -> pa.Table:
    """TORCH_OPS from op calls and launches (see :func:`op_launches`) and each launched kernel's duration."""
    if len(start) == 0:
        return TORCH_OPS.empty_table()
    return op_table(
        names, op_launches(names, thread, start, end, launch_thread, launch_ns, owners, queue), kernel_us, rank
    )


def op_table(names: list[str], launches: Launches, kernel_us: np.ndarray, rank: int | None) -> pa.Table:
    """TORCH_OPS: per op name, calls, host time (inclusive and self) and the device time and count of
    the kernels launched from inside the op itself (``launches.owner``)."""
    dur, parent = launches.dur, launches.parent
    if len(dur) == 0:
        return TORCH_OPS.empty_table()
    child = np.bincount(parent[parent >= 0], weights=dur[parent >= 0], minlength=len(dur))
    self_ns = np.maximum(dur - child, 0.0)
    device = np.zeros(len(dur))
    kernels = np.zeros(len(dur), np.int64)
    if len(kernel_us):
        owner = launches.owner
        hit = owner >= 0
        device = np.bincount(owner[hit], weights=np.asarray(kernel_us, float)[hit], minlength=len(dur))
        kernels = np.bincount(owner[hit], minlength=len(dur))
    t = pa.table(
        {
            "name": pa.array(names, pa.string()),
            "dur": dur / 1000.0,
            "self": self_ns / 1000.0,
            "dev": device,
            "k": kernels,
        }
    )
    g = t.group_by("name", use_threads=False).aggregate(
        [("dur", "count"), ("dur", "sum"), ("self", "sum"), ("dev", "sum"), ("k", "sum")]
    )
    out = pa.table(
        {
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), g.num_rows),
            "name": g["name"],
            "calls": g["dur_count"],
            "host_total_us": g["dur_sum"],
            "host_self_us": g["self_sum"],
            "device_us": g["dev_sum"],
            "kernels": g["k_sum"],
        },
        schema=TORCH_OPS,
    )
    return out.sort_by([("device_us", "descending"), ("name", "ascending")])


def launched_by(names: list[str], launches: Launches) -> pa.Array:
    """Per launch, the name of the framework op the user's code called that issued it (null where none)."""
    idx = launches.outermost
    labels = pa.array(names, pa.string())
    if len(labels) == 0:
        return pa.nulls(len(idx), pa.string())
    taken = labels.take(pa.array(np.maximum(idx, 0)))
    return pc.if_else(pa.array(idx >= 0), taken, pa.nulls(len(idx), pa.string()))


def _ranked(start: np.ndarray, end: np.ndarray, launch_ns: np.ndarray, queue: Queue | None):
    """The times as their ranks among all times (order and equality kept), so the composite (group,
    time) keys built from them stay far inside int64 whatever the timestamps are; the queue's too."""
    q = queue
    parts = [start, end, launch_ns] + ([q.deq_start, q.deq_end, q.enq_start] if q is not None else [])
    times = np.unique(np.concatenate(parts))
    start, end, launch_ns = (np.searchsorted(times, x) for x in (start, end, launch_ns))
    if q is not None:
        q = Queue(
            q.deq_thread,
            np.searchsorted(times, q.deq_start),
            np.searchsorted(times, q.deq_end),
            q.deq_corr,
            q.enq_thread,
            np.searchsorted(times, q.enq_start),
            q.enq_corr,
        )
    return start, end, launch_ns, q


def _framework_op(owner: np.ndarray, parent: np.ndarray, framework: np.ndarray) -> np.ndarray:
    """Each kernel's op moved up to the nearest enclosing framework op (a name with ``::``: aten::mm,
    npu::npu_rms_norm, c10d::allreduce_), past the aclnn / CANN node calls nested inside it; an op with
    no framework op around it keeps the kernel."""
    cur = owner.copy()
    for _ in range(256):
        climb = (cur >= 0) & ~framework[np.maximum(cur, 0)]
        if not climb.any():
            break
        cur = np.where(climb, parent[np.maximum(cur, 0)], cur)
    return np.where(cur >= 0, cur, owner)


def _outermost(owner: np.ndarray, parent: np.ndarray, framework: np.ndarray) -> np.ndarray:
    """Each launch's framework op moved up while its parent is a framework op too: the outermost op of
    the chain (aten::conv2d > aten::convolution > aten::_convolution), below the first op that is not
    one (a module, a Python function: the user's code). -1 stays -1, and so does a launch whose op is
    no framework op."""
    cur = np.where((owner >= 0) & framework[np.maximum(owner, 0)], owner, -1)
    for _ in range(256):  # the nesting depth bounds the climb
        up = parent[np.maximum(cur, 0)]
        climb = (cur >= 0) & (up >= 0) & framework[np.maximum(up, 0)]
        if not climb.any():
            break
        cur = np.where(climb, up, cur)
    return cur


def _owner(thread, start, end, parent, lt, lts) -> np.ndarray:
    """For each launch (thread, time), the innermost op of that thread around it; -1 when none."""
    comp = _composite(np.r_[thread, lt], np.r_[start, lts])
    n = len(start)
    op_comp, launch_comp = comp[:n], comp[n:]
    op_order = np.lexsort((-end, op_comp))  # at one start, the outer op first: the inner one is found
    pos = np.searchsorted(op_comp[op_order], launch_comp, side="right") - 1
    cand = np.where(pos >= 0, op_order[np.maximum(pos, 0)], -1)
    ok = cand >= 0
    ok[ok] = thread[cand[ok]] == lt[ok]
    cand = np.where(ok, cand, -1)
    for _ in range(256):  # climb to the op still running at the launch (the depth bounds the loop)
        out = (cand >= 0) & (end[np.maximum(cand, 0)] < lts)
        if not out.any():
            break
        cand = np.where(out, parent[np.maximum(cand, 0)], cand)
    return cand


Points = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # connection ids, threads, ns, device us


def from_db(
    api: pa.Table,
    conn: pa.Table,
    task: pa.Table,
    names: dict[int, str],
    rank: int | None,
    queue: Queue | None = None,
    launch_points: Points | None = None,
    comm: tuple[pa.Table, Points | None] | None = None,
) -> tuple[pa.Table, np.ndarray, pa.Array]:
    """TORCH_OPS from the .db's PYTORCH_API rows of type op (startNs, endNs, globalTid, connectionId,
    name id), CONNECTION_IDS (an op's id -> its connectionIds) and TASK (startNs, endNs, connectionId);
    and the framework op that launched the tasks of each connection id (the ids, the op names).
    ``launch_points`` place the launches of tasks no op links to (their CANN launch call; copies): the
    op around the point, through the ``queue`` where the point lies in a Dequeue. ``comm``: the
    communication ops (tasks and launch points) whose launching op is wanted too (not counted in the
    ops' device time)."""
    if api.num_rows == 0:
        return TORCH_OPS.empty_table(), np.zeros(0, np.int64), pa.array([], pa.string())
    start, end, thread = ns_of(api["startNs"]), ns_of(api["endNs"]), ns_of(api["globalTid"])
    label = [names.get(i, str(i)) for i in api["name"].to_pylist()]
    owners, lt, lns, k_us, conn_ids = _db_launch_rows(api, conn, task, launch_points)
    counted = len(owners)
    if comm is not None:
        parts = _db_launch_rows(api, conn, *comm)
        owners, lt, lns, k_us, conn_ids = (
            np.concatenate([a, b]) for a, b in zip((owners, lt, lns, k_us, conn_ids), parts)
        )
    launches = op_launches(label, thread, start, end, lt, lns, owners=owners, queue=queue)
    mine = Launches(launches.dur, launches.parent, launches.owner[:counted], launches.outermost[:counted])
    return op_table(label, mine, k_us[:counted], rank), conn_ids, launched_by(label, launches)


def _db_launch_rows(api: pa.Table, conn: pa.Table, task: pa.Table, points: Points | None) -> tuple[np.ndarray, ...]:
    """(owner op or -1, launch thread, launch ns, device us, connection id) of each task an op links to
    (CONNECTION_IDS), then of each other task placed by ``points``."""
    owners, k_us, conn_ids = db_launches(api, conn, task)
    lt = lns = np.full(len(owners), -1, np.int64)
    if points is not None:  # the tasks no op links to, launched where their CANN call ran
        p_conn, p_thread, p_ns, p_us = points
        extra = ~np.isin(p_conn, conn_ids)
        owners = np.concatenate([owners, np.full(int(extra.sum()), -1, np.int64)])
        lt, lns = np.concatenate([lt, p_thread[extra]]), np.concatenate([lns, p_ns[extra]])
        k_us, conn_ids = np.concatenate([k_us, p_us[extra]]), np.concatenate([conn_ids, p_conn[extra]])
    return owners, lt, lns, np.asarray(k_us, float), np.asarray(conn_ids, np.int64)


def ns_of(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pc.cast(col, pa.int64()).to_numpy(zero_copy_only=False)


def db_launches(api: pa.Table, conn: pa.Table, task: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each task an op of ``api`` launched (PYTORCH_API -> CONNECTION_IDS -> TASK connectionId): the
    op's row index, the task's device time, us, and its connection id."""
    op_index = pa.table({"id": pc.cast(api["connectionId"], pa.int64()), "op": pa.array(np.arange(api.num_rows))})
    links = pa.table({"id": pc.cast(conn["id"], pa.int64()), "connectionId": pc.cast(conn["connectionId"], pa.int64())})
    links = links.join(op_index, "id", join_type="inner")
    t = pa.table(
        {
            "connectionId": pc.cast(task["connectionId"], pa.int64()),
            "startNs": ns_of(task["startNs"]),
            "endNs": ns_of(task["endNs"]),
        }
    )
    tasks = t.join(links.select(["connectionId", "op"]), "connectionId", join_type="inner")
    us = (tasks["endNs"].to_numpy() - tasks["startNs"].to_numpy()) / 1000.0
    return tasks["op"].to_numpy(), us, tasks["connectionId"].to_numpy()


MODULE_PREFIX = "nn.Module: "  # torch_npu's python_function name of a module's forward (with_modules / with_stack)
PATH_DEPTH = 32  # a path names at most this many enclosing ranges; deeper ones show "…" for the rest


def range_table(
    source: str,
    kind: str,
    names: list[str],
    thread: np.ndarray,
    thread_ids: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    launch_thread: np.ndarray,
    launch_ns: np.ndarray,
    kernel_us: np.ndarray,
    rank: int | None,
    queue: Queue | None = None,
) -> pa.Table:
    """RANGES from host time ranges of one kind (``thread`` codes, ``thread_ids`` their ids, exact ns)
    and kernel launches (thread code and ns of each kernel's launch, its device time). A range holds
    the kernels launched on its thread while it ran (through a ``queue``'s Dequeue, the Enqueue that
    handed the work over counts), so nested ranges are counted in; the ranges of a thread nest, and
    each row carries its depth and path (the enclosing ranges' names, outermost first)."""
    n = len(start)
    if n == 0:
        return RANGES.empty_table()
    start, end, thread = np.asarray(start, np.int64), np.asarray(end, np.int64), np.asarray(thread, np.int64)
    launch_thread, launch_ns = np.asarray(launch_thread, np.int64), np.asarray(launch_ns, np.int64)
    rs, re_, rl, q = _ranked(start, end, launch_ns, queue)
    depth, parent = _nesting(thread, rs, re_)
    device = np.zeros(n)
    kernels = np.zeros(n, np.int64)
    if len(kernel_us):
        lt, lns = q.relay(launch_thread, rl) if q is not None else (launch_thread, rl)
        keys = _composite(np.r_[thread, thread, lt], np.r_[rs, re_, lns])
        k_start, k_end, k_launch = keys[:n], keys[n : 2 * n], keys[2 * n :]
        order = np.argsort(k_launch, kind="stable")
        cum = np.r_[0.0, np.cumsum(np.asarray(kernel_us, float)[order])]
        lo = np.searchsorted(k_launch[order], k_start, side="left")
        hi = np.searchsorted(k_launch[order], k_end, side="right")
        kernels, device = hi - lo, cum[hi] - cum[lo]
    return pa.table(
        {
            "source": pa.repeat(pa.scalar(source, pa.string()), n),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
            "kind": pa.repeat(pa.scalar(kind, pa.string()), n),
            "name": pa.array(names, pa.string()),
            "path": _paths(pa.array(names, pa.string()), depth, parent, thread, rs),
            "depth": pa.array(depth, pa.int32()),
            "start_us": pa.array(start / 1000.0, pa.float64()),
            "start_ns": pa.array(start, pa.int64()),
            "duration_us": pa.array((end - start) / 1000.0, pa.float64()),
            "thread_id": pa.array(thread_ids, pa.int64()),
            "kernels": pa.array(kernels, pa.int64()),
            "device_us": pa.array(device, pa.float64()),
        },
        schema=RANGES,
    ).sort_by([("start_ns", "ascending"), ("depth", "ascending")])


def _paths(label: pa.Array, depth: np.ndarray, parent: np.ndarray, thread: np.ndarray, start: np.ndarray) -> pa.Array:
    """Each range's enclosing names and its own, "/"-joined, level by level down to PATH_DEPTH; a deeper
    range hangs "…" and its name under its enclosing range at the last level (bounded work and text
    whatever the nesting)."""
    n = len(label)
    path = label
    for d in range(1, min(int(depth.max()), PATH_DEPTH - 1) + 1):  # a level's paths from its parents' (one level up)
        at = np.flatnonzero((depth == d) & (parent >= 0))
        if len(at):
            joined = pc.binary_join_element_wise(path.take(pa.array(parent[at])), label.take(pa.array(at)), "/")
            path = pc.replace_with_mask(path, pa.array(np.isin(np.arange(n), at)), joined)
    deep = np.flatnonzero(depth >= PATH_DEPTH)
    last = np.flatnonzero(depth == PATH_DEPTH - 1)
    if len(deep) and len(last):  # the enclosing range at the last level: the last one of the thread started before
        keys = _composite(np.r_[thread[last], thread[deep]], np.r_[start[last], start[deep]])
        k_last, k_deep = keys[: len(last)], keys[len(last) :]
        order = np.argsort(k_last, kind="stable")
        pos = np.maximum(np.searchsorted(k_last[order], k_deep, side="right") - 1, 0)
        above = path.take(pa.array(last[order][pos]))
        joined = pc.binary_join_element_wise(above, pa.array(["…"] * len(deep)), label.take(pa.array(deep)), "/")
        path = pc.replace_with_mask(path, pa.array(np.isin(np.arange(n), deep)), joined)
    return path
