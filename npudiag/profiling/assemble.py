"""Pure functions that turn what one unit's readers returned into its canonical tables.

Readers return each file's rows; these functions apply the one task model (:mod:`npudiag.profiling.tasks`)
to them, join what crosses files (a step window from one file placing the tasks of another, a
communication op naming its sub-tasks) and merge step rows that several files describe. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling import tasks


@dataclass
class SplitTasks:
    """A source's device tasks after the task model: the tables each class goes to."""

    kernels: pa.Table  # compute + communication op rows
    device_copies: pa.Table  # COPIES schema, side=device
    comm_tasks: pa.Table  # COMM_TASKS schema (sub-tasks seen on the device timeline)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # sync / other: task type -> count
    unknown_types: list[str] = field(default_factory=list)


def hccl_stream_mask(table: pa.Table, streams: set[int]) -> np.ndarray | None:
    if not streams or table.num_rows == 0:
        return None
    return pc.fill_null(pc.is_in(table["stream_id"], pa.array(sorted(streams), pa.int64())), False).to_numpy(
        zero_copy_only=False
    )


def split_tasks(table: pa.Table, hccl_streams: set[int] | None = None) -> SplitTasks:
    """Classify every row of a device-task table (kernels schema, perhaps with connection_id /
    size_bytes / direction / launch_ns) and send each class to its table."""
    if table.num_rows == 0:
        return SplitTasks(table, schemas.empty("copies"), schemas.empty("comm_tasks"))
    classes, unknown = tasks.classify(
        table["task_type"], table["op_name"], hccl_stream_mask(table, hccl_streams or set())
    )
    known = table["task_class"] if "task_class" in table.column_names else None
    if known is not None and known.null_count < table.num_rows:  # a reader that knew (comm op rows) wins
        classes = pc.coalesce(known, classes)
    table = _set(table, "task_class", classes)
    kernels = _rows(table, pc.is_in(classes, pa.array(list(tasks.KERNEL_CLASSES))))
    copies = device_copies(_rows(table, pc.equal(classes, tasks.COPY)))
    sub = comm_tasks_from_hardware(_rows(table, pc.equal(classes, tasks.COMM_TASK)))
    return SplitTasks(kernels, copies, sub, tasks.counts(classes, table["task_type"]), unknown)


def _rows(table: pa.Table, mask) -> pa.Table:
    """``table.filter(mask)`` (``mask`` has no nulls), without copying a wide table when the mask
    keeps every row or none (a kernel CSV is all kernels)."""
    if pc.all(mask).as_py():
        return table
    if not pc.any(mask).as_py():
        return table.slice(0, 0)
    return table.filter(mask)


def _set(table: pa.Table, name: str, values) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.schema.get_field_index(name), name, values)
    return table.append_column(name, values)


def _col(table: pa.Table, name: str, type_: pa.DataType) -> pa.ChunkedArray | pa.Array:
    return table[name] if name in table.column_names else pa.nulls(table.num_rows, type_)


def device_copies(t: pa.Table) -> pa.Table:
    """Copy-class device tasks as ``copies`` rows (size and direction where the source has them)."""
    n = t.num_rows
    out = pa.table(
        {
            "source": t["source"],
            "rank": t["rank"],
            "side": pa.repeat(pa.scalar("device"), n),
            "name": t["op_name"],
            "direction": pc.fill_null(_col(t, "direction", pa.string()), "unknown"),
            "size_bytes": _col(t, "size_bytes", pa.int64()),
            "start_us": t["start_us"],
            "start_ns": t["start_ns"],
            "duration_us": t["duration_us"],
            "stream_id": t["stream_id"],
            "mode": pa.repeat(pa.scalar("unknown"), n),
            "connection_id": _col(t, "connection_id", pa.int64()),
            "launched_by": _col(t, "launched_by", pa.string()),
        }
    )
    return schemas.conform(out, schemas.COPIES)


