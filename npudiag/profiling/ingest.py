"""Read everything a user points at into the canonical tables, one reader per file.

This is the library entry point behind ``npudiag analyze``: ``ingest([path])`` returns a
:class:`Profile` holding one Arrow table per canonical name plus what was read, used, skipped
and why. A file that fails is recorded with its one-line reason and the rest still load.
"""

from __future__ import annotations

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
from npudiag.executors import LocalPool, default_workers
from npudiag.phases import phase
from npudiag.profiling import tasks
from npudiag.profiling.analysis.copies import build_copies
from npudiag.profiling.assemble import (
    assign_steps_by_time,
    duplicate_steps,
    launch_from_timeline,
    merge_steps,
    name_comm_tasks,
    split_tasks,
)
from npudiag.profiling.discover import Unit, assign_ranks, collection_folder, discover, duplicate_ranks, run_groups
from npudiag.profiling.formats.profiler_metadata import read_distributed_args
from npudiag.profiling.formats.registry import FileTables, appended, formats, levels, read_tables, sources, whole_roles
from npudiag.profiling.op_names import fill_op_types
from npudiag.profiling.same_run import may_repeat, repeated_exports, same_collection_note
from npudiag.profiling.tasks import merge_counts
from npudiag.safeio import sha256_of

Progress = Callable[[int], None]
# what a reader may raise on input no real tool writes; turned into one line for that file so the
# other files of the run are still read
READ_ERRORS = (
    InputError,
    pa.ArrowException,
    ValueError,
    TypeError,
    OverflowError,
    UnicodeDecodeError,
    OSError,
    RecursionError,
)


def as_input_error(path: Path, exc: BaseException) -> InputError:
    if isinstance(exc, InputError):
        return exc
    if isinstance(exc, OSError):
        return InputError(path, f"cannot read: {exc.strerror or exc}")
    return InputError(
        path, f"unexpected content ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})"
    )


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


class _UnitReader:
    """Reads one unit's files, each at most once, recording per file what it was used for."""

    def __init__(
        self,
        unit: Unit,
        record: dict[Path, InputFile],
        warnings: list[str],
        errors: list[str],
        progress: Progress | None,
    ):
        self.unit = unit
        self.record = record
        self.warnings = warnings
        self.errors = errors
        self.progress = progress
        self._cache: dict[str, list[tuple[Path, FileTables]]] = {}

    def _fail(self, path: Path, exc: InputError) -> None:
        self.record[path].error = exc.one_line()
        self.errors.append(exc.one_line())

    def read(self, kind: str) -> list[tuple[Path, FileTables]]:
        """(path, what it gave) of every readable file of ``kind``; a file that fails is one error line."""
        if kind not in self._cache:
            out = []
            reader = formats()[kind].read
            for path in self.unit.files.get(kind, []):
                try:
                    result = reader(path, self.unit.rank)
                except READ_ERRORS as exc:
                    self._fail(path, as_input_error(path, exc))
                    continue
                finally:
                    if self.progress is not None:
                        self.progress(self.record[path].size_bytes)
                self.warnings.extend(result.warnings)
                out.append((path, result))
            self._cache[kind] = out
        return self._cache[kind]

    def reads(self, kinds: tuple[str, ...]) -> list[tuple[Path, FileTables]]:
        return [pr for kind in kinds if kind in self.unit.files for pr in self.read(kind)]

    def use(self, kind: str, what: str, paths: list[Path] | None = None) -> None:
        for p in paths if paths is not None else [p for p, _ in self._cache.get(kind, [])]:
            if what not in self.record[p].used_for:
                self.record[p].used_for.append(what)

    def drop_tasks(self, kinds: tuple[str, ...]) -> None:
        """The device tasks of these kinds' trace files are in tables of their own now: let the read
        rows go (the largest part of a trace; kept, they doubled the kernels in memory)."""
        for kind in kinds:
            for _, t in self._cache.get(kind, []):
                if "tasks" in t.tables:
                    t.tables["tasks"] = t.tables["tasks"].schema.empty_table()

    def first_level(self, role: str, name: str) -> list[pa.Table]:
        """The ``name`` rows of the best precedence level of ``role`` whose files hold any, marked as used."""
        for level in levels(role):
            found = [
                (p, kind, t.tables[name])
                for kind in level
                if kind in self.unit.files
                for p, t in self.read(kind)
                if t.rows(name)
            ]
            if found:
                for p, kind, _ in found:
                    self.use(kind, name, [p])
                return [t for _, _, t in found]
        return []


