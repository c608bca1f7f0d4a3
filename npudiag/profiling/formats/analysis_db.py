"""torch_npu's ``analysis.db`` (written beside ``ascend_pytorch_profiler_{rank}.db`` with
``export_type=Db``) → ``steps``, ``comm_ops`` and ``comm_links``.

It holds, as tables, what the text export writes as files (CANN docs, "analysis.db数据说明"):
``StepTraceTime`` = step_trace_time.csv (times in µs), ``CommAnalyzerTime`` = communication.json's
Communication Time Info (start in µs, durations in ms), ``CommAnalyzerMatrix`` =
communication_matrix.json's links (size in MB = 10^6 bytes, time in ms, bandwidth in GB/s).
``CommAnalyzerBandwidth`` (per-transport packet statistics) is not read.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pyarrow as pa

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.profiling.formats.communication import bandwidth_row, is_sample_group
from npudiag.profiling.formats.msprof_db import _open
from npudiag.profiling.formats.registry import FileTables, Format, register

_STEP_COLUMNS = {
    "computing_us": "computing",
    "communication_not_overlapped_us": "communication_not_overlapped",
    "overlapped_us": "overlapped",
    "communication_us": "communication",
    "free_us": "free",
    "step_time_us": "stage",
    "stage_us": "stage",
    "bubble_us": "bubble",
    "communication_not_overlapped_exclude_receive_us": "communication_not_overlapped_and_exclude_receive",
    "preparing_us": "preparing",
}


def _rows(con: sqlite3.Connection, table: str) -> tuple[list[str], list[tuple]]:
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    return cols, con.execute(f'SELECT * FROM "{table}"').fetchall()


def _num(path: Path, table: str, value: object) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, (bool, bytes)):
        raise InputError(path, f"{table}: {value!r} where a number was expected")
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(path, f"{table}: {str(value)[:40]!r} where a number was expected") from None
    return out if out == out else None


def _step_id(value: object) -> int | None:
    text = str(value).strip() if value is not None else ""
    text = text[4:] if text.startswith("step") else text
    return int(text) if text.lstrip("-").isdigit() and len(text) < 19 else None


def read_analysis_db(path: Path, rank: int | None = None) -> tuple[dict[str, pa.Table], list[str]]:
    """(``{"steps", "comm_ops", "comm_links", "comm_bandwidth"}``, warnings); a missing table gives an empty one."""
    con = _open(path)
    try:
        present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        out = {name: schemas.empty(name) for name in ("steps", "comm_ops", "comm_links", "comm_bandwidth")}
        warnings: list[str] = []
        try:
            if "StepTraceTime" in present:
                out["steps"] = _steps(path, con, rank)
            if "CommAnalyzerTime" in present:
                out["comm_ops"] = _comm_ops(path, con, rank)
            if "CommAnalyzerMatrix" in present:
                out["comm_links"] = _comm_links(path, con, rank)
            if "CommAnalyzerBandwidth" in present:
                try:  # optional figures: unusable ones leave the steps and op times of the file read
                    out["comm_bandwidth"] = _comm_bandwidth(path, con, rank)
                except InputError as exc:
                    warnings.append(f"{path}: CommAnalyzerBandwidth was not read ({exc.problem})")
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"database query failed: {exc}") from None
    finally:
        con.close()
    return out, warnings


def _steps(path: Path, con: sqlite3.Connection, rank: int | None) -> pa.Table:
    cols, rows = _rows(con, "StepTraceTime")
    rows_out = []
    for r in rows:
        d = dict(zip(cols, r))
        row = {"source": "step_trace", "rank": rank, "step": _step_id(d.get("step"))}
        for ours, theirs in _STEP_COLUMNS.items():
            row[ours] = _num(path, "StepTraceTime", d.get(theirs))
        rows_out.append(row)
    return pa.Table.from_pylist(rows_out, schema=schemas.STEPS) if rows_out else schemas.empty("steps")


def _ms(path: Path, table: str, v: object) -> float | None:
    x = _num(path, table, v)
    return x * 1000.0 if x is not None else None


def _comm_ops(path: Path, con: sqlite3.Connection, rank: int | None) -> pa.Table:
    cols, rows = _rows(con, "CommAnalyzerTime")
    out = []
    for r in rows:
        d = dict(zip(cols, r))
        t = "CommAnalyzerTime"
        out.append(
            {
                "rank": rank,
                "step": None if d.get("step") is None else str(d.get("step")),
                "kind": d.get("type"),
                "op_name": None if d.get("hccl_op_name") is None else str(d.get("hccl_op_name")),
                "start_us": _num(path, t, d.get("start_timestamp")),
                "elapse_us": _ms(path, t, d.get("elapse_time")),
                "transit_us": _ms(path, t, d.get("transit_time")),
                "wait_us": _ms(path, t, d.get("wait_time")),
                "synchronization_us": _ms(path, t, d.get("synchronization_time")),
                "idle_us": _ms(path, t, d.get("idle_time")),
            }
        )
    return pa.Table.from_pylist(out, schema=schemas.COMM_OPS) if out else schemas.empty("comm_ops")


def _comm_bandwidth(path: Path, con: sqlite3.Connection, rank: int | None) -> pa.Table:
    """CommAnalyzerBandwidth has one row per (op, transport, packet size); the op's transit figures
    repeat on each, so one row per (step, op, transport) is kept."""
    cols, rows = _rows(con, "CommAnalyzerBandwidth")
    out, seen = [], set()
    t = "CommAnalyzerBandwidth"
    for r in rows:
        d = dict(zip(cols, r))
        step, op, transport = d.get("step"), d.get("hccl_op_name"), d.get("transport_type")
        if (step, op, transport) in seen:
            continue
        seen.add((step, op, transport))
        figures = (_num(path, t, d.get(k)) for k in ("transit_size", "transit_time", "bandwidth", "large_packet_ratio"))
        kind = d.get("type")
        row = bandwidth_row(
            path,
            rank,
            None if step is None else str(step),
            None if kind is None else str(kind),
            None if op is None else str(op),
            transport,
            *figures,
        )
        if row is not None:
            out.append(row)
    return pa.Table.from_pylist(out, schema=schemas.COMM_BANDWIDTH) if out else schemas.empty("comm_bandwidth")


def _rank_of(v: object) -> int | None:
    text = str(v).strip() if v is not None else ""
    return int(text) if text.isdigit() and len(text) < 10 else None


def _comm_links(path: Path, con: sqlite3.Connection, rank: int | None) -> pa.Table:
    cols, rows = _rows(con, "CommAnalyzerMatrix")
    out = []
    for r in rows:
        d = dict(zip(cols, r))
        group = str(d.get("hccl_op_name") or "")
        if is_sample_group(group):
            continue
        t = "CommAnalyzerMatrix"
        size_mb = _num(path, t, d.get("transit_size"))
        out.append(
            {
                "rank": rank,
                "step": None if d.get("step") is None else str(d.get("step")),
                "kind": d.get("type"),
                "op_group": f"{group}@{d.get('group_name')}" if d.get("group_name") is not None else group,
                "op_name": d.get("op_name"),
                "src_rank": _rank_of(d.get("src_rank")),
                "dst_rank": _rank_of(d.get("dst_rank")),
                "transport": d.get("transport_type"),
                "size_bytes": round(size_mb * 1e6) if size_mb is not None else None,
                "time_us": _ms(path, t, d.get("transit_time")),
                "bandwidth_gbps": _num(path, t, d.get("bandwidth")),
            }
        )
    return pa.Table.from_pylist(out, schema=schemas.COMM_LINKS) if out else schemas.empty("comm_links")


register(
    Format(
        "analysis_db",
        re.compile(r"^analysis\.db$"),
        lambda path, rank: FileTables(*read_analysis_db(path, rank)),
        ("steps", "comm_ops", "comm_links", "comm_bandwidth"),
        sources={"steps": 1, "comm_links": 1, "comm_ops": 1, "comm_bandwidth": 1},
    )
)
