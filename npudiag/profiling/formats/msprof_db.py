"""SQLite exports (``msprof_{ts}.db`` in PROF_*, ``ascend_pytorch_profiler_{rank}.db``) → tables.

Layout as documented for CANN's db export (msprof docs ``msprof_db.md``) and as msprof-analyze and
MindStudio Insight query it: text values are integer ids into ``STRING_IDS(id, value)``; times
are ns (local Unix time).

- ``TASK`` holds every device task. Those joined by ``globalTaskId`` to ``COMPUTE_TASK_INFO`` are
  the compute kernels (name, opType, taskType = the accelerator core, blockDim, shapes...): the
  rows torch_npu's kernel_details.csv has. Those joined to ``COMMUNICATION_TASK_INFO`` are HCCL's
  sub-tasks (→ ``comm_tasks``: plane, src/dst rank, transport, link, size, bandwidth in B/s).
  MEMCPY tasks are copies (``MEMCPY_INFO`` gives size and direction where present). The rest
  (EVENT_* waits, PROFILING_*, and compute-typed tasks with no COMPUTE_TASK_INFO, such as the
  per-op task HCCL puts on its own stream) are counted, not kernels.
- ``COMMUNICATION_OP`` has one row per communication op: one kernel row each, as kernel_details.
- ``CANN_API`` the host API calls (``type`` → ``ENUM_API_TYPE``); ``STEP_TIME`` the profiler's
  steps (id, startNs, endNs); ``RANK_DEVICE_MAP`` the rank.

Every id column is read once and looked up with Arrow (``index_in`` + ``take``), every join is one
row per TASK row (info rows with a repeated key count once), and text values longer than
:data:`MAX_TEXT` are cut with a warning, so memory is linear in the rows of TASK.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.profiling import tasks
from npudiag.profiling.assemble import drop_bad_timing
from npudiag.profiling.formats.csvtext import NO_MODEL_ID
from npudiag.profiling.formats.registry import Format, from_object, register
from npudiag.profiling.formats.torch_ops import MODULE_PREFIX, Queue, db_launches, from_db, ns_of, range_table

MAX_TEXT = 1 << 16  # characters kept of one STRING_IDS value (real names are far shorter)
NO_RANK = 4294967295
_OPERATION = {
    "host to device": "H2D",
    "device to host": "D2H",
    "device to device": "D2D",
    "host to host": "H2H",
    "addr device to device": "D2D",
    "host to device ex": "H2D",
    "device to host ex": "D2H",
}


@dataclass
class DbTables:
    kernels: pa.Table
    copies: pa.Table
    comm_tasks: pa.Table
    api_calls: pa.Table
    steps: pa.Table
    task_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    rank: int | None = None
    warnings: list[str] = field(default_factory=list)
    memory_timeline: pa.Table = field(default_factory=lambda: schemas.empty("memory_timeline"))
    op_memory: pa.Table = field(default_factory=lambda: schemas.empty("op_memory"))
    aicore_freq: pa.Table = field(default_factory=lambda: schemas.empty("aicore_freq"))
    torch_ops: pa.Table = field(default_factory=lambda: schemas.empty("torch_ops"))
    host_ops: pa.Table = field(default_factory=lambda: schemas.empty("host_ops"))
    ranges: pa.Table = field(default_factory=lambda: schemas.empty("ranges"))


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in con.execute(f'PRAGMA table_info("{table}")')]


def _open(path: Path) -> sqlite3.Connection:
    """Open read-only by path: the URI is built by sqlite3 from a path, never from the file name as text."""
    try:
        uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
        con = sqlite3.connect(uri, uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"not a readable SQLite database ({exc})") from None
    except UnicodeDecodeError as exc:  # a damaged schema: table names that are not UTF-8
        raise InputError(path, f"damaged SQLite schema (a name is not UTF-8 at byte {exc.start})") from None
    return con


_INT = pa.int64()


def _to_int(values: list) -> pa.Array:
    """Integer column from SQLite values (ints, or numeric text / floats where a tool wrote them so)."""
    try:
        return pa.array(values, _INT)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        out = []
        for v in values:
            try:
                out.append(int(v) if v is not None and not isinstance(v, bytes) else None)
            except (TypeError, ValueError, OverflowError):
                out.append(None)
        return pa.array([v if v is None or -(2**63) <= v < 2**63 else None for v in out], _INT)


def _to_float(values: list) -> pa.Array:
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        out = []
        for v in values:
            try:
                out.append(float(v) if v is not None and not isinstance(v, bytes) else None)
            except (TypeError, ValueError):
                out.append(None)
        return pa.array(out, pa.float64())


class _Db:
    def __init__(self, path: Path, con: sqlite3.Connection) -> None:
        self.path = path
        self.con = con
        self.present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.warnings: list[str] = []
        self._strings: tuple[pa.Array, pa.Array] | None = None

    def read(self, table: str, wanted: dict[str, str], *, floats: tuple[str, ...] = ()) -> pa.Table:
        """``wanted`` maps output name -> column; absent columns come back as nulls. Every column is
        an integer (ids, ns, counts) except those in ``floats``."""
        have = set(_columns(self.con, table)) if table in self.present else set()
        cols = [(out, col) for out, col in wanted.items() if col in have]
        n_rows = 0
        data: dict[str, pa.Array] = {}
        if cols:
            sql = "SELECT " + ", ".join(f'"{c}"' for _, c in cols) + f' FROM "{table}"'
            rows = self.con.execute(sql).fetchall()
            n_rows = len(rows)
            for j, (out, _) in enumerate(cols):
                values = [r[j] for r in rows]
                data[out] = _to_float(values) if out in floats else _to_int(values)
            del rows
        for out in wanted:
            if out not in data:
                data[out] = pa.nulls(n_rows, pa.float64() if out in floats else _INT)
        return pa.table({out: data[out] for out in wanted})

    def strings(self) -> tuple[pa.Array, pa.Array]:
        if self._strings is None:
            rows = self.con.execute("SELECT id, value FROM STRING_IDS").fetchall()
            ids = _to_int([r[0] for r in rows])
            values = [r[1] if isinstance(r[1], str) else (None if r[1] is None else str(r[1])) for r in rows]
            long = [i for i, v in enumerate(values) if v is not None and len(v) > MAX_TEXT]
            if long:
                self.warnings.append(
                    f"{self.path}: {len(long)} STRING_IDS value(s) longer than {MAX_TEXT} "
                    "characters were cut to that length"
                )
                for i in long:
                    values[i] = values[i][:MAX_TEXT]  # type: ignore[index]
            self._strings = (ids, pa.array(values, pa.string()))
        return self._strings

    def text(self, ids: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The strings behind ``ids``; ``N/A`` is null, as the CSV exports' N/A is."""
        keys, values = self.strings()
        out = pc.take(values, pc.index_in(ids, value_set=keys))
        return pc.if_else(pc.equal(out, "N/A"), pa.scalar(None, pa.string()), out)

    def enum(self, table: str, ids: pa.Array | pa.ChunkedArray) -> pa.Array:
        """Names from an ENUM_* table; where it is missing, the value is a STRING_IDS id (older exports)."""
        if table not in self.present:
            return self.text(ids)
        rows = self.con.execute(f'SELECT id, name FROM "{table}"').fetchall()
        keys = _to_int([r[0] for r in rows])
        names = pa.array([r[1] if isinstance(r[1], str) else None for r in rows], pa.string())
        return pc.take(names, pc.index_in(ids, value_set=keys))