def comm_tasks_from_hardware(t: pa.Table) -> pa.Table:
    """HCCL sub-tasks seen only as device tasks (no plane data): type, time and stream, no ranks."""
    n = t.num_rows
    out = pa.table(
        {
            "source": pa.repeat(pa.scalar("hardware"), n),
            "rank": t["rank"],
            "task_type": t["task_type"],
            "start_us": t["start_us"],
            "start_ns": t["start_ns"],
            "duration_us": t["duration_us"],
            "stream_id": t["stream_id"],
            "task_id": t["task_id"],
            "size_bytes": _col(t, "size_bytes", pa.int64()),
        }
    )
    return schemas.conform(out, schemas.COMM_TASKS)


def name_comm_tasks(comm_tasks: pa.Table, kernels: pa.Table) -> pa.Table:
    """Give each sub-task without an op the communication op whose time range holds its start."""
    if comm_tasks.num_rows == 0 or comm_tasks["op_name"].null_count == 0:
        return comm_tasks
    ops = (
        kernels.filter(pc.fill_null(pc.equal(kernels["task_class"], tasks.COMMUNICATION), False))
        if kernels.num_rows
        else kernels
    )
    ops = ops.filter(pc.is_valid(ops["start_ns"])) if ops.num_rows else ops
    if ops.num_rows == 0:
        return comm_tasks
    ops = ops.sort_by("start_ns")
    s = ops["start_ns"].to_numpy()
    e = s + np.round(pc.fill_null(ops["duration_us"], 0.0).to_numpy() * 1000).astype(np.int64)
    t = pc.fill_null(comm_tasks["start_ns"], -(2**62)).to_numpy()
    i = np.searchsorted(s, t, side="right") - 1
    inside = (i >= 0) & (t <= e[np.maximum(i, 0)])
    found = ops["op_name"].take(pa.array(np.maximum(i, 0), pa.int64(), mask=~inside))  # null where no op holds it
    return _set(comm_tasks, "op_name", pc.coalesce(comm_tasks["op_name"], found))


LAUNCH_COLUMNS = (("connection_id", pa.int64()), ("launched_by", pa.string()), ("launch_ns", pa.int64()))
# a CSV's start of a communication op may differ from its trace event's by this much (a rounding: .563 vs .564 µs)
COMM_START_SLACK_NS = 1000


def launch_from_timeline(kernels: pa.Table, timeline: pa.Table, comm_ops: pa.Table | None = None) -> pa.Table:
    """Kernel CSV rows (kernel_details, op_summary) with how each was launched, taken from the device
    timeline of the same run (the trace): the task with the same exact start and task id (a CSV without
    task ids: the same name) gives its connection id (the host call with that id launched it), the
    framework op that issued it and the launch time; a communication op, the timeline's op of that name
    starting within a microsecond. Where the CSV already says, the CSV wins; a task the timeline
    repeats: its first row."""
    if kernels.num_rows == 0:
        return kernels
    pos = np.full(kernels.num_rows, -1, np.int64)
    sources = [t for t in (timeline, comm_ops) if t is not None and t.num_rows]
    if not sources:
        return kernels
    other = _launch_rows(sources)
    for keys in (["start_ns", "task_id"], ["start_ns", "op_name"]):
        if all(k in other.column_names and k in kernels.column_names for k in keys) and (pos < 0).any():
            _match(kernels, other, keys, pos)
    if comm_ops is not None and comm_ops.num_rows and "task_class" in kernels.column_names:
        _match_comm(kernels, comm_ops, pos, timeline.num_rows if timeline is not None and len(sources) > 1 else 0)
    return _with_launches(kernels, other, pos) if (pos >= 0).any() else kernels


def _with_launches(kernels: pa.Table, other: pa.Table, pos: np.ndarray) -> pa.Table:
    """``kernels`` with the launch columns of ``other``'s row ``pos`` (-1: none matched); a value the kernel
    table already has is kept."""
    found = pa.array(pos >= 0)
    take = pa.array(np.maximum(pos, 0))
    for name, type_ in LAUNCH_COLUMNS:
        if name not in other.column_names:
            continue
        values = pc.if_else(found, pc.take(other[name], take), pa.nulls(kernels.num_rows, type_))
        mine = kernels[name] if name in kernels.column_names else None
        kernels = _set(kernels, name, values if mine is None else pc.coalesce(mine, values))
    return kernels


