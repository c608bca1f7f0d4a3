"""``check``: the health of a collection before it is analysed, per rank.

For each profile found (discovery's units): which kinds of data it holds, which it lacks, and for a
lacking one whether the recorded configuration asked for it (a problem) or not (the switch that
would have recorded it); raw data not yet exported; the torch_npu / CANN versions and profiler
configuration it records; ranks missing from the world size, ranks declared twice, ranks profiled
with different versions; host-to-device flows that do not resolve.

It reads headers and indexes, not every event: CSV headers and their first data row, ``.db`` table
row counts (sqlite3), the small metadata JSON files, and a trace JSON by a DuckDB aggregation over
only the event fields ``ph``, ``cat``, ``name``, ``pid``, ``id`` (the JSON text is scanned, never
turned into Python objects).

What each torch_npu profiler level records is from the ProfilerLevel reference
(hiascend.com/document/detail/zh/Pytorch/710/apiref/torchnpuCustomsapi/context/torch_npu-profiler-ProfilerLevel.md):
Level0 the framework, the NPU tasks and the operators; Level1 adds the CANN AscendCL API, AI Core
metrics (PipeUtilization) and HCCL's communication.json / communication_matrix.json; Level2 adds the
Runtime API and AI CPU data.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.profiling import discover as disc
from npudiag.profiling import releases
from npudiag.profiling.formats.communication import read_matrix
from npudiag.profiling.formats.csvtext import read_header
from npudiag.profiling.formats.kineto import read_kineto
from npudiag.profiling.formats.profiler_metadata import read_distributed_args
from npudiag.safeio import is_regular, load_json, small_int

# statuses of one kind of data in one profile
PRESENT = "present"
MISSING = "missing"  # the recorded configuration asked for it: a problem
NOT_COLLECTED = "not collected"  # not asked for (or nothing says it was): the switch that records it
PARTIAL = "partial"  # present, with something wrong (flows that do not resolve)
UNREADABLE = "unreadable"

LEVELS = {"Level_none": -1, "Level0": 0, "Level1": 1, "Level2": 2}


@dataclass(frozen=True)
class Data:
    """One kind of data a profile may hold: what it is, and what records it."""

    name: str
    what: str
    torch_switch: str  # torch_npu.profiler setting that records it
    msprof_switch: str  # msprof command-line switch that records it


DATA = (
    Data("kernels", "device tasks (operators on the NPU)", "activities=[ProfilerActivity.NPU]", "--task-time=on"),
    Data("host_api", "CANN API calls on the host", "profiler_level=Level1 or higher", "--ascendcl=on"),
    Data("framework_ops", "framework operators (cpu_op)", "activities=[ProfilerActivity.CPU]", "(torch_npu only)"),
    Data("modules", "torch module ranges (nn.Module forwards)", "with_stack=True and with_modules=True", "(torch_npu only)"),
    Data("flows", "host-to-device flows (op launch -> kernel)", "activities CPU and NPU", "--ascendcl=on with --task-time=on"),
    Data(
        "steps",
        "step boundaries",
        "call prof.step() once per iteration",
        "a graph model's iterations, or the application's mstx marks with --msproftx=on",
    ),
    Data("memory", "memory records", "profile_memory=True", "--task-memory=on"),
    Data("communication", "collective communication (HCCL)", "profiler_level=Level1 or higher, on more than one rank", "--hccl=on"),
    Data(
        "aicore_metrics",
        "AI Core PMU metrics per kernel",
        "aic_metrics=AiCMetrics.PipeUtilization (Level1 or higher)",
        "--aic-metrics=PipeUtilization",
    ),  # fmt: skip
    Data("frequency", "AI Core frequency samples", "(recorded where the chip reports it)", "(recorded where the chip reports it)"),
)
DATA_BY_NAME = {d.name: d for d in DATA}

# .db tables (ascend_pytorch_profiler_N.db / msprof_*.db, and analysis.db) that hold each kind
DB_TABLES = {
    "kernels": ("TASK", "COMPUTE_TASK_INFO"),
    "host_api": ("CANN_API",),
    "framework_ops": ("PYTORCH_API",),
    "flows": ("CONNECTION_IDS",),
    "steps": ("STEP_TIME", "StepTraceTime"),
    "memory": ("MEMORY_RECORD", "OP_MEMORY", "NPU_MEM", "NPU_OP_MEM", "NPU_MODULE_MEM"),
    "communication": ("COMMUNICATION_OP", "COMMUNICATION_TASK_INFO", "CommAnalyzerTime"),
    "aicore_metrics": ("TASK_PMU_INFO",),
    "frequency": ("AICORE_FREQ",),
}
# file kinds (the format registry's) and the data their presence means
FILE_KINDS = {
    "kernel_details": "kernels", "op_summary": "kernels", "task_time": "kernels", "task_time_json": "kernels",
    "api_statistic": "host_api", "step_trace": "steps", "step_trace_json": "steps",
    "memory_record": "memory", "operator_memory": "memory", "npu_module_mem": "memory", "npu_mem": "memory",
    "communication": "communication", "communication_matrix": "communication", "hccl_json": "communication",
}  # fmt: skip
# flow categories that tie host work to device tasks: torch_npu's op -> kernel, CANN's API -> task
FLOW_CATS = ("async_npu", "HostToDevice")
# trace processes (process_name metadata) and the data their complete events are
TRACE_PROCESSES = {"Ascend Hardware": "kernels", "CANN": "host_api", "HCCL": "communication", "Communication": "communication"}
# PMU columns of kernel_details / op_summary (the tail --aic-metrics adds)
PMU_PREFIXES = ("aicore_time", "aic_", "aiv_", "cube_utilization", "vec_", "mac_", "mte", "scalar_", "ub_", "l2_", "main_mem")

_TRACE_SCAN = """
CREATE TEMP TABLE g AS
WITH ev AS (
  SELECT ph, cat, CAST(pid AS VARCHAR) AS pid,
         CASE WHEN ph IN ('s', 'f') AND cat IN $flow_cats THEN CAST(id AS VARCHAR) END AS fid,
         CASE WHEN ph = 'M' AND name = 'process_name' THEN json_extract_string(args, '$.name') END AS pname,
         CASE WHEN ph = 'X' THEN json_extract_string(args, '$.connection_id') END AS conn,
         ph = 'X' AND cat = 'cpu_op' AS cpu_op,
         ph = 'X' AND starts_with(name, 'ProfilerStep#') AS step,
         ph = 'X' AND cat = 'python_function' AND starts_with(name, 'nn.Module: ') AS module
  FROM $events
)
SELECT ph, CASE WHEN fid IS NOT NULL THEN cat END AS cat, pid, fid, pname, conn, cpu_op, step, module, count(*) AS n
FROM ev GROUP BY ALL
"""
# the events of a bare JSON array (torch_npu, msprof), each at most 4 MiB as the trace readers allow
_ARRAY = """read_json($path, format = 'array', maximum_object_size = 4194304,
                 columns = {ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'JSON', id: 'JSON', args: 'JSON'})"""
# the events of the {"traceEvents": [...]} form (the whole object is one JSON value: read whole, up to OBJECT_FORM_BYTES)
_OBJECT = """(SELECT e->>'ph' AS ph, e->>'cat' AS cat, e->>'name' AS name, e->'pid' AS pid, e->'id' AS id, e->'args' AS args
                 FROM (SELECT unnest(traceEvents) AS e FROM read_json($path, format = 'auto', maximum_object_size = $size,
                                                                     columns = {traceEvents: 'JSON[]'})))"""
OBJECT_FORM_BYTES = 1 << 30
# events by kind and process (g holds a row per flow id and per connection id besides)
_TRACE_EVENTS = "SELECT ph, pid, pname, cpu_op, step, module, sum(n)::BIGINT FROM g WHERE fid IS NULL GROUP BY ALL"
# flow ids: how many, how many with both a start and an end, and the starts
_TRACE_FLOWS = """
SELECT count(*), count(*) FILTER (WHERE s > 0 AND f > 0), coalesce(sum(s), 0)::BIGINT FROM (
  SELECT cat, fid, sum(n) FILTER (WHERE ph = 's') AS s, sum(n) FILTER (WHERE ph = 'f') AS f FROM g WHERE fid IS NOT NULL GROUP BY ALL)
