"""Read everything a user points at into the canonical tables, one reader per file.

This is the library entry point behind ``npudiag analyze``: ``ingest([path])`` returns a
:class:`Profile` holding one Arrow table per canonical name plus what was read, used, skipped
and why. A file that fails is recorded with its one-line reason and the rest still load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from npudiag import schemas
from npudiag.analysis.copies import build_copies
from npudiag.discover import Unit, assign_ranks, discover
from npudiag.errors import InputError
from npudiag.formats.api_statistic import read_api_statistic
from npudiag.formats.communication import read_communication, read_matrix
from npudiag.formats.kernel_csv import read_kernels
from npudiag.formats.msprof_db import read_db
from npudiag.formats.op_statistic import read_op_statistic
from npudiag.formats.profiler_metadata import read_distributed_args
from npudiag.formats.step_trace import read_steps
from npudiag.formats.trace_json import TraceTables, read_trace

# which source gives a unit's kernels, best first (kernel_details carries Step Id)
KERNEL_SOURCES = ("kernel_details", "op_summary", "db", "task_time", "trace")

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
    """Reads one unit's files, caching each file's result so a kernel source falls back cleanly."""

    def __init__(self, unit: Unit, record: dict[Path, InputFile], warnings: list[str], errors: list[str], progress: Progress | None):
        self.unit = unit
        self.record = record
        self.warnings = warnings
        self.errors = errors
        self.progress = progress
        self._trace: TraceTables | None | bool = False  # False: not read yet
        self._db: tuple[pa.Table, pa.Table] | None | bool = False

    def _fail(self, path: Path, exc: InputError) -> None:
        self.record[path].error = exc.one_line()
        self.errors.append(exc.one_line())

    def _done(self, path: Path) -> None:
        if self.progress is not None:
            self.progress(self.record[path].size_bytes)

    def _csv(self, kind: str, reader) -> list[pa.Table]:
        out = []
        for path in self.unit.files.get(kind, []):
            try:
                table, warns = reader(path, self.unit.rank)
            except READ_ERRORS as exc:
                self._fail(path, as_input_error(path, exc))
                continue
            finally:
                self._done(path)
            self.warnings.extend(warns)
            self.record[path].used_for.append(kind)
            out.append(table)
        return out

    def trace(self) -> TraceTables | None:
        if self._trace is False:
            parts = []
            for path in self.unit.files.get("trace", []):
                try:
                    parts.append((path, read_trace(path, self.unit.rank, self.progress)))
                except READ_ERRORS as exc:
                    self._fail(path, as_input_error(path, exc))
            self._trace = None
            if parts:
                for _, t in parts:
                    self.warnings.extend(t.warnings)
                self._trace = TraceTables(
                    schemas.concat([t.kernels for _, t in parts]),
                    schemas.concat([t.api_calls for _, t in parts]),
                    schemas.concat([t.device_copies for _, t in parts]),
                )
                self._trace_paths = [p for p, _ in parts]
        return self._trace  # type: ignore[return-value]

    def db(self) -> tuple[pa.Table, pa.Table] | None:
        if self._db is False:
            kernels, apis = [], []
            self._db_paths = []
            for path in self.unit.files.get("db", []):
                try:
                    k, a, warns = read_db(path, self.unit.rank)
                except READ_ERRORS as exc:
                    self._fail(path, as_input_error(path, exc))
                    continue
                finally:
                    self._done(path)
                self.warnings.extend(warns)
                kernels.append(k)
                apis.append(a)
                self._db_paths.append(path)
            self._db = (schemas.concat(kernels), schemas.concat(apis)) if kernels else None
        return self._db  # type: ignore[return-value]

    def _mark(self, paths: list[Path], use: str) -> None:
        for p in paths:
            self.record[p].used_for.append(use)

    def kernels(self) -> tuple[pa.Table | None, str | None]:
        for source in KERNEL_SOURCES:
            if source not in self.unit.files:
                continue
            if source == "trace":
                t = self.trace()
                if t is not None and t.kernels.num_rows:
                    self._mark(self._trace_paths, "kernels")
                    return t.kernels, source
                continue
            if source == "db":
                d = self.db()
                if d is not None and d[0].num_rows:
                    self._mark(self._db_paths, "kernels")
                    return d[0], source
                continue
            reader = read_kernels
            tables = self._csv(source, reader)
            if tables:
                return schemas.concat(tables), source
        return None, None

    def api_calls(self) -> pa.Table | None:
        if "trace" in self.unit.files:
            t = self.trace()
            if t is not None and t.api_calls.num_rows:
                self._mark(self._trace_paths, "api_calls")
                return t.api_calls
        if "db" in self.unit.files:
            d = self.db()
            if d is not None and d[1].num_rows:
                self._mark(self._db_paths, "api_calls")
                return d[1]
        return None

    def device_copies(self) -> pa.Table | None:
        if "trace" in self.unit.files:
            t = self.trace()
            if t is not None and t.device_copies.num_rows:
                self._mark(self._trace_paths, "copies")
                return t.device_copies
        return None


@dataclass
class UnitResult:
    parts: dict[str, list[pa.Table]]
    info: dict
    warnings: list[str]
    errors: list[str]
    record: dict[Path, InputFile]


READ_TABLES = ("kernels", "api_calls", "op_statistic", "api_statistic", "steps", "copies", "comm_links", "comm_ops")


def read_unit(u: Unit, record: dict[Path, InputFile], progress: Progress | None) -> UnitResult:
    """Everything one unit (rank) contributes; runs in a worker process for multi-rank inputs."""
    warnings: list[str] = []
    errors: list[str] = []
    parts: dict[str, list[pa.Table]] = {name: [] for name in READ_TABLES}
    r = _UnitReader(u, record, warnings, errors, progress)
    kernels, kernel_source = r.kernels()
    api = r.api_calls()
    dev_copies = r.device_copies()
    if kernels is not None:
        parts["kernels"].append(kernels)
    if api is not None:
        parts["api_calls"].append(api)
    parts["op_statistic"].extend(r._csv("op_statistic", read_op_statistic))
    parts["api_statistic"].extend(r._csv("api_statistic", read_api_statistic))
    parts["steps"].extend(r._csv("step_trace", read_steps))
    parts["comm_links"].extend(r._csv("communication_matrix", lambda path, rank: (read_matrix(path, rank), [])))
    parts["comm_ops"].extend(r._csv("communication", lambda path, rank: (read_communication(path, rank), [])))
    copies = build_copies(kernels, api, dev_copies)
    if copies.num_rows:
        parts["copies"].append(copies)
    # files of kinds not used (e.g. task_time when op_summary was read) are listed as unused
    if kernel_source in ("kernel_details", "op_summary") and "db" in u.files:
        warnings.append(f"{u.path}: text exports and a .db are both present; kernels were read from the {kernel_source} CSV")
    info = {"path": str(u.path), "kind": u.kind, "rank": u.rank, "kernel_source": kernel_source, "unread_files": [str(p) for p in u.unread]}
    if u.kind == "torch_npu":
        args, warning = read_distributed_args(u.path / "profiler_metadata.json")
        if warning:
            warnings.append(warning)
        if args is not None:
            info["distributed_args"] = args
    return UnitResult(parts, info, warnings, errors, record)


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

    def record_of(self, u: Unit) -> dict[Path, InputFile]:
        return {f: self.record[f] for fs in u.files.values() for f in fs}


def find_units(paths: list[Path]) -> Found:
    warnings: list[str] = []
    errors: list[str] = []
    units: list[Unit] = []
    for p in paths:
        if not p.exists():
            errors.append(f"{p}: no such file or folder")
            continue
        found = discover(p, errors if p.is_file() else warnings)
        if not found and p.is_dir():
            errors.append(f"{p}: no profiler output found (expected a PROF_* or *_ascend_pt folder, or summary CSV / trace JSON files)")
        units.extend(found)
    assign_ranks(units)
    record: dict[Path, InputFile] = {}
    for u in units:
        for kind, files in u.files.items():
            for f in files:
                try:
                    size = f.stat().st_size
                except OSError:
                    size = 0
                record[f] = InputFile(str(f), kind, u.rank, size)
    return Found(units, record, warnings, errors)


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
    memory. Many ranks are read in a local process pool; ``npudiag.rank_job`` is the path that
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
