"""Analysing a profile of many ranks one rank per task, for clusters too big for one process.

Each task (:func:`run_rank`) reads one rank, derives its own tables (hot ops, rank-level findings,
step breakdown), writes them as that rank's partitions of the hive datasets
(``kernels/rank=17/part-0.parquet``) into the run's hidden staging folder, and returns only what
adds up over ranks: the summary parts (``analysis.summary.summary_parts``) and the PMU ratio sums
of the profile-wide rules. The parent (:func:`analyze_ranks`) merges those, runs the profile-wide
rules once, writes ``hot_ops.parquet`` and the manifest, and swaps the folder in. The same task
runs in this process, in a local process pool or on Dask workers (``npudiag.executors``); the
tables it writes do not depend on where it ran.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from npudiag import schemas
from npudiag.errors import OptionError, OutputError
from npudiag.executors import Backend
from npudiag.profiling.analysis.summary import DATA_TABLES, SummaryParts
from npudiag.profiling.analysis.window import CutError, Window, WindowError
from npudiag.profiling.derive import cut_and_derive
from npudiag.profiling.discover import Unit
from npudiag.profiling.formats.registry import read_tables
from npudiag.profiling.ingest import READ_ERRORS, Found, InputFile, as_input_error, conform_parts, read_unit
from npudiag.profiling.rules import findings_table, options_for, profile_wide, sort_findings
from npudiag.profiling.rules.base import Skipped
from npudiag.profiling.same_run import may_repeat, repeated_exports, same_collection_note
from npudiag.safeio import sha256_of
from npudiag.store import (
    TableSet,
    analysis_manifest,
    dataset_ranks,
    load_outputs,
    load_rank_rows,
    partition_path,
    write_partition,
)

# the tables written per rank; hot_ops is one file for the whole profile
DERIVED_RANK_TABLES = ("findings", "finding_intervals", "step_breakdown", "idle_gaps", "idle_causes", "op_perf")


def rank_tables() -> tuple[str, ...]:
    """The tables a rank's task writes: every read table (the registry's), then the derived ones."""
    return (*read_tables(), *DERIVED_RANK_TABLES)


@dataclass
class RankJob:
    """Everything a worker needs, picklable: no open files, no callbacks."""

    unit: Unit
    record: dict[Path, InputFile]
    staging: str
    rule_options: dict[str, dict[str, float]] = field(default_factory=dict)
    window: Window = Window()
    hash_inputs: bool = True


@dataclass
class RankOutcome:
    info: dict[str, Any]
    record: dict[Path, InputFile]
    warnings: list[str]
    errors: list[str]
    row_counts: dict[str, int]
    parts: SummaryParts
    skipped: dict[str, str]
    partials: dict[str, pa.Table]  # what each profile-wide rule takes from this rank


def run_rank(job: RankJob) -> RankOutcome:
    """Read, derive and write one rank; a problem in its files is in ``errors``, not raised."""
    unit, staging = job.unit, Path(job.staging)
    res = read_unit(unit, job.record, None)
    # one chunk per column: Arrow sums chunk by chunk, and the readers' chunk boundaries are not the
    # same in every process (a pool worker and a Dask worker differed), which moved totals in the
    # last bit; with one chunk the tables a rank writes do not depend on where it ran
    tables = {name: t.combine_chunks() for name, t in conform_parts(res.parts).items()}
    row_counts = {name: t.num_rows for name, t in tables.items()}
    if job.hash_inputs:
        for path, rec in res.record.items():
            try:
                rec.sha256 = sha256_of(path)
            except OSError:
                rec.sha256 = None
    try:
        wide = profile_wide()
        done = cut_and_derive(tables, job.window, job.rule_options, exclude=tuple(r.rule_id for r in wide))
        partials = {r.rule_id: r.partial(done.tables) for r in wide}
    except WindowError:  # nothing of this rank in the window: the caller says so once for all ranks
        raise
    except CutError as exc:  # a rank that cannot be cut to the window is left out, not counted whole
        raise RuntimeError(str(exc)) from None
    except READ_ERRORS as exc:  # values no real profile holds: this rank fails alone, named
        raise RuntimeError(as_input_error(unit.path, exc).one_line()) from None
    tables, skipped = done.tables, done.skipped
    res.warnings.extend(done.warnings)
    for name in rank_tables():
        if tables[name].num_rows:
            write_partition(staging, name, unit.rank, tables[name])
    return RankOutcome(
        res.info, res.record, res.warnings, res.errors, row_counts, SummaryParts.of(tables), skipped, partials
    )


@dataclass
class RanksResult:
    parts: SummaryParts
    skipped: dict[str, str]
    inputs: list[InputFile]
    units: list[dict[str, Any]]
    warnings: list[str]
    errors: list[str]
    row_counts: dict[str, int]
    backend: str

    @property
    def read_any(self) -> bool:
        return any(f.used_for for f in self.inputs)

    def manifest(self, rule_options: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
        return analysis_manifest(
            self.inputs,
            self.units,
            self.row_counts,
            self.warnings,
            self.errors,
            rules={"options": rule_options or {}, "skipped": self.skipped},
            layout="hive-partitioned by rank: <table>/rank=N/part-0.parquet",
            backend=self.backend,
        )


def _profile_wide(
    parts: SummaryParts, outcomes: list[RankOutcome], overrides: dict[str, dict[str, float]]
) -> tuple[pa.Table, dict]:
    """The rules that need the whole profile, from what the ranks returned."""
    findings, skipped = [], {}
    for rule in profile_wide():
        try:
            partials = [o.partials[rule.rule_id] for o in outcomes]
            findings += rule.combine(parts.kernels, parts.hot_ops, partials, options_for(rule.rule_id, overrides))
        except Skipped as why:
            skipped[rule.rule_id] = str(why)
    return findings_table(findings), skipped


def analyze_ranks(
    found: Found,
    writer: TableSet,
    backend: Backend,
    *,
    rule_options: dict[str, dict[str, float]] | None = None,
    window: Window = Window(),
    hash_inputs: bool = True,
    on_rank: Callable[[int], None] | None = None,
) -> RanksResult:
    """Run :func:`run_rank` for every unit on ``backend``, writing into ``writer``'s staging folder,
    then the profile-wide parts. The caller finishes (or abandons) the writer with the manifest."""
    overrides = rule_options or {}
    staging = writer.work
    jobs = [RankJob(u, found.record_of(u), str(staging), overrides, window, hash_inputs) for u in found.units]
    outcomes: dict[int, RankOutcome] = {}
    failed: dict[int, str] = {}
    outside: dict[int, str] = {}  # ranks with nothing in the window
    for i, res in backend.run(run_rank, jobs):
        if isinstance(res, OutputError):  # the output cannot be written (a full disk): no rank can be, stop
            raise res
        if isinstance(res, WindowError):
            outside[i] = str(res)
        elif isinstance(res, BaseException):
            unit = found.units[i]
            failed[i] = f"{unit.path}: this rank failed and was left out ({type(res).__name__}: {res})"
            for name in rank_tables():  # what it wrote before it failed must not look like a result
                shutil.rmtree(partition_path(staging, name, unit.rank).parent, ignore_errors=True)
        else:
            outcomes[i] = res
        if on_rank is not None:
            on_rank(1)
    repeats = _repeated_exports(found, outcomes, staging)
    if outside and not outcomes and not failed:
        raise OptionError(f"{next(iter(outside.values()))} (on every rank)", window.option)
    ordered = [outcomes[i] for i in sorted(outcomes)]
    record = dict(found.record)
    warnings, errors = list(found.warnings), list(found.errors)
    warnings.extend(
        f"{found.units[i].path}: rank {found.units[i].rank} left out: {outside[i]}" for i in sorted(outside)
    )
    warnings.extend(repeats)
    row_counts = {name: 0 for name in read_tables()}
    for o in ordered:
        record.update(o.record)
        warnings.extend(o.warnings)
        errors.extend(o.errors)
        for name, n in o.row_counts.items():
            row_counts[name] += n
    errors.extend(failed[i] for i in sorted(failed))
    parts = (
        SummaryParts.combine([o.parts for o in ordered])
        if ordered
        else SummaryParts.of({n: schemas.empty(n) for n in schemas.TABLES})
    )
    wide, skipped = _profile_wide(parts, ordered, overrides)
    if wide.num_rows:
        write_partition(staging, "findings", None, wide, part="profile")
        parts = replace(parts, findings=sort_findings(pa.concat_tables([parts.findings, wide])))
    # a rule is skipped for the profile when no rank could run it; the first rank's reason stands
    if ordered:
        for rule_id, why in ordered[0].skipped.items():
            if all(rule_id in o.skipped for o in ordered[1:]):
                skipped.setdefault(rule_id, why)
    writer.submit("hot_ops", parts.hot_ops)
    return RanksResult(
        parts, skipped, list(record.values()), [o.info for o in ordered], warnings, errors, row_counts, backend.name
    )


def _repeated_exports(found: Found, outcomes: dict[int, RankOutcome], staging: Path) -> list[str]:
    """Two exports of one collection read as two ranks (see :mod:`npudiag.profiling.same_run`): the
    richer stays, the other's tables are removed from the staging folder and its outcome dropped."""
    idx = sorted(outcomes)
    ranks = [found.units[i].declared_rank for i in idx]
    if len(idx) < 2 or not may_repeat(ranks):
        return []
    kernels, richness = [], []
    for i in idx:
        files = sorted(partition_path(staging, "kernels", found.units[i].rank).parent.glob("*.parquet"))
        tables = []
        for f in files:
            names = pq.read_schema(f).names
            tables.append(
                pq.read_table(f, columns=[c for c in ("stream_id", "task_id", "start_ns", "device_id") if c in names])
            )
        kernels.append(tables)
        counts = outcomes[i].row_counts
        columns = len(pq.read_schema(files[0]).names) if files else 0
        richness.append((sum(1 for n in counts.values() if n), columns, counts.get("kernels", 0)))
    notes = []
    for rep in repeated_exports(kernels, richness, ranks):
        gone, kept = idx[rep.dropped], idx[rep.kept]
        drop, keep = found.units[gone], found.units[kept]
        for name in rank_tables():
            shutil.rmtree(partition_path(staging, name, drop.rank).parent, ignore_errors=True)
        for rec in outcomes.pop(gone).record.values():
            rec.used_for = []
        outcomes[kept].info.setdefault("same_collection_as", []).append(str(drop.path))
        notes.append(same_collection_note(drop.path, keep.path, rep))
    return notes


def summary_parts_of_dataset(out: Path) -> SummaryParts | None:
    """The summary parts of a partitioned ``--out`` folder, holding one rank in memory at a time
    (``npudiag report`` on a cluster); None when the folder is not partitioned. Every rank with
    data in any table counts, as in ``analyze``."""
    ranks = sorted({r for name in rank_tables() for r in dataset_ranks(out, name)})
    if not ranks:
        return None
    parts = []
    for rank in ranks:
        tables = {
            name: load_rank_rows(out, name, [rank]) for name in (*DATA_TABLES, "step_breakdown", "finding_intervals")
        }
        tables["findings"] = schemas.empty("findings")
        parts.append(SummaryParts.of(tables))
    merged = SummaryParts.combine(parts)
    whole, _ = load_outputs(out, names=("hot_ops", "findings"))
    findings = sort_findings(whole["findings"])
    return replace(merged, hot_ops=whole["hot_ops"] if whole["hot_ops"].num_rows else merged.hot_ops, findings=findings)