"""
# connection ids on complete events: how many, and how many tie a CANN API call to an Ascend Hardware task
_TRACE_LINKS = """
WITH names AS (SELECT DISTINCT pid, pname FROM g WHERE pname IS NOT NULL)
SELECT count(*), count(*) FILTER (WHERE host AND device) FROM (
  SELECT conn, bool_or(names.pname = 'CANN') AS host, bool_or(names.pname = 'Ascend Hardware') AS device
  FROM g LEFT JOIN names USING (pid) WHERE g.conn IS NOT NULL GROUP BY conn)
"""


class NotChecked(Exception):
    """A file this check leaves alone (a note, not a problem)."""


@dataclass
class DataRow:
    data: str
    status: str
    # the largest count of one source (sources of one kind overlap: a trace and a .db, TASK and COMPUTE_TASK_INFO);
    # counted where a source gives it cheaply (.db tables, trace events), None for files only looked into
    rows: int | None = None
    found_in: str = ""
    note: str = ""


@dataclass
class ProfileHealth:
    path: Path
    kind: str
    rank: int | None
    versions: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    data: list[DataRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    world_size: int | None = None
    peer_ranks: set[int] = field(default_factory=set)  # the ranks its communication names (links, sub-tasks)


@dataclass
class HealthResult:
    """What ``check`` found: one :class:`ProfileHealth` per profile, and the collection's own problems."""

    profiles: list[ProfileHealth]
    collection_problems: list[str]  # of the profiles together: missing or doubled ranks, mixed versions
    errors: list[str]  # paths that could not be read at all
    warnings: list[str]
    # ranks of the job (its recorded world size, the ranks its communication names) that no profile is of
    ranks_not_profiled: list[int] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        return self.to_dict()

    @property
    def problems(self) -> list[str]:
        """Every problem, one line each, a profile's prefixed with its path."""
        return [f"{p.path}: {text}" for p in self.profiles for text in p.problems] + self.collection_problems

    @property
    def healthy(self) -> bool:
        return not self.problems and not self.errors

    @property
    def tables(self) -> dict[str, pa.Table]:
        rows = [{"rank": p.rank, "profile": str(p.path), **asdict(d)} for p in self.profiles for d in p.data]
        return {"health": pa.Table.from_pylist(rows, schema=schemas.HEALTH)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "problems": self.problems,
            "collection_problems": self.collection_problems,
            "errors": self.errors,
            "warnings": self.warnings,
            "ranks_not_profiled": self.ranks_not_profiled,
            "profiles": [
                {"path": str(p.path), "kind": p.kind, "rank": p.rank, "world_size": p.world_size, "versions": p.versions,
                 "config": p.config, "problems": p.problems, "notes": p.notes,
                 "data": [asdict(d) for d in p.data]}
                for p in self.profiles
            ],
        }  # fmt: skip


