"""The profiler file formats npudiag reads: one :class:`Format` per real format, declared by its reader.

Each reader module ends with ``register(Format(...))``: the kind, how a file of it is recognised
(its name; a CSV's header or a JSON's content when the name says nothing), the tables it yields in
one shape (:class:`FileTables`), and where it stands among the formats that give the same data
(``sources``: role -> precedence, lower first), and the kind of data ``check`` reports each table
as (``reports``; the canonical tables' kinds are :data:`DATA_OF_TABLE`). Discovery, ingest, the
summary and ``check`` ask this registry; nothing else lists formats. The tables ingest reads
(:func:`read_tables`) and the roles it routes whole (:func:`whole_roles`) are derived from it, and
registering a role nothing reads, or a table with no kind of data, fails at once. Adding a reader is
one module plus its entry in :data:`MODULES` (docs/development.md has a worked example).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

# the reader modules, in the order their formats are tried by name and by header
MODULES = (
    "kernel_csv",
    "op_statistic",
    "api_statistic",
    "step_trace",
    "trace_json",
    "msprof_db",
    "analysis_db",
    "communication",
    "memory_csv",
    "device_info",
    "kineto",
)


# the roles ingest routes itself (the device tasks split by class, the step merge, the host calls beside
# a .db's tasks, the frequency samples kept once); every other role is a table read whole from the best
# precedence level whose files hold rows (see whole_roles)
ROUTED_ROLES = frozenset(
    {"device_tasks", "kernel_csv", "device_timeline", "hccl", "hccl_streams", "steps", "api_calls", "aicore_freq"}
)
# tables ingest derives from the read ones (the device tasks split; copies joined to their host calls)
DERIVED_TABLES = ("kernels", "copies", "comm_tasks", "api_calls")
# the kind of data ``check`` reports each canonical table as (None: facts, not data a switch records)
DATA_OF_TABLE: dict[str, str | None] = {
    "tasks": "kernels", "kernels": "kernels", "copies": "kernels", "op_statistic": "kernels",
    "api_calls": "host_api", "api_statistic": "host_api",
    "host_ops": "framework_ops", "torch_ops": "framework_ops",
    "ranges": "modules",
    "steps": "steps",
    "memory_timeline": "memory", "op_memory": "memory",
    "comm_ops": "communication", "comm_tasks": "communication", "comm_links": "communication", "comm_bandwidth": "communication",
    "aicore_freq": "frequency",
    "device_info": None,
}  # fmt: skip


@dataclass
class FileTables:
    """What one file gave, the same shape for every format: tables by name (the canonical tables of
    ``npudiag.schemas``, or ``tasks``: device tasks in the kernels schema plus the columns that
    place them), warnings, and the facts a trace or .db carries besides tables."""

    tables: dict[str, pa.Table]
    warnings: list[str] = field(default_factory=list)
    hccl_streams: frozenset[int] = frozenset()  # the streams of a trace's HCCL process
    task_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # a .db's tasks by class and type
    links: dict[str, int] = field(default_factory=dict)  # a trace's host-to-device flow ids, and those with both ends

    def rows(self, name: str) -> int:
        t = self.tables.get(name)
        return 0 if t is None else t.num_rows


@dataclass(frozen=True)
class Format:
    """One real file format. ``name`` matches the file name alone (any suffix the tools or users add
    after the documented stem is accepted); ``headers``: column sets, any of which makes a CSV of
    unknown name this kind; ``trace_content``: a JSON of unknown name that is a Chrome trace is this
    kind. ``yields``: the tables :attr:`read` returns. ``sources``: for each role the format plays
    (``device_tasks``, ``steps``, ``memory_timeline`` ...), its precedence: formats of a lower number
    win, formats of one number are read together. ``append``: its tables are added to the unit's as
    they are, beside those of other files (statistics, device facts), with no precedence."""

    kind: str
    name: re.Pattern[str]
    read: Callable[[Path, int | None], FileTables]
    yields: tuple[str, ...]
    headers: tuple[frozenset[str], ...] = ()
    trace_content: bool = False
    content: Callable[[bytes], bool] | None = (
        None  # a JSON of unknown name whose first 64 KiB this accepts is this kind
    )
    sources: dict[str, int] = field(default_factory=dict)
    append: bool = False
    totals: bool = False
    reports: dict[str, str] = field(default_factory=dict)


_FORMATS: dict[str, Format] = {}
_loaded = False


def register(fmt: Format) -> Format:
    """Add ``fmt`` (a reader module calls this when imported; a test may add its own)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", fmt.kind):
        raise ValueError(f"format kind {fmt.kind!r}: lower-case letters, digits and _")
    for table in fmt.yields:
        if table not in DATA_OF_TABLE and table not in fmt.reports:
            raise ValueError(f"format {fmt.kind}: table {table!r} has no kind of data for check (give it in reports)")
    for role in fmt.sources:
        if role not in ROUTED_ROLES and role not in fmt.yields:
            raise ValueError(
                f"format {fmt.kind}: role {role!r} is neither routed by ingest nor a "
                "table it yields (nothing would read it)"
            )
    _FORMATS[fmt.kind] = fmt
    return fmt


