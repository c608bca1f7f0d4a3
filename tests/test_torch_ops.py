"""Framework ops (torch_ops) and compare --level torch, recomputed from the raw trace with json and
from the raw .db with sqlite3, in plain loops independent of npudiag's array code."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from npudiag.profiling.ingest import ingest

from .helpers import run_cli

LEVEL0 = "msinsight-pytorch-text-2025/level0/rank0_ascend_pt"
DB = "msinsight-pytorch-db-rank1/level1/rank1_ascend_pt"


def _ns(ts) -> int:
    return int(Decimal(str(ts)) * 1000)


def _innermost_framework(ops: list[dict], thread, ns: int) -> dict | None:
    """The innermost op with '::' in its name on ``thread`` around ``ns``; else the innermost op."""
    around = [o for o in ops if o["thread"] == thread and o["start"] <= ns <= o["end"]]
    if not around:
        return None
    around.sort(key=lambda o: (o["start"], -o["end"]))
    framework = [o for o in around if "::" in o["name"]]
    return framework[-1] if framework else around[-1]


def _per_name(ops: list[dict]) -> dict[str, dict]:
    """calls, host total / self (minus direct children on the thread), device, kernels per name."""
    by_thread = defaultdict(list)
    for o in ops:
        by_thread[o["thread"]].append(o)
    for group in by_thread.values():
        group.sort(key=lambda o: (o["start"], -o["end"]))
        stack: list[dict] = []
        for o in group:
            while stack and stack[-1]["end"] < o["end"]:
                stack.pop()
            if stack:
                stack[-1]["children"] += o["end"] - o["start"]
            stack.append(o)
    out: dict[str, dict] = defaultdict(lambda: {"calls": 0, "total": 0, "self": 0, "device": 0.0, "kernels": 0})
    for o in ops:
        r = out[o["name"]]
        r["calls"] += 1
        r["total"] += o["end"] - o["start"]
        r["self"] += max(o["end"] - o["start"] - o["children"], 0)
        r["device"] += o["device"]
        r["kernels"] += o["kernels"]
    return out


def test_torch_ops_of_a_real_trace_equal_a_recount_with_json(corpus: Path) -> None:
    """Level0 trace_view.json: every torch_to_npu flow's kernel (Ascend Hardware task starting at the
    flow's end on that stream) belongs to the innermost aten op around the flow's start (through the
    task queue's Enqueue when the start lies in a Dequeue)."""
    unit = corpus / LEVEL0
    events = json.loads((unit / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    ops = [{"thread": (e["pid"], e["tid"]), "start": _ns(e["ts"]), "end": _ns(e["ts"]) + round(float(e["dur"]) * 1000),
            "name": e["name"], "children": 0, "device": 0.0, "kernels": 0}
           for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]  # fmt: skip
    tasks = {(e["pid"], e["tid"], _ns(e["ts"])): e for e in events if e.get("ph") == "X" and names.get(e["pid"]) == "Ascend Hardware"}
    deq = [e for e in events if e.get("ph") == "X" and e.get("cat") == "dequeue"]
    enq = {e["args"]["correlation_id"]: e for e in events if e.get("ph") == "X" and e.get("cat") == "enqueue"}
    starts = {e["id"]: e for e in events if e.get("cat") == "async_npu" and e["ph"] == "s"}
    linked = 0
    for f in (e for e in events if e.get("cat") == "async_npu" and e["ph"] == "f"):
        task = tasks.get((f["pid"], f["tid"], _ns(f["ts"])))
        s = starts.get(f["id"])
        if task is None or s is None:
            continue
        assert task["args"]["Task Type"] in {"AI_CORE", "MIX_AIV", "SDMA_SQE", "PCIE_DMA_SQE", "DSA_SQE"}  # compute or copy, all kept
        thread, ns = (s["pid"], s["tid"]), _ns(s["ts"])
        for d in deq:
            if (d["pid"], d["tid"]) == thread and _ns(d["ts"]) <= ns <= _ns(d["ts"]) + round(d["dur"] * 1000):
                e = enq[d["args"]["correlation_id"]]
                thread, ns = (e["pid"], e["tid"]), _ns(e["ts"])
        owner = _innermost_framework(ops, thread, ns)
        if owner is not None:
            owner["device"] += float(task["dur"])
            owner["kernels"] += 1
            linked += 1
    want = _per_name(ops)
    got = {r["name"]: r for r in ingest([unit]).tables["torch_ops"].to_pylist()}
    assert linked == 206 and sum(r["kernels"] for r in got.values()) == linked
    assert set(got) == set(want) and len(got) == 134
    for name, w in want.items():
        g = got[name]
        assert (g["calls"], g["kernels"]) == (w["calls"], w["kernels"]), name
        assert g["device_us"] == pytest.approx(w["device"], abs=1e-6), name
        assert g["host_total_us"] == pytest.approx(w["total"] / 1000, abs=1e-6), name
        assert g["host_self_us"] == pytest.approx(w["self"] / 1000, abs=1e-6), name
    assert max(got.values(), key=lambda r: r["device_us"])["name"] == "aten::convolution_backward"


def _db_queue(con: sqlite3.Connection) -> tuple[list[tuple], dict]:
    """The .db's task queue: Dequeue rows (thread, start, end, correlation) and each correlation's
    Enqueue (thread, start); an Enqueue and its Dequeue share a CONNECTION_IDS connection id."""
    q = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'queue'").fetchone()[0]
    rows = con.execute("SELECT p.globalTid, p.startNs, p.endNs, c.connectionId, s.value FROM PYTORCH_API p "
                       "JOIN CONNECTION_IDS c ON c.id = p.connectionId JOIN STRING_IDS s ON s.id = p.name WHERE p.type = ?",
                       (q,)).fetchall()  # fmt: skip
    deq = [(r[0], int(r[1]), int(r[2]), r[3]) for r in rows if r[4].startswith("Dequeue")]
    enq = {r[3]: (r[0], int(r[1])) for r in rows if r[4] == "Enqueue"}
    return deq, enq


def _relay(deq: list[tuple], enq: dict, thread, ns: int) -> tuple:
    for t, s, e, corr in deq:
        if t == thread and s <= ns <= e and corr in enq:
            return enq[corr]
    return thread, ns


def test_torch_ops_of_a_real_db_equal_a_recount_with_sqlite(corpus: Path) -> None:
    """The .db export: PYTORCH_API rows of type op, their CONNECTION_IDS, the TASK rows with those
    connection ids that are compute kernels (COMPUTE_TASK_INFO) or copies (MEMCPY tasks); a task no op
    links to (the copies) was launched where its CANN_API call ran, and a launch inside the task
    queue's Dequeue belongs to the op around the matching Enqueue."""
    unit = corpus / DB
    con = sqlite3.connect(next((unit / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")))
    op_type = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'op'").fetchone()[0]
    rows = con.execute("SELECT p.rowid, p.startNs, p.endNs, p.globalTid, s.value FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
                       "WHERE p.type = ?", (op_type,)).fetchall()  # fmt: skip
    ops = {r[0]: {"thread": r[3], "start": int(r[1]), "end": int(r[2]), "name": r[4], "children": 0, "device": 0.0, "kernels": 0}
           for r in rows}  # fmt: skip
    device_work = "(t.globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO) OR ty.value LIKE 'MEMCPY%')"
    links = con.execute(
        "SELECT p.rowid, t.startNs, t.endNs, t.connectionId FROM PYTORCH_API p JOIN CONNECTION_IDS c ON c.id = p.connectionId "
        f"JOIN TASK t ON t.connectionId = c.connectionId JOIN STRING_IDS ty ON ty.id = t.taskType WHERE p.type = ? AND {device_work}",
        (op_type,),
    ).fetchall()
    linked = {r[3] for r in links}
    by_call = con.execute(
        "SELECT t.startNs, t.endNs, t.connectionId, (SELECT a.globalTid FROM CANN_API a WHERE a.connectionId = t.connectionId "
        "ORDER BY a.startNs, a.globalTid LIMIT 1), (SELECT min(a.startNs) FROM CANN_API a WHERE a.connectionId = t.connectionId) "
        f"FROM TASK t JOIN STRING_IDS ty ON ty.id = t.taskType WHERE {device_work} AND t.connectionId IS NOT NULL"
    ).fetchall()
    deq, enq = _db_queue(con)
    con.close()
    counted = 0
    for rowid, start, end, _ in links:
        op = ops[rowid]
        thread, ns = _relay(deq, enq, op["thread"], op["start"])
        owner = (
            op
            if (thread, ns) == (op["thread"], op["start"]) and "::" in op["name"]
            else _innermost_framework(list(ops.values()), thread, ns)
        )
        owner = owner or op
        owner["device"] += (int(end) - int(start)) / 1000
        owner["kernels"] += 1
        counted += 1
    for start, end, conn, thread, ns in by_call:
        if conn in linked or thread is None:
            continue
        owner = _innermost_framework(list(ops.values()), *_relay(deq, enq, thread, int(ns)))
        if owner is not None:
            owner["device"] += (int(end) - int(start)) / 1000
            owner["kernels"] += 1
            counted += 1
    want = _per_name(list(ops.values()))
    got = {r["name"]: r for r in ingest([unit]).tables["torch_ops"].to_pylist()}
    assert len(links) > 100 and counted > len(links)  # the copies through their launch call
    assert sum(r["kernels"] for r in got.values()) == counted
    assert set(got) == set(want)
    for name, w in want.items():
        assert (got[name]["calls"], got[name]["kernels"]) == (w["calls"], w["kernels"]), name
        assert got[name]["device_us"] == pytest.approx(w["device"], abs=1e-6), name
        assert got[name]["host_self_us"] == pytest.approx(w["self"] / 1000, abs=1e-6), name


def test_compare_level_torch_matches_framework_ops_and_warns_on_little_overlap(corpus: Path, tmp_path: Path) -> None:
    """Level0 text export vs the Level1 .db export of the same model: Level0 writes no op types, so the
    kernels once shared no key; with the types taken from the op names they match, and the framework
    ops match too, their device times the two sides' torch_ops. Two different models (PyTorch and
    MindSpore) share few op types: the kernel-level compare warns and names --level torch."""
    a, b = corpus / LEVEL0, corpus / DB
    kernel = run_cli("compare", a, b, "--out", tmp_path / "k", "--json")
    assert kernel.returncode == 0, kernel.stderr
    k = json.loads(kernel.stdout)
    assert k["ops"]["matched_share"]["baseline"] > 0.9 and "--level torch" not in kernel.stderr
    other = run_cli("compare", a, corpus / "mindinsight-prof-device0-2023", "--out", tmp_path / "k2", "--json")
    assert json.loads(other.stdout)["ops"]["matched_share"]["baseline"] < 0.5 and "--level torch" in other.stderr
    torch = run_cli("compare", a, b, "--out", tmp_path / "t", "--json", "--level", "torch")
    assert torch.returncode == 0, torch.stderr
    t = json.loads(torch.stdout)
    assert t["ops"]["match_by"] == "torch" and t["ops"]["matched_share"]["baseline"] > 0.9
    sides = [{r["name"]: r for r in ingest([p]).tables["torch_ops"].to_pylist()} for p in (a, b)]
    rows = {r["key"]: r for r in t["ops"]["rows"]}
    for name in ("aten::addmm", "aten::mm", "aten::convolution_backward"):
        assert rows[name]["status"] == "both"
        assert rows[name]["base_total_us"] == pytest.approx(sides[0][name]["device_us"])
        assert rows[name]["cur_total_us"] == pytest.approx(sides[1][name]["device_us"])
        assert rows[name]["cur_host_self_us"] == pytest.approx(sides[1][name]["host_self_us"])
    text = run_cli("compare", a, b, "--out", tmp_path / "t2", "--level", "torch", env={"COLUMNS": "80"}).stdout
    assert "Framework ops, largest change first" in text and "aten::addmm" in text


def test_nesting_and_ownership_by_hand_with_timestamps_far_apart() -> None:
    """aten::a (0-100 ns) holds aclnnA (10-50): a kernel launched at 20 ns belongs to aten::a (the
    framework op around the aclnn call); aten::a's self time is 100 - 40 ns. An op 9e17 ns later on a
    thread with a 2^40 id must not overflow the keys."""
    import numpy as np

    from npudiag.profiling.formats.torch_ops import torch_op_table

    far = 9 * 10**17
    t = torch_op_table(["aten::a", "aclnnA", "aten::b"], np.array([7, 7, 2**40]), np.array([0, 10, far]), np.array([100, 50, far + 5]),
                       np.array([7]), np.array([20]), np.array([3.0]), 0)  # fmt: skip
    rows = {r["name"]: r for r in t.to_pylist()}
    assert (rows["aten::a"]["device_us"], rows["aten::a"]["kernels"], rows["aclnnA"]["kernels"]) == (3.0, 1, 0)
    assert rows["aten::a"]["host_self_us"] == pytest.approx(0.06) and rows["aten::b"]["host_total_us"] == pytest.approx(0.005)
