"""Writing and reading the ``--out`` folder: Parquet tables and manifest.json, always atomically.

Each file is written to a hidden temporary name in the same folder, flushed to disk, then renamed
over the final name, so an interrupted run leaves either the old file or the new one, never half
of either. Reading back needs nothing from npudiag: plain Parquet and JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from npudiag.errors import writing


def current_umask() -> int:
    """The process's umask now (a library caller may change it between calls). Read from
    /proc/self/status where there is one, so no other thread sees a temporary umask of 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Run ``write`` on a temporary file beside ``path``, flush it to disk, then rename it over ``path``.
    OutputError (one line) when the folder cannot be made or the file cannot be created."""
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; outputs get the usual permissions
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_table(table: pa.Table, path: Path) -> None:
    # snappy with dictionaries, by measurement (bench/bench_parquet.py, docs/speed.md): on a 1 M-row
    # kernel table zstd writes 9% slower for files 17% smaller, and turning dictionaries off costs time
    atomic_write(path, lambda fh: pq.write_table(table, fh, compression="snappy"))


def _rank_partitioning():
    import pyarrow.dataset as ds

    return ds.partitioning(pa.schema([("rank", pa.int32())]), flavor="hive")


NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # the folder pyarrow, DuckDB and Spark use for a null rank


def partition_path(folder: Path, name: str, rank: int | None, part: str = "0") -> Path:
    """Where one rank's slice of table ``name`` lives: ``name/rank=N/part-0.parquet``."""
    return folder / name / f"rank={NULL_PARTITION if rank is None else rank}" / f"part-{part}.parquet"


def write_partition(folder: Path, name: str, rank: int | None, table: pa.Table, part: str = "0") -> None:
    """One rank's slice of a hive-partitioned dataset that DuckDB, pyarrow.dataset and Spark read with
    partition pruning. The rank lives in the folder name, not in the file, as those readers expect."""
    body = table.drop_columns(["rank"]) if "rank" in table.column_names else table
    write_table(body, partition_path(folder, name, rank, part))


