"""``check``: the health of a collection before it is analysed, per rank.

For each profile found (discovery's units): which kinds of data it holds, which it lacks, and for a
lacking one whether the recorded configuration asked for it (a problem) or not (the switch that
would have recorded it); raw data not yet exported; the torch_npu / CANN versions and profiler
configuration it records; ranks missing from the world size, ranks declared twice, ranks profiled
with different versions; host-to-device flows that do not resolve.

It reads each profile with the readers ``analyze`` uses (the format registry's), so a count here is
the count ``analyze`` gives for the same rank: kernels are the rows of its kernels table, framework
ops of host_ops, host API calls of api_calls; a format added to the registry is reported as the kind
of data its tables are. The versions and configuration come from the small metadata JSON files.

What each torch_npu profiler level records is from the ProfilerLevel reference
(hiascend.com/document/detail/zh/Pytorch/710/apiref/torchnpuCustomsapi/context/torch_npu-profiler-ProfilerLevel.md):
Level0 the framework, the NPU tasks and the operators; Level1 adds the CANN AscendCL API, AI Core
metrics (PipeUtilization) and HCCL's communication.json / communication_matrix.json; Level2 adds the
Runtime API and AI CPU data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.errors import InputError
from npudiag.profiling import discover as disc
from npudiag.profiling import releases
from npudiag.profiling.formats import registry
from npudiag.profiling.formats.profiler_metadata import read_distributed_args
from npudiag.profiling.ingest import InputFile, UnitResult, file_records, read_units
from npudiag.safeio import is_regular, load_json, small_int

# statuses of one kind of data in one profile
PRESENT = "present"
MISSING = "missing"  # the recorded configuration asked for it: a problem
NOT_COLLECTED = "not collected"  # not asked for (or nothing says it was): the switch that records it
PARTIAL = "partial"  # present, with something wrong (flows that do not resolve)
UNREADABLE = "unreadable"

LEVELS = {"Level_none": -1, "Level0": 0, "Level1": 1, "Level2": 2}


@dataclass(frozen=True)
class DataKind:
    """One kind of data a profile may hold: what it is, and what records it."""

    name: str
    what: str
    torch_switch: str  # torch_npu.profiler setting that records it
    msprof_switch: str  # msprof command-line switch that records it


DATA = (
    DataKind("kernels", "device tasks (operators on the NPU)", "activities=[ProfilerActivity.NPU]", "--task-time=on"),
    DataKind("host_api", "CANN API calls on the host", "profiler_level=Level1 or higher", "--ascendcl=on"),
    DataKind("framework_ops", "framework operators (cpu_op)", "activities=[ProfilerActivity.CPU]", "(torch_npu only)"),
    DataKind(
        "modules",
        "torch module ranges (nn.Module forwards)",
        "with_stack=True and with_modules=True",
        "(torch_npu only)",
    ),
    DataKind(
        "flows",
        "host-to-device flows (op launch -> kernel)",
        "activities CPU and NPU",
        "--ascendcl=on with --task-time=on",
    ),
    DataKind(
        "steps",
        "step boundaries",
        "call prof.step() once per iteration",
        "a graph model's iterations, or the application's mstx marks with --msproftx=on",
    ),
    DataKind("memory", "memory records", "profile_memory=True", "--task-memory=on"),
    DataKind(
        "communication",
        "collective communication (HCCL)",
        "profiler_level=Level1 or higher, on more than one rank",
        "--hccl=on",
    ),
    DataKind(
        "aicore_metrics",
        "AI Core PMU metrics per kernel",
        "aic_metrics=AiCMetrics.PipeUtilization (Level1 or higher)",
        "--aic-metrics=PipeUtilization",
    ),
    DataKind(
        "frequency",
        "AI Core frequency samples",
        "(recorded where the chip reports it)",
        "(recorded where the chip reports it)",
    ),
)

# the table whose rows count each kind of data, as analyze reads them (the first of a kind's tables
# that holds rows; a kind the registry adds for a new table is counted by that table)
COUNTED_BY = {
    "kernels": ("kernels",), "host_api": ("api_calls",), "framework_ops": ("host_ops", "torch_ops"), "modules": ("ranges",),
    "steps": ("steps",), "memory": ("memory_timeline", "op_memory"), "communication": ("comm_ops", "comm_tasks", "comm_links"),
    "frequency": ("aicore_freq",),
}  # fmt: skip
# PMU columns of the kernels table (the tail --aic-metrics adds to kernel_details / op_summary, a .db's TASK_PMU_INFO)
PMU_PREFIXES = (
    "aicore_time",
    "aic_",
    "aiv_",
    "cube_utilization",
    "vec_",
    "mac_",
    "mte",
    "scalar_",
    "ub_",
    "l2_",
    "main_mem",
)


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
                {
                    "path": str(p.path),
                    "kind": p.kind,
                    "rank": p.rank,
                    "world_size": p.world_size,
                    "versions": p.versions,
                    "config": p.config,
                    "problems": p.problems,
                    "notes": p.notes,
                    "data": [asdict(d) for d in p.data],
                }
                for p in self.profiles
            ],
        }


def check(paths: Iterable[str | Path]) -> HealthResult:
    """The health of the profiles under ``paths``. A path with no profile in it is an error (the
    caller's exit 2); problems are what the user should fix before analysing. Each profile is read by
    the readers analyze uses (:func:`npudiag.profiling.ingest.read_units`), so every count is analyze's."""
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
    record = file_records(units)
    results, failed = read_units(units, record)
    profiles = [_profile(u, results.get(i), failed.get(i), record) for i, u in enumerate(units)]
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


def _peer_ranks(tables: dict[str, pa.Table]) -> set[int]:
    """The ranks one profile's communication names: the ends of its links (communication_matrix.json)
    and of its communication tasks (a trace's planes, a .db's COMMUNICATION_TASK_INFO)."""
    out: set[int] = set()
    for name in ("comm_links", "comm_tasks"):
        t = tables.get(name)
        if t is None or not t.num_rows:
            continue
        for col in ("src_rank", "dst_rank"):
            out |= {r for r in pc.unique(t[col]).to_pylist() if r is not None}
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
            shown = ", ".join(str(r) for r in missing[:20]) + (
                f" and {len(missing) - 20} more" if len(missing) > 20 else ""
            )
            out.append(f"world size {world}, {len(ranks)} ranks found: rank(s) {shown} missing")
    for key in ("torch_npu", "cann"):
        seen = {p.versions[key] for p in profiles if key in p.versions}
        if len(seen) > 1:
            out.append(f"the ranks were profiled with different {key} versions: " + ", ".join(sorted(seen)))
    return out


def _profile(u: disc.Unit, res: UnitResult | None, failed: str | None, record: dict[Path, InputFile]) -> ProfileHealth:
    """One profile's health: its metadata, the files that could not be read, and each kind of data as
    present (with its rows), partial, missing although asked for, or not collected (with the switch)."""
    p = ProfileHealth(u.path, u.kind, u.rank)
    _read_metadata(u, p)
    if failed:
        p.problems.append(failed)
    tables = {name: schemas.concat(ts) for name, ts in res.parts.items() if ts} if res is not None else {}
    used = _files_used(u, record, p)
    _unit_notes(u, res, p)
    if u.kind == "file" and "trace" in u.files and "kineto" not in u.files and _rows(tables, "host_ops"):
        p.kind = "torch_npu"  # a bare trace with framework ops (cpu_op events) is torch_npu's, whatever its name
    expected = _expected(p)
    for d in (*DATA, *_added_data()):
        _judge_data(d, _count(d.name, tables, res), used, u, expected, res, p)
    for path, why in u.not_read:
        p.notes.append(f"{path.name}: {why}")
    p.peer_ranks = _peer_ranks(tables)
    return p


def _files_used(u: disc.Unit, record: dict[Path, InputFile], p: ProfileHealth) -> dict[str, list[str]]:
    """The files each kind of data was read from; a file that could not be read is a problem and an
    unreadable row of the data its format yields."""
    used: dict[str, list[str]] = {}
    for kind, files in sorted(u.files.items()):
        fmt = registry.get(kind)
        for f in files:
            rec = record[f]
            if rec.error is not None:
                why = rec.error[len(str(f)) :].lstrip(":").strip() if rec.error.startswith(str(f)) else rec.error
                p.problems.append(f"{f.name}{'' if why.startswith('(') else ':'} {why}")
                data = next((d for d in map(registry.data_of, fmt.yields) if d), kind)
                p.data.append(DataRow(data, UNREADABLE, found_in=f.name, note=why))
            for table in rec.used_for:
                data = registry.data_of(table)
                if data and f.name not in used.setdefault(data, []):
                    used[data].append(f.name)
    return used


def _unit_notes(u: disc.Unit, res: UnitResult | None, p: ProfileHealth) -> None:
    """What the reading said of the profile: a GPU Kineto trace, the readers' warnings, an unexported run."""
    if "kineto" in u.files:
        p.notes.append(
            "a PyTorch (Kineto) trace of a GPU run; npudiag reads its framework ops and their kernels' time, "
            "a baseline for compare --level torch; no NPU data is expected"
        )
    if res is not None:
        p.notes.extend(w.removeprefix(f"{u.path}: ") for w in res.warnings)
    if u.unexported:
        p.problems.append(u.unexported)


def _judge_data(
    d: DataKind,
    rows: int,
    used: dict[str, list[str]],
    u: disc.Unit,
    expected: dict[str, str],
    res: UnitResult | None,
    p: ProfileHealth,
) -> None:
    """One kind of data's row: present with its rows (flows judged for their two ends), partial (totals
    only), missing although the configuration asked for it (a problem), or not collected (its switch)."""
    where = ", ".join(sorted(used.get(d.name, [])))
    totals = [n for n in used.get(d.name, []) if _from_totals(n, u)]
    if not rows and totals:
        what = "operator type" if d.name == "kernels" else "name"
        note = f"totals per {what} only; no per-row file"
        p.data.append(DataRow(d.name, PARTIAL, found_in=", ".join(totals), note=note))
        if expected.get(d.name):
            p.problems.append(f"only totals per {what} ({', '.join(totals)}); no file with one row per {d.what}")
        return
    flows = d.name == "flows" and res is not None
    if rows or (flows and res.links.get("flow_ids")):
        row = (
            DataRow(d.name, PRESENT, rows, where)
            if rows
            else DataRow(d.name, PRESENT, 0, ", ".join(sorted(used.get("kernels", []))))
        )
        if flows:
            _judge_flows(row, res.links, p)
        p.data.append(row)
        return
    if expected.get(d.name):
        p.data.append(DataRow(d.name, MISSING, note=f"the configuration asked for it ({expected[d.name]}); none found"))
        p.problems.append(f"no {d.what}, though {expected[d.name]}")
    else:
        p.data.append(DataRow(d.name, NOT_COLLECTED, note=d.torch_switch if p.kind == "torch_npu" else d.msprof_switch))


def _added_data() -> tuple[DataKind, ...]:
    """The kinds of data formats registered beyond npudiag's own report (a reader's new table)."""
    known = {d.name for d in DATA}
    added = {
        f.reports[t]: f.kind
        for f in registry.formats().values()
        for t in f.yields
        if f.reports.get(t) not in (None, *known)
    }
    how = "(see the format's reader)"
    return tuple(DataKind(name, f"{name} ({kind} files)", how, how) for name, kind in added.items())


def _from_totals(name: str, u: disc.Unit) -> bool:
    return any(registry.get(kind).totals for kind, files in u.files.items() if any(f.name == name for f in files))


def _rows(tables: dict[str, pa.Table], name: str) -> int:
    t = tables.get(name)
    return 0 if t is None else t.num_rows


def _count(data: str, tables: dict[str, pa.Table], res: UnitResult | None) -> int:
    """The rows of one kind of data as analyze reads them (its first table that holds any)."""
    kernels = tables.get("kernels")
    if data == "modules":
        t = tables.get("ranges")
        return 0 if t is None else pc.sum(pc.equal(t["kind"], "module")).as_py() or 0
    if data == "aicore_metrics":  # kernels with a PMU ratio
        cols = [c for c in kernels.column_names if c.startswith(PMU_PREFIXES)] if kernels is not None else []
        if not cols:
            return 0
        any_valid = pc.is_valid(kernels[cols[0]])
        for c in cols[1:]:
            any_valid = pc.or_(any_valid, pc.is_valid(kernels[c]))
        return pc.sum(any_valid).as_py() or 0
    if data == "flows":  # device tasks tied to the host call or framework op that launched them
        return sum(_launched(tables.get(n), tables.get("api_calls")) for n in ("kernels", "copies"))
    names = COUNTED_BY.get(data) or tuple(t for t in registry.read_tables() if registry.data_of(t) == data)
    return next((n for n in (_rows(tables, name) for name in names) if n), 0)


def _launched(t: pa.Table | None, api: pa.Table | None) -> int:
    if t is None or not t.num_rows:
        return 0
    tied = pc.is_valid(t["launched_by"]) if "launched_by" in t.column_names else pa.repeat(False, t.num_rows)
    if "connection_id" in t.column_names and api is not None and api.num_rows:
        calls = api["connection_id"].filter(pc.is_valid(api["connection_id"]))
        tied = pc.or_(tied, pc.fill_null(pc.is_in(t["connection_id"], value_set=pc.unique(calls)), False))
    return pc.sum(tied).as_py() or 0


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


def _judge_flows(row: DataRow, links: dict[str, int], p: ProfileHealth) -> None:
    """A trace's flow ids with both ends; none resolving is a problem (operators cannot be tied to kernels)."""
    ids, resolved = links.get("flow_ids", 0), links.get("flows_both_ends", 0)
    notes = []
    if ids:
        notes.append(f"{resolved:,} of {ids:,} flow ids have both ends")
        if ids > resolved and resolved:
            notes.append(f"{ids - resolved:,} one end only (cut by the collection window)")
    row.note = "; ".join(x for x in (row.note, *notes) if x)
    if ids and not resolved and not row.rows:
        row.status = PARTIAL
        p.problems.append(
            f"none of {ids:,} host-to-device flows resolves (a start with its end): operators cannot be tied to kernels"
        )
