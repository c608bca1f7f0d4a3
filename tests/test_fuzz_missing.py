"""Every optional field of every format may be missing: drop keys of trace events and their args,
columns of the CSVs, tables and columns of the .db, and run the whole pipeline (read, derive,
summarise). It gives tables and a summary, or one error line per file; never another exception."""

from __future__ import annotations

import atexit
import csv
import io
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npudiag.profiling.derive import derive
from npudiag.profiling.ingest import ingest
from npudiag.testing.generate import write_msprof_profile, write_torch_profile
from tests.helpers import build_summary

from .test_fuzz_all import SETTINGS

# every column and key dropped in turn
pytestmark = pytest.mark.slow

_BASE: dict[str, Path] = {}


def _base() -> dict[str, Path]:
    if not _BASE:
        root = Path(tempfile.mkdtemp(prefix="npudiag-fuzz-missing-"))
        atexit.register(shutil.rmtree, root, True)  # shared by every example of the session; removed at exit
        t = write_torch_profile(root / "t", kernels=80, copies=3, seed=4, steps=3, mallocs_per_step=1)
        d = write_torch_profile(root / "d", kernels=80, copies=3, seed=4, steps=3, export="db")
        m = write_msprof_profile(root / "m", kernels=60, copies=3, seed=4)
        _BASE.update(torch=Path(t.profile_dir), db=Path(d.profile_dir), msprof=Path(m.profile_dir))
    return _BASE


def _pipeline(paths: list[Path]) -> None:
    profile = ingest(paths)
    tables, skipped = derive(profile.tables)
    build_summary(tables, rules_skipped=skipped)
    for line in profile.errors:
        assert "\n" not in line and ": " in line  # one line, naming the file


def _copy(name: str, tmp: Path) -> Path:
    dst = tmp / name
    shutil.copytree(_base()[name], dst)
    return dst


def _drop_keys(obj: dict, drop: set[str]) -> dict:
    out = {k: v for k, v in obj.items() if k not in drop}
    if isinstance(out.get("args"), dict):
        out["args"] = {k: v for k, v in out["args"].items() if k not in drop}
    return out


TRACE_KEYS = ["ts", "dur", "pid", "tid", "name", "ph", "cat", "args", "Task Type", "Physic Stream Id", "Task Id", "connection_id",
              "Thread Id", "level", "Model Id", "size(B)", "operation", "id"]  # fmt: skip


@SETTINGS
@given(st.sets(st.sampled_from(TRACE_KEYS), min_size=1, max_size=5), st.integers(0, 7))
def test_trace_with_keys_dropped(drop, every) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = _copy("torch", Path(tmp))
        trace = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        events = json.loads(trace.read_text())
        events = [_drop_keys(e, drop) if i % (every + 1) == 0 else e for i, e in enumerate(events)]
        trace.write_text(json.dumps(events))
        _pipeline([trace])
        _pipeline([folder])


def _drop_columns(path: Path, drop: set[str]) -> None:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    keep = [i for i, h in enumerate(rows[0]) if h not in drop]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[r[i] for i in keep if i < len(r)] for r in rows])
    path.write_text(buf.getvalue(), encoding="utf-8")


KERNEL_COLUMNS = ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
                  "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Input Shapes", "aic_mac_ratio",
                  "aic_mte2_ratio"]  # fmt: skip
STEP_COLUMNS = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
                "Bubble", "Preparing"]  # fmt: skip


@SETTINGS
@given(st.sets(st.sampled_from(KERNEL_COLUMNS), min_size=1, max_size=6), st.sets(st.sampled_from(STEP_COLUMNS), max_size=4))
def test_csvs_with_columns_dropped(kernel_drop, step_drop) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = _copy("torch", Path(tmp))
        out = folder / "ASCEND_PROFILER_OUTPUT"
        _drop_columns(out / "kernel_details.csv", kernel_drop)
        _drop_columns(out / "step_trace_time.csv", step_drop)
        _pipeline([folder])
        mfolder = _copy("msprof", Path(tmp))
        op_summary = next((mfolder / "mindstudio_profiler_output").glob("op_summary_*.csv"))
        _drop_columns(op_summary, {"Op Name" if c == "Name" else "OP Type" if c == "Type" else c for c in kernel_drop})
        _pipeline([mfolder])


DB_COLUMNS = {
    "TASK": ["startNs", "endNs", "deviceId", "connectionId", "globalTaskId", "taskType", "streamId", "taskId", "modelId"],
    "COMPUTE_TASK_INFO": ["name", "globalTaskId", "blockDim", "taskType", "opType", "inputShapes"],
    "COMMUNICATION_OP": ["opName", "startNs", "endNs", "connectionId", "opId", "opType", "deviceId"],
    "COMMUNICATION_TASK_INFO": ["name", "globalTaskId", "taskType", "planeId", "srcRank", "dstRank", "transportType", "size", "opId"],
    "CANN_API": ["startNs", "endNs", "type", "globalTid", "connectionId", "name"],
    "STEP_TIME": ["id", "startNs", "endNs"],
    "MEMCPY_INFO": ["globalTaskId", "size", "memcpyOperation"],
}
DB_TABLES = sorted(DB_COLUMNS) + ["ENUM_API_TYPE", "ENUM_HCCL_TRANSPORT_TYPE", "RANK_DEVICE_MAP", "ENUM_MEMCPY_OPERATION"]


@SETTINGS
@given(
    st.sets(st.sampled_from(DB_TABLES), max_size=2),
    st.lists(st.tuples(st.sampled_from(sorted(DB_COLUMNS)), st.integers(0, 8)), max_size=4),
)
def test_db_with_tables_and_columns_dropped(tables, columns) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = _copy("db", Path(tmp))
        db = next(folder.rglob("ascend_pytorch_profiler_*.db"))
        con = sqlite3.connect(db)
        for table in tables:
            con.execute(f'DROP TABLE IF EXISTS "{table}"')
        present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table, i in columns:
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')] if table in present else []
            if len(cols) < 2:
                continue
            keep = [c for j, c in enumerate(cols) if j != i % len(cols)]
            con.execute(f'CREATE TABLE "_new" AS SELECT {", ".join(keep)} FROM "{table}"')
            con.execute(f'DROP TABLE "{table}"')
            con.execute(f'ALTER TABLE "_new" RENAME TO "{table}"')
        con.commit()
        con.close()
        _pipeline([folder])
