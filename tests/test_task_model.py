"""Every real layout counts each device task once, in the right table, with the step the profiler
recorded. Each number is recomputed from the raw files here with the sqlite3 / json / csv modules."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npudiag import schemas
from npudiag.profiling import tasks
from npudiag.profiling.analysis.quantities import phases, timeline
from npudiag.profiling.analysis.step_breakdown import step_breakdown
from npudiag.profiling.discover import classify, kind_by_header
from npudiag.profiling.ingest import ingest
from npudiag.testing.generate import write_torch_profile

from .conftest import CORPUS, corpus_files

DBS = [p for p in corpus_files("**/ascend_pytorch_profiler_*.db") + corpus_files("**/msprof_*.db")]
LEVELS = ["level0", "level1", "level2"]


def _rel(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def _sqlite_truth(db: Path) -> dict:
    """What the .db's own tables say, with the documented joins only."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sid = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    compute = con.execute(
        "SELECT t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId ORDER BY t.startNs"
    ).fetchall()
    ops = con.execute("SELECT startNs, endNs, opName FROM COMMUNICATION_OP ORDER BY startNs").fetchall()
    subtasks = con.execute(
        "SELECT t.startNs, t.endNs, c.taskType, c.srcRank, c.dstRank, c.size, t.taskType FROM TASK t "
        "JOIN COMMUNICATION_TASK_INFO c ON c.globalTaskId = t.globalTaskId ORDER BY t.startNs"
    ).fetchall()
    claimed = {r[0] for r in con.execute("SELECT globalTaskId FROM COMPUTE_TASK_INFO")}
    claimed |= {r[0] for r in con.execute("SELECT globalTaskId FROM COMMUNICATION_TASK_INFO")}
    memcpy = [r for r in con.execute("SELECT globalTaskId, taskType, startNs, endNs FROM TASK")
              if r[0] not in claimed and "MEMCPY" in sid[r[1]]]  # fmt: skip
    steps = con.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchall()
    rank = [r[0] for r in con.execute("SELECT rankId FROM RANK_DEVICE_MAP")]
    con.close()
    return {"compute": compute, "ops": ops, "subtasks": subtasks, "memcpy": memcpy, "steps": steps, "rank": rank, "sid": sid}


@pytest.mark.parametrize("db", DBS, ids=_rel)
def test_db_export_tables_equal_its_own_joins(db: Path) -> None:
    truth = _sqlite_truth(db)
    p = ingest([db.parent.parent])  # the rank folder, as a user points at it
    assert p.errors == []
    k = p.table("kernels")
    comp = k.filter(pc.equal(k["task_class"], "compute"))
    comm = k.filter(pc.equal(k["task_class"], "communication"))
    assert comp.num_rows == len(truth["compute"]) and comm.num_rows == len(truth["ops"])
    assert sorted(comp["start_ns"].to_pylist()) == [s for s, _ in truth["compute"]]
    assert pc.sum(comp["duration_us"]).as_py() == pytest.approx(sum(e - s for s, e in truth["compute"]) / 1e3, abs=0.01)
    assert comm["op_name"].to_pylist() == [truth["sid"][n] for _, _, n in truth["ops"]]
    ct = p.table("comm_tasks")
    assert ct.num_rows == len(truth["subtasks"])
    # the sub-task's type; Level0 writes N/A there, and then the TASK row's type says it
    sub_types = [truth["sid"][r[2]] if truth["sid"][r[2]] != "N/A" else truth["sid"][r[6]] for r in truth["subtasks"]]
    assert ct["task_type"].to_pylist() == sub_types
    assert pc.sum(ct["duration_us"]).as_py() == pytest.approx(sum(e - s for s, e, *_ in truth["subtasks"]) / 1e3, abs=0.01)
    assert set(pc.drop_null(ct["op_name"]).to_pylist()) <= {truth["sid"][n] for _, _, n in truth["ops"]}
    dev = p.table("copies").filter(pc.equal(p.table("copies")["side"], "device"))
    assert dev.num_rows == len(truth["memcpy"])
    steps = p.table("steps")
    assert steps["step"].to_pylist() == [s for s, _, _ in truth["steps"]]
    assert p.units[0]["rank"] == truth["rank"][0]
    # every kernel lies in the profiler's step range, so carries its step
    assert k["step"].null_count == 0 and set(k["step"].to_pylist()) == {s for s, _, _ in truth["steps"]}


