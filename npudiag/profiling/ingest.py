"""Read everything a user points at into the canonical tables, one reader per file.

This is the library entry point behind ``npudiag analyze``: ``ingest([path])`` returns a
:class:`Profile` holding one Arrow table per canonical name plus what was read, used, skipped
and why. A file that fails is recorded with its one-line reason and the rest still load.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.profiling import tasks
from npudiag.profiling.analysis.copies import build_copies
from npudiag.profiling.assemble import assign_steps_by_time, duplicate_steps, merge_steps, name_comm_tasks, split_tasks
from npudiag.profiling.discover import Unit, assign_ranks, collection_folder, discover, duplicate_ranks, run_groups
from npudiag.profiling.formats.analysis_db import read_analysis_db
from npudiag.profiling.formats.api_statistic import read_api_statistic
from npudiag.profiling.formats.communication import read_communication_tables, read_matrix
from npudiag.profiling.formats.device_info import read_device_info
from npudiag.profiling.formats.kernel_csv import read_kernels
from npudiag.profiling.formats.memory_csv import read_memory_record, read_npu_mem, read_npu_module_mem, read_operator_memory
from npudiag.profiling.formats.msprof_db import read_db
from npudiag.profiling.formats.op_statistic import read_op_statistic
from npudiag.profiling.formats.profiler_metadata import read_distributed_args
from npudiag.profiling.formats.step_trace import read_steps
from npudiag.profiling.formats.trace_json import TraceTables, read_trace
from npudiag.profiling.op_names import fill_op_types
from npudiag.profiling.tasks import merge_counts

Progress = Callable[[int], None]
# what a reader may raise on input no real tool writes; turned into one line for that file so the
# other files of the run are still read
READ_ERRORS = (InputError, pa.ArrowException, ValueError, TypeError, OverflowError, UnicodeDecodeError, OSError, RecursionError)


def as_input_error(path: Path, exc: BaseException) -> InputError:
    if isinstance(exc, InputError):
        return exc
    if isinstance(exc, OSError):
        return InputError(path, f"cannot read: {exc.strerror or exc}")
    return InputError(path, f"unexpected content ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})")


@dataclass
class InputFile:
    path: str
    kind: str
    rank: int | None
    size_bytes: int
    sha256: str | None = None
    used_for: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class Profile:
    tables: dict[str, pa.Table]
    inputs: list[InputFile]
    units: list[dict]
    warnings: list[str]
    errors: list[str]

    def table(self, name: str) -> pa.Table:
        return self.tables.get(name, schemas.empty(name))


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


class _UnitReader:
    """Reads one unit's files, each at most once, recording per file what it was used for."""

    def __init__(self, unit: Unit, record: dict[Path, InputFile], warnings: list[str], errors: list[str], progress: Progress | None):
        self.unit = unit
        self.record = record
        self.warnings = warnings
        self.errors = errors
        self.progress = progress
        self._cache: dict[str, list[tuple[Path, Any]]] = {}

    def _fail(self, path: Path, exc: InputError) -> None:
        self.record[path].error = exc.one_line()
        self.errors.append(exc.one_line())

    def read(self, kind: str) -> list[tuple[Path, Any]]:
        """(path, result) of every readable file of ``kind``; a file that fails is one error line."""
        if kind not in self._cache:
            out = []
            reader = _READERS[kind]
            for path in self.unit.files.get(kind, []):
                try:
                    result = reader(path, self.unit.rank)
                except READ_ERRORS as exc:
                    self._fail(path, as_input_error(path, exc))
                    continue
                finally:
                    if self.progress is not None:
                        self.progress(self.record[path].size_bytes)
                warns = result[1] if isinstance(result, tuple) else result.warnings
                self.warnings.extend(warns)
                out.append((path, result[0] if isinstance(result, tuple) else result))
            self._cache[kind] = out
        return self._cache[kind]

    def use(self, kind: str, what: str, paths: list[Path] | None = None) -> None:
        for p in paths if paths is not None else [p for p, _ in self._cache.get(kind, [])]:
            if what not in self.record[p].used_for:
                self.record[p].used_for.append(what)

    def drop_tasks(self, kinds: tuple[str, ...]) -> None:
        """The device tasks of these kinds' trace files are in tables of their own now: let the read
        rows go (the largest part of a trace; kept, they doubled the kernels in memory)."""
        for kind in kinds:
            for _, t in self._cache.get(kind, []):
                t.tasks = t.tasks.schema.empty_table()

    def traces(self, kind: str) -> list[TraceTables]:
        return [t for _, t in self.read(kind)]

    def tables_of(self, kind: str) -> list[pa.Table]:
        return [t for _, t in self.read(kind)]


