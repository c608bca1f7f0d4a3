"""torch_npu's communication_matrix.json (per link) and communication.json (per collective op).

Both are ``{step: {"p2p"|"collective": {op: ...}}}``. The matrix gives, per ``"src-dst"`` rank
pair, Transport Type, Transit Size(MB) (10^6 bytes: 8 MiB shows as 8.388608), Transit Time(ms),
Bandwidth(GB/s), Op Name; communication.json gives each op's Communication Time Info (Start
Timestamp(us), Elapse / Transit / Wait / Synchronization / Idle Time(ms)) and its Communication
Bandwidth Info (per transport: Transit Size(MB), Transit Time(ms), Bandwidth(GB/s), Large Packet
Ratio). The "Total Op Info" entries are totals, skipped.

The matrix groups each op kind's links several ways: ``allreduce-total@<group>`` holds every link's
totals; ``-top1`` / ``-middle`` / ``-bottom1..3`` are sample ops (the slowest, a middle one, the
fastest) whose links the total already holds, so they are skipped: adding them counted each byte
3 to 4 times. Groups of any other name (one op's links) are kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.errors import InputError
from npudiag.profiling.formats.registry import FileTables, Format, register
from npudiag.safeio import load_json
from npudiag.schemas import COMM_BANDWIDTH, COMM_LINKS, COMM_OPS

_LINK = re.compile(r"^(\d+)-(\d+)$")
_SAMPLE_GROUP = re.compile(r"-(top\d+|middle|bottom\d+)(@|$)")


def is_sample_group(group: str) -> bool:
    """``allreduce-top1@...``: a sample op's links, which the ``-total@`` group already counts."""
    return _SAMPLE_GROUP.search(group) is not None


def _kinds(path: Path, step: str, kinds: object) -> dict[str, dict]:
    if not isinstance(kinds, dict):
        raise InputError(path, f"step {step!r}: expected an object of p2p / collective")
    for kind, ops in kinds.items():
        if ops is not None and not isinstance(ops, dict):
            raise InputError(
                path, f"step {step!r}, {kind!r}: expected an object of communication ops, found {type(ops).__name__}"
            )
    return {k: v or {} for k, v in kinds.items()}


def _load(path: Path) -> dict[str, Any]:
    data = load_json(path, 1 << 30)
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object of steps")
    return data