def _first_per_key(table: pa.Table, key: str) -> pa.Table:
    """One row per non-null ``key`` (its first), so a join on it keeps the other side's row count."""
    if table.num_rows == 0:
        return table
    table = table.filter(pc.is_valid(table[key]))
    keys = table[key].to_numpy(zero_copy_only=False)
    _, first = np.unique(keys, return_index=True)
    return table.take(pa.array(np.sort(first)))


def _us(ns: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.divide(pc.cast(ns, pa.float64(), safe=False), 1000.0)


def _duration_us(start: pa.ChunkedArray, end: pa.ChunkedArray) -> pa.Array:
    return pc.divide(pc.cast(pc.subtract(end, start), pa.float64(), safe=False), 1000.0)


def _repeat(value, n: int, type_: pa.DataType) -> pa.Array:
    return pa.nulls(n, type_) if value is None else pa.repeat(pa.scalar(value, type_), n)


def _no_model(model: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.if_else(pc.equal(model, NO_MODEL_ID), pa.scalar(None, _INT), model)


def read_db(path: Path, rank: int | None = None) -> DbTables:
    con = _open(path)
    try:
        db = _Db(path, con)
        if "TASK" not in db.present or "STRING_IDS" not in db.present:
            raise InputError(
                path, "no TASK / STRING_IDS tables; expected an msprof or torch_npu profiler export database"
            )
        try:
            return _read(db, rank)
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"database query failed: {exc}") from None
        except (pa.ArrowException, TypeError, OverflowError) as exc:
            raise InputError(path, f"unexpected value types in the export's tables ({exc})") from None
    finally:
        con.close()


def _db_rank(db: _Db) -> int | None:
    if "RANK_DEVICE_MAP" not in db.present:
        return None
    t = db.read("RANK_DEVICE_MAP", {"rank": "rankId"})
    ranks = sorted({r for r in t["rank"].to_pylist() if r is not None and 0 <= r < NO_RANK})
    return ranks[0] if len(ranks) == 1 else None


def _read(db: _Db, rank: int | None) -> DbTables:
    if rank is None:
        rank = _db_rank(db)
    task = db.read(
        "TASK",
        {
            "start_ns": "startNs",
            "end_ns": "endNs",
            "device_id": "deviceId",
            "connection_id": "connectionId",
            "gid": "globalTaskId",
            "type_id": "taskType",
            "context_id": "contextId",
            "stream_id": "streamId",
            "task_id": "taskId",
            "model_id": "modelId",
        },
    )
    task = task.append_column("task_type", db.text(task["type_id"]))
    n = task.num_rows
    cti_cols = {
        "gid": "globalTaskId",
        "name": "name",
        "type": "taskType",
        "op_type": "opType",
        "block_dim": "blockDim",
        "mix_block_dim": "mixBlockDim",
        "input_formats": "inputFormats",
        "input_dtypes": "inputDataTypes",
        "input_shapes": "inputShapes",
        "output_formats": "outputFormats",
        "output_dtypes": "outputDataTypes",
        "output_shapes": "outputShapes",
        "op_state": "opState",
        "hf32_eligible": "hf32Eligible",
    }
    if "COMPUTE_TASK_INFO" in db.present:
        cti = _first_per_key(db.read("COMPUTE_TASK_INFO", cti_cols), "gid")
    else:
        cti = db.read("COMPUTE_TASK_INFO", cti_cols).slice(0, 0)
        db.warnings.append(f"{db.path}: no COMPUTE_TASK_INFO table; op names are task types")
    comm_info = _first_per_key(
        db.read(
            "COMMUNICATION_TASK_INFO",
            {
                "gid": "globalTaskId",
                "name": "name",
                "type": "taskType",
                "plane_id": "planeId",
                "src": "srcRank",
                "dst": "dstRank",
                "transport": "transportType",
                "size": "size",
                "link": "linkType",
                "op_id": "opId",
                "bandwidth": "bandwidth",
            },
            floats=("bandwidth",),
        ),
        "gid",
    )
    gid = task["gid"]
    in_cti = pc.index_in(gid, value_set=cti["gid"]) if cti.num_rows else pa.nulls(n, pa.int32())
    in_comm = pc.index_in(gid, value_set=comm_info["gid"]) if comm_info.num_rows else pa.nulls(n, pa.int32())
    is_cti = pc.is_valid(in_cti)
    is_comm = pc.and_(pc.is_valid(in_comm), pc.invert(is_cti))
    # what is neither is classified by type; a compute-typed task here has no op info: other
    rest = task.filter(pc.invert(pc.or_(is_cti, is_comm)))
    classes, _ = tasks.classify(rest["task_type"], rest["task_type"])
    classes = pc.if_else(pc.equal(classes, tasks.COMPUTE), tasks.OTHER, classes)
    counts = tasks.counts(classes, rest["task_type"])

    comm_ops = _comm_ops(db, task, rank)
    kernels = _compute_kernels(db, task.filter(is_cti), cti, pc.drop_null(pc.filter(in_cti, is_cti)), rank)
    kernels = schemas.concat([t for t in (kernels, comm_ops) if t.num_rows] or [kernels]).sort_by(
        [("start_ns", "ascending")]
    )
    copies = _copies(db, rest.filter(pc.equal(classes, tasks.COPY)), rank)
    ctasks = _comm_tasks(db, task.filter(is_comm), comm_info, pc.drop_null(pc.filter(in_comm, is_comm)), rank)
    api = _api_calls(db, rank) if "CANN_API" in db.present else schemas.empty("api_calls")
    steps = _steps(db, rank, task)
    checked = []
    for name, table in (
        ("TASK / COMMUNICATION_OP", kernels),
        ("TASK (MEMCPY)", copies),
        ("COMMUNICATION_TASK_INFO", ctasks),
        ("CANN_API", api),
    ):
        table, bad = drop_bad_timing(
            table, f"{db.path} {name}", lambda i, t=table: f"startNs {t['start_ns'][i].as_py()}"
        )
        db.warnings.extend(bad)
        checked.append(table)
    out = DbTables(*checked, steps, counts, rank, db.warnings)
    out.memory_timeline = _memory_timeline(db, rank)
    out.op_memory = _op_memory(db, rank)
    out.aicore_freq = _aicore_freq(db, rank)
    # the device work framework ops launch: compute kernels and copies (not HCCL's sub-tasks)
    op_calls = _op_calls(db)
    launched = schemas.concat([task.filter(is_cti), rest.filter(pc.equal(classes, tasks.COPY))])
    out.torch_ops, conn_ids, launchers = _torch_ops(
        db, rank, launched, op_calls, out.kernels.filter(pc.equal(out.kernels["task_class"], tasks.COMMUNICATION))
    )
    out.kernels = with_launched_by(out.kernels, conn_ids, launchers)
    out.copies = with_launched_by(out.copies, conn_ids, launchers)
    out.host_ops = _host_ops(db, rank, op_calls)
    out.ranges = _ranges(db, rank, launched, op_calls)
    return out


# ENUM_API_TYPE ids in every export seen (op, trace = python functions, mstx); the table says so where present
_API_TYPES = {"op": 50001, "queue": 50002, "trace": 50003, "mstx": 50004}


def _op_calls(db: _Db, kind: str = "op") -> pa.Table | None:
    """PYTORCH_API rows of ``kind`` (ENUM_API_TYPE) with a start and an end not before it; None without the table."""
    if "PYTORCH_API" not in db.present:
        return None
    api = db.read(
        "PYTORCH_API",
        {
            "startNs": "startNs",
            "endNs": "endNs",
            "globalTid": "globalTid",
            "connectionId": "connectionId",
            "name": "name",
            "type": "type",
        },
    )
    api_type = _API_TYPES[kind]
    if "ENUM_API_TYPE" in db.present:
        found = [r[0] for r in db.con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = ?", (kind,)).fetchall()]
        api_type = found[0] if found else api_type
    api = api.filter(pc.fill_null(pc.and_(pc.equal(api["type"], api_type), pc.is_valid(api["startNs"])), False))
    return api.filter(pc.fill_null(pc.greater_equal(api["endNs"], api["startNs"]), False))


def _links(db: _Db, task: pa.Table) -> tuple[pa.Table, pa.Table]:
    """CONNECTION_IDS (an op's id -> its connection ids) and the tasks with a connection id, as from_db reads them."""
    conn = (
        db.read("CONNECTION_IDS", {"id": "id", "connectionId": "connectionId"})
        if "CONNECTION_IDS" in db.present
        else None
    )
    links = conn if conn is not None else pa.table({"id": pa.array([], _INT), "connectionId": pa.array([], _INT)})
    t = task.select(["connection_id", "start_ns", "end_ns"]).rename_columns(["connectionId", "startNs", "endNs"])
    return links.filter(pc.is_valid(links["connectionId"])), t.filter(pc.is_valid(t["connectionId"]))


def _torch_ops(
    db: _Db, rank: int | None, task: pa.Table, api: pa.Table | None, comm_ops: pa.Table
) -> tuple[pa.Table, np.ndarray, pa.Array]:
    """The op calls (``_op_calls``), linked to their tasks through CONNECTION_IDS; and the framework op
    that launched the tasks (and the communication ops) of each connection id."""
    if api is None or api.num_rows == 0:
        return schemas.empty("torch_ops"), np.zeros(0, np.int64), pa.array([], pa.string())
    keys, values = db.strings()
    names = dict(zip(keys.to_pylist(), values.to_pylist()))
    conn, launched = _links(db, task)
    comm = None
    if comm_ops.num_rows:
        ops = comm_ops.filter(pc.is_valid(comm_ops["connection_id"]))
        ns = ns_of(ops["start_ns"])
        dur_ns = np.rint(pc.fill_null(ops["duration_us"], 0.0).to_numpy(zero_copy_only=False) * 1000).astype(np.int64)
        t = pa.table({"connection_id": ops["connection_id"], "start_ns": ns, "end_ns": ns + dur_ns})
        comm = (_links(db, t)[1], _api_launches(db, t))
    return from_db(api, conn, launched, names, rank, _queue(db, conn, names), _api_launches(db, task), comm)


def _queue(db: _Db, conn: pa.Table, names: dict[int, str]) -> Queue | None:
    """torch_npu's task queue in the .db: PYTORCH_API rows of type queue, named Enqueue or
    Dequeue@..., an Enqueue and its Dequeue sharing a CONNECTION_IDS connection id."""
    rows = _op_calls(db, "queue")
    if rows is None or rows.num_rows == 0 or conn.num_rows == 0:
        return None
    rows = rows.append_column("row", pa.array(np.arange(rows.num_rows)))
    links = pa.table({"id": pc.cast(conn["id"], pa.int64()), "corr": pc.cast(conn["connectionId"], pa.int64())})
    j = pa.table({"id": pc.cast(rows["connectionId"], pa.int64()), "row": rows["row"]}).join(
        links, "id", join_type="inner"
    )
    row, corr = j["row"].to_numpy(), j["corr"].to_numpy()
    label = np.array([names.get(i, "") for i in rows["name"].to_pylist()], object)[row]
    deq = np.char.startswith(label.astype(str), "Dequeue")
    enq = label == "Enqueue"
    thread, start, end = (ns_of(rows[c])[row] for c in ("globalTid", "startNs", "endNs"))
    return Queue(thread[deq], start[deq], end[deq], corr[deq], thread[enq], start[enq], corr[enq])


def with_launched_by(table: pa.Table, conn_ids: np.ndarray, names: pa.Array) -> pa.Table:
    """``table`` (kernels or copies) with each row's ``launched_by`` set from its connection id."""
    if table.num_rows == 0 or len(conn_ids) == 0:
        return table
    keep = pc.is_valid(names).to_numpy(zero_copy_only=False)
    pos = pc.index_in(table["connection_id"], value_set=pa.array(conn_ids[keep], pa.int64()))
    found = pc.take(names.filter(pa.array(keep)), pos)
    return table.set_column(
        table.schema.get_field_index("launched_by"), "launched_by", pc.coalesce(table["launched_by"], found)
    )


# ENUM_MSTX_EVENT_TYPE: 0 marker, 1 push/pop, 2 start/end, 3 marker_ex; the ranges are 1 and 2
_MSTX_RANGES = {"push/pop": 1, "start/end": 2}


def _mstx_events(db: _Db) -> pa.Table | None:
    """msprof's MSTX_EVENTS ranges (push/pop and start/end; marks have no length): startNs, endNs,
    globalTid (the thread the range started on) and the message's STRING_IDS id as ``name``."""
    if "MSTX_EVENTS" not in db.present:
        return None
    t = db.read(
        "MSTX_EVENTS",
        {"startNs": "startNs", "endNs": "endNs", "type": "eventType", "globalTid": "globalTid", "name": "message"},
    )
    kinds = dict(_MSTX_RANGES)
    if "ENUM_MSTX_EVENT_TYPE" in db.present:
        found = dict(db.con.execute("SELECT name, id FROM ENUM_MSTX_EVENT_TYPE").fetchall())
        kinds = {k: found.get(k, v) for k, v in kinds.items()}
    keep = pc.and_(pc.is_in(t["type"], pa.array(list(kinds.values()), t["type"].type)), pc.is_valid(t["startNs"]))
    t = t.filter(pc.fill_null(keep, False))
    return t.filter(pc.fill_null(pc.greater_equal(t["endNs"], t["startNs"]), False))


def _api_launches(db: _Db, task: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each task was launched from, by CANN_API's connection ids: the task's connection id, the
    thread and start of the earliest API call with that id, and the task's device time, us."""
    if "CANN_API" not in db.present:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    api = db.read("CANN_API", {"s": "startNs", "tid": "globalTid", "connectionId": "connectionId"})
    api = api.filter(pc.and_(pc.is_valid(api["connectionId"]), pc.is_valid(api["s"])))
    first = api.group_by("connectionId", use_threads=False).aggregate([("s", "min")])
    first = first.join(
        api.rename_columns(["s_min", "tid", "connectionId"]), ["connectionId", "s_min"], join_type="inner"
    )
    first = first.group_by(["connectionId", "s_min"], use_threads=False).aggregate([("tid", "min")])
    t = task.select(["connection_id", "start_ns", "end_ns"]).rename_columns(["connectionId", "start", "end"])
    j = t.join(first, "connectionId", join_type="inner")
    us = (ns_of(j["end"]) - ns_of(j["start"])) / 1000.0
    return ns_of(j["connectionId"]), ns_of(j["tid_min"]), ns_of(j["s_min"]), us


def _ranges(db: _Db, rank: int | None, task: pa.Table, ops: pa.Table | None) -> pa.Table:
    """RANGES: torch modules (PYTORCH_API rows of type trace named "nn.Module: ...") and mstx ranges
    (torch_npu's: PYTORCH_API rows of type mstx; msprof's: MSTX_EVENTS push/pop and start/end), with the
    tasks launched inside them: from the framework ops inside (an op's start on its thread is its
    launch point), or where the profile has no framework ops, from the CANN API calls inside."""
    found = [
        (kind, rows)
        for kind, api_kind in (("module", "trace"), ("mstx", "mstx"))
        if (rows := _op_calls(db, api_kind)) is not None and rows.num_rows
    ]
    mstx = _mstx_events(db)
    if mstx is not None and mstx.num_rows:
        found.append(("mstx", mstx))
    if not found:
        return schemas.empty("ranges")
    lt = lns = np.zeros(0, np.int64)
    k_us = np.zeros(0)
    if ops is not None and ops.num_rows:
        owners, k_us, _ = db_launches(ops, *_links(db, task))
        lt, lns = ns_of(ops["globalTid"])[owners], ns_of(ops["startNs"])[owners]
    else:
        _, lt, lns, k_us = _api_launches(db, task)
    parts = []
    for kind, rows in found:
        names = db.text(rows["name"])
        if kind == "module":
            is_module = pc.fill_null(pc.starts_with(names, MODULE_PREFIX), False)
            rows, names = rows.filter(is_module), pc.utf8_slice_codeunits(names.filter(is_module), len(MODULE_PREFIX))
        if rows.num_rows == 0:
            continue
        thread = ns_of(rows["globalTid"])
        parts.append(
            range_table(
                "db",
                kind,
                pc.fill_null(names, "").to_pylist(),
                thread,
                thread & 0xFFFFFFFF,
                ns_of(rows["startNs"]),
                ns_of(rows["endNs"]),
                lt,
                lns,
                k_us,
                rank,
            )
        )
    if not parts:
        return schemas.empty("ranges")
    return schemas.concat(parts).sort_by([("start_ns", "ascending"), ("depth", "ascending")])


def _host_ops(db: _Db, rank: int | None, api: pa.Table | None) -> pa.Table:
    """The op calls as time ranges (HOST_OPS); globalTid's low 32 bits are the thread id."""
    if api is None or api.num_rows == 0:
        return schemas.empty("host_ops")
    n = api.num_rows
    start = pc.cast(api["startNs"], pa.int64())
    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "name": db.text(api["name"]),
        "start_us": _us(start),
        "start_ns": start,
        "duration_us": pc.divide(pc.cast(pc.subtract(pc.cast(api["endNs"], pa.int64()), start), pa.float64()), 1000.0),
        "thread_id": pc.bit_wise_and(pc.cast(api["globalTid"], pa.int64()), 0xFFFFFFFF),
    }
    return schemas.conform(pa.table(cols), schemas.HOST_OPS).sort_by([("start_ns", "ascending")])


def _aicore_freq(db: _Db, rank: int | None) -> pa.Table:
    """AICORE_FREQ: one row per change of the AI Core clock (deviceId, timestampNs, freq in MHz)."""
    if "AICORE_FREQ" not in db.present:
        return schemas.empty("aicore_freq")
    t = db.read(
        "AICORE_FREQ", {"device_id": "deviceId", "ts_ns": "timestampNs", "freq_mhz": "freq"}, floats=("freq_mhz",)
    )
    n = t.num_rows
    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "device_id": pc.cast(t["device_id"], pa.int32(), safe=False),
        "ts_us": _us(t["ts_ns"]),
        "ts_ns": t["ts_ns"],
        "freq_mhz": t["freq_mhz"],
    }
    return schemas.conform(pa.table(cols), schemas.AICORE_FREQ).sort_by([("ts_ns", "ascending")])


def _compute_kernels(db: _Db, task: pa.Table, cti: pa.Table, pos: pa.Array, rank: int | None) -> pa.Table:
    n = task.num_rows
    info = cti.take(pos) if n else cti.slice(0, 0)
    text = {
        k: db.text(info[k])
        for k in (
            "op_type",
            "op_state",
            "hf32_eligible",
            "input_shapes",
            "input_dtypes",
            "input_formats",
            "output_shapes",
            "output_dtypes",
            "output_formats",
        )
    }
    task_type = pc.coalesce(db.text(info["type"]), task["task_type"])
    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "device_id": pc.cast(task["device_id"], pa.int32(), safe=False),
        "model_id": _no_model(task["model_id"]),
        "stream_id": task["stream_id"],
        "task_id": task["task_id"],
        "op_name": pc.coalesce(db.text(info["name"]), task_type),
        "task_type": task_type,
        "task_class": _repeat(tasks.COMPUTE, n, pa.string()),
        "start_us": _us(task["start_ns"]),
        "start_ns": task["start_ns"],
        "duration_us": _duration_us(task["start_ns"], task["end_ns"]),
        "block_dim": info["block_dim"],
        "mix_block_dim": info["mix_block_dim"],
        "context_id": pc.cast(task["context_id"], pa.string()),
        "connection_id": task["connection_id"],
        **text,
        **_pmu_columns(db, task),
    }
    return schemas.conform(pa.table(cols), schemas.KERNELS, keep_extra=True)


