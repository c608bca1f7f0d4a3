"""idle_gaps: each device gap of a step given to what delayed the launch of the task ending it.

On the corpus Level0 / Level1 traces and the .db export every gap's task, launch call, launching
thread, framework op, cause and kind are recomputed from the raw file (json / sqlite3, plain loops
here, not npudiag's code) and agree row for row. Generated torch_npu-shaped traces plant one case of
each kind (op compilation, another CANN call on the launching thread, a sync, a DataLoader fetch, a
framework op that issued its kernel late) before, between and after the tasks of a step. Property:
no gap is called sync unless a synchronising call overlaps at least half of it."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from .helpers import run_cli

LEVEL1 = "msinsight-pytorch-text-2025/level1/rank0_ascend_pt"
LEVEL0 = "msinsight-pytorch-text-2025/level0/rank0_ascend_pt"
DB = "msinsight-pytorch-db-rank1/level1/rank1_ascend_pt"
SYNC_CALLS = ("Synchronize", "StreamSync", "DeviceSync", "EventSync", "QueryEvent", "MemCopySync", "aclrtMemcpy")
SYNC_OPS = {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero", "aten::equal", "aten::masked_select"}


def _ns(ts) -> int:
    return int(Decimal(str(ts)) * 1000)


def _end(ts, dur) -> int:
    return _ns(ts) + round(float(dur) * 1000)


def _outermost(ops: list[dict], thread, ns: int) -> str | None:
    """The framework op ('::') the user's code called around (thread, ns): the innermost op around the
    point climbed to the nearest framework op, then up while the enclosing op is a framework op too."""
    around = sorted((o for o in ops if o["thread"] == thread and o["s"] <= ns <= o["e"]), key=lambda o: (o["s"], -o["e"]))
    while around and "::" not in around[-1]["name"]:
        around.pop()
    if not around:
        return None
    i = len(around) - 1
    while i > 0 and "::" in around[i - 1]["name"]:
        i -= 1
    return around[i]["name"]


def _cause(gap_s: int, gap_e: int, thread, calls: list[dict], ops: list[dict], launched_by: str | None) -> tuple[str | None, str]:
    """The rule of docs/rules.md, from plain lists: calls (label, thread, s, e) and framework ops (name, thread, s, e)."""
    mid = gap_s + (gap_e - gap_s) // 2
    on = [c for c in calls if thread is not None and c["thread"] == thread and c["s"] <= mid <= c["e"]]
    longest = lambda cs: sorted(cs, key=lambda c: (-(c["e"] - c["s"]), c["s"]))[0]["label"]  # noqa: E731
    compiling = [c for c in on if "compile" in c["label"].lower()]
    if thread is None:  # no call carries the task's connection id: a compile on any thread
        compiling = [c for c in calls if "compile" in c["label"].lower() and c["s"] <= mid <= c["e"]]
    if compiling:
        return longest(compiling), "op_compile"
    busy = [c for c in on if not any(k in c["label"] for k in SYNC_CALLS)]
    if busy:
        return longest(busy), "host_api"
    # of equal overlaps: a CANN call before a framework op, then the earliest to start
    waits = [
        (min(c["e"], gap_e) - max(c["s"], gap_s), c)
        for c in sorted(calls, key=lambda c: c["s"])
        if any(k in c["label"] for k in SYNC_CALLS) and c["s"] <= mid <= c["e"]
    ]
    waits += [
        (min(o["e"], gap_e) - max(o["s"], gap_s), {**o, "label": o["name"]})
        for o in sorted(ops, key=lambda o: o["s"])
        if o["name"] in SYNC_OPS and o["s"] <= mid <= o["e"]
    ]
    if waits:
        overlap, best = max(waits, key=lambda w: w[0])
        if 2 * overlap >= gap_e - gap_s:
            return best["label"], "sync"
    loading = [o for o in ops if o["name"].startswith("enumerate(DataLoader)") and o["s"] <= mid <= o["e"]]
    if loading:
        return min(loading, key=lambda o: o["e"] - o["s"])["name"], "dataloader"
    if launched_by is not None:
        return launched_by, "dispatch"
    return None, "none"


def _launch(calls: list[dict], conn) -> dict | None:
    """The CANN call carrying the connection id (of several, the one starting last)."""
    found = [c for c in calls if conn is not None and c["conn"] == conn]
    return max(found, key=lambda c: (c["s"], c["i"])) if found else None


def _relay(deq: list[tuple], enq: dict, thread, ns: int) -> tuple:
    """A point inside a Dequeue moved to the Enqueue with its correlation."""
    for t, s, e, corr in deq:
        if t == thread and s <= ns <= e and corr in enq:
            return enq[corr]
    return thread, ns


def _check_rows(rows: list[dict], tasks_at, calls: list[dict], ops: list[dict], launcher) -> dict:
    """Each placed gap recomputed: its task (a raw task starting at the gap's end; after the last task,
    the first one after it), its launch call and thread, the op that issued it, cause and kind."""
    kinds: dict[str, float] = {}
    for r in rows:
        if r["start_ns"] is None:
            continue
        gap_s = r["start_ns"]
        gap_e = gap_s + round(r["idle_us"] * 1000)
        task = tasks_at(gap_e, r["next_task"])
        assert (task is None) == (r["next_task"] is None), r
        launch = _launch(calls, task["conn"]) if task else None
        thread = launch["thread"] if launch else None
        assert r["launch_call"] == (launch["label"] if launch else None), r
        assert r["launch_thread_id"] == thread, r
        launched_by = launcher(task) if task else None
        assert r["launched_by"] == launched_by, r
        cause, kind = _cause(gap_s, gap_e, thread, calls, ops, launched_by)
        assert (r["cause"], r["kind"]) == (cause, kind), r
        kinds[kind] = kinds.get(kind, 0.0) + r["idle_us"]
    return kinds


def _analyze(src: Path, out: Path) -> list[dict]:
    r = run_cli("analyze", src, "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    return pq.read_table(out / "idle_gaps.parquet").to_pylist()


def _trace_sources(events: list[dict]):
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    xs = [e for e in events if e.get("ph") == "X"]
    calls = [{"label": f"{e['args']['level']}@{e['name'].split('@', 1)[1]}", "thread": e["tid"], "s": _ns(e["ts"]),
              "e": _end(e["ts"], e["dur"]), "conn": e["args"].get("connection_id"), "i": i}
             for i, e in enumerate(x for x in xs if names.get(x["pid"]) == "CANN")]  # fmt: skip
    ops = [{"name": e["name"], "thread": (e["pid"], e["tid"]), "s": _ns(e["ts"]), "e": _end(e["ts"], e["dur"])}
           for e in xs if e.get("cat") == "cpu_op" and not e["name"].startswith("ProfilerStep#")]  # fmt: skip
    all_ops = ops + [{"name": e["name"], "thread": (e["pid"], e["tid"]), "s": _ns(e["ts"]), "e": _end(e["ts"], e["dur"])}
                     for e in xs if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")]  # fmt: skip
    tasks = [e for e in xs if names.get(e["pid"]) in ("Ascend Hardware", "HCCL") and "Task Type" in e.get("args", {})
             or (names.get(e["pid"]) == "HCCL" and "connection_id" in e.get("args", {}))]  # fmt: skip
    deq = [
        ((e["pid"], e["tid"]), _ns(e["ts"]), _end(e["ts"], e["dur"]), e["args"]["correlation_id"]) for e in xs if e.get("cat") == "dequeue"
    ]
    enq = {e["args"]["correlation_id"]: ((e["pid"], e["tid"]), _ns(e["ts"])) for e in xs if e.get("cat") == "enqueue"}
    flow_s = {e["id"]: e for e in events if e.get("cat") == "async_npu" and e.get("ph") == "s"}
    flow_f = {(e["pid"], e["tid"], _ns(e["ts"])): e["id"] for e in events if e.get("cat") == "async_npu" and e.get("ph") == "f"}

    def tasks_at(gap_e: int, name: str | None) -> dict | None:
        after = sorted((t for t in tasks if _ns(t["ts"]) >= gap_e and t["name"] == name), key=lambda t: _ns(t["ts"]))
        if not after:
            return None
        t = after[0]
        return {"conn": t["args"].get("connection_id"), "key": (t["pid"], t["tid"], _ns(t["ts"]))}

    def launcher(task: dict) -> str | None:
        fid = flow_f.get(task["key"])
        if fid is None or fid not in flow_s:
            return None
        s = flow_s[fid]
        return _outermost(all_ops, *_relay(deq, enq, (s["pid"], s["tid"]), _ns(s["ts"])))

    return tasks_at, calls, ops, launcher


@pytest.mark.parametrize("profile", [LEVEL1, LEVEL0])
def test_every_gap_of_a_real_trace_is_recomputed_from_the_json(corpus: Path, tmp_path: Path, profile: str) -> None:
    rows = _analyze(corpus / profile, tmp_path / "o")
    events = json.loads((corpus / profile / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    kinds = _check_rows(rows, *_trace_sources(events))
    assert len(rows) > 50
    if profile == LEVEL1:  # the largest gaps are op compilations (aclopCompileAndExecute on torch_npu's dequeue thread)
        top = sorted((r for r in rows if r["place"] == "between_tasks"), key=lambda r: -r["idle_us"])[:2]
        assert [(r["kind"], r["cause"]) for r in top] == [("op_compile", "acl@aclopCompileAndExecute")] * 2
        assert kinds["op_compile"] > 5000 and kinds["dispatch"] > kinds["op_compile"] and kinds["sync"] > 0 and kinds["host_api"] > 0
        assert {r["place"] for r in rows} == {"before_first_task", "between_tasks", "after_last_task"}


def test_every_gap_of_a_real_db_is_recomputed_with_sqlite(corpus: Path, tmp_path: Path) -> None:
    rows = _analyze(corpus / DB, tmp_path / "o")
    con = sqlite3.connect(next((corpus / DB / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")))
    text = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    level = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE"))
    calls = [{"label": f"{level[t]}@{text[n]}", "thread": tid, "s": s, "e": e, "conn": c, "i": i}
             for i, (s, e, t, tid, c, n) in enumerate(con.execute(
                 "SELECT startNs, endNs, type, globalTid, connectionId, name FROM CANN_API ORDER BY startNs"))]  # fmt: skip
    op_type = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'op'").fetchone()[0]
    ops = [{"name": text[n], "thread": tid, "s": int(s), "e": int(e), "id": cid}
           for s, e, tid, n, cid in con.execute(
               "SELECT startNs, endNs, globalTid, name, connectionId FROM PYTORCH_API WHERE type = ?", (op_type,))]  # fmt: skip
    links = {}
    for op_id, conn in con.execute("SELECT id, connectionId FROM CONNECTION_IDS"):
        links.setdefault(conn, []).append(op_id)
    q = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'queue'").fetchone()[0]
    queue = con.execute("SELECT p.globalTid, p.startNs, p.endNs, c.connectionId, s.value FROM PYTORCH_API p JOIN CONNECTION_IDS c "
                        "ON c.id = p.connectionId JOIN STRING_IDS s ON s.id = p.name WHERE p.type = ?", (q,)).fetchall()  # fmt: skip
    deq = [(t, int(s), int(e), c) for t, s, e, c, n in queue if n.startswith("Dequeue")]
    enq = {c: (t, int(s)) for t, s, _e, c, n in queue if n == "Enqueue"}
    tasks = [{"s": s, "conn": c, "name": text.get(n) or text[ty]} for s, c, n, ty in con.execute(
        "SELECT t.startNs, t.connectionId, ci.name, t.taskType FROM TASK t "
        "LEFT JOIN COMPUTE_TASK_INFO ci ON ci.globalTaskId = t.globalTaskId")]  # fmt: skip
    tasks += [{"s": s, "conn": c, "name": text[n]} for s, c, n in con.execute("SELECT startNs, connectionId, opName FROM COMMUNICATION_OP")]
    con.close()
    by_id = {o["id"]: o for o in ops if o["id"] is not None}

    def tasks_at(gap_e: int, name: str | None) -> dict | None:
        after = sorted((t for t in tasks if t["s"] >= gap_e and t["name"] == name), key=lambda t: t["s"])
        return after[0] if after else None

    def launcher(task: dict) -> str | None:
        linked = [by_id[i] for i in links.get(task["conn"], []) if i in by_id]
        if linked:  # the op the .db links to the task; a point inside a Dequeue moves to its Enqueue
            op = linked[0]
            thread, ns = _relay(deq, enq, op["thread"], op["s"])
            return _outermost(ops, thread, ns)
        launch = [c for c in calls if c["conn"] == task["conn"]]
        if not launch:
            return None
        first = min(launch, key=lambda c: (c["s"], c["thread"]))
        return _outermost(ops, *_relay(deq, enq, first["thread"], first["s"]))

    kinds = _check_rows(rows, tasks_at, calls, [{k: o[k] for k in ("name", "thread", "s", "e")} for o in ops], launcher)
    assert kinds["op_compile"] > 5000 and kinds["dispatch"] > 0


def test_no_gap_is_called_sync_unless_a_sync_call_holds_half_of_it(corpus: Path, tmp_path: Path) -> None:
    """The property on every corpus profile with host calls and on generated syncs: a sync gap's cause
    is a synchronising call (or op) that overlaps at least half of it."""
    from npudiag.testing.generate import write_torch_profile

    write_torch_profile(tmp_path / "gen", kernels=500, steps=3, copies=0, syncs_per_step=3, sync_idle_us=400.0)
    for i, src in enumerate((corpus / LEVEL1, corpus / DB, tmp_path / "gen")):
        out = tmp_path / f"o{i}"
        rows = _analyze(src, out)
        api = pq.read_table(out / "api_calls.parquet").to_pylist()
        host = pq.read_table(out / "host_ops.parquet").to_pylist()
        spans = [(f"{a['level']}@{a['name']}", a["start_ns"], a["start_ns"] + round(a["duration_us"] * 1000)) for a in api]
        spans += [(h["name"], h["start_ns"], h["start_ns"] + round(h["duration_us"] * 1000)) for h in host]
        synced = [r for r in rows if r["kind"] == "sync"]
        for r in synced:
            s, e = r["start_ns"], r["start_ns"] + round(r["idle_us"] * 1000)
            held = max(min(ce, e) - max(cs, s) for name, cs, ce in spans if name == r["cause"])
            assert 2 * held >= e - s, r
        assert synced or i < 2


# ---- generated torch_npu-shaped traces: one case of each kind ----

MAIN, DEQ, HW, CANN, PY = 100, 101, 900, 800, 700


def _t(us: float) -> str:
    return f"{1_700_000_000_000_000 + us:.3f}"


class _Trace:
    """A trace as torch_npu writes one: cpu_op events on the main thread, Enqueue there and Dequeue on
    the task queue's thread (same correlation id), CANN calls (Node@launch with the task's connection id)
    on the dequeue thread, async_npu flows from the op to the kernel, Ascend Hardware tasks."""

    def __init__(self) -> None:
        self.ev: list[dict] = [
            {"ph": "M", "name": "process_name", "pid": PY, "tid": 0, "args": {"name": "Python"}},
            {"ph": "M", "name": "process_name", "pid": CANN, "tid": 0, "args": {"name": "CANN"}},
            {"ph": "M", "name": "process_name", "pid": HW, "tid": 0, "args": {"name": "Ascend Hardware"}},
            {"ph": "M", "name": "process_labels", "pid": HW, "tid": 0, "args": {"labels": "NPU 0"}},
            {"ph": "M", "name": "thread_name", "pid": HW, "tid": 2, "args": {"name": "Stream 2"}},
        ]
        self.conn = 1000
        self.corr = 1

    def op(self, name: str, ts: float, dur: float, tid: int = MAIN) -> None:
        self.ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PY, "tid": tid, "ts": _t(ts), "dur": dur, "args": {}})

    def api(self, name: str, level: str, ts: float, dur: float, tid: int = DEQ, conn: int | None = None) -> None:
        prefix = {"acl": "AscendCL", "node": "Node", "runtime": "Runtime", "hccl": "Hccl"}[level]
        self.ev.append({"ph": "X", "name": f"{prefix}@{name}", "pid": CANN, "tid": tid, "ts": _t(ts), "dur": dur,
                        "args": {"Thread Id": tid, "level": level, "id": name,
                                 "connection_id": conn if conn is not None else 0}})  # fmt: skip

    def kernel(self, op_ts: float, enq_ts: float, launch_ts: float, ts: float, dur: float, name: str) -> None:
        """A kernel issued at enq_ts inside the op (Enqueue), launched at launch_ts on the dequeue thread."""
        self.conn += 1
        self.corr += 1
        self.ev += [
            {"ph": "X", "cat": "enqueue", "name": "Enqueue", "pid": PY, "tid": MAIN, "ts": _t(enq_ts), "dur": 1.0,
             "args": {"correlation_id": self.corr}},
            {"ph": "X", "cat": "dequeue", "name": "Dequeue@" + name, "pid": PY, "tid": DEQ, "ts": _t(launch_ts - 2), "dur": 5.0,
             "args": {"correlation_id": self.corr}},
            {"ph": "s", "cat": "async_npu", "name": "torch_to_npu", "id": self.conn, "pid": PY, "tid": MAIN, "ts": _t(enq_ts)},
            {"ph": "f", "cat": "async_npu", "name": "torch_to_npu", "id": self.conn, "pid": HW, "tid": 2, "ts": _t(ts), "bp": "e"},
            {"ph": "X", "name": name, "pid": HW, "tid": 2, "ts": _t(ts), "dur": dur,
             "args": {"Model Id": 4294967295, "Task Type": "AI_CORE", "Physic Stream Id": 2, "Task Id": self.conn,
                      "connection_id": self.conn}},
        ]  # fmt: skip
        self.api("launch", "node", launch_ts, 1.0, conn=self.conn)

    def write(self, root: Path) -> Path:
        folder = root / "host_1_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        folder.mkdir(parents=True)
        (folder / "trace_view.json").write_text(json.dumps(self.ev))
        return root


def test_each_kind_on_a_generated_trace(tmp_path: Path) -> None:
    """Step 1 runs 0..1000 µs. Kernels at 100 (issued by aten::to), 200 (aten::conv2d > aten::convolution),
    400 (aten::linear), 600, 800 (aten::mul). Before 100: a DataLoader fetch; 210..400: aclopCompileAndExecute
    on the dequeue thread; 410..600: hcom_allReduce_ there; 610..800: the main thread in aclrtSynchronizeStream
    for 150 of the 190 µs, with a 4 µs aten::_local_scalar_dense before it; 810..1000: after the last task."""
    t = _Trace()
    t.op("ProfilerStep#1", 0, 1000)
    t.op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 5, 80)
    t.op("aten::to", 88, 6)
    t.kernel(88, 90, 95, 100, 10, "MEMCPY_H2D_like")
    t.op("aten::conv2d", 150, 60)
    t.op("aten::convolution", 152, 50)
    t.op("aten::_convolution", 153, 40)
    t.kernel(153, 160, 195, 200, 10, "Conv2D")
    t.api("aclopCompileAndExecute", "acl", 205, 193)  # on the dequeue thread, across 210..400
    t.api("opCompile", "acl", 210, 150)
    t.op("aten::linear", 300, 100)
    t.kernel(300, 305, 398, 400, 10, "MatMul")
    t.api("hcom_allReduce_", "acl", 412, 180)  # the dequeue thread busy in a collective across 410..600
    t.kernel(300, 306, 596, 600, 10, "MatMulV2")
    t.op("aten::_local_scalar_dense", 611, 4)  # a read of a device value that did not hold the host
    t.api("aclrtSynchronizeStream", "acl", 630, 150, tid=MAIN)  # the main thread held 630..780 of 610..800
    t.op("aten::mul", 785, 10)
    t.kernel(785, 788, 796, 800, 10, "Mul")
    rows = _analyze(t.write(tmp_path / "p"), tmp_path / "o")
    got = [(r["place"], round(r["idle_us"], 3), r["kind"], r["cause"], r["next_task"], r["launched_by"]) for r in rows]
    assert got == [
        (
            "before_first_task",
            100.0,
            "dataloader",
            "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
            "MEMCPY_H2D_like",
            "aten::to",
        ),
        ("between_tasks", 90.0, "dispatch", "aten::conv2d", "Conv2D", "aten::conv2d"),
        ("between_tasks", 190.0, "op_compile", "acl@aclopCompileAndExecute", "MatMul", "aten::linear"),
        ("between_tasks", 190.0, "host_api", "acl@hcom_allReduce_", "MatMulV2", "aten::linear"),
        ("between_tasks", 190.0, "sync", "acl@aclrtSynchronizeStream", "Mul", "aten::mul"),
        ("after_last_task", 190.0, "none", None, None, None),
    ]
    assert {r["launch_call"] for r in rows[1:5]} == {"node@launch"} and {r["launch_thread_id"] for r in rows[1:5]} == {DEQ}
    # the causes add up to the step's idle time, and the summary names the source of its advice
    step = pq.read_table(tmp_path / "o" / "step_breakdown.parquet").to_pylist()[0]
    assert sum(r["idle_us"] for r in rows) == pytest.approx(step["before_first_task_us"] + step["free_us"] + step["after_last_task_us"])
    r = run_cli("report", tmp_path / "o", env={"COLUMNS": "100"})
    flat = " ".join(r.stdout.split())
    assert "Device idle in steps" in flat and "(source: " in flat


def test_a_compile_on_another_thread_is_not_the_cause(tmp_path: Path) -> None:
    """The compile runs on a thread that did not launch the kernel ending the gap: the gap goes to the
    op that issued the kernel (dispatch), not to the compile."""
    t = _Trace()
    t.op("ProfilerStep#1", 0, 400)
    t.op("aten::relu_", 10, 300)
    t.kernel(10, 12, 15, 20, 10, "Relu0")
    t.api("aclopCompileAndExecute", "acl", 40, 250, tid=555)
    t.kernel(10, 290, 295, 300, 10, "Relu")
    rows = _analyze(t.write(tmp_path / "p"), tmp_path / "o")
    (gap,) = [r for r in rows if r["place"] == "between_tasks"]
    assert (gap["kind"], gap["cause"]) == ("dispatch", "aten::relu_")


def test_the_worked_sql_questions_answer_as_documented(corpus: Path, tmp_path: Path) -> None:
    """docs/sql.md's questions on the corpus Level1 trace print what the page shows."""
    import re
    import shlex

    _analyze(corpus / LEVEL1, tmp_path / "o")
    page = (Path(__file__).parents[1] / "docs" / "sql.md").read_text(encoding="utf-8")
    section = page[page.index("## Why the device was idle, on a real trace") :]
    blocks = re.findall(r"```\n\$ (npudiag sql OUT .*?)\n(.*?)```", section, re.S)
    assert len(blocks) == 5
    for command, shown in blocks:
        args = [str(tmp_path / "o") if a == "OUT" else a for a in shlex.split(command)[1:]]
        r = run_cli(*args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == shown.strip(), command


def test_sqlite_sidecars_are_part_of_the_db(corpus: Path, tmp_path: Path) -> None:
    """A .db's -shm / -wal / -journal files (SQLite writes them beside a database it has open) are no
    input of their own: check says nothing of them."""
    import shutil

    prof = tmp_path / "rank1_ascend_pt"
    shutil.copytree(corpus / DB, prof)
    out = prof / "ASCEND_PROFILER_OUTPUT"
    for suffix in ("-shm", "-wal", "-journal"):
        (out / f"ascend_pytorch_profiler_1.db{suffix}").write_bytes(b"\0" * 64)
    r = run_cli("check", prof, env={"COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    assert "-shm" not in r.stdout + r.stderr and "-wal" not in r.stdout + r.stderr and "-journal" not in r.stdout + r.stderr


def test_check_lists_the_ranks_not_profiled(corpus: Path, tmp_path: Path) -> None:
    """The ranks a profile's communication names (communication_matrix.json's "src-dst" link keys, the
    .db's COMMUNICATION_TASK_INFO ranks) and its world size, less the ranks profiled, as a JSON list."""
    matrix = json.loads((corpus / LEVEL1 / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
    named = {int(r) for kinds in matrix.values() for groups in kinds.values() for links in groups.values()
             for key in links if "-" in key for r in key.split("-")}  # fmt: skip
    con = sqlite3.connect(next((corpus / DB / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")))
    peers = {r for (r,) in con.execute("SELECT srcRank FROM COMMUNICATION_TASK_INFO UNION SELECT dstRank FROM COMMUNICATION_TASK_INFO")}
    con.close()
    for profile, own, ranks in ((LEVEL1, 0, named), (DB, 1, {r for r in peers if r < 4294967295})):
        r = run_cli("check", corpus / profile, "--json")
        assert r.returncode == 0, r.stderr
        want = sorted(ranks - {own})
        assert json.loads(r.stdout)["ranks_not_profiled"] == want and len(want) == 7, profile
        text = run_cli("check", corpus / profile, env={"COLUMNS": "100"}).stdout
        assert "not profiled: rank(s) " + ", ".join(map(str, want)) in " ".join(text.split())


def test_a_bare_torch_npu_trace_is_torch_npus(corpus: Path, tmp_path: Path) -> None:
    """A torch_npu trace given alone (renamed, outside its *_ascend_pt folder) is classified by what it
    holds: framework ops (cpu_op events) make it torch_npu's, and the switches check names are torch_npu's."""
    import shutil

    shutil.copy(corpus / LEVEL1 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", tmp_path / "trace.json")
    r = run_cli("check", tmp_path / "trace.json", "--json")
    assert r.returncode == 0, r.stderr
    (p,) = json.loads(r.stdout)["profiles"]
    assert p["kind"] == "torch_npu"
    memory = next(d for d in p["data"] if d["data"] == "memory")
    assert memory["status"] == "not collected" and memory["note"] == "profile_memory=True"
