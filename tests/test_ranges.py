"""Ranges: torch modules (trace_view.json python_function "nn.Module: X" / the .db's PYTORCH_API rows of
type trace) and torch_npu mstx ranges (.db rows of type mstx), with the kernels launched inside each,
recounted from the raw files with json and sqlite3."""

from __future__ import annotations

import json
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from npudiag.profiling.formats.msprof_db import read_db
from npudiag.profiling.formats.torch_ops import PATH_DEPTH, range_table
from npudiag.profiling.formats.trace_json import read_trace

from .conftest import CORPUS
from .helpers import run_cli

LEVEL0 = CORPUS / "msinsight-pytorch-text-2025" / "level0"
TRACE = LEVEL0 / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
DB = CORPUS / "msinsight-pytorch-db-rank1" / "level0" / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db"


def _need(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"corpus file not present: {path} (set NPUDIAG_CORPUS)")


def _ns(ev: dict) -> int:
    return int(Decimal(str(ev["ts"])) * 1000)


def _trace_recount(events: list[dict]) -> list[tuple[str, str, int, float]]:
    """(name, path, kernels, device us) per module, in file order: a kernel (the device task at an async_npu
    flow's end) counts for every module of the launching thread whose range holds the flow's start, a
    start inside a Dequeue being moved to its Enqueue (same correlation_id)."""
    mods = [(e["pid"], e["tid"], _ns(e), _ns(e) + round(float(e["dur"]) * 1000), e["name"][len("nn.Module: ") :])
            for e in events if e.get("cat") == "python_function" and str(e.get("name")).startswith("nn.Module: ")]  # fmt: skip
    deq = [(e["pid"], e["tid"], _ns(e), _ns(e) + round(float(e["dur"]) * 1000), e["args"]["correlation_id"])
           for e in events if e.get("cat") == "dequeue" and e.get("ph") == "X"]  # fmt: skip
    enq = {e["args"]["correlation_id"]: (e["pid"], e["tid"], _ns(e)) for e in events if e.get("cat") == "enqueue" and e.get("ph") == "X"}
    starts = {e["id"]: (e["pid"], e["tid"], _ns(e)) for e in events if e.get("cat") == "async_npu" and e.get("ph") == "s"}
    ends = {e["id"]: (e["pid"], e["tid"], _ns(e)) for e in events if e.get("cat") == "async_npu" and e.get("ph") == "f"}
    hw_pids = {
        e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"] == "Ascend Hardware"
    }
    tasks = {(e["pid"], e["tid"], _ns(e)): float(e["dur"]) for e in events if e.get("ph") == "X" and e["pid"] in hw_pids}
    kernels = [0] * len(mods)
    device = [0.0] * len(mods)
    for fid, point in starts.items():
        dur = tasks.get(ends.get(fid))
        if dur is None:
            continue
        for p, t, a, b, corr in deq:
            if (p, t) == point[:2] and a <= point[2] <= b and corr in enq:
                point = enq[corr]
                break
        for i, (p, t, a, b, _) in enumerate(mods):
            if (p, t) == point[:2] and a <= point[2] <= b:
                kernels[i] += 1
                device[i] += dur
    paths = []
    for i, (p, t, a, b, name) in enumerate(mods):  # enclosing modules of the same thread, outermost first
        outer = sorted((m for m in mods if m is not mods[i] and m[:2] == (p, t) and m[2] <= a and b <= m[3]), key=lambda m: (m[2], -m[3]))
        paths.append("/".join([m[4] for m in outer] + [name]))
    return [(m[4], paths[i], kernels[i], device[i]) for i, m in enumerate(mods)]


def test_trace_modules_equal_a_recount_from_the_raw_json() -> None:
    _need(TRACE)
    expected = _trace_recount(json.loads(TRACE.read_text()))
    assert len(expected) == 26
    r = read_trace(TRACE, 0).ranges
    got = sorted(zip(r["name"].to_pylist(), r["path"].to_pylist(), r["kernels"].to_pylist(), r["device_us"].to_pylist()))
    assert [g[:3] for g in got] == [e[:3] for e in sorted(expected)]
    assert all(abs(g[3] - e[3]) < 1e-6 for g, e in zip(got, sorted(expected)))
    top = dict(zip(r["path"].to_pylist(), r["kernels"].to_pylist()))
    assert top["DistributedDataParallel_0"] == 48 and top["DistributedDataParallel_0/AlexNet_0/Sequential_0/Conv2d_0"] == 4
    assert set(r["kind"].to_pylist()) == {"module"} and max(r["depth"].to_pylist()) == 3