def _launch_rows(sources: list[pa.Table]) -> pa.Table:
    """The timeline's tasks and communication ops as one table of the columns a match reads and fills."""
    if len(sources) == 1:
        return sources[0]
    wanted = ("start_ns", "task_id", "op_name", *(n for n, _ in LAUNCH_COLUMNS))
    return schemas.concat([t.select([c for c in wanted if c in t.column_names]) for t in sources])


def _match(kernels: pa.Table, other: pa.Table, keys: list[str], pos: np.ndarray) -> None:
    """``pos`` of each kernel row not matched yet: the first row of ``other`` with equal ``keys`` (no null).
    Only the rows an earlier match left are joined, against the rows of ``other`` that share their first key."""
    todo = np.flatnonzero(pos < 0)
    k = kernels.select(keys)
    valid = pc.is_valid(other[keys[0]])
    if len(todo) < kernels.num_rows:
        k = k.take(pa.array(todo))
        valid = pc.is_in(other[keys[0]], value_set=pc.unique(k[keys[0]]).drop_null())
    k = k.append_column("k_row", pa.array(todo))
    for name in keys[1:]:
        valid = pc.and_(valid, pc.is_valid(other[name]))
    t = other.select(keys).append_column("o_row", pa.array(np.arange(other.num_rows))).filter(valid)
    t = t.group_by(keys, use_threads=False).aggregate([("o_row", "min")])
    j = k.join(t, keys, join_type="inner")
    if j.num_rows:
        pos[j["k_row"].to_numpy()] = j["o_row_min"].to_numpy()


def _match_comm(kernels: pa.Table, comm: pa.Table, pos: np.ndarray, offset: int) -> None:
    """Communication kernels not matched yet: the op of the same name in ``comm`` (rows from ``offset`` in
    the concatenated table) whose start is within COMM_START_SLACK_NS of theirs, the nearest."""
    is_comm = pc.fill_null(pc.equal(kernels["task_class"], "communication"), False).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(is_comm & (pos < 0))
    if not len(rows):
        return
    k = pa.table(
        {
            "op_name": kernels["op_name"].take(pa.array(rows)),
            "k_row": rows,
            "k_ns": pc.fill_null(kernels["start_ns"].take(pa.array(rows)), 0),
        }
    )
    c = pa.table(
        {
            "op_name": comm["op_name"],
            "o_row": np.arange(comm.num_rows) + offset,
            "o_ns": pc.fill_null(comm["start_ns"], 0),
        }
    )
    j = k.join(c, "op_name", join_type="inner")
    if not j.num_rows:
        return
    gap = np.abs(j["k_ns"].to_numpy() - j["o_ns"].to_numpy())
    j = (
        j.append_column("gap", pa.array(gap))
        .filter(pa.array(gap <= COMM_START_SLACK_NS))
        .sort_by([("k_row", "ascending"), ("gap", "ascending")])
    )
    if j.num_rows:
        k_row, o_row = j["k_row"].to_numpy(), j["o_row"].to_numpy()
        first = np.r_[True, k_row[1:] != k_row[:-1]]
        pos[k_row[first]] = o_row[first]


def assign_steps_by_time(kernels: pa.Table, steps: pa.Table, launch_ns: pa.Array | None = None) -> pa.Table:
    """Kernels without a Step Id take the step whose [start, end] range (from the steps table)
    holds their launch time (the host call that issued them) or, unknown that, their start.
    Kernels outside every range keep a null step."""
    if kernels.num_rows == 0 or steps.num_rows == 0 or kernels["step"].null_count == 0:
        return kernels
    st = steps.filter(
        pc.and_(pc.and_(pc.is_valid(steps["start_us"]), pc.is_valid(steps["end_us"])), pc.is_valid(steps["step"]))
    )
    if st.num_rows == 0:
        return kernels
    st = st.sort_by("start_us")
    lo = np.round(st["start_us"].to_numpy() * 1000).astype(np.int64)
    hi = np.round(st["end_us"].to_numpy() * 1000).astype(np.int64)
    ids = st["step"].to_numpy(zero_copy_only=False)
    when = kernels["start_ns"]
    if launch_ns is not None:
        when = pc.coalesce(launch_ns, when)
    t = pc.fill_null(when, -(2**62)).to_numpy()
    i = np.searchsorted(lo, t, side="right") - 1
    inside = (i >= 0) & (t <= hi[np.maximum(i, 0)])
    by_time = pa.array(np.where(inside, ids[np.maximum(i, 0)], 0), pa.int64(), mask=~inside)
    return _set(kernels, "step", pc.coalesce(kernels["step"], by_time))


