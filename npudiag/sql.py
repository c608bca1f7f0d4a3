"""SQL over an npudiag out folder: every table a view, queried through DuckDB, read-only.

``query(out, sql)`` makes one view per table of ``out``: ``<name>.parquet`` (one rank) and
``<name>/rank=N/*.parquet`` (many ranks, with ``rank`` from the folder name), also those of a
``tables/`` folder inside it (``cluster``'s). A table's name must be a plain identifier to become a
view; file names are never put into the SQL text.

The query reads those tables and nothing else. The tables reach DuckDB as Arrow datasets (pyarrow
reads the files, lazily), so DuckDB itself needs no file access and has none: external access off
(no file, URL, glob, COPY, ATTACH or extension install), extension auto-install and auto-load off,
and the configuration locked before the query runs. Only SELECT statements run, and EXPLAIN (or
EXPLAIN ANALYZE) of a SELECT; a table whose files are not readable Parquet is left out with a
warning and the others still answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag import schemas
from npudiag.errors import InputError, OptionError
from npudiag.output import json_safe

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_RANK_DIR = re.compile(r"^rank=(-?[0-9]{1,9}|__HIVE_DEFAULT_PARTITION__)$")
MAX_QUERY_CHARS = 100_000


def tables_of(out: Path) -> dict[str, list[Path]]:
    """View name -> its Parquet files, for ``out`` and its ``tables/`` folder (the first one found wins)."""
    found: dict[str, list[Path]] = {}
    for folder in (out, out / "tables"):
        if not folder.is_dir() or folder.is_symlink() and folder != out:
            continue
        for p in sorted(folder.iterdir()):
            stem = p.name.removesuffix(".parquet")
            if not _NAME.match(stem) or stem in found or p.is_symlink():
                continue
            if p.is_file() and p.name.endswith(".parquet"):
                found[stem] = [p]
            elif p.is_dir():
                parts = sorted(
                    f
                    for d in p.iterdir()
                    if d.is_dir() and _RANK_DIR.match(d.name)
                    for f in d.glob("*.parquet")
                    if f.is_file()
                )
                if parts:
                    found[stem] = parts
    return found


@dataclass
class QueryResult:
    """``tables["result"]``: the rows the query returned; ``summary``: the query, its rows and columns,
    the views it could use."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


_EXPLAIN = re.compile(r"^\s*EXPLAIN(?:\s+ANALYZE)?(?:\s*\([^()]{0,200}\))?\s+(.+)$", re.I | re.S)


def _checked(sql: str, duckdb: Any) -> None:
    """OptionError unless every statement of ``sql`` is a SELECT, or EXPLAIN [ANALYZE] of one."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise OptionError(_one_line(exc), "query") from None
    if not statements:
        raise OptionError("no statement in the query", "query")
    for s in statements:
        kind = s.type
        if kind == duckdb.StatementType.EXPLAIN:  # what it explains (EXPLAIN ANALYZE runs it) must be a SELECT too
            m = _EXPLAIN.match(s.query)
            try:
                inner = duckdb.extract_statements(m.group(1)) if m else []
            except duckdb.Error:
                inner = []
            kind = inner[0].type if len(inner) == 1 else None
        if kind != duckdb.StatementType.SELECT:
            what = "an EXPLAIN of something else" if s.type == duckdb.StatementType.EXPLAIN else s.type.name
            raise OptionError(f"only SELECT queries run here (read-only); this one is {what}", "query")


def _dataset(files: list[Path], out: Path) -> Any:
    """The Arrow dataset of one table's files (rank partitions: ``rank`` from the folder name), its
    schema the union of the files' (a rank may have columns another has not)."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    schema = pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")
    partitioned = files[0].parent != out and files[0].parent.name.startswith("rank=")
    if not partitioned:
        return ds.dataset([str(f) for f in files], format="parquet", schema=schema)
    hive = ds.HivePartitioning(pa.schema([("rank", pa.int32())]))  # rank=__HIVE_DEFAULT_PARTITION__: null
    if "rank" in schema.names:
        schema = schema.remove(schema.get_field_index("rank"))
    return ds.dataset(
        [str(f) for f in files],
        format="parquet",
        partitioning=hive,
        partition_base_dir=str(files[0].parent.parent),
        schema=schema.append(pa.field("rank", pa.int32())),
    )


def query(out: str | Path, sql: str) -> QueryResult:
    """Run ``sql`` (SELECT statements only) over the tables of the out folder ``out``. InputError when
    ``out`` holds no tables; OptionError, one line, for a query DuckDB refuses or one that would write."""
    import duckdb  # only this command needs it; --help and the other commands never load it

    out = Path(out)
    if not out.is_dir():
        raise InputError(
            out, "no such folder (expected an npudiag out folder: analyze, cluster, logs parse, dump parse)"
        )
    views = tables_of(out)
    if not views:
        raise InputError(out, "no tables here (<name>.parquet or <name>/rank=N/*.parquet)")
    if len(sql) > MAX_QUERY_CHARS:
        raise OptionError(f"the query is {len(sql):,} characters; at most {MAX_QUERY_CHARS:,}", "query")
    _checked(sql, duckdb)
    warnings: list[str] = []
    config = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "enable_external_access": False,
    }
    con = duckdb.connect(":memory:", config=config)
    try:
        con.execute("SET lock_configuration = true")
        for name, files in views.items():
            try:
                con.register(name, _dataset(files, out))
            except (OSError, pa.ArrowException) as exc:  # a truncated, foreign or unreadable file: that table only
                warnings.append(
                    f"{files[0].parent if len(files) > 1 else files[0]}: not readable Parquet ({_one_line(exc)}); "
                    f"no view {name}"
                )
        if "kernels" in views:  # a profile's folder: a table it has no rows of (no modules, no memory) is an empty view
            for name, schema in schemas.TABLES.items():
                if name not in views:
                    con.register(name, schema.empty_table())
        try:
            rel = con.sql(sql)
            # to_arrow_table in DuckDB 2, fetch_arrow_table before
            result = pa.table({}) if rel is None else (getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table)()
        except (duckdb.Error, OSError, pa.ArrowException) as exc:  # a file that goes bad as it is read, too
            raise OptionError(_one_line(exc) + (f" ({'; '.join(warnings)})" if warnings else ""), "query") from None
    finally:
        con.close()
    summary = {
        "out": str(out),
        "query": sql,
        "rows": result.num_rows,
        "columns": result.column_names,
        "views": sorted(views),
        "warnings": warnings,
    }
    return QueryResult(summary, {"result": result}, warnings=warnings)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:500]
