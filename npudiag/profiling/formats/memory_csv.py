"""Memory summary CSVs → ``memory_timeline`` and ``op_memory``.

Four files, in two generations each (torch_npu's ASCEND_PROFILER_OUTPUT, msprof's
mindstudio_profiler_output ``*_{ts}.csv``); the unit is in every column name and differs between them:

- ``memory_record``: the allocator's totals at each allocation / release. torch_npu:
  ``Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type``
  (components PTA = torch_npu's caching allocator, GE = the graph engine, PTA+GE their sum, APP = the
  whole process, sampled, reserved only); msprof: ``Device_id,Component,Timestamp(us),Total Allocated(KB),
  Total Reserved(KB),Device`` (GE only).
- ``operator_memory``: one row per block: ``Name,Size(KB),Allocation Time(us),Release Time(us),...`` (torch_npu,
  totals in MB) or ``Device_id,Name,Size(KB),Allocation Time(us),Duration(us),...`` (msprof, totals in KB).
  CANN documents that a negative Size is a release whose allocation came before the profile (no name,
  no allocation columns) and an empty Release a block still held when the profile ended.
- ``npu_module_mem``: ``[Device_id,]Component,Timestamp(us),Total Reserved(MB|KB),Device``: what each CANN
  module (SLOG, HCCL, FMK, ...) holds.
- ``npu_mem``: ``Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)``: process (APP) and device
  level memory in use; memory = DDR + HBM.

MB here is 2**20 bytes and KB 2**10 (a torch_npu MB total times 2**20 is the .db export's byte count).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.profiling.formats.csvtext import CsvText, read_csv_text, to_float, to_int, to_ns, to_text
from npudiag.profiling.formats.registry import Format, one_table, register

_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
# timestamps are read as text and parsed exactly (a float64 of today's epoch in us keeps 0.25 us)
_TIMES = ("Timestamp(us)", "timestamp(us)", "Allocation Time(us)", "Release Time(us)")
_NPU = r"^\s*NPU\s*:\s*(?P<id>\d{1,9})\s*$"


def _sized(ct: CsvText, stem: str) -> tuple[str, int] | None:
    """The column ``stem(UNIT)`` (any of B, KB, MB, GB) and its bytes per unit."""
    for name in ct.table.column_names:
        head, paren, unit = name.rstrip(")").rpartition("(")
        if paren and name.endswith(")") and head.strip().lower() == stem.lower() and unit.upper() in _UNITS:
            return name, _UNITS[unit.upper()]
    return None


def _bytes(ct: CsvText, stem: str) -> pa.ChunkedArray | None:
    found = _sized(ct, stem)
    if found is None:
        return None
    name, factor = found
    values = to_float(ct, name)
    finite = pc.if_else(pc.is_finite(values), values, pa.scalar(None, pa.float64()))
    scaled = pc.multiply(finite, float(factor))
    too_big = pc.fill_null(pc.greater_equal(pc.abs(scaled), 2.0**62), False)
    if pc.any(too_big).as_py():
        i = int(pc.index(too_big, True).as_py())
        raise InputError(
            ct.path, f"column {name!r} has {ct.table.column(name)[i].as_py()!r}, beyond any device memory", line=i + 2
        )
    return pc.cast(pc.round(scaled), pa.int64(), safe=False)


def _device_id(ct: CsvText, device_col: str | None) -> pa.ChunkedArray | None:
    """Device_id where the file has it, else the N of ``NPU:N`` in the Device / Device Type column."""
    if ct.has("Device_id"):
        return to_int(ct, "Device_id", bits=32)
    if device_col is None:
        return None
    text = to_text(ct, device_col)
    return pc.struct_field(pc.extract_regex(text, _NPU), "id").cast(pa.int32())


def _us_and_ns(ct: CsvText, name: str | None) -> tuple[pa.ChunkedArray | None, pa.ChunkedArray | None]:
    if name is None:
        return None, None
    return to_float(ct, name), to_ns(ct, name)


def _table(cols: dict, n: int, rank: int | None, source: str, schema: pa.Schema) -> pa.Table:
    cols = {"source": pa.repeat(pa.scalar(source), n), "rank": pa.repeat(pa.scalar(rank, pa.int32()), n), **cols}
    return schemas.conform(pa.table({k: v for k, v in cols.items() if v is not None}), schema)


def _samples(
    path: Path, rank: int | None, source: str, kind: str, sizes: tuple[str, ...], device_names: tuple[str, ...]
) -> tuple[pa.Table, list[str]]:
    """memory_record / npu_module_mem: Component, Timestamp(us), then the ``sizes`` totals in their unit."""
    ct = read_csv_text(path, (("Component",), ("Timestamp(us)",)), text_columns=_TIMES)
    if all(_sized(ct, stem) is None for stem in sizes[:2]):
        raise InputError(path, f"missing column {' or '.join(repr(stem + '(MB|KB)') for stem in sizes[:2])}", line=1)
    n = ct.table.num_rows
    device_col = ct.has(*device_names)
    ts_us, ts_ns = _us_and_ns(ct, "Timestamp(us)")
    cols = {
        "device_id": _device_id(ct, device_col),
        "kind": pa.repeat(pa.scalar(kind), n),
        "component": to_text(ct, "Component"),
        "ts_us": ts_us,
        "ts_ns": ts_ns,
        **{f"{stem.split()[-1].lower()}_bytes": _bytes(ct, stem) for stem in sizes},
        "stream_ptr": to_int(ct, ct.has("Stream Ptr")),
        "device_type": to_text(ct, device_col),
    }
    return _table(cols, n, rank, source, schemas.MEMORY_TIMELINE), ct.warnings


def read_memory_record(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    sizes = ("Total Allocated", "Total Reserved", "Total Active")
    return _samples(path, rank, "memory_record", "allocator", sizes, ("Device Type", "Device"))


def read_npu_module_mem(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    return _samples(path, rank, "npu_module_mem", "module", ("Total Reserved",), ("Device", "Device Type"))


def read_npu_mem(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    ct = read_csv_text(path, (("event",), ("timestamp(us)",)), text_columns=_TIMES)
    n = ct.table.num_rows
    ts_us, ts_ns = _us_and_ns(ct, "timestamp(us)")
    hbm, ddr, memory = _bytes(ct, "hbm"), _bytes(ct, "ddr"), _bytes(ct, "memory")
    if memory is None and hbm is not None and ddr is not None:
        memory = pc.add(pc.fill_null(hbm, 0), pc.fill_null(ddr, 0))
    cols = {
        "device_id": _device_id(ct, None),
        "kind": pa.repeat(pa.scalar("npu"), n),
        "component": pc.utf8_upper(to_text(ct, "event")),
        "ts_us": ts_us,
        "ts_ns": ts_ns,
        "reserved_bytes": memory,
        "hbm_bytes": hbm,
        "ddr_bytes": ddr,
    }
    return _table(cols, n, rank, "npu_mem", schemas.MEMORY_TIMELINE), ct.warnings


def read_operator_memory(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    ct = read_csv_text(path, (("Name",), ("Allocation Time(us)",)), text_columns=_TIMES)
    if _sized(ct, "Size") is None:
        raise InputError(path, "missing column 'Size(KB)'", line=1)
    n = ct.table.num_rows
    device_col = ct.has("Device Type", "Device")
    alloc_us, alloc_ns = _us_and_ns(ct, "Allocation Time(us)")
    release_us, release_ns = _us_and_ns(ct, ct.has("Release Time(us)"))
    duration = to_float(ct, ct.has("Duration(us)"))
    if release_us is None and duration is not None:
        # msprof's file has no release time: the block was held for Duration after its allocation
        release_us = pc.add(alloc_us, duration)
        release_ns = pc.add(alloc_ns, pc.cast(pc.round(pc.multiply(duration, 1000.0)), pa.int64(), safe=False))
    cols = {
        "device_id": _device_id(ct, device_col),
        "op_name": to_text(ct, "Name"),
        "size_bytes": _bytes(ct, "Size"),
        "alloc_us": alloc_us,
        "alloc_ns": alloc_ns,
        "release_us": release_us,
        "release_ns": release_ns,
        "active_release_us": to_float(ct, ct.has("Active Release Time(us)")),
        "duration_us": duration,
        "active_duration_us": to_float(ct, ct.has("Active Duration(us)")),
        "alloc_allocated_bytes": _bytes(ct, "Allocation Total Allocated"),
        "alloc_reserved_bytes": _bytes(ct, "Allocation Total Reserved"),
        "alloc_active_bytes": _bytes(ct, "Allocation Total Active"),
        "release_allocated_bytes": _bytes(ct, "Release Total Allocated"),
        "release_reserved_bytes": _bytes(ct, "Release Total Reserved"),
        "release_active_bytes": _bytes(ct, "Release Total Active"),
        "stream_ptr": to_int(ct, ct.has("Stream Ptr")),
        "device_type": to_text(ct, device_col),
    }
    return _table(cols, n, rank, "operator_memory", schemas.OP_MEMORY), ct.warnings


register(
    Format(
        "memory_record",
        re.compile(r"^memory_record[^/]*\.csv$"),
        lambda path, rank: one_table(read_memory_record(path, rank), "memory_timeline"),
        ("memory_timeline",),
        headers=(
            frozenset({"Component", "Timestamp(us)", "Total Allocated(MB)"}),
            frozenset({"Component", "Timestamp(us)", "Total Allocated(KB)"}),
        ),
        sources={"memory_timeline": 0},
    )
)
register(
    Format(
        "operator_memory",
        re.compile(r"^operator_memory[^/]*\.csv$"),
        lambda path, rank: one_table(read_operator_memory(path, rank), "op_memory"),
        ("op_memory",),
        headers=(frozenset({"Name", "Size(KB)", "Allocation Time(us)"}),),
        sources={"op_memory": 0},
    )
)
register(
    Format(
        "npu_module_mem",
        re.compile(r"^npu_module_mem[^/]*\.csv$"),
        lambda path, rank: one_table(read_npu_module_mem(path, rank), "memory_timeline"),
        ("memory_timeline",),
        sources={"memory_timeline": 0},
    )
)
register(
    Format(
        "npu_mem",
        re.compile(r"^npu_mem(?!ory)[^/]*\.csv$"),
        lambda path, rank: one_table(read_npu_mem(path, rank), "memory_timeline"),
        ("memory_timeline",),
        sources={"memory_timeline": 0},
    )
)