def _read_trace_file(path: Path, rank: int | None) -> TraceTables:
    return read_trace(path, rank)


_READERS: dict[str, Callable[[Path, int | None], Any]] = {
    "kernel_details": read_kernels,
    "op_summary": read_kernels,
    "task_time": read_kernels,
    "op_statistic": read_op_statistic,
    "api_statistic": read_api_statistic,
    "step_trace": read_steps,
    "trace": _read_trace_file,
    "task_time_json": _read_trace_file,
    "step_trace_json": _read_trace_file,
    "hccl_json": _read_trace_file,
    "db": read_db,
    "analysis_db": read_analysis_db,
    "communication_matrix": lambda path, rank: (read_matrix(path, rank), []),
    "communication": read_communication_tables,
    "device_info": lambda path, rank: (read_device_info(path, rank), []),
    "memory_record": read_memory_record,
    "npu_module_mem": read_npu_module_mem,
    "npu_mem": read_npu_mem,
    "operator_memory": read_operator_memory,
}
# which file gives a unit's device tasks, best first (kernel_details carries Step Id); per-iteration
# trace files of one kind are read together, in time order
TASK_SOURCES = ("kernel_details", "op_summary", "db", "task_time", "task_time_json", "trace")
_CSV_SOURCES = ("kernel_details", "op_summary", "task_time")
_TRACE_FAMILY = ("task_time_json", "trace")  # files whose tasks are the device timeline
_COMM_FAMILY = ("hccl_json", "trace")  # files whose HCCL process has the ops and plane tasks
_KERNEL_EXTRA_DROP = ("size_bytes", "direction", "launch_ns", "comm_op_id")


@dataclass
class UnitResult:
    parts: dict[str, list[pa.Table]]
    info: dict
    warnings: list[str]
    errors: list[str]
    record: dict[Path, InputFile]


READ_TABLES = ("kernels", "api_calls", "op_statistic", "api_statistic", "steps", "copies", "comm_links", "comm_ops", "comm_tasks",
               "comm_bandwidth", "memory_timeline", "op_memory", "aicore_freq", "device_info", "torch_ops")  # fmt: skip
# the memory files of a unit, by the table they give; the .db export's tables stand in for them
_MEMORY_KINDS = {"memory_timeline": ("memory_record", "npu_module_mem", "npu_mem"), "op_memory": ("operator_memory",)}


def _by_time(tables: list[pa.Table]) -> pa.Table | None:
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return None
    t = schemas.concat(tables)
    return t.sort_by([("start_ns", "ascending")]) if len(tables) > 1 else t


def _first_kind(r: _UnitReader, kinds: tuple[str, ...], get: Callable[[Any], pa.Table], use: str) -> pa.Table | None:
    """The rows ``get`` takes from the first kind of ``kinds`` whose files hold any, marked as used."""
    for kind in kinds:
        if kind not in r.unit.files:
            continue
        parts = [(p, get(t)) for p, t in r.read(kind)]
        table = _by_time([t for _, t in parts])
        if table is not None:
            r.use(kind, use, [p for p, t in parts if t.num_rows])
            return table
    return None


def _launch_ns(kernels: pa.Table, api: pa.Table | None) -> pa.Array | None:
    """Each kernel's launch time: the trace's HostToDevice flow, else the host call with its connection id."""
    launch = kernels["launch_ns"] if "launch_ns" in kernels.column_names else None
    if api is not None and api.num_rows and "connection_id" in kernels.column_names:
        calls = api.select(["connection_id", "start_ns"])  # a filter copies every column it keeps
        calls = calls.filter(pc.is_valid(calls["connection_id"]))
        if calls.num_rows:
            by_conn = pc.take(calls["start_ns"], pc.index_in(kernels["connection_id"], value_set=calls["connection_id"]))
            launch = by_conn if launch is None else pc.coalesce(launch, by_conn)
    return launch