def _schema_first(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` with the declared columns in their declared order, then its extra (metric) columns."""
    return t.select([n for n in schema.names if n in t.column_names] + [n for n in t.column_names if n not in schema.names])


def read_rank_dataset(folder: Path, schema: pa.Schema) -> pa.Table:
    """The dataset as one table. Ranks may differ in their extra columns (PMU metrics of one
    collection but not another), so the files' schemas are unified rather than the first one's taken."""
    import pyarrow.dataset as ds

    files = ds.dataset(folder, format="parquet", partitioning=_rank_partitioning())
    unified = pa.unify_schemas([f.physical_schema for f in files.get_fragments()] + [pa.schema([("rank", pa.int32())])],
                               promote_options="permissive")  # fmt: skip
    d = ds.dataset(folder, format="parquet", partitioning=_rank_partitioning(), schema=unified)
    return _schema_first(d.to_table(), schema)


def write_json(obj: Any, path: Path) -> None:
    data = json.dumps(obj, indent=2, ensure_ascii=False, default=str).encode() + b"\n"
    atomic_write(path, lambda fh: fh.write(data))


def write_text(text: str, path: Path) -> None:
    data = text.encode("utf-8")
    atomic_write(path, lambda fh: fh.write(data))


def read_table(path: Path) -> pa.Table:
    return pq.read_table(path)


def output_manifest(profile: Any, version: str, schema_version: int) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        "npudiag_version": version,
        "schema_version": schema_version,
        "inputs": [asdict(f) for f in profile.inputs],
        "units": profile.units,
        "row_counts": {name: t.num_rows for name, t in profile.tables.items()},
        "warnings": profile.warnings,
        "errors": profile.errors,
    }


class OutputWriter:
    """Writes tables in background threads (Parquet encoding releases the GIL) so the summary can
    be computed meanwhile, into a hidden sibling folder ``.<name>.tmp-*``; ``finish`` writes
    manifest.json last and swaps the folder in, so ``out`` is either the previous complete run or
    the new complete run, never a mixture, even after a kill -9. Stale temporary folders of
    earlier killed runs are removed first."""

    def __init__(self, out: Path, force: bool = False) -> None:
        from npudiag.errors import InputError

        self.out = out.absolute()
        if self.out.exists() and not _replaceable(self.out) and not force:
            raise InputError(
                out, "exists and was not written by npudiag (no npudiag manifest.json); use --force to replace it, or another --out"
            )
        with writing(self.out):
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self._lock = TargetLock(self.out)
        try:
            remove_stale_staging(self.out)
            self.work = temp_sibling_dir(self.out)
        except BaseException:
            self._lock.release()
            raise
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._pending: list[Future[None]] = []

    def submit(self, name: str, table: pa.Table) -> None:
        """``name.parquet``, written in the background."""
        self._pending.append(self._pool.submit(write_table, table, self.work / f"{name}.parquet"))

    def finish(self, manifest: dict[str, Any]) -> None:
        try:
            for f in self._pending:
                f.result()
        except BaseException:
            shutil.rmtree(self.work, ignore_errors=True)
            raise
        finally:
            self._pool.shutdown()
        try:
            write_json(manifest, self.work / "manifest.json")
            commit_staging(self.work, self.out)
        finally:
            self._lock.release()

    def abandon(self) -> None:
        self._pool.shutdown(cancel_futures=True)
        shutil.rmtree(self.work, ignore_errors=True)
        self._lock.release()


STAGING_MARKER = ".npudiag-staging"  # inside every folder npudiag stages a write in: {"pid": ..., "started": ...}


def is_npudiag_manifest(path: Path) -> bool:
    """``path`` is a manifest.json npudiag wrote (it has npudiag's own keys), not any tool's manifest."""
    from npudiag.errors import InputError
    from npudiag.safeio import load_json

    try:
        data = load_json(path, 64 << 20)
    except InputError:
        return False
    return isinstance(data, dict) and "npudiag_version" in data and "schema_version" in data


def _replaceable(path: Path) -> bool:
    """A folder npudiag may replace: one it wrote (its manifest.json), or an empty one."""
    if not path.is_dir() or path.is_symlink():
        return False
    if is_npudiag_manifest(path / "manifest.json"):
        return True
    try:
        return not any(path.iterdir())
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def remove_stale_staging(dest: Path) -> None:
    """Delete ``.<name>.tmp-*`` folders beside ``dest`` left by killed npudiag runs: only those whose
    marker file says npudiag made them, for a process that is gone. Anything else is left alone."""
    from npudiag.errors import InputError
    from npudiag.safeio import load_json

    prefix = f".{dest.name}.tmp-"
    try:
        entries = list(os.scandir(dest.parent))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            marker = load_json(Path(entry.path) / STAGING_MARKER, 4096)
        except InputError:
            continue
        pid = marker.get("pid") if isinstance(marker, dict) else None
        if isinstance(pid, int) and not isinstance(pid, bool) and not _alive(pid):
            shutil.rmtree(entry.path, ignore_errors=True)


def temp_sibling_dir(dest: Path) -> Path:
    """A new hidden ``.<name>.tmp-*`` folder beside ``dest`` (same file system, so it can be renamed
    into place), with the permissions the umask gives, not mkdtemp's 0700, and npudiag's marker."""
    import time

    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    os.chmod(work, 0o777 & ~current_umask())
    (work / STAGING_MARKER).write_text(json.dumps({"pid": os.getpid(), "started": time.time()}))
    return work


class TargetLock:
    """An exclusive lock on an output folder (fcntl on ``.<name>.lock`` beside it, removed on
    release), so two runs into one ``--out`` cannot interleave: the second gets one line, exit 2."""

    def __init__(self, dest: Path) -> None:
        import fcntl

        from npudiag.errors import InputError

        self.path = dest.parent / f".{dest.name}.lock"
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666 & ~current_umask())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise InputError(dest, "another npudiag run is writing this folder now; wait for it or choose another --out") from None
            # the file may have been removed (and a new one locked) between our open and our lock
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd: int | None = fd
                return
            os.close(fd)

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None


def commit_staging(work: Path, dest: Path) -> None:
    """Swap a finished ``temp_sibling_dir`` in at ``dest``, without its staging marker."""
    with contextlib.suppress(FileNotFoundError):
        (work / STAGING_MARKER).unlink()
    swap_dir(work, dest)


def swap_dir(new: Path, dest: Path) -> None:
    """Put folder ``new`` at ``dest``: rename the old one aside, rename the new one in, delete the old.
    A crash between the two renames leaves the old folder as ``.<name>.old-*`` beside it."""
    if not dest.exists():
        os.rename(new, dest)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    os.rmdir(old)
    os.rename(dest, old)
    os.rename(new, dest)
    shutil.rmtree(old, ignore_errors=True)


def load_rank_rows(out: Path, name: str, ranks: list[int]) -> pa.Table:
    """Only ``ranks``' rows of one table of an ``--out`` folder: partition pruning where it is a
    dataset, a filter where it is one file."""
    import pyarrow.compute as pc

    from npudiag.schemas import TABLES

    if (out / name).is_dir():
        parts = []
        for rank in ranks:  # straight to the partitions' files: no footer of any other rank is read
            for f in sorted(partition_path(out, name, rank).parent.glob("*.parquet")):
                t = read_table(f)
                parts.append(t.append_column("rank", pa.array([rank] * t.num_rows, pa.int32())))
        if not parts:
            return TABLES[name].empty_table()
        return _schema_first(pa.concat_tables(parts, promote_options="permissive"), TABLES[name])
    if (out / f"{name}.parquet").is_file():
        t = read_table(out / f"{name}.parquet")
        return t.filter(pc.fill_null(pc.is_in(t["rank"], pa.array(ranks, pa.int32())), False))
    return TABLES[name].empty_table()


def dataset_ranks(out: Path, name: str = "kernels") -> list[int]:
    """The ranks of a partitioned table, from its folder names; [] where it is one file."""
    folder = out / name
    if not folder.is_dir():
        return []
    return sorted(int(p.name[5:]) for p in folder.iterdir() if p.name.startswith("rank=") and p.name[5:].isdigit())


def load_outputs(out: Path, names: tuple[str, ...] | None = None) -> tuple[dict[str, pa.Table], dict[str, Any]]:
    """The tables (all, or ``names``) and manifest of an ``analyze --out`` folder."""
    from npudiag.errors import InputError
    from npudiag.safeio import load_json
    from npudiag.schemas import TABLES

    manifest_path = out / "manifest.json"
    if not manifest_path.is_file():
        raise InputError(out, "no manifest.json; expected a folder written by 'npudiag analyze --out'")
    manifest = load_json(manifest_path, 256 << 20)
    if not isinstance(manifest, dict) or "npudiag_version" not in manifest:
        raise InputError(manifest_path, "not a manifest npudiag wrote (expected a JSON object with npudiag_version)")
    tables = {}
    for name, schema in TABLES.items():
        if names is not None and name not in names:
            continue
        path = out / f"{name}.parquet"
        if (out / name).is_dir():
            try:
                tables[name] = read_rank_dataset(out / name, schema)
            except Exception as exc:  # noqa: BLE001 - any parquet failure is bad input here
                raise InputError(out / name, f"unreadable Parquet dataset ({str(exc).splitlines()[0][:120]})") from None
            continue
        if not path.is_file():
            tables[name] = schema.empty_table()
            continue
        try:
            tables[name] = read_table(path)
        except Exception as exc:  # noqa: BLE001 - any parquet failure is bad input here
            raise InputError(path, f"unreadable Parquet file ({str(exc).splitlines()[0][:120]})") from None
    for name, table in tables.items():
        tables[name] = _checked(table, TABLES[name], out / f"{name}.parquet")
    return tables, manifest


def _checked(table: pa.Table, schema: pa.Schema, path: Path) -> pa.Table:
    """A table read back from an ``--out`` folder in its declared schema: a column npudiag writes
    that is missing or of another type means the file was changed, and is one error line."""
    from npudiag.errors import InputError

    for field in schema:
        if field.name not in table.column_names:
            raise InputError(path, f"column {field.name!r} is missing; the file was not written by this npudiag (or was changed)")
        if table.schema.field(field.name).type != field.type:
            got = table.schema.field(field.name).type
            raise InputError(path, f"column {field.name!r} is {got}, expected {field.type}; the file was changed after npudiag wrote it")
    return _schema_first(table, schema)