_KERNEL_EXTRA_DROP = ("size_bytes", "direction", "launch_ns", "comm_op_id")


@dataclass
class UnitResult:
    parts: dict[str, list[pa.Table]]
    info: dict
    warnings: list[str]
    errors: list[str]
    record: dict[Path, InputFile]
    links: dict[str, int] = field(
        default_factory=dict
    )  # the traces' host-to-device flow ids (FileTables.links), summed


def _by_time(tables: list[pa.Table]) -> pa.Table | None:
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return None
    t = schemas.concat(tables)
    return t.sort_by([("start_ns", "ascending")]) if len(tables) > 1 else t


# what a folder of another tool's output holds, and what to run on instead
_OTHER_OUTPUTS = (
    (("cluster_step_trace_time.csv", "cluster_communication.json", "cluster_analysis.db"),
     "msprof-analyze's cluster_analysis_output (its summary of a cluster, not profiler data); run npudiag cluster on the rank "
     "folders it was made from (*_ascend_pt or PROF_*)"),
)  # fmt: skip


def _not_a_profile(folder: Path) -> str:
    """Why a folder yields no profile: what it is, where npudiag knows it, else what was expected."""
    for marks, what in _OTHER_OUTPUTS:
        if any(os.path.lexists(folder / m) for m in marks):
            return what
    return "no profiler output found (expected a PROF_* or *_ascend_pt folder, or summary CSV / trace JSON files)"


def _short(name: str, limit: int = 48) -> str:
    """A name from the input, short enough for a warning line: its end, where an op name says its type."""
    return name if len(name) <= limit else "…" + name[-(limit - 1) :]


def _first_kind(r: _UnitReader, kinds: tuple[str, ...], name: str, use: str) -> pa.Table | None:
    """The ``name`` rows of the first kind of ``kinds`` whose files hold any, in time order, marked as used."""
    for kind in kinds:
        if kind not in r.unit.files:
            continue
        parts = [(p, t.tables[name]) for p, t in r.read(kind)]
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
            by_conn = pc.take(
                calls["start_ns"], pc.index_in(kernels["connection_id"], value_set=calls["connection_id"])
            )
            launch = by_conn if launch is None else pc.coalesce(launch, by_conn)
    return launch


@dataclass
class _DeviceTasks:
    """A unit's device tasks, split by class, and where they came from."""

    source: str | None = None  # the kind the kernels came from
    presplit: bool = False  # that source splits its tasks itself (a .db)
    kernels: pa.Table | None = None
    copies: pa.Table | None = None  # device-side copies (MEMCPY tasks)
    comm_tasks: pa.Table | None = None
    api_calls: pa.Table | None = None  # the host calls a presplit source holds beside its tasks
    counts: list[dict[str, dict[str, int]]] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)