def check(paths: Iterable[str | Path]) -> HealthResult:
    """The health of the profiles under ``paths``. A path with no profile in it is an error (the
    caller's exit 2); problems are what the user should fix before analysing."""
    errors: list[str] = []
    warnings: list[str] = []
    units: list[disc.Unit] = []
    for path in map(Path, paths):
        if not path.exists():
            errors.append(f"{path}: no such file or folder")
            continue
        skipped: list[str] = []
        found = disc.discover(path, skipped)
        warnings.extend(skipped)
        if not found:
            errors.append(f"{path}: no profile found (no *_ascend_pt or PROF_* folder, no profiler file)")
        units.extend(found)
    profiles = [_profile(u) for u in units]
    return HealthResult(profiles, _collection_problems(units, profiles), errors, warnings, _not_profiled(profiles))


def _not_profiled(profiles: list[ProfileHealth]) -> list[int]:
    """The ranks the profiles' own records name (their world size, the peers of their communication) that
    no profile is of; empty where no profile declares its rank."""
    ranks = {p.rank for p in profiles if p.rank is not None}
    if not ranks:
        return []
    named: set[int] = set()
    for p in profiles:
        named |= p.peer_ranks
        if p.world_size and p.world_size <= _MAX_WORLD:
            named |= set(range(p.world_size))
    return sorted(named - ranks)