def _pmu_column(metric: str) -> tuple[str, float]:
    """A TASK_PMU_INFO metric's column in the text export's naming, and the factor to its unit: times
    are in ns in the .db (aic_total_time is within a few % of the task's endNs - startNs) and in µs in
    kernel_details.csv (``aic_mte2_time(us)`` -> ``aic_mte2_time_us``); ratios, rates and cycles as they are."""
    named = {"aic_total_time": "aicore_time", "aiv_total_time": "aiv_time"}
    if metric.endswith("_time"):
        return named.get(metric, metric) + "_us", 1e-3
    return metric, 1.0


def _occurrence(keys: np.ndarray, order: np.ndarray) -> np.ndarray:
    """For each row, how many rows of the same key come before it in ``order`` (0 for the first)."""
    ranked = order[np.argsort(keys[order], kind="stable")]
    sorted_keys = keys[ranked]
    first = np.r_[0, np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1]
    starts = np.repeat(first, np.diff(np.r_[first, len(ranked)]))
    out = np.empty(len(keys), np.int64)
    out[ranked] = np.arange(len(ranked)) - starts
    return out


def _pmu_columns(db: _Db, task: pa.Table) -> dict[str, pa.Array]:
    """TASK_PMU_INFO (one row per task and metric: globalTaskId, name, value) as one column per metric,
    joined by globalTaskId. A globalTaskId some TASK rows share (the same task run again) takes its
    metric groups in order, where it has exactly as many as it has runs; otherwise its metrics stay null."""
    if "TASK_PMU_INFO" not in db.present or not task.num_rows:
        return {}
    pmu = db.read("TASK_PMU_INFO", {"gid": "globalTaskId", "name": "name", "value": "value"}, floats=("value",))
    pmu = pmu.filter(pc.and_(pc.is_valid(pmu["gid"]), pc.is_valid(pmu["name"])))
    if not pmu.num_rows:
        return {}
    gid = task["gid"].to_numpy(zero_copy_only=False)
    valid = ~pc.is_null(task["gid"]).to_numpy(zero_copy_only=False)
    gid = np.where(valid, gid, -1)
    runs = _occurrence(gid, np.argsort(task["start_ns"].to_numpy(zero_copy_only=False), kind="stable"))
    uniq, per_gid = np.unique(gid, return_counts=True)
    here = pa.table({"gid": pa.array(gid), "k": pa.array(runs), "row": pa.array(np.arange(len(gid)))})
    out: dict[str, pa.Array] = {}
    names = db.text(pmu["name"])
    metric_ids = pmu["name"].to_numpy(zero_copy_only=False)
    text_of = dict(zip(metric_ids.tolist(), names.to_pylist(), strict=True))
    for metric_id in sorted(set(metric_ids.tolist())):
        metric = text_of[metric_id]
        if metric is None:
            continue
        rows = pmu.filter(pc.equal(pmu["name"], metric_id))
        g = rows["gid"].to_numpy(zero_copy_only=False)
        k = _occurrence(g, np.arange(len(g)))
        mg, mcount = np.unique(g, return_counts=True)
        # only where the groups of a task id match its runs one to one
        at = np.minimum(np.searchsorted(uniq, mg), len(uniq) - 1)
        ok = (uniq[at] == mg) & (per_gid[at] == mcount)
        keep = np.isin(g, mg[ok])
        side = pa.table({"gid": pa.array(g[keep]), "k": pa.array(k[keep]), "v": rows["value"].filter(pa.array(keep))})
        joined = here.join(side, ["gid", "k"], join_type="inner")
        column, factor = _pmu_column(metric)
        values = np.full(len(gid), np.nan)
        values[joined["row"].to_numpy()] = joined["v"].to_numpy(zero_copy_only=False) * factor
        out[column] = pa.array(values, pa.float64(), mask=np.isnan(values))
    return out


