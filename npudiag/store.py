"""Writing and reading the ``--out`` folder: Parquet tables and manifest.json, always atomically.

Each file is written to a hidden temporary name in the same folder, flushed to disk, then renamed
over the final name, so an interrupted run leaves either the old file or the new one, never half
of either. Reading back needs nothing from npudiag: plain Parquet and JSON.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from npudiag.errors import InputError
from npudiag.output import OutputFolder, atomic_write, write_manifest
from npudiag.safeio import load_json
from npudiag.schemas import TABLES
from npudiag.version import SCHEMA_VERSION, __version__


def write_table(table: pa.Table, path: Path) -> None:
    # snappy with dictionaries: the fastest write of the choices measured (bench/bench_parquet.py,
    # figures in docs/speed.md)
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
    return t.select(
        [n for n in schema.names if n in t.column_names] + [n for n in t.column_names if n not in schema.names]
    )


def read_rank_dataset(folder: Path, schema: pa.Schema) -> pa.Table:
    """The dataset as one table. Ranks may differ in their extra columns (PMU metrics of one
    collection but not another), so the files' schemas are unified rather than the first one's taken."""
    import pyarrow.dataset as ds

    files = ds.dataset(folder, format="parquet", partitioning=_rank_partitioning())
    unified = pa.unify_schemas(
        [f.physical_schema for f in files.get_fragments()] + [pa.schema([("rank", pa.int32())])],
        promote_options="permissive",
    )
    d = ds.dataset(folder, format="parquet", partitioning=_rank_partitioning(), schema=unified)
    return _schema_first(d.to_table(), schema)


def read_table(path: Path) -> pa.Table:
    return pq.read_table(path)


@functools.lru_cache(maxsize=8)
def _recorded_rows(manifest: Path, stamp: tuple[int, int]) -> dict[str, int]:

    try:
        data = load_json(manifest, 256 << 20)
    except Exception:  # noqa: BLE001 - a manifest that cannot be read records nothing; load_outputs says why
        return {}
    rows = data.get("parquet_rows") if isinstance(data, dict) else None
    return {k: v for k, v in rows.items() if isinstance(v, int)} if isinstance(rows, dict) else {}


def check_rows(out: Path, path: Path) -> None:
    """Before ``path`` (a Parquet file of the out folder ``out``) is decoded: its footer's row count is
    the one npudiag recorded when it wrote the folder. A file changed since (a few MB can decode to
    billions of rows) is one InputError, read no further. Folders of npudiag before the record pass."""

    manifest = out / "manifest.json"
    try:
        st = manifest.stat()
    except OSError:
        return
    expected = _recorded_rows(manifest, (st.st_mtime_ns, st.st_size)).get(path.relative_to(out).as_posix())
    if expected is None:
        return
    try:
        found = pq.read_metadata(path).num_rows
    except Exception as exc:  # noqa: BLE001 - any parquet failure is bad input here
        raise InputError(path, f"unreadable Parquet file ({str(exc).splitlines()[0][:120]})") from None
    if found != expected:
        raise InputError(
            path, f"holds {found:,} rows, but npudiag wrote {expected:,}; the file was changed after it was written"
        )


def analysis_manifest(
    inputs: Iterable[Any],
    units: list[dict],
    row_counts: dict[str, int],
    warnings: list[str],
    errors: list[str],
    **extra: Any,
) -> dict[str, Any]:
    """The manifest of an analysed table set (an ``analyze`` out folder, one rank or many, a stored
    baseline): the version, every input file and what it was used for, the rows written, what went
    wrong; ``extra`` (rules, layout, backend) follows."""
    return {
        "npudiag_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "inputs": [asdict(f) for f in inputs],
        "units": units,
        "row_counts": row_counts,
        "warnings": warnings,
        "errors": errors,
        **extra,
    }


class TableSet:
    """Tables written in background threads (Parquet encoding releases the GIL, so the summary is
    computed meanwhile) into ``work``, a folder npudiag is staging; :meth:`close_with` waits for
    them and writes manifest.json last (npudiag's keys and every file listed)."""

    def __init__(self, work: Path, kind: str = "analyze") -> None:
        self.work = work
        self.kind = kind
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._pending: list[Future[None]] = []

    def submit(self, name: str, table: pa.Table) -> None:
        """``name.parquet``, written in the background."""
        self._pending.append(self._pool.submit(write_table, table, self.work / f"{name}.parquet"))

    def wait(self) -> None:
        try:
            for f in self._pending:
                f.result()
        finally:
            self._pool.shutdown(cancel_futures=True)

    def close_with(self, manifest: dict[str, Any]) -> None:
        self.wait()
        write_manifest(self.work, self.kind, manifest)

    def cancel(self) -> None:
        self._pool.shutdown(cancel_futures=True)


class OutputWriter(TableSet):
    """A :class:`TableSet` that is a whole ``--out`` folder (an :class:`~npudiag.output.OutputFolder`):
    ``finish`` writes the manifest and swaps the folder in, so ``out`` is the previous complete run
    or the new complete run, never a mixture, even after a kill -9; ``abandon`` leaves it as it was."""

    def __init__(self, out: Path, force: bool = False, *, kind: str = "analyze", inputs: Iterable[Path] = ()) -> None:
        self.folder = OutputFolder(out, kind=kind, force=force, inputs=inputs)
        self.out = self.folder.dest
        super().__init__(self.folder.work, kind)

    def finish(self, manifest: dict[str, Any]) -> None:
        try:
            self.wait()
            self.folder.commit(manifest)
        except BaseException as exc:
            self.folder.explain(exc)
            raise
        finally:
            self.abandon()

    def abandon(self) -> None:
        self.cancel()
        self.folder.abandon()


def load_rank_rows(out: Path, name: str, ranks: list[int]) -> pa.Table:
    """Only ``ranks``' rows of one table of an ``--out`` folder: partition pruning where it is a
    dataset, a filter where it is one file."""
    import pyarrow.compute as pc

    if (out / name).is_dir():
        parts = []
        for rank in ranks:  # straight to the partitions' files: no footer of any other rank is read
            for f in sorted(partition_path(out, name, rank).parent.glob("*.parquet")):
                check_rows(out, f)
                t = read_table(f)
                parts.append(t.append_column("rank", pa.repeat(pa.scalar(rank, pa.int32()), t.num_rows)))
        if not parts:
            return TABLES[name].empty_table()
        return _schema_first(pa.concat_tables(parts, promote_options="permissive"), TABLES[name])
    if (out / f"{name}.parquet").is_file():
        check_rows(out, out / f"{name}.parquet")
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

    manifest_path = out / "manifest.json"
    if not out.exists():
        raise InputError(out, "no such file or folder; expected a folder written by 'npudiag analyze --out'")
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
            for f in sorted((out / name).glob("rank=*/*.parquet")):
                check_rows(out, f)
            try:
                tables[name] = read_rank_dataset(out / name, schema)
            except Exception as exc:  # noqa: BLE001 - any parquet failure is bad input here
                raise InputError(out / name, f"unreadable Parquet dataset ({str(exc).splitlines()[0][:120]})") from None
            continue
        if not path.is_file():
            tables[name] = schema.empty_table()
            continue
        check_rows(out, path)
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

    for field in schema:
        if field.name not in table.column_names:
            raise InputError(
                path, f"column {field.name!r} is missing; the file was not written by this npudiag (or was changed)"
            )
        if table.schema.field(field.name).type != field.type:
            got = table.schema.field(field.name).type
            raise InputError(
                path,
                f"column {field.name!r} is {got}, expected {field.type}; the file was changed after npudiag wrote it",
            )
    return _schema_first(table, schema)