_MAX_WORLD = 1 << 20  # a recorded world size above this is no job's
_NO_RANK = 4294967295  # HCCL's "no rank"


def _peer_ranks(u: disc.Unit) -> set[int]:
    """The ranks one profile's communication names: communication_matrix.json's link ends, the .db's
    COMMUNICATION_TASK_INFO source and destination ranks."""
    out: set[int] = set()
    for path in u.files.get("communication_matrix", []):
        try:
            t = read_matrix(path, u.rank)
        except (InputError, pa.ArrowException, ValueError, TypeError, OverflowError, UnicodeDecodeError, OSError, RecursionError):
            continue  # its read errors are the data rows' to say
        for col in ("src_rank", "dst_rank"):
            out |= {r for r in t[col].to_pylist() if r is not None}
    for path in u.files.get("db", []):
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        except sqlite3.Error:
            continue
        try:
            if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'COMMUNICATION_TASK_INFO'").fetchone():
                rows = con.execute("SELECT srcRank FROM COMMUNICATION_TASK_INFO UNION SELECT dstRank FROM COMMUNICATION_TASK_INFO")
                out |= {r for (r,) in rows if isinstance(r, int)}
        except sqlite3.Error:
            pass
        finally:
            con.close()
    return {r for r in out if 0 <= r < _NO_RANK and r <= _MAX_WORLD}


def _collection_problems(units: list[disc.Unit], profiles: list[ProfileHealth]) -> list[str]:
    """Problems of the ranks of one job together: the profiles under one folder are one job."""
    groups: dict[Path, list[int]] = {}
    for i, u in enumerate(units):
        groups.setdefault(disc.collection_folder(u).parent, []).append(i)
    out = []
    for folder, idx in groups.items():
        out += [f"{folder}: {text}" for text in _job_problems([units[i] for i in idx], [profiles[i] for i in idx])]
    return out


