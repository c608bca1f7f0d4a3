"""comm_peer_wait on the corpus: each collective whose busiest plane waited more than half of it,
recomputed from the raw trace (json) and the raw .db (sqlite3) in a few plain lines."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from npudiag.profiling.ingest import ingest
from npudiag.profiling.rules import run_rules

LEVEL1 = "msinsight-pytorch-text-2025/level1/rank0_ascend_pt"
DB = "msinsight-pytorch-db-rank1/level1/rank1_ascend_pt"


def _ns(ts) -> int:
    return int(Decimal(str(ts)) * 1000)


def _flagged(ops: dict[str, tuple[int, int]], waits: list[tuple[str, int, float, int | None]], own: int) -> dict:
    """op -> (wait us of its busiest plane, peer of that plane's longest wait) where that wait is over half the op."""
    out = {}
    for op, (s, e) in ops.items():
        planes: dict[int, list] = {}
        for name, plane, us, peer in waits:
            if name == op:
                planes.setdefault(plane, []).append((us, peer))
        if not planes:
            continue
        plane = max(planes, key=lambda p: (sum(u for u, _ in planes[p]), -p))
        total = sum(u for u, _ in planes[plane])
        if total > 0.5 * (e - s) / 1000 and total >= 1000:
            out[op] = (total, max(planes[plane], key=lambda x: x[0])[1])
    return out


def _finding(profile: Path):
    findings, _ = run_rules(ingest([profile]).tables)
    (f,) = [x for x in findings if x.rule_id == "comm_peer_wait"]
    return f


def test_a_trace_collective_waiting_on_a_peer(corpus: Path) -> None:
    events = json.loads((corpus / LEVEL1 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    hccl = [e for e in events if e.get("ph") == "X" and names.get(e["pid"]) == "HCCL"]
    ops = {e["name"]: (_ns(e["ts"]), _ns(e["ts"]) + round(float(e["dur"]) * 1000)) for e in hccl
           if not threads.get((e["pid"], e["tid"]), "").startswith("Plane")}  # fmt: skip
    waits = []
    for e in hccl:
        plane = threads.get((e["pid"], e["tid"]), "")
        if plane.startswith("Plane") and e["name"] == "Notify_Wait":
            t = _ns(e["ts"])
            op = next((n for n, (s, end) in ops.items() if s <= t <= end), None)
            peer = next((r for r in (e["args"]["src rank"], e["args"]["dst rank"]) if r != 0), None)
            waits.append((op, int(plane.split()[1]), float(e["dur"]), peer))
    want = _flagged(ops, waits, 0)
    f = _finding(corpus / LEVEL1)
    got = {o["op_name"]: (o["wait_us"], o["peer_rank"]) for o in f.evidence["ops"]}
    assert set(got) == set(want) and "hcom_allReduce__586_0_1" in want
    for op, (us, peer) in want.items():
        assert got[op][0] == pytest.approx(us, abs=1e-6) and got[op][1] == peer, op
    assert want["hcom_allReduce__586_0_1"][1] == 5 and want["hcom_allReduce__586_0_1"][0] > 78_000
    assert f.title.startswith("hcom_allReduce__586_0_1 waited 78.77 ms of its 79.09 ms for rank 5")
    assert f.time_lost_us == pytest.approx(sum(us for us, _ in want.values()), abs=0.01)  # the waits do not overlap here (ns)


def test_a_db_collective_waiting_on_a_peer(corpus: Path) -> None:
    con = sqlite3.connect(next((corpus / DB / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")))
    text = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    ops = {text[n]: (s, e) for n, s, e in con.execute("SELECT opName, startNs, endNs FROM COMMUNICATION_OP")}
    op_names = {i: text[n] for i, n in con.execute("SELECT opId, opName FROM COMMUNICATION_OP")}
    rows = con.execute("SELECT c.opId, c.planeId, c.taskType, t.startNs, t.endNs, c.srcRank, c.dstRank FROM COMMUNICATION_TASK_INFO c "
                       "JOIN TASK t ON t.globalTaskId = c.globalTaskId").fetchall()  # fmt: skip
    con.close()
    waits = [(op_names[o], p, (e - s) / 1000, next((r for r in (src, dst) if r != 1), None))
             for o, p, ty, s, e, src, dst in rows if text.get(ty) in ("Notify_Wait", "Notify Wait")]  # fmt: skip
    want = _flagged(ops, waits, 1)
    f = _finding(corpus / DB)
    got = {o["op_name"]: (o["wait_us"], o["peer_rank"]) for o in f.evidence["ops"]}
    assert set(got) == set(want) and want
    for op, (us, peer) in want.items():
        assert got[op][0] == pytest.approx(us, abs=1e-6) and got[op][1] == peer, op
    assert max(us for us, _ in want.values()) > 80_000 and f.severity == "critical"
