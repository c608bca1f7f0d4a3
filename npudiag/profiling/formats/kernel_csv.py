"""op_summary_*.csv (msprof), kernel_details.csv (torch_npu) and task_time_*.csv → ``kernels``.

The three files describe the same device tasks with names that moved between CANN versions
(``Op Name``/``Name``, ``OP Type``/``Type``, ``Task Type``/``Accelerator Core``, ``Block Dim``/
``Block Num``). Every column the core schema does not name is kept as a metric column.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.executors import threads
from npudiag.phases import phase
from npudiag.profiling.assemble import drop_bad_timing
from npudiag.profiling.formats.csvtext import (
    NO_MODEL_ID,
    CsvText,
    first_bad_utf8_line,
    normalise_column_name,
    read_csv_text,
    to_float,
    to_int,
    to_ns,
    to_text,
)
from npudiag.profiling.formats.registry import Format, one_table, register

# canonical column -> (alternative source names, converter)
_COLUMNS: dict[str, tuple[tuple[str, ...], str]] = {
    "step": (("Step Id", "Step ID"), "int"),
    "device_id": (("Device_id", "Device ID"), "int32"),
    "model_id": (("Model ID",), "int"),
    "stream_id": (("Stream ID", "stream_id"), "int"),
    "task_id": (("Task ID", "task_id"), "int"),
    "op_name": (("Name", "Op Name", "kernel_name"), "text"),
    "op_type": (("Type", "OP Type"), "text"),
    "op_state": (("OP State",), "text"),
    "task_type": (("Accelerator Core", "Task Type", "kernel_type"), "text"),
    "start_us": (("Start Time(us)", "Task Start Time(us)", "task_start(us)"), "float"),
    "duration_us": (("Duration(us)", "Task Duration(us)", "task_time(us)"), "float"),
    "wait_us": (("Wait Time(us)", "Task Wait Time(us)"), "float"),
    "block_dim": (("Block Dim", "Block Num"), "int"),
    "mix_block_dim": (("Mix Block Dim", "Mix Block Num"), "int"),
    "hf32_eligible": (("HF32 Eligible",), "text"),
    "context_id": (("Context ID",), "text"),
    "input_shapes": (("Input Shapes",), "text"),
    "input_dtypes": (("Input Data Types",), "text"),
    "input_formats": (("Input Formats",), "text"),
    "output_shapes": (("Output Shapes",), "text"),
    "output_dtypes": (("Output Data Types",), "text"),
    "output_formats": (("Output Formats",), "text"),
}
_CONSUMED_EXTRA = {"task_stop(us)"}  # task_time's end column: start + duration already say it
MAX_COLUMNS = 512  # the core columns and the PMU metric tail of any --aic-metrics set fit many times over
_ALL_NAMES = tuple(
    n for alternatives, _ in _COLUMNS.values() for n in alternatives
)  # every name a core column may have
REQUIRED = (
    _COLUMNS["op_name"][0],
    _COLUMNS["start_us"][0],
    _COLUMNS["duration_us"][0],
)


def kind_of(path: Path) -> str:
    name = path.name
    if name.startswith("kernel_details"):
        return "kernel_details"
    if name.startswith("task_time"):
        return "task_time"
    return "op_summary"


def read_kernels(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    # start times stay text so they can be parsed exactly (see to_ns)
    with phase("csv: read"):
        ct = read_csv_text(
            path, REQUIRED, text_columns=_COLUMNS["start_us"][0], max_columns=MAX_COLUMNS, keep=_ALL_NAMES
        )
    try:
        with phase("csv: columns converted"):
            table = kernels_from_csv(ct, kind_of(path), rank)
        table, bad = drop_bad_timing(table, str(path), lambda i: f"data row {i + 1}")
        return table, ct.warnings + bad
    except pa.ArrowInvalid as exc:
        if "utf8" in str(exc).lower():
            raise InputError(path, "bytes that are not UTF-8 text", line=first_bad_utf8_line(path)) from None
        raise InputError(path, f"unexpected content ({str(exc).splitlines()[0][:160]})") from None


def _convert(ct: CsvText, source_name: str | None, how: str) -> pa.ChunkedArray | None:
    if how in ("int", "int32"):
        return to_int(ct, source_name, bits=64 if how == "int" else 32)
    if how == "float":
        return to_float(ct, source_name)
    return to_text(ct, source_name)


def _metric(ct: CsvText, name: str) -> pa.ChunkedArray:
    try:
        return to_float(ct, name)
    except InputError:  # a non-numeric metric stays text
        return to_text(ct, name)


def kernels_from_csv(ct: CsvText, source: str, rank: int | None) -> pa.Table:
    """Convert columns in parallel: pyarrow kernels release the GIL, and there are dozens."""
    n = ct.table.num_rows
    jobs: dict[str, tuple] = {}
    used: set[str] = set()
    for canonical, (alternatives, how) in _COLUMNS.items():
        name = ct.has(*alternatives)
        if name is not None:
            used.add(name)
            jobs[canonical] = (_convert, ct, name, how)
    extras: dict[str, str] = {}
    for name in ct.table.column_names:
        if name in used or name in _CONSUMED_EXTRA:
            continue
        extra = normalise_column_name(name)
        if extra in schemas.KERNELS.names or extra in extras:
            continue
        extras[extra] = name
        jobs["extra:" + extra] = (_metric, ct, name)
    pool = threads("csv-columns", min(4, os.cpu_count() or 1))
    futures = {key: pool.submit(job[0], *job[1:]) for key, job in jobs.items()}
    try:
        done = {key: f.result() for key, f in futures.items()}
    finally:  # a failed column: the others are not waited for
        for f in futures.values():
            f.cancel()
    cols = {k: v for k, v in done.items() if not k.startswith("extra:")}
    start_name = ct.has(*_COLUMNS["start_us"][0])
    if start_name is not None:
        cols["start_ns"] = to_ns(ct, start_name)
    if "model_id" in cols:
        cols["model_id"] = pc.if_else(
            pc.equal(cols["model_id"], NO_MODEL_ID), pa.scalar(None, pa.int64()), cols["model_id"]
        )
    cols["source"] = pa.repeat(pa.scalar(source, pa.string()), n)
    cols["rank"] = pa.repeat(pa.scalar(rank, pa.int32()), n)
    table = schemas.conform(pa.table(cols), schemas.KERNELS)
    if not extras:
        return table
    # all metric columns at once: appending one at a time copies the schema each time (quadratic)
    arrays = list(table.columns) + [done["extra:" + e] for e in extras]
    fields = list(table.schema) + [pa.field(e, done["extra:" + e].type) for e in extras]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


# the device tasks, one row each: torch_npu's kernel_details.csv (carries Step Id), msprof's
# op_summary.csv, and the older task_time.csv; these hold kernels only, the device timeline of the
# same run gives the copies
for _kind, _header, _rank in (
    ("kernel_details", frozenset({"Name", "Accelerator Core", "Start Time(us)", "Duration(us)"}), 0),
    ("op_summary", frozenset({"Op Name", "Task Type", "Task Start Time(us)", "Task Duration(us)"}), 1),
    ("task_time", frozenset({"kernel_name", "kernel_type", "task_start(us)", "task_time(us)"}), 3),
):
    register(
        Format(
            _kind,
            re.compile(rf"^{_kind}[^/]*\.csv$"),
            lambda path, rank: one_table(read_kernels(path, rank), "tasks"),
            ("tasks",),
            headers=(_header,),
            sources={"device_tasks": _rank, "kernel_csv": 0},
        )
    )