def _job_problems(units: list[disc.Unit], profiles: list[ProfileHealth]) -> list[str]:
    out = []
    repeated = {id(u) for g in disc.run_groups(units) for u in g}
    for rank, us in disc.duplicate_ranks(units).items():
        if not all(id(u) in repeated for u in us):
            out.append(f"rank {rank} is declared by {len(us)} profiles: " + ", ".join(u.path.name for u in us))
    worlds = {p.world_size for p in profiles if p.world_size}
    ranks = {p.rank for p in profiles if p.rank is not None}
    if len(worlds) > 1:
        out.append("the profiles record different world sizes: " + ", ".join(str(w) for w in sorted(worlds)))
    elif worlds and len(ranks) > 1:
        world = worlds.pop()
        missing = sorted(set(range(world)) - ranks)
        if missing:
            shown = ", ".join(str(r) for r in missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
            out.append(f"world size {world}, {len(ranks)} ranks found: rank(s) {shown} missing")
    for key in ("torch_npu", "cann"):
        seen = {p.versions[key] for p in profiles if key in p.versions}
        if len(seen) > 1:
            out.append(f"the ranks were profiled with different {key} versions: " + ", ".join(sorted(seen)))
    return out


def _profile(u: disc.Unit) -> ProfileHealth:
    p = ProfileHealth(u.path, u.kind, u.rank)
    _read_metadata(u, p)
    found: dict[str, list[tuple[str, int | None]]] = {d.name: [] for d in DATA}  # data -> (where, rows)
    flows: dict[str, int] = {}
    stats: dict[str, list[tuple[str, int | None]]] = {"kernels": []}  # per-type totals only
    for kind, files in sorted(u.files.items()):
        for f in files:
            try:
                if kind in ("db", "analysis_db"):
                    _from_db(f, found)
                elif kind in ("trace",):
                    flows = _add_flows(flows, _from_trace(f, found))
                elif kind == "kineto":  # a GPU run: its framework ops are what npudiag reads of it
                    found["framework_ops"].append((f.name, read_kineto(f).tables["host_ops"].num_rows))
                    p.notes.append(f"{f.name}: a PyTorch (Kineto) trace of a GPU run; npudiag reads its framework ops "
                                   "and their kernels' time, a baseline for compare --level torch; no NPU data is expected")  # fmt: skip
                elif kind in FILE_KINDS:
                    _from_csv_or_json(FILE_KINDS[kind], f, found)
                elif kind == "op_statistic":
                    _from_csv_or_json("kernels", f, stats)
                if kind in ("kernel_details", "op_summary") and _has_pmu(f):
                    found["aicore_metrics"].append((f.name, None))
            except NotChecked as exc:
                p.notes.append(str(exc))
            except InputError as exc:
                p.problems.append(f"{f.name}: {exc}")
                data = FILE_KINDS.get(kind, "kernels" if kind == "op_statistic" else kind)
                p.data.append(DataRow(data, UNREADABLE, found_in=f.name, note=str(exc)))
    if u.unexported:
        p.problems.append(u.unexported)
    if u.kind == "file" and "trace" in u.files and "kineto" not in u.files and [n for w, n in found["framework_ops"] if n]:
        p.kind = "torch_npu"  # a bare trace with framework ops (cpu_op events) is torch_npu's, whatever its name
    expected = _expected(p)
    for d in DATA:
        where = found[d.name]
        if not where and d.name == "kernels" and stats["kernels"]:
            files = ", ".join(w for w, _ in stats["kernels"])
            p.data.append(DataRow(d.name, PARTIAL, found_in=files, note="totals per operator type only; no per-kernel file"))
            if expected.get(d.name):
                p.problems.append(f"only totals per operator type ({files}); no per-kernel file (kernel_details.csv, op_summary, .db)")
            continue
        if where:
            counts = [n for _, n in where if n is not None]
            row = DataRow(d.name, PRESENT, max(counts) if counts else None, _where(w for w, _ in where))
            if d.name == "flows" and flows:
                _judge_flows(row, flows, p)
            p.data.append(row)
            continue
        switch = d.torch_switch if p.kind == "torch_npu" else d.msprof_switch
        if expected.get(d.name):
            p.data.append(DataRow(d.name, MISSING, note=f"the configuration asked for it ({expected[d.name]}); none found"))
            p.problems.append(f"no {d.what}, though {expected[d.name]}")
        else:
            p.data.append(DataRow(d.name, NOT_COLLECTED, note=switch))
    for path, why in u.not_read:
        p.notes.append(f"{path.name}: {why}")
    p.peer_ranks = _peer_ranks(u)
    return p


def _where(places) -> str:
    """File names, and a .db's tables after its name: ``a.csv, b.db: TASK, CANN_API``."""
    by_file: dict[str, list[str]] = {}
    for w in places:
        name, _, table = w.partition(":")
        tables = by_file.setdefault(name, [])
        if table and table not in tables:
            tables.append(table)
    return ", ".join(f"{n}: {', '.join(sorted(t))}" if t else n for n, t in sorted(by_file.items()))


def _read_metadata(u: disc.Unit, p: ProfileHealth) -> None:
    """Versions, configuration and world size from torch_npu's profiler_info_N.json and profiler_metadata.json."""
    folder = u.path if u.path.is_dir() else u.path.parent
    for info in sorted(folder.glob("profiler_info*.json"))[:1]:
        try:
            doc = load_json(info)
        except InputError as exc:
            p.problems.append(f"{info.name}: {exc}")
            continue
        if not isinstance(doc, dict):
            continue
        for key, name in (("torch_npu_version", "torch_npu"), ("cann_version", "cann")):
            if isinstance(doc.get(key), str):
                p.versions[name] = doc[key]
        if "torch_npu" in p.versions and "cann" in p.versions:
            note = releases.mismatch(p.versions["torch_npu"], p.versions["cann"])
            if note is not None:
                p.notes.append(note)
        config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
        common = config.get("common_config") if isinstance(config.get("common_config"), dict) else {}
        exp = config.get("experimental_config") if isinstance(config.get("experimental_config"), dict) else {}
        for key in ("activities", "profile_memory", "record_shapes", "with_stack", "with_modules"):
            if key in common:
                p.config[key] = common[key]
        for key in ("_profiler_level", "_aic_metrics", "_export_type", "_msprof_tx", "_mstx"):
            if key in exp:
                p.config[key.lstrip("_")] = exp[key]
    meta = folder / "profiler_metadata.json"
    if is_regular(meta):
        args, warning = read_distributed_args(meta)  # the reader ingest uses
        if warning:
            p.problems.append(warning)
        if args is not None:
            p.world_size = small_int(args.get("world_size"), 1, 1 << 20)


def _expected(p: ProfileHealth) -> dict[str, str]:
    """Data the recorded torch_npu configuration asked for -> the setting that asked (empty for msprof
    folders and files: their switches are not recorded where npudiag reads)."""
    c = p.config
    if not c:
        return {}
    out: dict[str, str] = {}
    acts = c.get("activities")
    acts = [str(a) for a in acts] if isinstance(acts, list) else []
    npu, cpu = "ProfilerActivity.NPU" in acts, "ProfilerActivity.CPU" in acts
    level = LEVELS.get(str(c.get("profiler_level")))
    if npu:
        out["kernels"] = "activities include NPU"
    if cpu:
        out["framework_ops"] = "activities include CPU"
    if npu and cpu:
        out["flows"] = "activities include CPU and NPU"
    if cpu and c.get("with_stack") is True and c.get("with_modules") is True:
        out["modules"] = "with_stack=True and with_modules=True"
    if c.get("profile_memory") is True:
        out["memory"] = "profile_memory=True"
    if npu and level is not None and level >= 1:
        out["host_api"] = f"profiler_level={c['profiler_level']}"
        aic = str(c.get("aic_metrics") or "")
        if aic and not aic.endswith("NONE"):
            out["aicore_metrics"] = f"aic_metrics={aic}"
        if (p.world_size or 1) > 1:
            out["communication"] = f"profiler_level={c['profiler_level']} on {p.world_size} ranks"
    return out


def _from_db(path: Path, found: dict[str, list[tuple[str, int | None]]]) -> None:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise InputError(path, f"not a readable SQLite database ({exc})") from None
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for data, tables in DB_TABLES.items():
            for t in tables:
                if t in names:
                    n = con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]  # t is one of ours, not the file's
                    if n:
                        found[data].append((f"{path.name}:{t}", n))
        if {"PYTORCH_API", "STRING_IDS"} <= names:  # module forwards: python-function rows named "nn.Module: ..."
            n = con.execute("SELECT count(*) FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
                            "WHERE s.value LIKE 'nn.Module: %'").fetchone()[0]  # fmt: skip
            if n:
                found["modules"].append((f"{path.name}:PYTORCH_API", n))
    except sqlite3.Error as exc:
        raise InputError(path, f"not a readable SQLite database ({exc})") from None
    finally:
        con.close()


