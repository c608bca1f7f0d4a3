"""SQLite exports (``msprof_{ts}.db`` in PROF_*, ``ascend_pytorch_profiler_{rank}.db``) → tables.

Layout as documented for CANN's db export and as queried by msprof-analyze: every text value is an
integer id into ``STRING_IDS(id, value)``; times are ns (local Unix time). ``TASK`` holds every
device task (``startNs, endNs, deviceId, streamId, taskId, modelId, contextId, globalTaskId,
connectionId, taskType``), ``COMPUTE_TASK_INFO`` adds operator details per ``globalTaskId`` (``name,
opType, taskType, blockDim, mixBlockDim, opState, input*/output* shapes, data types, formats``) and
``CANN_API`` the host API calls (``startNs, endNs, type`` → ``ENUM_API_TYPE``, ``globalTid,
connectionId, name``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.formats.csvtext import NO_MODEL_ID

_CTI_TEXT = {
    "op_name": "name",
    "op_type": "opType",
    "op_state": "opState",
    "input_shapes": "inputShapes",
    "input_dtypes": "inputDataTypes",
    "input_formats": "inputFormats",
    "output_shapes": "outputShapes",
    "output_dtypes": "outputDataTypes",
    "output_formats": "outputFormats",
}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _query_table(con: sqlite3.Connection, sql: str, names: list[str], types: dict[str, pa.DataType]) -> pa.Table:
    rows = con.execute(sql).fetchall()
    cols = list(zip(*rows)) if rows else [[] for _ in names]
    return pa.table({n: pa.array(list(c), types.get(n)) for n, c in zip(names, cols)})


def _open(path: Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"not a readable SQLite database ({exc})") from None
    except UnicodeDecodeError as exc:  # a damaged schema: table names that are not UTF-8
        raise InputError(path, f"damaged SQLite schema (a name is not UTF-8 at byte {exc.start})") from None
    return con


def tables_in(path: Path) -> set[str]:
    con = _open(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except UnicodeDecodeError as exc:
        raise InputError(path, f"damaged SQLite schema (a name is not UTF-8 at byte {exc.start})") from None
    finally:
        con.close()


def read_db(path: Path, rank: int | None = None) -> tuple[pa.Table, pa.Table, list[str]]:
    """Return (kernels, api_calls, warnings)."""
    con = _open(path)
    try:
        present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "TASK" not in present or "STRING_IDS" not in present:
            raise InputError(path, "no TASK / STRING_IDS tables; expected an msprof or torch_npu profiler export database")
        try:
            kernels = _kernels(con, present, rank)
            api = _api_calls(con, present, rank) if "CANN_API" in present else schemas.empty("api_calls")
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"database query failed: {exc}") from None
        except (pa.ArrowException, TypeError, OverflowError) as exc:
            raise InputError(path, f"unexpected value types in TASK / CANN_API columns ({exc})") from None
    finally:
        con.close()
    warnings = [] if "COMPUTE_TASK_INFO" in present else [f"{path}: no COMPUTE_TASK_INFO table; op names are task types"]
    return kernels, api, warnings


def _kernels(con: sqlite3.Connection, present: set[str], rank: int | None) -> pa.Table:
    task_cols = _columns(con, "TASK")
    has_cti = "COMPUTE_TASK_INFO" in present
    cti_cols = _columns(con, "COMPUTE_TASK_INFO") if has_cti else set()

    def task(col: str) -> str:
        return f"t.{col}" if col in task_cols else "NULL"

    def cti_text(col: str) -> str:
        return f"(SELECT value FROM STRING_IDS WHERE id = c.{col})" if col in cti_cols else "NULL"

    def cti_num(col: str) -> str:
        return f"c.{col}" if col in cti_cols else "NULL"

    select = {
        "start_ns": task("startNs"),
        "end_ns": task("endNs"),
        "device_id": task("deviceId"),
        "stream_id": task("streamId"),
        "task_id": task("taskId"),
        "model_id": task("modelId"),
        "context_id": task("contextId"),
        "connection_id": task("connectionId"),
        "rts_type": "(SELECT value FROM STRING_IDS WHERE id = t.taskType)" if "taskType" in task_cols else "NULL",
        "cti_type": cti_text("taskType"),
        "block_dim": cti_num("blockDim"),
        "mix_block_dim": cti_num("mixBlockDim"),
        "hf32_eligible": cti_text("hf32Eligible"),
        **{k: cti_text(v) for k, v in _CTI_TEXT.items()},
    }
    join = " LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId" if has_cti and "globalTaskId" in task_cols else ""
    if not join:
        for k in ("cti_type", "block_dim", "mix_block_dim", "hf32_eligible", *_CTI_TEXT):
            select[k] = "NULL"
    sql = "SELECT " + ", ".join(f"{v} AS {k}" for k, v in select.items()) + " FROM TASK t" + join + " ORDER BY t.startNs"
    int_cols = ("start_ns", "end_ns", "device_id", "stream_id", "task_id", "model_id", "connection_id", "block_dim", "mix_block_dim")
    raw = _query_table(con, sql, list(select), {c: pa.int64() for c in int_cols})
    n = raw.num_rows
    start_us = pc.divide(raw["start_ns"].cast(pa.float64(), safe=False), 1000.0)
    duration_us = pc.divide(pc.subtract(raw["end_ns"], raw["start_ns"]).cast(pa.float64(), safe=False), 1000.0)
    task_type = pc.coalesce(raw["cti_type"].cast(pa.string()), raw["rts_type"].cast(pa.string()))
    op_name = pc.coalesce(raw["op_name"].cast(pa.string()), task_type)
    model = raw["model_id"]
    cols = {
        "source": pa.array(["db"] * n, pa.string()),
        "rank": pa.array([rank] * n, pa.int32()),
        "device_id": raw["device_id"].cast(pa.int32()),
        "model_id": pc.if_else(pc.equal(model, NO_MODEL_ID), pa.scalar(None, pa.int64()), model),
        "stream_id": raw["stream_id"],
        "task_id": raw["task_id"],
        "op_name": op_name,
        "task_type": task_type,
        "start_us": start_us,
        "start_ns": raw["start_ns"],
        "duration_us": duration_us,
        "block_dim": raw["block_dim"],
        "mix_block_dim": raw["mix_block_dim"],
        "context_id": raw["context_id"].cast(pa.string()),
        "connection_id": raw["connection_id"],
        **{k: raw[k].cast(pa.string()) for k in ("op_type", "op_state", "hf32_eligible", *[c for c in _CTI_TEXT if c != "op_name"])},
    }
    return schemas.conform(pa.table(cols), schemas.KERNELS, keep_extra=True)


def _api_calls(con: sqlite3.Connection, present: set[str], rank: int | None) -> pa.Table:
    cols = _columns(con, "CANN_API")
    level = "(SELECT name FROM ENUM_API_TYPE WHERE id = a.type)" if "ENUM_API_TYPE" in present and "type" in cols else "NULL"
    tid = "a.globalTid" if "globalTid" in cols else "NULL"
    conn = "a.connectionId" if "connectionId" in cols else "NULL"
    sql = (
        f"SELECT a.startNs, a.endNs, {level}, (SELECT value FROM STRING_IDS WHERE id = a.name), {tid}, {conn} "
        "FROM CANN_API a ORDER BY a.startNs"
    )
    names = ["start_ns", "end_ns", "level", "name", "tid", "connection_id"]
    raw = _query_table(con, sql, names, {"start_ns": pa.int64(), "end_ns": pa.int64(), "tid": pa.int64(), "connection_id": pa.int64()})
    n = raw.num_rows
    # globalTid is kept as CANN wrote it (peers use it as the thread id unchanged)
    thread = raw["tid"]
    table = pa.table(
        {
            "source": pa.array(["db"] * n, pa.string()),
            "rank": pa.array([rank] * n, pa.int32()),
            "level": raw["level"].cast(pa.string()),
            "name": raw["name"].cast(pa.string()),
            "start_us": pc.divide(raw["start_ns"].cast(pa.float64(), safe=False), 1000.0),
            "start_ns": raw["start_ns"],
            "duration_us": pc.divide(pc.subtract(raw["end_ns"], raw["start_ns"]).cast(pa.float64(), safe=False), 1000.0),
            "thread_id": thread,
            "connection_id": raw["connection_id"],
        }
    )
    return schemas.conform(table, schemas.API_CALLS)
