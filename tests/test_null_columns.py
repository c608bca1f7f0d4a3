"""npudiag's own memory does not grow with what a profile lacks: a column no row of a table has a value for (an
msprof trace records no shapes, dtypes or formats; no peak known, no MFU) is held as nulls over one zero
buffer, shared by every such column and mapped only where read, not as a zeroed buffer of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from npudiag import schemas
from npudiag.profiling.analysis.op_perf import op_perf
from npudiag.profiling.ingest import ingest

TRACE = "mstt-advisor-trace-view"  # an msprof trace_view.json: kernels without shapes, dtypes or formats


def _addresses(table: pa.Table, names: list[str]) -> set[int]:
    return {b.address for c in names for ch in table[c].chunks for b in ch.buffers() if b is not None and b.size}


def _all_null(table: pa.Table) -> list[str]:
    return [c for c in table.column_names if table.num_rows and table[c].null_count == table.num_rows]


def test_a_traces_absent_kernel_columns_share_one_buffer(corpus: Path) -> None:
    kernels = ingest([corpus / TRACE]).tables["kernels"]
    absent = _all_null(kernels)
    # the raw trace records no Input Shapes / Input Data Types / Input Formats / Output Shapes (args of its
    # complete events, read here with the json module), so none of those columns has a value
    events = json.loads((corpus / TRACE / "trace_view.json").read_text())
    args = {k for e in events if e.get("ph") == "X" for k in (e.get("args") or {})}
    assert "Task Type" in args and not args & {"Input Shapes", "Input Data Types", "Input Formats", "Output Shapes"}
    assert {"input_shapes", "input_dtypes", "input_formats", "output_shapes"} <= set(absent)
    assert len(absent) >= 10 and len(_addresses(kernels, absent)) == 1


def test_op_perfs_columns_without_data_share_it_too(corpus: Path) -> None:
    kernels = ingest([corpus / TRACE]).tables["kernels"]
    perf = op_perf({"kernels": kernels})
    absent = _all_null(perf)
    # no shapes: no FLOPs, no moved bytes, nothing per second or per byte, no pipe ratios
    assert {"flops", "shape_flops", "moved_bytes", "achieved_tflops", "mfu_pct", "aic_mac_ratio"} <= set(absent)
    assert perf.num_rows > 100 and len(_addresses(perf, absent)) == 1


def test_conform_keeps_values_where_there_are_some() -> None:
    raw = pa.table({"a": pa.array([None, None], pa.string()), "b": [1, None]})
    t = schemas.conform(raw, pa.schema([("a", pa.string()), ("b", pa.int64())]))
    assert t.to_pylist() == [{"a": None, "b": 1}, {"a": None, "b": None}]