def _device_tasks(r: _UnitReader) -> _DeviceTasks:
    """The device tasks from the best source that holds any; copies and communication tasks from the
    device timeline and the HCCL trace of the same run where the kernels came from a CSV."""
    hccl_streams: set[int] = set()
    for _, t in r.reads(sources("hccl_streams")):
        hccl_streams |= t.hccl_streams
    d = _DeviceTasks()
    for source in sources("device_tasks"):
        if source not in r.unit.files:
            continue
        if "kernels" in formats()[source].yields:  # tasks already split into kernels, copies and communication
            rows = [(p, t) for p, t in r.read(source) if t.rows("kernels")]
            if not rows:
                continue
            d.kernels, d.copies, d.comm_tasks, d.api_calls = (
                _by_time([t.tables[n] for _, t in rows]) for n in ("kernels", "copies", "comm_tasks", "api_calls")
            )
            d.counts += [t.task_counts for _, t in rows]
            r.use(source, "kernels", [p for p, _ in rows])
            d.presplit = True
        else:
            table = _first_kind(r, (source,), "tasks", "kernels")
            if table is None:
                continue
            split = split_tasks(table, hccl_streams)
            del table
            d.kernels, d.copies, d.comm_tasks = split.kernels, split.device_copies, split.comm_tasks
            d.counts.append(split.counts)
            d.unknown |= set(split.unknown_types)
            del split
        d.source = source
        break
    if d.source in sources("kernel_csv"):
        # the CSV holds the kernels; the device timeline of the same run gives copies and the rest
        timeline = _first_kind(r, sources("device_timeline"), "tasks", "copies")
        if timeline is not None:
            # the same files' communication ops: how the CSV's HCCL rows were launched
            comm = _by_time(
                [
                    t.tables["comm_ops"]
                    for k in sources("device_timeline")
                    if k in r.unit.files
                    for _, t in r.read(k)
                    if t.rows("comm_ops")
                ]
            )
            d.kernels = launch_from_timeline(d.kernels, timeline, comm)
            split = split_tasks(timeline, hccl_streams)
            d.copies, d.comm_tasks = split.device_copies, split.comm_tasks
            d.counts.append(split.counts)
            del timeline, split
    r.drop_tasks(sources("device_timeline"))  # not read again
    if d.presplit:
        return d
    if d.kernels is not None and not pc.any(pc.equal(d.kernels["task_class"], tasks.COMMUNICATION)).as_py():
        ops = _first_kind(r, sources("hccl"), "comm_ops", "kernels")
        if ops is not None:
            d.kernels = schemas.concat([d.kernels, ops]).sort_by([("start_ns", "ascending")])
    planes = _first_kind(r, sources("hccl"), "comm_tasks", "comm_tasks")
    if planes is not None:
        d.comm_tasks = planes
    return d


def _steps(r: _UnitReader, warnings: list[str]) -> pa.Table:
    """One row per step from every file that describes steps, each column from the first that says it."""
    u = r.unit
    step_parts = [t.tables["steps"] for _, t in r.reads(sources("steps"))]
    dup = duplicate_steps(step_parts)
    if dup:
        warnings.append(
            f"{u.path}: step {', '.join(map(str, dup[:5]))} appear(s) more than once in "
            "one step file; each counted once"
        )
    steps = merge_steps(step_parts)
    if steps.num_rows:
        steps = _fill(steps, "rank", u.rank, pa.int32())
        for kind in sources("steps"):
            r.use(kind, "steps", [p for p, t in r.read(kind) if t.rows("steps")] if kind in u.files else [])
    return steps


def read_unit(u: Unit, record: dict[Path, InputFile], progress: Progress | None) -> UnitResult:
    """Everything one unit (rank) contributes; runs in a worker process for multi-rank inputs."""
    warnings: list[str] = []
    errors: list[str] = []
    parts: dict[str, list[pa.Table]] = {name: [] for name in read_tables()}
    r = _UnitReader(u, record, warnings, errors, progress)
    d = _device_tasks(r)
    if d.unknown:
        warnings.append(
            f"{u.path}: task types {', '.join(sorted(d.unknown))} are not in npudiag's task table; counted as compute"
        )
    # host calls from the best source that records them on its own; a .db that gave the kernels gives its own
    api = _first_kind(
        r, tuple(k for k in sources("api_calls") if "tasks" in formats()[k].yields), "api_calls", "api_calls"
    )
    if api is None and d.api_calls is not None and d.api_calls.num_rows:
        api = d.api_calls
        r.use(d.source, "api_calls")
    steps = _steps(r, warnings)
    kernels, comm_tasks = d.kernels, d.comm_tasks
    if kernels is not None:
        launch = _launch_ns(kernels, api)
        kernels = kernels.drop_columns([c for c in _KERNEL_EXTRA_DROP if c in kernels.column_names])
        kernels = assign_steps_by_time(kernels, steps, launch)
        del launch
        kernels, derived, examples = fill_op_types(kernels)
        if derived:  # torch_npu Level0 writes N/A; MindSpore's timelines carry names only
            shown = ", ".join(f"{_short(name)} -> {_short(kind)}" for name, kind in examples)
            warnings.append(
                f"{u.path}: {derived:,} kernel(s) record no op type; their type is taken from the op name"
                + (f" (here: {shown})" if shown else "")
            )
        parts["kernels"].append(kernels)
        if comm_tasks is not None:
            comm_tasks = name_comm_tasks(comm_tasks, kernels)
    if api is not None:
        parts["api_calls"].append(api)
    if comm_tasks is not None and comm_tasks.num_rows:
        parts["comm_tasks"].append(comm_tasks)
    if steps.num_rows:
        parts["steps"].append(steps)
    # tables one source gives whole: the best precedence level that holds rows (the text exports
    # before a .db's or analysis.db's copy of the same data); every such role of the registry
    for role in whole_roles():
        parts[role].extend(r.first_level(role, role))
    freq = r.first_level("aicore_freq", "aicore_freq")
    if freq:  # several msprof_*.json slices of one run each carry their part; a sample in two is kept once
        parts["aicore_freq"].append(freq[0] if len(freq) == 1 else _first_of_each(pa.concat_tables(freq)))
    for fmt in appended():  # statistics and device facts: every file's rows, side by side
        for p, t in r.reads((fmt.kind,)):
            for name in fmt.yields:
                parts[name].append(t.tables[name])
                r.use(fmt.kind, name, [p])
    copies = build_copies(d.copies, api)
    if copies.num_rows:
        parts["copies"].append(copies)
    links: dict[str, int] = {}
    for reads in r._cache.values():
        for _, t in reads:
            links = {k: links.get(k, 0) + t.links.get(k, 0) for k in links.keys() | t.links.keys()}
    return UnitResult(parts, _unit_info(u, d, parts, warnings), warnings, errors, record, links)