def _comm_ops(db: _Db, task: pa.Table, rank: int | None) -> pa.Table:
    if "COMMUNICATION_OP" not in db.present:
        return _empty_kernels()
    op = db.read(
        "COMMUNICATION_OP",
        {
            "op_id": "opId",
            "name": "opName",
            "start_ns": "startNs",
            "end_ns": "endNs",
            "connection_id": "connectionId",
            "op_type": "opType",
            "device_id": "deviceId",
        },
    )
    if op["op_id"].null_count < op.num_rows:  # opId is the key: a repeated op counts once
        op = _first_per_key(op, "op_id")
    n = op.num_rows
    device = op["device_id"]
    if (
        n and device.null_count == n and task.num_rows
    ):  # older exports: the device of the task that shares the connection
        pos = pc.index_in(op["connection_id"], value_set=task["connection_id"])
        device = pc.take(task["device_id"], pos)
    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "device_id": pc.cast(device, pa.int32(), safe=False),
        "op_name": db.text(op["name"]),
        "op_type": db.text(op["op_type"]),
        "task_type": _repeat("HCCL", n, pa.string()),
        "task_class": _repeat(tasks.COMMUNICATION, n, pa.string()),
        "start_us": _us(op["start_ns"]),
        "start_ns": op["start_ns"],
        "duration_us": _duration_us(op["start_ns"], op["end_ns"]),
        "connection_id": op["connection_id"],
        "comm_op_id": op["op_id"],
    }
    return schemas.conform(pa.table(cols), schemas.KERNELS, keep_extra=True)