def read_unit(u: Unit, record: dict[Path, InputFile], progress: Progress | None) -> UnitResult:
    """Everything one unit (rank) contributes; runs in a worker process for multi-rank inputs."""
    warnings: list[str] = []
    errors: list[str] = []
    parts: dict[str, list[pa.Table]] = {name: [] for name in READ_TABLES}
    r = _UnitReader(u, record, warnings, errors, progress)
    hccl_streams: set[int] = set()
    for kind in ("hccl_json", "trace", "task_time_json"):
        if kind in u.files:
            for t in r.traces(kind):
                hccl_streams |= t.hccl_streams

    kernels: pa.Table | None = None
    kernel_source: str | None = None
    dev_copies: pa.Table | None = None
    comm_tasks: pa.Table | None = None
    counts: list[dict[str, dict[str, int]]] = []
    unknown: set[str] = set()
    db_api: pa.Table | None = None
    for source in TASK_SOURCES:
        if source not in u.files:
            continue
        if source == "db":
            dbs = r.read("db")
            rows = [(p, d) for p, d in dbs if d.kernels.num_rows]
            if not rows:
                continue
            kernels = _by_time([d.kernels for _, d in rows])
            dev_copies = _by_time([d.copies for _, d in rows])
            comm_tasks = _by_time([d.comm_tasks for _, d in rows])
            db_api = _by_time([d.api_calls for _, d in rows])
            counts += [d.task_counts for _, d in rows]
            r.use("db", "kernels", [p for p, _ in rows])
        else:
            get = (lambda t: t) if source in _CSV_SOURCES else (lambda t: t.tasks)
            table = _first_kind(r, (source,), get, "kernels")
            if table is None:
                continue
            split = split_tasks(table, hccl_streams)
            del table
            kernels, dev_copies, comm_tasks = split.kernels, split.device_copies, split.comm_tasks
            counts.append(split.counts)
            unknown |= set(split.unknown_types)
            del split
        kernel_source = source
        break
    if kernel_source in _CSV_SOURCES:
        # the CSV holds the kernels; the device timeline of the same run gives copies and the rest
        timeline = _first_kind(r, _TRACE_FAMILY, lambda t: t.tasks, "copies")
        if timeline is not None:
            split = split_tasks(timeline, hccl_streams)
            dev_copies, comm_tasks = split.device_copies, split.comm_tasks
            counts.append(split.counts)
            del timeline, split
    r.drop_tasks(_TRACE_FAMILY)  # not read again below
    if kernels is not None and kernel_source != "db" and not pc.any(pc.equal(kernels["task_class"], tasks.COMMUNICATION)).as_py():
        ops = _first_kind(r, _COMM_FAMILY, lambda t: t.comm_ops, "kernels")
        if ops is not None:
            kernels = schemas.concat([kernels, ops]).sort_by([("start_ns", "ascending")])
    if kernel_source != "db":
        planes = _first_kind(r, _COMM_FAMILY, lambda t: t.comm_tasks, "comm_tasks")
        if planes is not None:
            comm_tasks = planes
    if unknown:
        warnings.append(f"{u.path}: task types {', '.join(sorted(unknown))} are not in npudiag's task table; counted as compute")

    api = _first_kind(r, ("trace",), lambda t: t.api_calls, "api_calls")
    if api is None and db_api is not None and db_api.num_rows:
        api = db_api
        r.use("db", "api_calls")

    step_parts = r.tables_of("step_trace") + [t["steps"] for t in r.tables_of("analysis_db")]
    step_parts += [d.steps for d in r.tables_of("db")]
    step_parts += [t.steps for t in r.traces("step_trace_json")] + [t.steps for t in r.traces("trace")]
    dup = duplicate_steps(step_parts)
    if dup:
        warnings.append(f"{u.path}: step {', '.join(map(str, dup[:5]))} appear(s) more than once in one step file; each counted once")
    steps = merge_steps(step_parts)
    if steps.num_rows:
        steps = _fill(steps, "rank", u.rank, pa.int32())
        for kind in ("step_trace", "analysis_db", "db", "step_trace_json", "trace"):
            r.use(kind, "steps", [p for p, t in r.read(kind) if _steps_of(kind, t).num_rows] if kind in u.files else [])

    if kernels is not None:
        launch = _launch_ns(kernels, api)
        kernels = kernels.drop_columns([c for c in _KERNEL_EXTRA_DROP if c in kernels.column_names])
        kernels = assign_steps_by_time(kernels, steps, launch)
        del launch
        kernels, derived = fill_op_types(kernels)
        if derived:  # torch_npu Level0 writes N/A; MindSpore's timelines carry names only
            warnings.append(f"{u.path}: {derived:,} kernel(s) record no op type; their type is taken from the op name "
                            "(Default/.../Conv2D-op8 -> Conv2D, aclnnMm_MatMulCommon_MatMulV2 -> MatMulV2, hcom_allReduce__3_1 -> "
                            "hcom_allReduce_)")  # fmt: skip
        parts["kernels"].append(kernels)
        if comm_tasks is not None:
            comm_tasks = name_comm_tasks(comm_tasks, kernels)
    if api is not None:
        parts["api_calls"].append(api)
    if comm_tasks is not None and comm_tasks.num_rows:
        parts["comm_tasks"].append(comm_tasks)
    if steps.num_rows:
        parts["steps"].append(steps)
    parts["op_statistic"].extend(r.tables_of("op_statistic"))
    parts["api_statistic"].extend(r.tables_of("api_statistic"))
    r.use("op_statistic", "op_statistic")
    r.use("api_statistic", "api_statistic")
    for name, kind in (("comm_links", "communication_matrix"), ("comm_ops", "communication"), ("comm_bandwidth", "communication")):
        tables = [t if kind == "communication_matrix" else t[name] for t in r.tables_of(kind)]
        if any(t.num_rows for t in tables):
            parts[name].extend(tables)
            r.use(kind, name)
        elif "analysis_db" in u.files:
            found = [(p, t[name]) for p, t in r.read("analysis_db") if t[name].num_rows]
            parts[name].extend(t for _, t in found)
            r.use("analysis_db", name, [p for p, _ in found])
    _read_memory(r, parts)
    _read_freq(r, parts)
    _read_torch_ops(r, parts)
    infos = [t for t in r.tables_of("device_info") if t.num_rows]
    if infos:
        parts["device_info"].extend(infos)
        r.use("device_info", "device_info")
    copies = build_copies(dev_copies, api)
    if copies.num_rows:
        parts["copies"].append(copies)
    if kernel_source in ("kernel_details", "op_summary") and "db" in u.files:
        warnings.append(f"{u.path}: text exports and a .db are both present; kernels were read from the {kernel_source} CSV")
    info = {
        "path": str(u.path),
        "kind": u.kind,
        "rank": u.rank,
        "kernel_source": kernel_source,
        "holds": sorted(name for name, ts in parts.items() if any(t.num_rows for t in ts)),
        "task_counts": merge_counts(counts),
        "unread_files": [str(p) for p in u.unread],
        "not_read": [{"path": str(p), "reason": why} for p, why in u.not_read],
    }
    data_like = [p.name for p, _ in u.not_read if p.suffix.lower() in (".csv", ".json", ".db")]
    if data_like:
        shown = ", ".join(data_like[:5]) + (f" and {len(data_like) - 5} more" if len(data_like) > 5 else "")
        warnings.append(f"{u.path}: {len(data_like)} file(s) not read, their name and content match no format npudiag reads: "
                        f"{shown} (listed under not_read in manifest.json)")  # fmt: skip
    if u.kind == "torch_npu":
        args, warning = read_distributed_args(u.path / "profiler_metadata.json")
        if warning:
            warnings.append(warning)
        if args is not None:
            info["distributed_args"] = args
    return UnitResult(parts, info, warnings, errors, record)