_SQL = """
WITH m AS (SELECT p.rowid id, s.value name, CAST(p.startNs AS INTEGER) s, CAST(p.endNs AS INTEGER) e, p.globalTid g
           FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name
           WHERE p.type = (SELECT id FROM ENUM_API_TYPE WHERE name = ?) AND s.value LIKE ?),
     o AS (SELECT CAST(p.startNs AS INTEGER) s, p.globalTid g, c.connectionId cid
           FROM PYTORCH_API p JOIN CONNECTION_IDS c ON c.id = p.connectionId
           WHERE p.type = (SELECT id FROM ENUM_API_TYPE WHERE name = 'op'))
SELECT m.name, count(t.rowid), coalesce(sum(t.endNs - t.startNs), 0) / 1000.0
FROM m LEFT JOIN o ON o.g = m.g AND o.s BETWEEN m.s AND m.e
LEFT JOIN TASK t ON t.connectionId = o.cid AND t.globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)
GROUP BY m.id ORDER BY m.s, m.id
"""


def _db_recount(db: Path, kind: str, like: str) -> list[tuple[str, int, float]]:
    """Per range: the compute tasks linked (CONNECTION_IDS) to the ops of its thread that start inside it."""
    with sqlite3.connect(db) as con:
        return con.execute(_SQL, (kind, like)).fetchall()


def _same(rows: list[tuple[str, int, float]], ranges, strip: str = "") -> None:
    got = list(zip(ranges["name"].to_pylist(), ranges["kernels"].to_pylist(), ranges["device_us"].to_pylist()))
    assert [(n.removeprefix(strip), k) for n, k, _ in rows] == [(n, k) for n, k, _ in got]
    assert all(abs(a[2] - b[2]) < 1e-6 for a, b in zip(rows, got))


def test_db_modules_equal_a_sqlite_recount() -> None:
    _need(DB)
    expected = _db_recount(DB, "trace", "nn.Module: %")
    assert len(expected) == 26 and expected[0][1] == 46
    r = read_db(DB, 1).ranges
    _same(expected, r, "nn.Module: ")
    assert r["path"][1].as_py() == "DistributedDataParallel_0/AlexNet_0"


def test_planted_mstx_ranges_in_a_db(tmp_path: Path) -> None:
    """torch_npu mstx ranges (PYTORCH_API rows of type mstx) planted around the first and the last
    third of the module calls: each counts the kernels launched in it; recounted with sqlite3."""
    _need(DB)
    db = tmp_path / "ascend_pytorch_profiler_1.db"
    shutil.copy(DB, db)
    with sqlite3.connect(db) as con:
        (s0, e0, g), *_ = con.execute("SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER), globalTid FROM PYTORCH_API p "
                                      "WHERE type = 50003 ORDER BY CAST(startNs AS INTEGER) LIMIT 1").fetchall()  # fmt: skip
        top = con.execute("SELECT max(id) FROM STRING_IDS").fetchone()[0]
        con.executemany("INSERT INTO STRING_IDS (id, value) VALUES (?, ?)", [(top + 1, "forward"), (top + 2, "warm-up")])
        mid = s0 + (e0 - s0) // 3
        for name, (a, b) in ((top + 1, (s0, e0)), (top + 2, (s0, mid))):
            con.execute(
                "INSERT INTO PYTORCH_API (startNs, endNs, globalTid, name, type) VALUES (?, ?, ?, ?, 50004)", (str(a), str(b), g, name)
            )
    expected = _db_recount(db, "mstx", "%")
    r = read_db(db, 1).ranges
    mstx = r.filter(pc.equal(r["kind"], "mstx"))
    assert [x[0] for x in expected] == ["forward", "warm-up"] and expected[0][1] > expected[1][1] > 0
    _same(expected, mstx)
    assert mstx["path"].to_pylist() == ["forward", "forward/warm-up"] and mstx["depth"].to_pylist() == [0, 1]
    assert r.num_rows == 28  # the 26 modules still there