def _empty_kernels() -> pa.Table:
    return schemas.empty("kernels")


def _copies(db: _Db, task: pa.Table, rank: int | None) -> pa.Table:
    n = task.num_rows
    size = pa.nulls(n, _INT)
    direction = _repeat("unknown", n, pa.string())
    if n and "MEMCPY_INFO" in db.present:
        info = _first_per_key(
            db.read("MEMCPY_INFO", {"gid": "globalTaskId", "size": "size", "op": "memcpyOperation"}), "gid"
        )
        pos = pc.index_in(task["gid"], value_set=info["gid"])
        size = pc.take(info["size"], pos)
        names = db.enum("ENUM_MEMCPY_OPERATION", pc.take(info["op"], pos))
        direction = schemas.map_distinct(names, lambda v: _OPERATION.get(v, "unknown") if v else "unknown")
    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "side": _repeat("device", n, pa.string()),
        "name": task["task_type"],
        "direction": direction,
        "size_bytes": size,
        "start_us": _us(task["start_ns"]),
        "start_ns": task["start_ns"],
        "duration_us": _duration_us(task["start_ns"], task["end_ns"]),
        "stream_id": task["stream_id"],
        "mode": _repeat("unknown", n, pa.string()),
        "connection_id": task["connection_id"],
    }
    return schemas.conform(pa.table(cols), schemas.COPIES)