def _read_memory(r: _UnitReader, parts: dict[str, list[pa.Table]]) -> None:
    """memory_timeline / op_memory from the text exports, else from the .db export of the unit."""
    for name, kinds in _MEMORY_KINDS.items():
        for kind in kinds:
            found = [(p, t) for p, t in r.read(kind) if t.num_rows] if kind in r.unit.files else []
            parts[name].extend(t for _, t in found)
            r.use(kind, name, [p for p, _ in found])
        if not parts[name] and "db" in r.unit.files:
            found = [(p, getattr(d, name)) for p, d in r.read("db") if getattr(d, name).num_rows]
            parts[name].extend(t for _, t in found)
            r.use("db", name, [p for p, _ in found])


def _read_freq(r: _UnitReader, parts: dict[str, list[pa.Table]]) -> None:
    """aicore_freq from the .db export's AICORE_FREQ, else from the traces' "AI Core Freq" counters
    (several msprof_*.json slices of one run each carry their part; a sample in two is kept once)."""
    for kind in ("db", "trace"):
        if kind not in r.unit.files:
            continue
        found = [(p, t.aicore_freq) for p, t in r.read(kind) if t.aicore_freq.num_rows]
        if found:
            t = found[0][1] if len(found) == 1 else _first_of_each(pa.concat_tables([x for _, x in found]))
            parts["aicore_freq"].append(t)
            r.use(kind, "aicore_freq", [p for p, _ in found])
            return