def test_db_and_text_exports_of_the_levels_give_the_same_kernel_rows(corpus: Path) -> None:
    """Level0/1/2, .db and text: 187 compute tasks + 4 communication ops per rank, as kernel_details has."""
    for level in LEVELS:
        db = ingest([corpus / "msinsight-pytorch-db-rank1" / level]).table("kernels")
        text_path = corpus / "msinsight-pytorch-text-2025" / level / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
        with open(text_path, newline="", encoding="utf-8-sig") as fh:
            text_rows = list(csv.DictReader(fh))
        assert db.num_rows == len(text_rows) == 191, level
        n_comm_text = sum(1 for r in text_rows if r["Accelerator Core"] == "HCCL")
        assert pc.sum(pc.equal(db["task_class"], "communication")).as_py() == n_comm_text == 4


def test_analysis_db_step_trace_time_equals_our_breakdown_of_the_db(corpus: Path) -> None:
    for level in LEVELS:
        folder = corpus / "msinsight-pytorch-db-rank1" / level
        con = sqlite3.connect(f"file:{next(folder.rglob('analysis.db'))}?mode=ro", uri=True)
        ((step, computing, cno, overlapped, comm, free, stage, *_),) = con.execute("SELECT * FROM StepTraceTime").fetchall()
        con.close()
        (row,) = step_breakdown(ingest([folder]).tables).to_pylist()
        assert row["step"] == int(step)
        assert row["computing_us"] == pytest.approx(computing, abs=0.01)
        assert row["communication_us"] == pytest.approx(comm, abs=0.01)
        assert row["overlapped_us"] == pytest.approx(overlapped, abs=0.01)
        assert row["communication_not_overlapped_us"] == pytest.approx(cno, abs=0.01)
        assert row["stage_us"] == stage  # torch_npu's Stage as the file gives it; the step time is STEP_TIME's range


def test_text_level0_kernel_details_and_its_trace_hold_the_same_tasks(corpus: Path) -> None:
    out = corpus / "msinsight-pytorch-text-2025/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
    from_csv = ingest([out / "kernel_details.csv"]).table("kernels")
    from_trace = ingest([out / "trace_view.json"]).table("kernels")
    assert from_csv.num_rows == from_trace.num_rows == 191
    # the two files round some start times differently in the last digit (1 ns)
    pairs = zip(sorted(from_csv["start_ns"].to_pylist()), sorted(from_trace["start_ns"].to_pylist()))
    assert max(abs(a - b) for a, b in pairs) <= 1
    assert sorted(from_csv["task_class"].to_pylist()) == sorted(from_trace["task_class"].to_pylist())
    # the trace's HCCL sub-tasks (on the hardware streams) are the .db's 296 COMMUNICATION_TASK_INFO rows' kind
    events = json.loads((out / "trace_view.json").read_text())
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    hw = [e for e in events if e.get("ph") == "X" and procs.get(e["pid"]) == "Ascend Hardware"]
    subtypes = {"Notify Wait", "Write Value", "SDMA"}
    ct = ingest([out / "trace_view.json"]).table("comm_tasks")
    assert ct.num_rows == sum(1 for e in hw if e["args"]["Task Type"] in subtypes) == 296
    copies = [e for e in hw if e["name"] == "MEMCPY_ASYNC"]
    dev = ingest([out / "trace_view.json"]).table("copies")
    assert dev.filter(pc.equal(dev["side"], "device")).num_rows == len(copies) == 24


TIMELINE = CORPUS / "mindinsight-prof-device0-2023/PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0"


def _events(path: Path) -> tuple[list[dict], dict, dict]:
    ev = json.loads(path.read_text())
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [e for e in ev if e.get("ph") == "X"], procs, threads