def _from_csv_or_json(data: str, path: Path, found: dict[str, list[tuple[str, int | None]]]) -> None:
    """A CSV counts when it has a data row after its header; a JSON when it is not empty."""
    if not is_regular(path):
        return
    if path.suffix.lower() == ".csv":
        read_header(path)  # what analyze's readers refuse (UTF-16, binary, a megabyte of columns) is unreadable here too
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".csv":
        lines = [ln for ln in head.splitlines()[:2] if ln.strip()]
        if len(lines) < 2:
            return
    elif not head.strip(b" \t\r\n[]{}"):
        return
    found[data].append((path.name, None))


def _has_pmu(path: Path) -> bool:
    if not is_regular(path):
        return False
    try:
        with open(path, "rb") as fh:
            header = fh.readline(1 << 20).decode("utf-8-sig", "replace")
    except OSError:
        return False
    return any(c.strip().strip('"').startswith(PMU_PREFIXES) for c in header.split(","))


def _from_trace(path: Path, found: dict[str, list[tuple[str, int | None]]]) -> dict[str, int]:
    """Counts from a Chrome trace: complete events per process kind, cpu_op and ProfilerStep# events;
    returns the host-to-device links: flow events (torch_npu's op -> kernel, CANN's API -> task) and
    the connection ids that tie a CANN API call to a device task."""
    import duckdb

    try:
        with open(path, "rb") as fh:
            first = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        events = _ARRAY
        if first.startswith(b"{"):  # {"traceEvents": [...]}
            size = path.stat().st_size
            if size > OBJECT_FORM_BYTES:
                raise NotChecked(f"{path.name}: a {{\"traceEvents\": [...]}} trace over {OBJECT_FORM_BYTES >> 20} MiB is not checked "
                                 "('npudiag analyze' reads it)")  # fmt: skip
            events = _OBJECT.replace("$size", str(size + 1024))
        con = duckdb.connect()
        try:
            cats = "(" + ", ".join(f"'{c}'" for c in FLOW_CATS) + ")"
            con.execute(_TRACE_SCAN.replace("$events", events).replace("$flow_cats", cats), {"path": str(path)})
            rows = con.execute(_TRACE_EVENTS).fetchall()
            ids, resolved, starts = con.execute(_TRACE_FLOWS).fetchone()
            conns, linked = con.execute(_TRACE_LINKS).fetchone()
        finally:
            con.close()
    except duckdb.Error as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(path, f"not a readable trace JSON array ({first_line[:200]})") from None
    names = {pid: pname for ph, pid, pname, *_ in rows if ph == "M" and pname is not None and pid is not None}
    per: dict[str, int] = {}
    for ph, pid, _pname, cpu, step, module, n in rows:
        if ph == "X":
            data = "framework_ops" if cpu else "modules" if module else TRACE_PROCESSES.get(names.get(pid, ""), "")
            if step:
                per["steps"] = per.get("steps", 0) + n
            if data:
                per[data] = per.get(data, 0) + n
        elif ph == "C" and names.get(pid) == "AI Core Freq":
            per["frequency"] = per.get("frequency", 0) + n
    for data, n in per.items():
        if n:
            found[data].append((path.name, n))
    if starts or linked:
        found["flows"].append((path.name, starts or linked))
    return {"ids": ids, "resolved": resolved, "conns": conns, "linked": linked}


def _add_flows(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


def _judge_flows(row: DataRow, flows: dict[str, int], p: ProfileHealth) -> None:
    ids, resolved = flows.get("ids", 0), flows.get("resolved", 0)
    linked = flows.get("linked", 0)
    notes = []
    if ids:
        notes.append(f"{resolved:,} of {ids:,} flow ids have both ends")
        if ids > resolved and resolved:
            notes.append(f"{ids - resolved:,} one end only (cut by the collection window)")
    if linked:
        notes.append(f"{linked:,} connection ids tie a CANN call to a device task")
    row.note = "; ".join(notes)
    if ids and not resolved and not linked:
        row.status = PARTIAL
        p.problems.append(f"none of {ids:,} host-to-device flows resolves (a start with its end): operators cannot be tied to kernels")