def merge_steps(parts: list[pa.Table]) -> pa.Table:
    """One row per step from several files that describe the same steps (step_trace_time.csv's
    phases, STEP_TIME's start and end, a trace's ranges): per column, the first file that says it."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schemas.empty("steps")
    if (
        len(parts) == 1
        and parts[0]["step"].null_count == 0
        and pc.count_distinct(parts[0]["step"]).as_py() == parts[0].num_rows
    ):
        return parts[0]
    t = pa.concat_tables([schemas.conform(p, schemas.STEPS) for p in parts])
    valued = pc.is_valid(t["step"])
    keyed, loose = t.filter(valued), t.filter(pc.invert(valued))
    others = [c for c in t.column_names if c != "step"]
    # per step and column the first value any file gives, files in order (an ordered group-by: "first"
    # skips nulls); rows without a step stay as they are, after the steps
    g = keyed.group_by("step", use_threads=False).aggregate([(c, "first") for c in others])
    merged = pa.table({c: (g["step"] if c == "step" else g[f"{c}_first"]) for c in t.column_names}).sort_by("step")
    return schemas.conform(pa.concat_tables([merged.cast(t.schema), loose]), schemas.STEPS)


def duplicate_steps(parts: list[pa.Table]) -> list[int]:
    """Step ids that one file lists more than once (a duplicated row the merge keeps once)."""
    dup: set[int] = set()
    for p in parts:
        if p.num_rows < 2:
            continue
        g = p.group_by("step", use_threads=False).aggregate([("step", "count")])
        dup |= {s for s, c in zip(g["step"].to_pylist(), g["step_count"].to_pylist()) if c > 1 and s is not None}
    return sorted(dup)


MAX_DURATION_US = 1e12  # 11.6 days: no device task or host call is longer


def timing_problems(table: pa.Table) -> np.ndarray:
    """Rows whose start or duration cannot be placed on a timeline: missing, not finite, negative
    duration, or beyond any clock. They are left out of every table (with a warning), so no sum,
    span or union is computed from them."""
    if table.num_rows == 0:
        return np.zeros(0, bool)
    start = pc.fill_null(pc.cast(table["start_us"], pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    dur = pc.fill_null(pc.cast(table["duration_us"], pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(start) | ~np.isfinite(dur) | (dur < 0) | (dur > MAX_DURATION_US) | (np.abs(start) > 1e17)
    if "start_ns" in table.column_names:
        bad |= pc.is_null(table["start_ns"]).to_numpy(zero_copy_only=False) & (np.abs(np.nan_to_num(start)) > 9e15)
    return bad


def drop_bad_timing(table: pa.Table, source: str, where: Callable[[int], str]) -> tuple[pa.Table, list[str]]:
    """``table`` without the rows :func:`timing_problems` finds, and one warning naming ``source``
    and where the first of them is (``where(row index)``)."""
    bad = timing_problems(table)
    if not bad.any():
        return table, []
    idx = np.nonzero(bad)[0]
    first = int(idx[0])
    row = table.slice(first, 1).to_pylist()[0]
    why = "no start" if row.get("start_us") is None else "duration " + repr(row.get("duration_us"))
    msg = (
        f"{source}: {len(idx)} row(s) with a missing, non-finite or negative start or "
        "duration were left out of every table "
        f"(first at {where(first)}: {why})"
    )
    return table.filter(pa.array(~bad)), [msg]