def unregister(kind: str) -> None:
    _FORMATS.pop(kind, None)


def formats() -> dict[str, Format]:
    """Every registered format by kind, in the order they are tried."""
    global _loaded
    if not _loaded:
        for module in MODULES:  # imported on first use: discovery by name needs no pyarrow compute
            importlib.import_module(f"npudiag.profiling.formats.{module}")
        _loaded = True
    return _FORMATS


def get(kind: str) -> Format:
    return formats()[kind]


def sources(role: str) -> tuple[str, ...]:
    """The kinds that play ``role``, best first."""
    fs = formats()
    order = {k: i for i, k in enumerate(fs)}
    return tuple(sorted((k for k, f in fs.items() if role in f.sources), key=lambda k: (fs[k].sources[role], order[k])))


def levels(role: str) -> list[tuple[str, ...]]:
    """The kinds that play ``role`` grouped by precedence, best group first."""
    out: dict[int, list[str]] = {}
    for kind in sources(role):
        out.setdefault(formats()[kind].sources[role], []).append(kind)
    return [tuple(v) for _, v in sorted(out.items())]


def whole_roles() -> tuple[str, ...]:
    """The roles that are tables read whole (the best precedence level holding rows), in registry order."""
    out: dict[str, None] = {}
    for f in formats().values():
        out.update((r, None) for r in f.sources if r not in ROUTED_ROLES)
    return tuple(out)


def read_tables() -> tuple[str, ...]:
    """Every table ingest gives: the derived ones, then each registered format's, in registry order."""
    out: dict[str, None] = dict.fromkeys(DERIVED_TABLES)
    for f in formats().values():
        out.update((t, None) for t in f.yields if t != "tasks")
    return tuple(out)


def data_of(table: str) -> str | None:
    """The kind of data ``check`` reports ``table`` as."""
    if table in DATA_OF_TABLE:
        return DATA_OF_TABLE[table]
    for f in formats().values():
        if table in f.reports:
            return f.reports[table]
    return None


def appended() -> tuple[Format, ...]:
    return tuple(f for f in formats().values() if f.append)


def one_table(table_and_warnings: tuple[pa.Table, list[str]], name: str) -> FileTables:
    """A reader's (table, warnings) as a :class:`FileTables` of one table."""
    table, warnings = table_and_warnings
    return FileTables({name: table}, list(warnings))


def from_object(obj: Any, names: tuple[str, ...]) -> FileTables:
    """A reader's result object (attributes named as tables, ``warnings``, and optionally
    ``hccl_streams`` / ``task_counts``) as a :class:`FileTables`."""
    return FileTables(
        {n: getattr(obj, n) for n in names},
        list(getattr(obj, "warnings", [])),
        frozenset(getattr(obj, "hccl_streams", ()) or ()),
        dict(getattr(obj, "task_counts", {}) or {}),
        dict(getattr(obj, "links", {}) or {}),
    )