def _comm_tasks(db: _Db, task: pa.Table, info_all: pa.Table, pos: pa.Array, rank: int | None) -> pa.Table:
    n = task.num_rows
    info = info_all.take(pos) if n else info_all.slice(0, 0)
    op_name = pa.nulls(n, pa.string())
    if n and "COMMUNICATION_OP" in db.present:
        ops = _first_per_key(db.read("COMMUNICATION_OP", {"op_id": "opId", "name": "opName"}), "op_id")
        op_name = db.text(pc.take(ops["name"], pc.index_in(info["op_id"], value_set=ops["op_id"])))
    op_name = pc.coalesce(op_name, db.text(info["name"]))

    def rank_of(col: pa.ChunkedArray) -> pa.ChunkedArray:
        return pc.if_else(pc.or_(pc.equal(col, NO_RANK), pc.less(col, 0)), pa.scalar(None, _INT), col)

    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "op_name": op_name,
        "plane_id": pc.cast(info["plane_id"], pa.int32(), safe=False),
        # Level0 exports write N/A as the sub-task type: the TASK row's type (Notify Wait, SDMA...) says it
        "task_type": pc.coalesce(db.text(info["type"]), task["task_type"]),
        "start_us": _us(task["start_ns"]),
        "start_ns": task["start_ns"],
        "duration_us": _duration_us(task["start_ns"], task["end_ns"]),
        "stream_id": task["stream_id"],
        "task_id": task["task_id"],
        "src_rank": rank_of(info["src"]),
        "dst_rank": rank_of(info["dst"]),
        "transport": db.enum("ENUM_HCCL_TRANSPORT_TYPE", info["transport"]),
        "link_type": db.enum("ENUM_HCCL_LINK_TYPE", info["link"]),
        "size_bytes": info["size"],
        "bandwidth_gbps": pc.divide(info["bandwidth"], 1e9),  # the table says B/s
    }
    return schemas.conform(pa.table(cols), schemas.COMM_TASKS).sort_by([("start_ns", "ascending")])