def _read_torch_ops(r: _UnitReader, parts: dict[str, list[pa.Table]]) -> None:
    """torch_ops from the trace's cpu_op events, else from the .db's PYTORCH_API (the same run's ops either way)."""
    for kind in ("trace", "db"):
        if kind not in r.unit.files:
            continue
        found = [(p, t.torch_ops) for p, t in r.read(kind) if t.torch_ops.num_rows]
        if found:
            parts["torch_ops"].extend(t for _, t in found)
            r.use(kind, "torch_ops", [p for p, _ in found])
            return


def _first_of_each(t: pa.Table) -> pa.Table:
    """Rows of ``t`` sorted by time with exact duplicates (same ts_ns and freq) dropped."""
    t = t.sort_by([("ts_us", "ascending")])
    us = t["ts_us"].to_numpy(zero_copy_only=False)
    mhz = t["freq_mhz"].to_numpy(zero_copy_only=False)
    keep = np.ones(len(us), bool)
    keep[1:] = (us[1:] != us[:-1]) | (mhz[1:] != mhz[:-1])
    return t.filter(pa.array(keep))


def _steps_of(kind: str, result: Any) -> pa.Table:
    if kind == "analysis_db":
        return result["steps"]
    if kind in ("db", "trace", "step_trace_json"):
        return result.steps
    return result


def _fill(table: pa.Table, name: str, value, type_: pa.DataType) -> pa.Table:
    if value is None:
        return table
    i = table.schema.get_field_index(name)
    return table.set_column(i, name, pc.coalesce(table[name], pa.scalar(value, type_)))


def conform_parts(parts: dict[str, list[pa.Table]]) -> dict[str, pa.Table]:
    """The read tables, each in its declared schema (an empty table where nothing was read)."""
    tables = {}
    for name in READ_TABLES:
        schema = schemas.TABLES[name]
        ps = parts.get(name, [])
        tables[name] = schemas.conform(schemas.concat(ps), schema, keep_extra=(name == "kernels")) if ps else schema.empty_table()
    return tables


@dataclass
class Found:
    """What discovery found under the paths a user gave: units (ranks) and every file of them."""

    units: list[Unit]
    record: dict[Path, InputFile]
    warnings: list[str]
    errors: list[str]
    duplicate_ranks: dict[int, list[str]] = field(default_factory=dict)  # rank -> the folders that all declare it

    def record_of(self, u: Unit) -> dict[Path, InputFile]:
        return {f: self.record[f] for fs in u.files.values() for f in fs}


RUNS = ("latest", "all")  # what find_units does with repeated runs of one process