def test_cann7_timeline_folder_counts_each_task_once(corpus: Path) -> None:
    p = ingest([TIMELINE.parent])
    assert p.errors == []
    k = p.table("kernels")
    compute = comm_ops = planes = 0
    hccl_streams: set[int] = set()
    for f in sorted((TIMELINE / "timeline").glob("hccl_*.json")):
        xs, _, threads = _events(f)
        plane = [e for e in xs if threads.get((e["pid"], e["tid"]), "").startswith("Plane")]
        planes += len(plane)
        comm_ops += len(xs) - len(plane)
        hccl_streams |= {e["args"]["stream id"] for e in plane}
    for f in sorted((TIMELINE / "timeline").glob("task_time_*.json")):
        xs, _, _ = _events(f)
        compute += sum(1 for e in xs if e["args"]["Task Type"] in ("AI_CORE", "AI_CPU") and e["args"]["Stream Id"] not in hccl_streams)
    assert k.num_rows == compute + comm_ops == 3 * 140
    assert pc.sum(pc.equal(k["task_class"], "communication")).as_py() == comm_ops == 3
    assert p.table("comm_tasks").num_rows == planes
    assert p.table("copies").num_rows == 0  # every MEMCPY_ASYNC here runs on an HCCL stream: HCCL's own
    names = set(k["op_name"].to_pylist())
    assert not {n for n in names if n.startswith(("Iteration", "FP_BP", "Reduce_"))}
    # steps from step_trace_*.json: each file lists all 10 iterations; each counted once
    xs, _, _ = _events(TIMELINE / "timeline" / "step_trace_0_2_1.json")
    iterations = {e["args"]["Iteration ID"]: e for e in xs if e.get("cat") == "Iteration Time"}
    steps = {r["step"]: r for r in p.table("steps").to_pylist()}
    assert sorted(steps) == sorted(iterations)
    for step, e in iterations.items():
        assert steps[step]["step_time_us"] == pytest.approx(e["dur"], abs=1e-6)
    assert sorted(set(k["step"].to_pylist())) == [1, 2, 3]  # kernels of the three copied iterations
    aicpu = [f for f in p.warnings if "None" in f]
    assert aicpu == []


OVERLAP_TRACES = [p for p in corpus_files("**/trace_view.json") + corpus_files("**/msprof_*.json")
                  if '"Overlap Analysis"' in p.read_text(encoding="utf-8")]  # fmt: skip


@pytest.mark.parametrize("path", OVERLAP_TRACES, ids=_rel)
def test_trace_overlap_analysis_is_our_breakdown(path: Path) -> None:
    """torch_npu / msprof write their own Computing / Communication / Not Overlapped / Free tracks;
    over the same tasks, ours equal them to 0.01 µs."""
    xs, procs, _ = _events(path)
    theirs: dict[str, float] = {}
    for e in xs:
        if procs.get(e["pid"]) == "Overlap Analysis":
            theirs[e["name"]] = theirs.get(e["name"], 0.0) + float(e["dur"])
    k = ingest([path]).table("kernels")
    tl = timeline(k, schemas.empty("copies"))  # their Free holds the copies: compare over kernels alone
    ours = phases(tl)
    assert ours["computing_us"] == pytest.approx(theirs.get("Computing", 0.0), abs=0.01)
    assert ours["communication_us"] == pytest.approx(theirs.get("Communication", 0.0), abs=0.01)
    assert ours["communication_not_overlapped_us"] == pytest.approx(theirs.get("Communication(Not Overlapped)", 0.0), abs=0.01)
    free_events = [e for e in xs if procs.get(e["pid"]) == "Overlap Analysis" and e["name"] == "Free"]
    if free_events and min(float(e["ts"]) for e in free_events) >= tl.start_us() - 0.01:
        # msprof starts Free at its first task of any type (TASK_TIMEOUT_SET in one sample): compare where it starts at ours
        assert ours["free_us"] == pytest.approx(theirs["Free"], abs=0.01)