def _unit_info(u: Unit, d: _DeviceTasks, parts: dict[str, list[pa.Table]], warnings: list[str]) -> dict[str, Any]:
    """What the manifest says of a unit, and the warnings about what it holds besides."""
    ranked = sources("device_tasks")
    below = ranked[ranked.index(d.source) + 1 :] if d.source in sources("kernel_csv") else ()
    if any(k in u.files and "kernels" in formats()[k].yields for k in below):
        warnings.append(f"{u.path}: text exports and a .db are both present; kernels were read from the {d.source} CSV")
    info = {
        "path": str(u.path),
        "kind": u.kind,
        "rank": u.rank,
        "kernel_source": d.source,
        "holds": sorted(name for name, ts in parts.items() if any(t.num_rows for t in ts)),
        "task_counts": merge_counts(d.counts),
        "unread_files": [str(p) for p in u.unread],
        "not_read": [{"path": str(p), "reason": why} for p, why in u.not_read],
    }
    data_like = [p.name for p, _ in u.not_read if p.suffix.lower() in (".csv", ".json", ".db")]
    if data_like:
        shown = ", ".join(data_like[:5]) + (f" and {len(data_like) - 5} more" if len(data_like) > 5 else "")
        warnings.append(
            f"{u.path}: {len(data_like)} file(s) not read, their name and content match no format npudiag reads: "
            f"{shown} (listed under not_read in manifest.json)"
        )
    if u.kind == "torch_npu":
        args, warning = read_distributed_args(u.path / "profiler_metadata.json")
        if warning:
            warnings.append(warning)
        if args is not None:
            info["distributed_args"] = args
    return info


def _first_of_each(t: pa.Table) -> pa.Table:
    """Rows of ``t`` sorted by time with exact duplicates (same ts_ns and freq) dropped."""
    t = t.sort_by([("ts_us", "ascending")])
    us = t["ts_us"].to_numpy(zero_copy_only=False)
    mhz = t["freq_mhz"].to_numpy(zero_copy_only=False)
    keep = np.ones(len(us), bool)
    keep[1:] = (us[1:] != us[:-1]) | (mhz[1:] != mhz[:-1])
    return t.filter(pa.array(keep))


def _fill(table: pa.Table, name: str, value, type_: pa.DataType) -> pa.Table:
    if value is None:
        return table
    i = table.schema.get_field_index(name)
    return table.set_column(i, name, pc.coalesce(table[name], pa.scalar(value, type_)))