def find_units(paths: list[Path], follow_symlinks: bool = False, runs: str = "latest") -> Found:
    """The units under ``paths``. Repeated runs of one process collected side by side (several
    PROF_* folders of the same device, several *_ascend_pt of the same rank) are not ranks:
    ``runs="latest"`` keeps the newest of each, ``"all"`` reads each as its own rank; a warning says which."""
    warnings: list[str] = []
    errors: list[str] = []
    units: list[Unit] = []
    seen: dict[Path, Path] = {}  # resolved unit folder / file -> the path it was first found under
    for p in paths:
        if not p.exists():
            errors.append(f"{p}: no such file or folder" if not p.is_symlink() else f"{p}: a link to nothing ({os.readlink(p)})")
            continue
        found = discover(p, errors if p.is_file() else warnings, follow_symlinks)
        if not found and p.is_dir():
            errors.append(f"{p}: no profiler output found (expected a PROF_* or *_ascend_pt folder, or summary CSV / trace JSON files)")
        for u in found:
            if u.unexported is not None:  # nothing to read until a tool exports it: say which command does
                errors.append(f"{u.path}: {u.unexported}")
                continue
            key = u.path.resolve()
            if key in seen:
                warnings.append(f"{u.path}: the same profile as {seen[key]} (given twice); read once")
                continue
            seen[key] = u.path
            units.append(u)
    for group in run_groups(units):
        where = collection_folder(group[0]).parent
        names = ", ".join(u.path.name for u in group[:4]) + (f" and {len(group) - 4} more" if len(group) > 4 else "")
        if runs == "latest":
            drop = {id(u) for u in group[:-1]}
            units = [u for u in units if id(u) not in drop]
            warnings.append(f"{where}: {len(group)} runs of the same process ({names}), not {len(group)} ranks; "
                            f"analysing the latest, {group[-1].path.name} (--runs all reads each as its own rank)")  # fmt: skip
        else:
            warnings.append(f"{where}: {len(group)} runs of the same process ({names}) read as {len(group)} ranks (--runs all)")
    duplicates = {r: [str(u.path) for u in us] for r, us in duplicate_ranks(units).items()}
    warnings.extend(assign_ranks(units))
    record: dict[Path, InputFile] = {}
    for u in units:
        for kind, files in u.files.items():
            for f in files:
                try:
                    size = f.stat().st_size
                except OSError:
                    size = 0
                record[f] = InputFile(str(f), kind, u.rank, size)
    return Found(units, record, warnings, errors, duplicates)


def _read_unit_job(job: tuple[Unit, dict[Path, InputFile]]) -> UnitResult:
    return read_unit(job[0], job[1], None)


def ingest(
    paths: list[Path],
    progress: Progress | None = None,
    *,
    total: Callable[[int], None] | None = None,
    hash_inputs: bool = True,
    found: Found | None = None,
) -> Profile:
    """Read ``paths`` (profile folders, parents of many, or single files) into canonical tables, in
    memory. Many ranks are read in a local process pool; ``npudiag.profiling.rank_job`` is the path that
    writes each rank's tables from its own task instead, for clusters too big to hold."""
    from npudiag.executors import LocalPool, default_workers

    found = found if found is not None else find_units(paths)
    units, record, warnings, errors = found.units, found.record, found.warnings, found.errors
    if total is not None:
        total(sum(r.size_bytes for r in record.values()))

    parts: dict[str, list[pa.Table]] = {name: [] for name in READ_TABLES}
    hashes: dict[Path, Future[str]] = {}
    pool = ThreadPoolExecutor(max_workers=1) if hash_inputs and record else None
    if pool is not None:
        hashes = {p: pool.submit(sha256_of, p) for p in record}

    results: dict[int, UnitResult] = {}
    failed: dict[int, str] = {}
    workers = default_workers(len(units)) if len(units) > 1 else 1
    if workers > 1:
        jobs = [(u, found.record_of(u)) for u in units]
        for i, res in LocalPool(workers).run(_read_unit_job, jobs):
            if isinstance(res, BaseException):
                failed[i] = f"{units[i].path}: reading this rank failed ({type(res).__name__}: {res})"
                continue
            record.update(res.record)
            if progress is not None:
                progress(sum(r.size_bytes for r in res.record.values()))
            results[i] = res
    else:
        for i, u in enumerate(units):
            results[i] = read_unit(u, record, progress)
    errors.extend(failed[i] for i in sorted(failed))
    unit_info = []
    for i in sorted(results):
        res = results[i]
        for name, ts in res.parts.items():
            parts[name].extend(ts)
        warnings.extend(res.warnings)
        errors.extend(res.errors)
        unit_info.append(res.info)

    tables = conform_parts(parts)
    if pool is not None:
        for p, fut in hashes.items():
            try:
                record[p].sha256 = fut.result()
            except OSError:
                record[p].sha256 = None
        pool.shutdown()
    return Profile(tables, list(record.values()), unit_info, warnings, errors)