def test_generated_db_with_insight_overlap_analysis(tmp_path: Path) -> None:
    """A torch_npu .db that MindStudio Insight opened holds OVERLAP_ANALYSIS (type 0 Computing,
    1 Communication, 2 Communication(Not Overlapped), 3 Free): our breakdown equals it."""
    gt = write_torch_profile(tmp_path, kernels=3000, seed=3, steps=4, copies=6, export="db", overlap_analysis=True)
    db = next(Path(gt.profile_dir).rglob("ascend_pytorch_profiler_*.db"))
    con = sqlite3.connect(db)
    theirs = {t: s / 1e3 for t, s in con.execute("SELECT type, sum(endNs - startNs) FROM OVERLAP_ANALYSIS GROUP BY type")}
    con.close()
    p = ingest([Path(gt.profile_dir)])
    ours = phases(timeline(p.table("kernels"), schemas.empty("copies")))
    assert ours["computing_us"] == pytest.approx(theirs[0], abs=0.01)
    assert ours["communication_us"] == pytest.approx(theirs[1], abs=0.01)
    assert ours["communication_not_overlapped_us"] == pytest.approx(theirs[2], abs=0.01)
    assert ours["free_us"] == pytest.approx(theirs[3], abs=0.01)
    sb = step_breakdown(p.tables)
    assert sb.num_rows == 4 and pc.sum(sb["kernels"]).as_py() == gt.kernels
    assert pc.sum(sb["computing_us"]).as_py() == pytest.approx(theirs[0], abs=0.01)  # steps do not overlap in time


def test_classifier_table() -> None:
    types = ["AI_CORE", "HCCL", "Notify Wait", "MEMCPY_ASYNC", "EVENT_WAIT_SQE", "PROFILING_ENABLE", None, "Other", "NEW_UNIT"]
    names = ["MatMul", "hcom_allReduce_", "Notify Wait", "MEMCPY_ASYNC", "EVENT_WAIT", "PROFILING_ENABLE", "Add", "Mul", "x"]
    classes, unknown = tasks.classify(pa.array(types, pa.string()), pa.array(names))
    assert classes.to_pylist() == ["compute", "communication", "comm_task", "copy", "sync", "other", "compute", "compute", "compute"]
    assert unknown == ["NEW_UNIT"]
    # on a stream HCCL owns, a NOTIFY / MEMCPY task is HCCL's; an EVENT hand-over stays a sync
    c2, _ = tasks.classify(pa.array(["NOTIFY_WAIT", "MEMCPY_ASYNC", "EVENT_RECORD", "NOTIFY_WAIT"]), pa.array(["a", "b", "c", "d"]),
                           __import__("numpy").array([True, True, True, False]))  # fmt: skip
    assert c2.to_pylist() == ["comm_task", "comm_task", "sync", "sync"]