def _api_calls(db: _Db, rank: int | None) -> pa.Table:
    raw = db.read(
        "CANN_API",
        {
            "start_ns": "startNs",
            "end_ns": "endNs",
            "type": "type",
            "tid": "globalTid",
            "connection_id": "connectionId",
            "name": "name",
        },
    )
    n = raw.num_rows
    level = db.enum("ENUM_API_TYPE", raw["type"]) if "ENUM_API_TYPE" in db.present else pa.nulls(n, pa.string())
    table = pa.table(
        {
            "source": _repeat("db", n, pa.string()),
            "rank": _repeat(rank, n, pa.int32()),
            "level": level,
            "name": db.text(raw["name"]),
            "start_us": _us(raw["start_ns"]),
            "start_ns": raw["start_ns"],
            "duration_us": _duration_us(raw["start_ns"], raw["end_ns"]),
            # globalTid is kept as CANN wrote it (peers use it as the thread id unchanged)
            "thread_id": raw["tid"],
            "connection_id": raw["connection_id"],
        }
    )
    return schemas.conform(table, schemas.API_CALLS).sort_by([("start_ns", "ascending")])


def _steps(db: _Db, rank: int | None, task: pa.Table) -> pa.Table:
    """STEP_TIME: the profiler's step ranges. Their duration is the host's step; the device's step
    time (torch_npu's Stage) is derived from the tasks inside, so only start and end are kept."""
    if "STEP_TIME" not in db.present:
        return schemas.empty("steps")
    st = db.read("STEP_TIME", {"step": "id", "start_ns": "startNs", "end_ns": "endNs"})
    n = st.num_rows
    device = None
    if task.num_rows:
        devices = pc.unique(pc.drop_null(task["device_id"])).to_pylist()
        device = devices[0] if len(devices) == 1 else None
    table = pa.table(
        {
            "source": _repeat("db", n, pa.string()),
            "rank": _repeat(rank, n, pa.int32()),
            "device_id": _repeat(device, n, pa.int32()),
            "step": st["step"],
            "start_us": _us(st["start_ns"]),
            "end_us": _us(st["end_ns"]),
            "start_ns": pc.cast(st["start_ns"], pa.int64(), safe=False),
            "end_ns": pc.cast(st["end_ns"], pa.int64(), safe=False),
        }
    )
    return schemas.conform(table, schemas.STEPS)