def test_analyze_writes_ranges_and_shows_the_module_tree(tmp_path: Path) -> None:
    _need(TRACE)
    for width in ("60", "80", "200"):
        out = tmp_path / f"o{width}"
        r = run_cli("analyze", LEVEL0, "--out", out, env={"COLUMNS": width})
        assert r.returncode == 0, r.stderr
        assert "Modules by device time" in r.stdout
        lines = r.stdout.splitlines()
        i = next(i for i, line in enumerate(lines) if line.startswith("Modules"))
        block = "\n".join(lines[i : i + 16])
        assert "Sequential_0" in block and "2.31ms" in block and "48" in block  # names wrap at 60 columns, numbers never
        if width != "60":
            assert "DistributedDataParallel_0" in block and "\n    Sequential_0" in block
        assert all(len(line) <= int(width) for line in lines)
    t = pq.read_table(tmp_path / "o80" / "ranges.parquet")
    assert t.num_rows == 26 and t.schema.field("device_us").type == "double"
    manifest = json.loads((tmp_path / "o80" / "manifest.json").read_text())
    assert "ranges" in json.dumps(manifest)


def test_a_profile_without_modules_has_no_ranges_and_no_tree(tmp_path: Path) -> None:
    p = CORPUS / "mstt-advisor-trace-view" / "trace_view.json"
    _need(p)
    assert read_trace(p, 0).ranges.num_rows == 0
    r = run_cli("analyze", p.parent, "--out", tmp_path / "o", env={"COLUMNS": "100"})
    assert r.returncode == 0 and "Modules" not in r.stdout


def test_deep_nesting_costs_bounded_work_and_text() -> None:
    """5,000 ranges nested in one another (a hostile trace): one pass, each holds the one launch inside
    them all, and no path names more than PATH_DEPTH ranges."""
    n = 5000
    start = np.arange(n, dtype=np.int64) * 10
    end = 10**9 - start
    t = range_table("trace", "module", [f"M_{i}" for i in range(n)], np.zeros(n, np.int64), np.full(n, 7), start, end,
                    np.array([0, 1]), np.array([5 * 10**8, 5 * 10**8]), np.array([2.5, 1.0]), 0)  # fmt: skip
    assert t["depth"].to_pylist() == list(range(n))
    assert set(t["kernels"].to_pylist()) == {1} and set(t["device_us"].to_pylist()) == {2.5}  # the other thread's launch is not theirs
    paths = t["path"].to_pylist()
    assert paths[3] == "M_0/M_1/M_2/M_3"
    assert paths[-1] == "/".join(f"M_{i}" for i in range(PATH_DEPTH)) + "/…/M_4999"
    assert max(p.count("/") for p in paths) == PATH_DEPTH + 1


def test_compare_at_the_module_level_matches_paths(tmp_path: Path) -> None:
    """The text export against the .db export of the same model (two runs): every module path on both
    sides, each side's device time its own recount's, shares of the outermost modules' time."""
    _need(TRACE)
    _need(DB)
    r = run_cli("compare", LEVEL0, DB.parent.parent.parent, "--level", "module", "--json", "--out", tmp_path / "c")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = {x["key"]: x for x in doc["ops"]["rows"]}
    assert doc["ops"]["match_by"] == "module" and len(rows) == 26 and {x["status"] for x in rows.values()} == {"both"}
    base = {p: d for _, p, _, d in _trace_recount(json.loads(TRACE.read_text()))}
    cur = {n.removeprefix("nn.Module: "): d for n, _, d in _db_recount(DB, "trace", "nn.Module: %")}
    for path, row in rows.items():
        assert abs(row["base_total_us"] - base[path]) < 1e-6
        assert abs(row["cur_total_us"] - cur[path.rsplit("/", 1)[-1]]) < 1e-6
    top = [x for p, x in rows.items() if "/" not in p]
    assert abs(sum(x["base_share_pct"] for x in top) - 100.0) < 1e-9  # the outermost modules hold all of it
    assert doc["ops"]["matched_share"] == {"baseline": 1.0, "current": 1.0}
    assert pq.read_table(tmp_path / "c" / "diff.parquet").num_rows == 26