def _class_of_row(task_type: str | None, name: str | None, on_hccl_stream: bool) -> str:
    """The module docstring's rule for one row, in plain Python: the reference the vectorised classifier must equal."""
    t = task_type.strip() if task_type is not None else None
    n = name or ""
    if t in tasks.COMMUNICATION_TYPES or (n.startswith("hcom_") and t not in tasks.KNOWN_TYPES - tasks.COMPUTE_TYPES):
        return "communication"
    if on_hccl_stream:
        return "sync" if t is not None and "EVENT" in t else "comm_task"
    if (t is not None and (t in tasks.COPY_TYPES or "MEMCPY" in t)) or ("MEMCPY" in n.upper() and t not in tasks.COMM_TASK_TYPES):
        return "copy"
    for values, label in ((tasks.COMM_TASK_TYPES, "comm_task"), (tasks.SYNC_TYPES, "sync"), (tasks.OTHER_TYPES, "other")):
        if t in values:
            return label
    return "compute"


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from(sorted(tasks.KNOWN_TYPES) + ["NEW_UNIT", "", "Other"]),
                      st.sampled_from([" AI_CORE", "EVENT_RECORD ", "MY_EVENT", "xMEMCPY"]), st.text(max_size=6)),
            st.one_of(st.none(), st.sampled_from(["hcom_allReduce_1", "HCOM_x", "aclrtMemcpy", "MatMul", "memcpy", "hcom_", ""]),
                      st.text(max_size=6)),
            st.booleans(),
        ),
        max_size=30,
    ),
    st.booleans(),
    st.booleans(),
)  # fmt: skip
@pytest.mark.slow
@settings(max_examples=300, deadline=None)
def test_classifier_equals_the_row_rule(rows: list, chunked: bool, hccl: bool) -> None:
    types = [r[0] for r in rows]
    col = pa.array(types, pa.string())
    if chunked:
        col = pa.chunked_array([col.slice(0, len(rows) // 2), col.slice(len(rows) // 2)], pa.string())
    on_stream = np.array([r[2] for r in rows], bool) if hccl else None
    classes, unknown = tasks.classify(col, pa.array([r[1] for r in rows], pa.string()), on_stream)
    expected = [_class_of_row(t, n, hccl and h) for t, n, h in rows]
    assert classes.to_pylist() == expected
    assert unknown == sorted({t.strip() for t, c in zip(types, expected) if t is not None and t.strip() not in tasks.KNOWN_TYPES
                              and c == "compute"})  # fmt: skip


def test_file_names_with_any_suffix_and_headers(tmp_path: Path, corpus: Path) -> None:
    for name in ("kernel_details_rank0.csv", "kernel_details_20260101.csv", "op_summary_slice_0_2026.csv", "trace_view_rank3.json"):
        assert classify(name) is not None, name
    src = corpus / "msinsight-pytorch-text-2025/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    renamed = tmp_path / "my_kernels.csv"
    renamed.write_bytes(src.read_bytes())
    assert kind_by_header(renamed) == "kernel_details"
    assert ingest([renamed]).table("kernels").num_rows == 191
    other = tmp_path / "notes.csv"
    other.write_text("a,b,c\n1,2,3\n")
    p = ingest([other])
    assert len(p.errors) == 1 and "neither its name nor its header matches a known format" in p.errors[0]


def test_duplicate_declared_ranks_are_named(tmp_path: Path) -> None:
    for i in range(3):
        write_torch_profile(tmp_path / f"run{i}", kernels=50, seed=i, rank=1, copies=0, trace=False)
    p = ingest([tmp_path])
    assert any("rank 1 is declared by 3 folders" in w for w in p.warnings)
    assert sorted(u["rank"] for u in p.units) == [0, 1, 2]
    first = min(p.units, key=lambda u: u["path"])
    assert first["rank"] == 1  # the first keeps the rank it declares


def test_host_copy_call_without_connection_id(tmp_path: Path) -> None:
    """A plain aclrtMemcpy X event whose args have only Thread Id / Mode / level: no crash, counted."""
    events = [
        {"name": "process_name", "pid": 1, "tid": 0, "args": {"name": "CANN"}, "ph": "M"},
        {"name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"},
        {"name": "AscendCL@aclrtMemcpy", "pid": 1, "tid": 7, "ts": "1000.000", "dur": 50.0, "ph": "X",
         "args": {"Thread Id": 7, "Mode": "ACL_RTS", "level": "acl"}},
        {"name": "AscendCL@aclrtMemcpy", "pid": 1, "tid": 7, "ts": "1100.000", "dur": 50.0, "ph": "X",
         "args": {"Thread Id": 7, "Mode": "ACL_RTS", "level": "acl", "connection_id": 5}},
        {"name": "MatMul", "pid": 2, "tid": 3, "ts": "1000.000", "dur": 20.0, "ph": "X", "args": {"Task Type": "AI_CORE"}},
    ]  # fmt: skip
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    p = ingest([path])
    assert p.errors == []
    host = p.table("copies").filter(pc.equal(p.table("copies")["side"], "host"))
    assert host.num_rows == 2 and host["connection_id"].to_pylist() == [None, 5]


def test_cluster_refuses_duplicate_ranks_unless_asked(tmp_path: Path) -> None:
    from .helpers import run_cli

    for i in range(3):
        write_torch_profile(tmp_path / "in" / f"run{i}", kernels=60, seed=i, rank=1, copies=0, trace=False)
    r = run_cli("cluster", tmp_path / "in", "--out", tmp_path / "o")
    assert r.returncode == 2 and "rank 1 is declared by 3 folders" in r.stderr and "--allow-duplicate-ranks" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli("cluster", tmp_path / "in", "--out", tmp_path / "o", "--allow-duplicate-ranks", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ranks"] == 3


def _link_by_rows(device: list[dict], host: list[dict]) -> tuple[list, list, list]:
    """The copy link rule row by row: a device copy takes the mode of the last host call with its
    connection id; a call takes the size (where it has none) and the direction (where it is
    "unknown") of the last device copy with its connection id."""
    last_call = {h["connection_id"]: h for h in host if h["connection_id"] is not None}
    last_copy = {d["connection_id"]: d for d in device if d["connection_id"] is not None}
    modes = [last_call[d["connection_id"]]["mode"] if d["connection_id"] in last_call else d["mode"] for d in device]
    sizes, directions = [], []
    for h in host:
        d = last_copy.get(h["connection_id"]) if h["connection_id"] is not None else None
        sizes.append(d["size_bytes"] if d is not None and h["size_bytes"] is None else h["size_bytes"])
        directions.append(d["direction"] if d is not None and h["direction"] == "unknown" else h["direction"])
    return modes, sizes, directions


_COPY_ROW_KEYS = ("connection_id", "size_bytes", "direction", "mode")
_COPY_ROW = st.fixed_dictionaries(
    {
        "connection_id": st.one_of(st.none(), st.integers(0, 6)),
        "size_bytes": st.one_of(st.none(), st.integers(0, 1 << 40)),
        "direction": st.one_of(st.none(), st.sampled_from(["unknown", "H2D", "D2H", "D2D"])),
        "mode": st.one_of(st.none(), st.sampled_from(["sync", "async", "unknown"])),
    }
)


@pytest.mark.slow
@given(st.lists(_COPY_ROW, max_size=12), st.lists(_COPY_ROW, max_size=12))
@settings(max_examples=300, deadline=None)
def test_copy_link_equals_the_row_rule(device: list[dict], host: list[dict]) -> None:
    from npudiag.profiling.analysis.copies import _link

    def table(rows: list[dict]) -> pa.Table:
        some = pa.schema([schemas.COPIES.field(k) for k in _COPY_ROW_KEYS])
        return schemas.conform(pa.Table.from_pylist(rows, schema=some), schemas.COPIES)

    d, h = _link(table(device), table(host))
    if device and host:
        modes, sizes, directions = _link_by_rows(device, host)
    else:
        modes, sizes, directions = [r["mode"] for r in device], [r["size_bytes"] for r in host], [r["direction"] for r in host]
    assert d["mode"].to_pylist() == modes
    assert h["size_bytes"].to_pylist() == sizes
    assert h["direction"].to_pylist() == directions
    assert d.schema == schemas.COPIES and h.schema == schemas.COPIES


@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(0, 30), st.sampled_from(["hcom_a", "hcom_b", None])), max_size=8),
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 140)), st.sampled_from([None, None, "given"])), max_size=12),
)
@pytest.mark.slow
@settings(max_examples=300, deadline=None)
def test_comm_task_naming_equals_the_row_rule(ops: list, subtasks: list) -> None:
    """A sub-task without an op takes the name of the op (communication kernel, by start) whose
    time range holds its start: the last op that starts at or before it, if it has not ended."""
    from npudiag.profiling.assemble import name_comm_tasks

    kernels = schemas.conform(
        pa.table(
            {
                "start_ns": pa.array([s for s, _, _ in ops], pa.int64()),
                "duration_us": pa.array([d / 1000 for _, d, _ in ops], pa.float64()),
                "op_name": pa.array([n for _, _, n in ops], pa.string()),
                "task_class": pa.array(["communication"] * len(ops), pa.string()),
            }
        ),
        schemas.KERNELS,
    )
    comm = schemas.conform(
        pa.table({"start_ns": pa.array([t for t, _ in subtasks], pa.int64()), "op_name": pa.array([n for _, n in subtasks], pa.string())}),
        schemas.COMM_TASKS,
    )
    by_start = sorted(ops, key=lambda o: o[0])  # stable, as the table's sort

    def holder(t: int | None) -> str | None:
        before = [o for o in by_start if t is not None and o[0] <= t]
        return before[-1][2] if before and t <= before[-1][0] + before[-1][1] else None

    expected = [n if n is not None else holder(t) for t, n in subtasks]
    assert name_comm_tasks(comm, kernels)["op_name"].to_pylist() == expected