def conform_parts(parts: dict[str, list[pa.Table]]) -> dict[str, pa.Table]:
    """The read tables, each in its declared schema (an empty table where nothing was read)."""
    tables = {}
    for name in read_tables():
        schema = schemas.TABLES[name]
        ps = parts.get(name, [])
        tables[name] = (
            schemas.conform(schemas.concat(ps), schema, keep_extra=(name == "kernels")) if ps else schemas.empty(name)
        )
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
            errors.append(
                f"{p}: no such file or folder" if not p.is_symlink() else f"{p}: a link to nothing ({os.readlink(p)})"
            )
            continue
        found = discover(p, errors if p.is_file() else warnings, follow_symlinks)
        if not found and p.is_dir():
            errors.append(f"{p}: {_not_a_profile(p)}")
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
            warnings.append(
                f"{where}: {len(group)} runs of the same process ({names}), not {len(group)} ranks; "
                f"analysing the latest, {group[-1].path.name} (--runs all reads each as its own rank)"
            )
        else:
            warnings.append(
                f"{where}: {len(group)} runs of the same process ({names}) read as {len(group)} ranks (--runs all)"
            )
    duplicates = {r: [str(u.path) for u in us] for r, us in duplicate_ranks(units).items()}
    warnings.extend(assign_ranks(units))
    return Found(units, file_records(units), warnings, errors, duplicates)


def file_records(units: list[Unit]) -> dict[Path, InputFile]:
    """One record per file of ``units``: its kind, rank and size; what it is used for is filled as it is read."""
    record: dict[Path, InputFile] = {}
    for u in units:
        for kind, files in u.files.items():
            for f in files:
                try:
                    size = f.stat().st_size
                except OSError:
                    size = 0
                record[f] = InputFile(str(f), kind, u.rank, size)
    return record


def _read_unit_job(job: tuple[Unit, dict[Path, InputFile]]) -> UnitResult:
    return read_unit(job[0], job[1], None)


def read_units(
    units: list[Unit], record: dict[Path, InputFile], progress: Progress | None = None
) -> tuple[dict[int, UnitResult], dict[int, str]]:
    """Each unit read (:func:`read_unit`), in a local process pool when there are several; ``record`` is
    updated with what each file was used for. Returns the results and, by unit index, why a unit failed."""
    results: dict[int, UnitResult] = {}
    failed: dict[int, str] = {}
    workers = default_workers(len(units)) if len(units) > 1 else 1
    if workers > 1:
        jobs = [(u, {f: record[f] for fs in u.files.values() for f in fs}) for u in units]
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
    return results, failed


def _read_once(
    units: list[Unit], results: dict[int, UnitResult], record: dict[Path, InputFile], warnings: list[str]
) -> None:
    """Two exports of one collection (see :mod:`npudiag.profiling.same_run`) are one rank: the richer
    reading stays, the others are dropped from ``results``, their files marked unused, a line says which."""
    idx = sorted(results)
    ranks = [units[i].declared_rank for i in idx]
    if len(idx) < 2 or not may_repeat(ranks):
        return
    richness = []
    for i in idx:
        parts = results[i].parts
        k = [t for t in parts.get("kernels", []) if t.num_rows]
        richness.append(
            (
                sum(1 for ts in parts.values() if any(t.num_rows for t in ts)),
                max((t.num_columns for t in k), default=0),
                sum(t.num_rows for t in k),
            )
        )
    for rep in repeated_exports([results[i].parts.get("kernels", []) for i in idx], richness, ranks):
        drop, keep = units[idx[rep.dropped]], units[idx[rep.kept]]
        res = results.pop(idx[rep.dropped])
        for f in res.record:
            record[f].used_for = []
        results[idx[rep.kept]].info.setdefault("same_collection_as", []).append(str(drop.path))
        warnings.append(same_collection_note(drop.path, keep.path, rep))


def _hashed(path: Path) -> str:
    with phase("hash an input (own thread)"):
        return sha256_of(path)


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
    found = found if found is not None else find_units(paths)
    units, record, warnings, errors = found.units, found.record, found.warnings, found.errors
    if total is not None:
        total(sum(r.size_bytes for r in record.values()))

    parts: dict[str, list[pa.Table]] = {name: [] for name in read_tables()}
    hashes: dict[Path, Future[str]] = {}
    pool = ThreadPoolExecutor(max_workers=1) if hash_inputs and record else None
    if pool is not None:
        hashes = {p: pool.submit(_hashed, p) for p in record}

    results, failed = read_units(units, record, progress)
    errors.extend(failed[i] for i in sorted(failed))
    _read_once(units, results, record, warnings)
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