def test_gate_on_a_module(tmp_path: Path) -> None:
    """gate --metric module:PATH: the module's device time per step, each side equal to its recount."""
    _need(TRACE)
    _need(DB)
    path = "DistributedDataParallel_0/AlexNet_0"
    r = run_cli("gate", LEVEL0, DB.parent.parent, "--metric", f"module:{path}", "--json")
    doc = json.loads(r.stdout)
    (m,) = [x for x in doc["metrics"] if x["metric"] == f"module:{path}"]
    base = {p: d for _, p, _, d in _trace_recount(json.loads(TRACE.read_text()))}[path]
    cur = {n.removeprefix("nn.Module: "): d for n, _, d in _db_recount(DB, "trace", "nn.Module: %")}["AlexNet_0"]
    assert m["base_n"] == m["cur_n"] == 1  # one profiled step on each side
    assert m["base_median_us"] == pytest.approx(base) and m["cur_median_us"] == pytest.approx(cur) and m["status"] == "pass"
    bad = run_cli("gate", LEVEL0, LEVEL0, "--metric", "module:")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


DB1 = CORPUS / "msinsight-pytorch-db-rank1" / "level1" / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db"
_SQL_API = """
WITH r AS (SELECT e.rowid id, s.value name, e.startNs s, e.endNs e, e.globalTid g FROM MSTX_EVENTS e
           JOIN STRING_IDS s ON s.id = e.message WHERE e.eventType IN (1, 2)),
     a AS (SELECT connectionId cid, min(startNs) s FROM CANN_API WHERE connectionId IS NOT NULL GROUP BY connectionId),
     l AS (SELECT a.cid, a.s, min(c.globalTid) g FROM a JOIN CANN_API c ON c.connectionId = a.cid AND c.startNs = a.s GROUP BY a.cid, a.s)
SELECT r.name, count(t.rowid), coalesce(sum(t.endNs - t.startNs), 0) / 1000.0
FROM r LEFT JOIN l ON l.g = r.g AND l.s BETWEEN r.s AND r.e
LEFT JOIN TASK t ON t.connectionId = l.cid AND (t.globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)
                    OR t.taskType IN (SELECT id FROM STRING_IDS WHERE value LIKE 'MEMCPY%'))
GROUP BY r.id ORDER BY r.s, r.id
"""


def test_msprof_mstx_events_with_the_cann_calls_inside(tmp_path: Path) -> None:
    """msprof's MSTX_EVENTS (columns as MindStudio Insight reads them) planted in a copy of a real .db
    whose framework ops are taken out: push/pop and start/end rows are ranges, a marker is not, and a
    range holds the kernels and copies (COMPUTE_TASK_INFO, MEMCPY tasks) whose launching CANN call (by
    connection id) starts inside it on its thread."""
    _need(DB1)
    db = tmp_path / "ascend_pytorch_profiler_1.db"
    shutil.copy(DB1, db)
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE PYTORCH_API")
        con.execute("CREATE TABLE MSTX_EVENTS (startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER, "
                    "message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, connectionId INTEGER)")  # fmt: skip
        (g, lo, hi), *_ = con.execute("SELECT globalTid, min(startNs), max(endNs) FROM CANN_API GROUP BY globalTid "
                                      "ORDER BY count(*) DESC").fetchall()  # fmt: skip
        top = con.execute("SELECT max(id) FROM STRING_IDS").fetchone()[0]
        con.executemany("INSERT INTO STRING_IDS (id, value) VALUES (?, ?)", [(top + 1, "train_step"), (top + 2, "loss"), (top + 3, "mark")])
        third = (hi - lo) // 3
        rows = [(lo, hi, 2, 1, top + 1), (lo + third, lo + 2 * third, 1, 2, top + 2), (lo + third, lo + third, 0, 0, top + 3)]
        con.executemany("INSERT INTO MSTX_EVENTS (startNs, endNs, eventType, rangeId, message, globalTid) VALUES (?, ?, ?, ?, ?, ?)",
                        [(s, e, k, rid, m, g) for s, e, k, rid, m in rows])  # fmt: skip
        expected = con.execute(_SQL_API).fetchall()
    assert [x[0] for x in expected] == ["train_step", "loss"] and expected[0][1] > expected[1][1] > 0
    r = read_db(db, 1).ranges
    assert r["kind"].to_pylist() == ["mstx", "mstx"] and r["path"].to_pylist() == ["train_step", "train_step/loss"]
    _same(expected, r)