def _num(path: Path, d: dict, key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(path, f"{key!r} is {v!r}, expected a number")
    return float(v)


def read_matrix(path: Path, rank: int | None) -> pa.Table:
    rows = []
    for step, kinds in _load(path).items():
        for kind, ops in _kinds(path, step, kinds).items():
            for group, links in ops.items():
                if not isinstance(links, dict) or group.startswith("Total") or is_sample_group(group):
                    continue
                for pair, info in links.items():
                    m = _LINK.match(pair)
                    if not m or not isinstance(info, dict):
                        continue
                    size_mb = _num(path, info, "Transit Size(MB)")
                    time_ms = _num(path, info, "Transit Time(ms)")
                    rows.append(
                        {
                            "rank": rank,
                            "step": step,
                            "kind": kind,
                            "op_group": group,
                            "op_name": info.get("Op Name"),
                            "src_rank": int(m.group(1)),
                            "dst_rank": int(m.group(2)),
                            "transport": info.get("Transport Type"),
                            "size_bytes": round(size_mb * 1e6) if size_mb is not None else None,
                            "time_us": time_ms * 1000 if time_ms is not None else None,
                            "bandwidth_gbps": _num(path, info, "Bandwidth(GB/s)"),
                        }
                    )
    return pa.Table.from_pylist(rows, schema=COMM_LINKS) if rows else COMM_LINKS.empty_table()


def read_communication_tables(path: Path, rank: int | None) -> tuple[dict[str, pa.Table], list[str]]:
    """(``{"comm_ops", "comm_bandwidth"}``, warnings) from one read of communication.json; an op whose
    bandwidth figures are unusable keeps its times, and a warning counts such ops."""
    rows, bw, skipped = [], [], []
    for step, kinds in _load(path).items():
        for kind, ops in _kinds(path, step, kinds).items():
            for op, info in ops.items():
                if op.startswith("Total") or not isinstance(info, dict):
                    continue
                t = info.get("Communication Time Info") or {}
                if not isinstance(t, dict):
                    continue

                def ms(key: str, t: dict = t) -> float | None:
                    v = _num(path, t, key)
                    return v * 1000 if v is not None else None

                rows.append(
                    {
                        "rank": rank,
                        "step": step,
                        "kind": kind,
                        "op_name": op,
                        "start_us": _num(path, t, "Start Timestamp(us)"),
                        "elapse_us": ms("Elapse Time(ms)"),
                        "transit_us": ms("Transit Time(ms)"),
                        "wait_us": ms("Wait Time(ms)"),
                        "synchronization_us": ms("Synchronization Time(ms)"),
                        "idle_us": ms("Idle Time(ms)"),
                    }
                )
                try:  # optional figures: an op whose bandwidth part is unusable keeps its times
                    bw.extend(
                        _bandwidth_rows(path, rank, step, kind, op, info.get("Communication Bandwidth Info") or {})
                    )
                except InputError as exc:
                    skipped.append(exc.problem)
    warnings = []
    if skipped:
        warnings.append(f"{path}: the Communication Bandwidth Info of {len(skipped)} op(s) was not read ({skipped[0]})")
    return {
        "comm_ops": pa.Table.from_pylist(rows, schema=COMM_OPS) if rows else COMM_OPS.empty_table(),
        "comm_bandwidth": pa.Table.from_pylist(bw, schema=COMM_BANDWIDTH) if bw else COMM_BANDWIDTH.empty_table(),
    }, warnings


def _bandwidth_rows(path: Path, rank, step, kind, op, transports: object) -> list[dict[str, Any]]:
    if not isinstance(transports, dict):
        raise InputError(path, f"{op!r}: 'Communication Bandwidth Info' is not an object")
    out = []
    for transport, b in transports.items():
        if not isinstance(b, dict):
            raise InputError(path, f"{op!r}, {transport!r}: expected an object of transit figures")
        row = bandwidth_row(path, rank, step, kind, op, transport, *(_num(path, b, k) for k in BANDWIDTH_KEYS))
        if row is not None:
            out.append(row)
    return out


BANDWIDTH_KEYS = ("Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)", "Large Packet Ratio")


def bandwidth_row(path: Path, rank, step, kind, op, transport, size_mb, time_ms, gbps, large) -> dict[str, Any] | None:
    """One COMM_BANDWIDTH row (sizes in MB of 10^6 bytes, times in ms, as both exports write them);
    None for a transport that moved nothing."""
    if not size_mb and not time_ms:
        return None
    if (size_mb or 0) < 0 or (time_ms or 0) < 0 or (size_mb or 0) > 1e12:
        raise InputError(path, f"{op!r}, {transport!r}: transit size {size_mb} MB / time {time_ms} ms out of range")
    return {
        "rank": rank,
        "step": step,
        "kind": kind,
        "op_name": op,
        "transport": str(transport),
        "size_bytes": None if size_mb is None else round(size_mb * 1e6),
        "time_us": None if time_ms is None else time_ms * 1000.0,
        "bandwidth_gbps": gbps,
        "large_packet_pct": None if large is None else large * 100.0,
    }


register(
    Format(
        "communication_matrix",
        re.compile(r"^communication_matrix[^/]*\.json$"),
        lambda path, rank: FileTables({"comm_links": read_matrix(path, rank)}),
        ("comm_links",),
        sources={"comm_links": 0},
    )
)
register(
    Format(
        "communication",
        re.compile(r"^communication(_\d+)?\.json$"),
        lambda path, rank: FileTables(*read_communication_tables(path, rank)),
        ("comm_ops", "comm_bandwidth"),
        sources={"comm_ops": 0, "comm_bandwidth": 0},
    )
)