def _samples(rank: int | None, kind: str, table: pa.Table, component: pa.Array) -> pa.Table:
    n = table.num_rows
    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "device_id": pc.cast(table["device_id"], pa.int32(), safe=False),
        "kind": _repeat(kind, n, pa.string()),
        "component": component,
        "ts_us": _us(table["ts_ns"]),
        **{name: table[name] for name in table.column_names if name != "device_id"},
    }
    return schemas.conform(pa.table(cols), schemas.MEMORY_TIMELINE)


def _memory_timeline(db: _Db, rank: int | None) -> pa.Table:
    """MEMORY_RECORD (the allocator's totals), NPU_MODULE_MEM (per CANN module) and NPU_MEM (process
    and device level, DDR + HBM): bytes and ns, as every table of the export."""
    parts = []
    if "MEMORY_RECORD" in db.present:
        t = db.read(
            "MEMORY_RECORD",
            {
                "component": "component",
                "ts_ns": "timestamp",
                "allocated_bytes": "totalAllocated",
                "reserved_bytes": "totalReserved",
                "active_bytes": "totalActive",
                "stream_ptr": "streamPtr",
                "device_id": "deviceId",
            },
        )
        parts.append(_samples(rank, "allocator", t.drop_columns(["component"]), db.text(t["component"])))
    if "NPU_MODULE_MEM" in db.present:
        cols = {
            "module": "moduleId",
            "ts_ns": "timestampNs",
            "reserved_bytes": "totalReserved",
            "device_id": "deviceId",
        }
        t = db.read("NPU_MODULE_MEM", cols)
        parts.append(_samples(rank, "module", t.drop_columns(["module"]), db.enum("ENUM_MODULE", t["module"])))
    if "NPU_MEM" in db.present:
        t = db.read(
            "NPU_MEM",
            {"type": "type", "ts_ns": "timestampNs", "hbm_bytes": "hbm", "ddr_bytes": "ddr", "device_id": "deviceId"},
        )
        used = pc.add(pc.fill_null(t["hbm_bytes"], 0), pc.fill_null(t["ddr_bytes"], 0))
        level = pc.utf8_upper(db.text(t["type"]))  # app (the process) or device
        parts.append(_samples(rank, "npu", t.drop_columns(["type"]).append_column("reserved_bytes", used), level))
    return schemas.concat(parts) if parts else schemas.empty("memory_timeline")


def _op_memory(db: _Db, rank: int | None) -> pa.Table:
    if "OP_MEMORY" not in db.present:
        return schemas.empty("op_memory")
    t = db.read(
        "OP_MEMORY",
        {
            "name": "name",
            "size_bytes": "size",
            "alloc_ns": "allocationTime",
            "release_ns": "releaseTime",
            "active_release_ns": "activeReleaseTime",
            "duration_ns": "duration",
            "active_duration_ns": "activeDuration",
            "alloc_allocated_bytes": "allocationTotalAllocated",
            "alloc_reserved_bytes": "allocationTotalReserved",
            "alloc_active_bytes": "allocationTotalActive",
            "release_allocated_bytes": "releaseTotalAllocated",
            "release_reserved_bytes": "releaseTotalReserved",
            "release_active_bytes": "releaseTotalActive",
            "stream_ptr": "streamPtr",
            "device_id": "deviceId",
        },
    )
    n = t.num_rows
    cols = {
        "source": _repeat("db", n, pa.string()),
        "rank": _repeat(rank, n, pa.int32()),
        "device_id": pc.cast(t["device_id"], pa.int32(), safe=False),
        "op_name": db.text(t["name"]),
        "alloc_us": _us(t["alloc_ns"]),
        "release_us": _us(t["release_ns"]),
        "active_release_us": _us(t["active_release_ns"]),
        "duration_us": _us(t["duration_ns"]),
        "active_duration_us": _us(t["active_duration_ns"]),
        **{c: t[c] for c in t.column_names if c.endswith("_bytes") or c in ("alloc_ns", "release_ns", "stream_ptr")},
    }
    return schemas.conform(pa.table(cols), schemas.OP_MEMORY)


_DB_PARTS = (
    "kernels",
    "copies",
    "comm_tasks",
    "api_calls",
    "steps",
    "memory_timeline",
    "op_memory",
    "aicore_freq",
    "torch_ops",
    "host_ops",
    "ranges",
)

# msprof's msprof_*.db and torch_npu's ascend_pytorch_profiler*.db: the whole profile in SQLite
register(
    Format(
        "db",
        re.compile(r"^(msprof_[^/]*|ascend_pytorch_profiler[^/]*)\.db$"),
        lambda path, rank: from_object(read_db(path, rank), _DB_PARTS),
        _DB_PARTS,
        sources={
            "device_tasks": 2,
            "steps": 2,
            "api_calls": 1,
            "memory_timeline": 1,
            "op_memory": 1,
            "aicore_freq": 0,
            "torch_ops": 1,
            "host_ops": 1,
            "ranges": 1,
        },
    )
)
