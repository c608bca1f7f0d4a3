"""The format registry: every format npudiag reads is one entry, and a reader added by registering
one entry (nothing else touched) is discovered, read, used and summarised."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import npudiag
from npudiag import schemas
from npudiag.profiling.discover import classify, kind_by_content, kind_by_header
from npudiag.profiling.formats import registry
from npudiag.profiling.formats.registry import FileTables, Format


def _read_tiny(path: Path, rank: int | None) -> FileTables:
    """A made-up format for the test: ``name,type,start_ns,dur_ns`` rows of device tasks."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    start_ns = pa.array([int(r["start_ns"]) for r in rows], pa.int64())
    table = pa.table(
        {
            "source": pa.array(["tiny"] * len(rows)),
            "rank": pa.array([rank] * len(rows), pa.int32()),
            "op_name": pa.array([r["name"] for r in rows]),
            "op_type": pa.array([r["type"] for r in rows]),
            "task_type": pa.array(["AI_CORE"] * len(rows)),
            "start_us": pa.array([int(r["start_ns"]) / 1000 for r in rows], pa.float64()),
            "start_ns": start_ns,
            "duration_us": pa.array([int(r["dur_ns"]) / 1000 for r in rows], pa.float64()),
        }
    )
    return FileTables({"tasks": schemas.conform(table, schemas.KERNELS)})


@pytest.fixture
def tiny_format():
    fmt = registry.register(Format("tiny_tasks", re.compile(r"^tiny_tasks[^/]*\.csv$"), _read_tiny, ("tasks",),
                                   headers=(frozenset({"name", "type", "start_ns", "dur_ns"}),),
                                   sources={"device_tasks": 9}))  # fmt: skip
    yield fmt
    registry.unregister("tiny_tasks")


def test_a_registered_reader_is_discovered_read_and_summarised(tmp_path: Path, tiny_format: Format) -> None:
    folder = tmp_path / "prof"
    folder.mkdir()
    rows = [("MatMul_1", "MatMul", 1_000_000, 300_000), ("Add_2", "Add", 1_400_000, 50_000), ("MatMul_3", "MatMul", 1_500_000, 200_000)]
    with open(folder / "tiny_tasks_0.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "type", "start_ns", "dur_ns"])
        w.writerows(rows)
    # the same content under a name that says nothing: recognised by its header
    (folder / "renamed.csv").write_text((folder / "tiny_tasks_0.csv").read_text())
    assert classify("tiny_tasks_0.csv") == "tiny_tasks"
    assert kind_by_header(folder / "renamed.csv") == "tiny_tasks"

    result = npudiag.analyze([folder / "tiny_tasks_0.csv"], tmp_path / "out")
    assert not result.errors
    used = {Path(f.path).name: f.used_for for f in result.inputs}
    assert used == {"tiny_tasks_0.csv": ["kernels"]}
    profile = result.summary["profile"]
    assert profile["kernels"] == 3
    assert profile["kernel_time_us"] == pytest.approx(sum(r[3] for r in rows) / 1000)
    top = {r["key"]: r for r in result.summary["hot_ops"]["top"]}
    assert top["MatMul"]["total_us"] == pytest.approx(500.0) and top["MatMul"]["count"] == 2
    assert pq.read_table(tmp_path / "out" / "kernels.parquet").num_rows == 3


def test_every_kind_is_one_entry_with_a_reader_and_its_tables() -> None:
    fs = registry.formats()
    assert len(fs) >= 19
    for kind, fmt in fs.items():
        assert fmt.kind == kind and callable(fmt.read) and fmt.yields
        for name in fmt.yields:
            assert name == "tasks" or name in schemas.TABLES, (kind, name)
        assert fmt.append or fmt.sources, f"{kind}: neither appended nor a source of any role"
    # every role's precedence is a strict order or a level read together, never ambiguous by accident
    assert registry.sources("device_tasks")[:3] == ("kernel_details", "op_summary", "db")
    assert registry.levels("memory_timeline") == [("memory_record", "npu_module_mem", "npu_mem"), ("db",)]
    assert registry.sources("steps") == ("step_trace", "analysis_db", "db", "kineto", "step_trace_json", "trace")


WIDGETS = pa.schema([("source", pa.string()), ("rank", pa.int32()), ("name", pa.string()), ("size_bytes", pa.int64())])


def _read_widgets(path: Path, rank: int | None) -> FileTables:
    """A made-up format with a table npudiag has never heard of: ``name,size`` rows."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return FileTables({"widgets": pa.table({"source": ["widgets"] * len(rows), "rank": pa.array([rank] * len(rows), pa.int32()),
                                      "name": [r["name"] for r in rows], "size_bytes": [int(r["size"]) for r in rows]},
                                     schema=WIDGETS)})  # fmt: skip


def test_a_new_table_is_one_registry_line_read_written_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader with a table of its own: its module (here, the function above) and one registry line;
    ingest reads the table whole, analyze writes it, check reports its data with analyze's count."""
    from npudiag.profiling import health

    monkeypatch.setitem(schemas.TABLES, "widgets", WIDGETS)
    registry.register(Format("widget_csv", re.compile(r"^widgets[^/]*\.csv$"), _read_widgets, ("widgets",),
                             sources={"widgets": 0}, reports={"widgets": "widgets"}))  # fmt: skip
    try:
        folder = tmp_path / "prof"
        folder.mkdir()
        (folder / "widgets_0.csv").write_text("name,size\nbolt,8\nnut,4\nwasher,2\n")
        assert "widgets" in registry.read_tables() and "widgets" in registry.whole_roles()
        result = npudiag.analyze([folder], tmp_path / "out")
        assert not result.errors, result.errors
        assert {Path(f.path).name: f.used_for for f in result.inputs} == {"widgets_0.csv": ["widgets"]}
        written = pq.read_table(tmp_path / "out" / "widgets.parquet")
        assert written.num_rows == 3 and written["size_bytes"].to_pylist() == [8, 4, 2]
        (p,) = health.check([folder]).profiles
        row = next(d for d in p.data if d.data == "widgets")
        assert (row.status, row.rows, row.found_in) == ("present", 3, "widgets_0.csv")
    finally:
        registry.unregister("widget_csv")


def test_a_role_nothing_reads_or_a_table_without_data_fails_at_registration() -> None:
    with pytest.raises(ValueError, match="nothing would read it"):
        registry.register(Format("orphan", re.compile(r"^orphan\.csv$"), _read_widgets, ("steps",), sources={"gadgets": 0}))
    with pytest.raises(ValueError, match="no kind of data"):
        registry.register(Format("orphan", re.compile(r"^orphan\.csv$"), _read_widgets, ("gadgets",), sources={"gadgets": 0}))
    assert "orphan" not in registry.formats()


def test_a_trace_of_any_name_is_the_trace_format(tmp_path: Path) -> None:
    p = tmp_path / "renamed.json"
    p.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "1.0", "dur": 1}]')
    assert kind_by_content(p) == "trace"
    assert registry.get("trace").trace_content
