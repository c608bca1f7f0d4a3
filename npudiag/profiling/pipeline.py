"""The profiling pipelines the CLI and the library share: profiler output → tables → summary.

``analyze`` reads a profile (one rank in memory, or many ranks one task per rank, each writing its
own partitions) into the Parquet tables of an ``--out`` folder and builds the summary;
``load_output`` reads such a folder back; ``cluster`` builds the cross-rank view; ``compare`` and
``gate`` put two sides next to each other. Each returns a result dataclass with ``.summary`` (the
dict every renderer draws), ``.tables`` (name → Arrow table) and ``to_dict()`` (JSON-safe). Nothing
here prints: progress goes to an optional :class:`Progress`, problems into ``errors``/``warnings``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from npudiag.errors import InputError, OptionError
from npudiag.executors import choose_backend
from npudiag.output import OutputFolder, atomic_write, csv_column, dumps, json_safe, npudiag_manifest
from npudiag.phases import phase
from npudiag.profiling.analysis import cluster as cluster_analysis
from npudiag.profiling.analysis.compare import HOST_LEVELS, LEVELS, compare_totals, diff_ops, matched, steps_per_run
from npudiag.profiling.analysis.gate import (
    GateConfig,
    check_alpha,
    check_min_delta,
    check_top_ops,
    config_from,
    judge,
    parse_percent,
)
from npudiag.profiling.analysis.markers import markers
from npudiag.profiling.analysis.metrics import canonical_metric, known_metric
from npudiag.profiling.analysis.op_perf import peak_option
from npudiag.profiling.analysis.summary import SummaryParts, summary_from_parts
from npudiag.profiling.analysis.window import Window, parse_steps
from npudiag.profiling.collection import Collection, export_unexported
from npudiag.profiling.derive import DERIVED, cut_and_derive
from npudiag.profiling.formats.jsonstream import iter_events
from npudiag.profiling.ingest import Found, InputFile, find_units, ingest
from npudiag.profiling.options import AnalyzeOptions, window_option
from npudiag.profiling.rank_job import analyze_ranks, summary_parts_of_dataset
from npudiag.profiling.runs import describe, is_out_folder, load_side, store_runs
from npudiag.progress import Progress
from npudiag.results import RANK_KEY
from npudiag.store import OutputWriter, TableSet, analysis_manifest, load_outputs, load_rank_rows, write_table
from npudiag.tomlfile import read_toml
from npudiag.version import __version__


@dataclass
class Analysis:
    """What ``analyze`` found: the summary, the tables (loaded from ``out`` on first use when the
    profile was analysed rank by rank), every input file and what it was used for, errors, warnings.
    ``summary`` is None when no profiler data was found at all (``errors`` says why)."""

    summary: dict[str, Any] | None
    out: Path | None
    inputs: list = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    read_any: bool = False
    _tables: Mapping[str, pa.Table] | None = field(default=None, repr=False)

    @property
    def tables(self) -> Mapping[str, pa.Table]:
        if self._tables is None:
            if self.out is None or not self.read_any:
                return {}
            self._tables = load_outputs(self.out)[0]
        return self._tables

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary or {"errors": self.errors, "warnings": self.warnings})

    @classmethod
    def load(cls, out: str | Path, *, top: int = 20, by: str = "type") -> Analysis:
        return load_output(out, top=top, by=by)


def _meta(paths: list[Path], errors: list[str], warnings: list[str]) -> dict:
    return {
        "npudiag_version": __version__,
        "title": ", ".join(str(p) for p in paths),
        "errors": errors,
        "warnings": warnings,
    }


def analyze(
    paths: list[str | Path] | str | Path,
    out: str | Path | None = None,
    options: AnalyzeOptions | None = None,
    *,
    steps: str | tuple[int | None, int | None] | None = None,
    time: str | tuple[float | None, float | None] | None = None,
    rule_options: dict[str, dict[str, Any]] | None = None,
    top: int = 20,
    by: str = "type",
    force: bool = False,
    scheduler: str | None = None,
    dask: bool = False,
    follow_symlinks: bool = False,
    progress: Progress | None = None,
    export: bool = False,
    runs: str = "latest",
) -> Analysis:
    """Read profiler output (PROF_* / *_ascend_pt folders, a parent of many, single files).

    ``out``: folder for the Parquet tables and manifest.json; None keeps everything in memory (many
    ranks are then read by a local pool into one table set). ``options``: an :class:`AnalyzeOptions`
    (the keywords below are ignored when it is given). ``steps`` ``"10:100"`` or (10, 100);
    ``time`` ``"1.5s:3s"`` or (µs, µs) from the first kernel. ``rule_options``: {rule: {option: value}}.
    ``scheduler`` / ``dask`` run the per-rank work on Dask (``out`` required, on shared storage).
    ``export``: first export what was collected but never exported (msprof / torch_npu, which write
    into those folders). ``runs``: of repeated runs of one process collected side by side, analyse the
    ``"latest"`` or ``"all"`` (each as its own rank)."""
    if options is None:
        options = AnalyzeOptions.of(
            steps=steps,
            time=time,
            rule_options=rule_options,
            top=top,
            by=by,
            force=force,
            scheduler=scheduler,
            dask=dask,
            follow_symlinks=follow_symlinks,
            export=export,
            runs=runs,
        )
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    out = Path(out) if out is not None else None
    # collected but never exported: run msprof's export / torch_npu's parse first
    notes = export_unexported(paths, follow_symlinks=options.follow_symlinks) if options.export else []
    found = find_units(paths, options.follow_symlinks, options.runs)
    found.warnings[:0] = notes
    if not found.units and found.errors:  # nothing readable: say why, write nothing
        return Analysis(None, out, errors=list(found.errors), warnings=list(found.warnings))
    if out is not None and (len(found.units) > 1 or options.distributed):
        if options.distributed:  # workers elsewhere resolve paths themselves: give them absolute ones
            out = out.absolute()
        return _analyze_ranks(found, out, paths, options, progress)
    if options.distributed:
        raise OptionError("running on Dask needs an out folder on shared storage", "out")
    return _analyze_one(found, out, paths, options, progress)


def analyze_collected(
    collected: Collection, out: Path, *, steps: str | None = None, force: bool = False, progress=None
):
    """Analyze what a collection wrote into ``out``, keeping the ``steps`` window; where the window
    cannot be applied (msprof's op_summary rows carry no step ids) analyse every step instead, with a
    warning that says why."""
    try:
        return analyze(collected.prof_dirs, out, steps=steps, force=force, progress=progress)
    except OptionError as exc:
        if steps is None or exc.option != "steps":
            raise
        result = analyze(collected.prof_dirs, out, force=force, progress=progress)
        # in profile's own terms: it has --start-step / --stop-step, not analyze's --steps / --time
        why = str(exc).replace(" (use --time instead)", "").replace("--steps ", "--start-step/--stop-step window ")
        why = why.replace("--steps:", "the window:")
        note = f"the step window cannot be applied ({why}); analysing every step"
        if result.summary is not None:
            result.summary.setdefault("warnings", []).insert(0, note)
        if result.summary is None or result.summary["warnings"] is not result.warnings:
            result.warnings.insert(0, note)
        return result


def _analyze_one(
    found: Found, target: Path | None, paths: list[Path], options: AnalyzeOptions, progress: Progress | None
) -> Analysis:
    """One rank (or loose files, or in memory): every table in memory, written as one file each."""
    with phase("read"):
        if progress is not None:
            progress.start("bytes", "reading", None)
            profile = ingest(paths, progress.advance, total=progress.set_total, found=found)
        else:
            profile = ingest(paths, found=found)
    # reading leaves memory free but held by Arrow's allocator (a trace's store, the takes from it);
    # handed back before the analysis allocates its own
    pa.default_memory_pool().release_unused()
    read_any = any(f.used_for for f in profile.inputs)
    meta = _meta(paths, profile.errors, profile.warnings)
    window = options.window
    if window.active:
        meta["window"] = {"steps": window.steps, "time_us": window.time_us}
    writer = OutputWriter(target, force=options.force, inputs=paths) if read_any and target is not None else None

    def write_read(tables: dict[str, pa.Table]) -> None:
        for name, table in tables.items():
            writer.submit(name, table)

    try:
        try:
            with phase("derive"):
                done = cut_and_derive(
                    profile.tables,
                    window,
                    options.rule_options,
                    on_cut=write_read if writer is not None else None,
                )
        except ValueError as exc:  # WindowError, CutError: the window is the problem, not the profile
            raise OptionError(str(exc), window.option) from None
        profile.warnings.extend(done.warnings)
        if writer is not None:
            for name in DERIVED:
                if name in done.tables:
                    writer.submit(name, done.tables[name])
            meta["out"] = str(target)
        summary = summary_from_parts(
            SummaryParts.of(done.tables), top=options.top, by=options.by, meta=meta, rules_skipped=done.skipped
        )
        if writer is not None:
            with phase("write: the manifest, after the Parquet writers"):
                writer.finish(
                    analysis_manifest(
                        profile.inputs,
                        profile.units,
                        {name: t.num_rows for name, t in profile.tables.items()},
                        profile.warnings,
                        profile.errors,
                        rules={"options": options.rule_options, "skipped": done.skipped},
                        layout="one <table>.parquet per table",
                    )
                )
    finally:
        if writer is not None:
            writer.abandon()
    return Analysis(
        summary,
        target if writer is not None else None,
        profile.inputs,
        profile.errors,
        profile.warnings,
        read_any,
        done.tables,
    )


def _analyze_ranks(
    found: Found, target: Path, paths: list[Path], options: AnalyzeOptions, progress: Progress | None
) -> Analysis:
    """Many ranks: one task per rank (local pool or Dask), each writing its own partitions."""
    size = sum(f.size_bytes for f in found.record.values())
    backend = choose_backend(len(found.units), options.scheduler, options.dask, input_bytes=size)
    writer = OutputWriter(target, force=options.force, inputs=paths)
    try:
        on_rank = None
        if progress is not None:
            progress.start("ranks", f"ranks ({backend.name})", len(found.units))
            on_rank = progress.advance
        result = analyze_ranks(
            found, writer, backend, rule_options=options.rule_options, window=options.window, on_rank=on_rank
        )
    except BaseException as exc:
        writer.folder.explain(exc)
        writer.abandon()
        raise
    meta = _meta(paths, result.errors, result.warnings)
    if options.window.active:
        meta["window"] = {
            "steps": options.window.steps,
            "time_us": options.window.time_us,
            "time_origin": "each rank's first kernel",
        }
    try:
        if result.read_any:
            writer.finish(result.manifest(options.rule_options))
            meta["out"] = str(target)
    finally:
        writer.abandon()
    summary = summary_from_parts(result.parts, top=options.top, by=options.by, meta=meta, rules_skipped=result.skipped)
    # the whole profile is never in memory: .tables loads the --out folder on first use
    return Analysis(
        summary, target if result.read_any else None, result.inputs, result.errors, result.warnings, result.read_any
    )


def load_output(out: str | Path, *, top: int = 20, by: str = "type") -> Analysis:
    """The summary of an earlier ``analyze`` out folder, rebuilt from its tables (rank by rank for a
    partitioned one, never the whole cluster in memory); ``.tables`` loads on first use; ``.inputs``
    lists the input files the manifest names that are still there."""
    out = Path(out)
    earlier = _cluster_folder(out)
    if earlier is not None:  # a cluster out folder: the rank tables it holds (cluster OUT shows its own view)
        out = earlier
    elif out.is_dir() and npudiag_manifest(out) is not None and not is_out_folder(out):
        kind = npudiag_manifest(out).get("output")
        raise InputError(out, f"a '{kind}' out folder, not one 'npudiag analyze --out' wrote")
    parts = summary_parts_of_dataset(out) if (out / "manifest.json").is_file() else None
    tables = None
    if parts is not None:
        manifest = load_outputs(out, names=())[1]
    else:
        tables, manifest = load_outputs(out)
        parts = SummaryParts.of(tables)
    errors, warnings = list(manifest.get("errors", [])), list(manifest.get("warnings", []))
    meta = {"npudiag_version": __version__, "title": str(out), "errors": errors, "warnings": warnings}
    summary = summary_from_parts(
        parts, top=top, by=by, meta=meta, rules_skipped=manifest.get("rules", {}).get("skipped", {})
    )
    listed = [i for i in manifest.get("inputs", []) if isinstance(i, dict) and isinstance(i.get("path"), str)]
    inputs = [
        InputFile(i["path"], str(i.get("kind")), None, 0, used_for=list(i.get("used_for") or []), error=i.get("error"))
        for i in listed
    ]
    return Analysis(summary, out, inputs, errors, warnings, True, tables)


@dataclass
class TimelineView:
    """What a timeline renderer draws: the tables, npudiag's marks (exposed copies, device idle),
    the findings, and the profiler's own events when its trace files are at hand (None: rebuild the
    timeline from the tables); with several ranks each event carries its rank under ``RANK_KEY``.
    ``warnings``: traces the analysis read that are gone since."""

    tables: dict[str, pa.Table]
    marks: pa.Table
    findings: list[dict[str, Any]]
    originals: Callable[[], Iterator[dict[str, Any]]] | None  # a fresh pass over the profiler's own events per call
    warnings: list[str]


def timeline_of(result: Analysis) -> TimelineView:
    """The timeline of an analysis (fresh, or loaded from its out folder), for a renderer that reads no files."""
    traces = [Path(f.path) for f in result.inputs if f.kind == "trace" and f.used_for and f.error is None]
    here = [p for p in traces if p.is_file()]
    warnings = []
    if len(here) < len(traces):
        gone = [str(p) for p in traces if not p.is_file()]
        warnings.append(
            f"{len(gone)} original trace(s) are no longer there ({gone[0]}); the Chrome "
            "trace holds npudiag's marks only for them"
        )
    tables = result.tables
    rank_of = {Path(f.path): f.rank for f in result.inputs}
    ranks = {rank_of.get(p) for p in here}
    originals = None
    if here and len(ranks) > 1:  # several ranks: each event says whose it is, so processes and flows stay apart
        originals = lambda: ({**e, RANK_KEY: rank_of.get(p)} for p in here for e in iter_events(p))  # noqa: E731
    elif here:
        originals = lambda: (e for p in here for e in iter_events(p))  # noqa: E731
    return TimelineView(tables, markers(tables), result.summary["findings"], originals, warnings)


@dataclass
class Cluster:
    """The cross-rank view: ``summary`` (rank × phase matrix, per-step medians, slow ranks, links,
    wait skew, late ranks), ``tables`` (cluster_steps, cluster_slow_ranks, cluster_stages, cluster_links,
    cluster_comm_ops, cluster_comm_waits)."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def cluster(
    path: str | Path,
    out: str | Path,
    *,
    threshold: str | float = "5%",
    scheduler: str | None = None,
    dask: bool = False,
    allow_duplicate_ranks: bool = False,
    force: bool = False,
) -> Cluster:
    """Analyse every rank of ``path`` (or read an ``analyze`` out folder) and write the cluster tables
    and cluster_step_trace_time.csv into ``out``; a rank is slow when its step time exceeds the
    median by more than ``threshold``."""
    path, out = Path(path), Path(out)
    try:
        thr = parse_percent(threshold)
    except ValueError as exc:
        raise OptionError(str(exc), "threshold") from None
    errors: list[str] = []
    warnings: list[str] = []
    found = None
    earlier = _cluster_folder(path)
    if earlier is not None:  # an earlier cluster out folder: its rank tables again
        view_only = out.absolute() == path.absolute() or (out.exists() and out.resolve() == path.resolve())
        path = earlier
        if view_only:  # `cluster OUT --out OUT`: shown again, not written over the tables it reads
            outputs, steps, sources = _cluster_tables(path, thr)
            return Cluster(_cluster_summary(outputs, steps, sources, out, path, thr, [], []), outputs)
    elif not is_out_folder(path):
        found = find_units([path])
        if not found.units:  # the error line names its file already: said once
            why = found.errors[0] if found.errors else "no profiler data found"
            raise InputError(path, why.removeprefix(f"{path}: "))
        if found.duplicate_ranks and not allow_duplicate_ranks:
            rank, folders = next(iter(found.duplicate_ranks.items()))
            raise InputError(
                path,
                f"rank {rank} is declared by {len(folders)} folders "
                f"({', '.join(folders)}); ranks of one cluster must differ "
                "(several runs mixed?): --allow-duplicate-ranks merges them renumbered",
            )
    with OutputFolder(out, kind="cluster", force=force, inputs=[path]) as folder:
        if found is None:
            dataset = path
        else:  # every rank analysed into tables/ of the folder being staged
            dataset = folder.work / "tables"
            writer = TableSet(dataset)
            try:
                result = analyze_ranks(
                    found, writer, choose_backend(len(found.units), scheduler, dask), hash_inputs=False
                )
                if not result.read_any:
                    raise InputError(path, result.errors[0] if result.errors else "no profiler data found")
                writer.close_with(result.manifest())
            except BaseException:
                writer.cancel()
                raise
            errors, warnings = result.errors, result.warnings
        outputs, steps, sources = _cluster_tables(dataset, thr)
        for name, table in outputs.items():
            write_table(table, folder.work / f"{name}.parquet")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        header, rows = cluster_analysis.cluster_csv(steps, csv_column)
        w.writerow(header)
        w.writerows(rows)
        atomic_write(folder.work / "cluster_step_trace_time.csv", lambda fh: fh.write(buf.getvalue().encode("utf-8")))
        folder.commit({"input": str(path), "tables": "tables" if found is not None else str(dataset.absolute())})
    tables_at = (out / "tables").absolute() if found is not None else dataset
    return Cluster(
        _cluster_summary(outputs, steps, sources, out, tables_at, thr, errors, warnings), outputs, errors, warnings
    )


def _cluster_folder(path: Path) -> Path | None:
    """The rank tables an earlier ``cluster`` out folder holds (its ``tables`` folder, or the analyze
    out folder it read), None when ``path`` is no cluster out folder."""
    manifest = npudiag_manifest(path) if path.is_dir() else None
    if manifest is None or manifest.get("output") != "cluster":
        return None
    where = manifest.get("tables")
    tables = path / "tables" if where in (None, "tables") or not isinstance(where, str) else Path(where)
    if not is_out_folder(tables):
        raise InputError(
            path, f"a cluster out folder whose rank tables ({tables}) are gone; run cluster on the profiles again"
        )
    return tables


def _cluster_tables(dataset: Path, thr: float) -> tuple[dict[str, pa.Table], pa.Table, dict[str, Any]]:
    """The cluster tables of the rank tables in ``dataset`` (an analyze out folder), the rank x step
    phases among them, and where those come from (:func:`cluster.phase_sources`)."""
    tables, manifest = load_outputs(dataset, names=("steps", "step_breakdown", "comm_links", "comm_ops"))
    args = next((u["distributed_args"] for u in manifest.get("units", []) if u.get("distributed_args")), None)
    rows = cluster_analysis.rank_steps(tables)
    steps = cluster_analysis.with_parallel(
        rows, cluster_analysis.parallel_indices(args, pc.unique(rows["rank"]).drop_null().to_pylist())
    )
    slow = cluster_analysis.slow_ranks(steps, lambda ranks: load_rank_rows(dataset, "kernels", ranks), thr)
    stage_rows = cluster_analysis.stages(steps)
    waits = cluster_analysis.comm_waits(
        tables["comm_ops"],
        lambda ranks: load_rank_rows(dataset, "kernels", ranks),
        lambda ranks: (load_rank_rows(dataset, "api_calls", ranks), load_rank_rows(dataset, "host_ops", ranks)),
    )
    outputs = {
        "cluster_links": tables["comm_links"],
        "cluster_comm_ops": tables["comm_ops"],
        "cluster_steps": steps,
        "cluster_slow_ranks": slow,
        "cluster_stages": stage_rows,
        "cluster_comm_waits": waits,
    }
    return outputs, steps, cluster_analysis.phase_sources(tables, steps)


def _cluster_summary(
    outputs: dict[str, pa.Table],
    steps: pa.Table,
    sources: dict[str, Any],
    out: Path,
    tables_at: Path,
    thr: float,
    errors: list[str],
    warnings: list[str],
) -> dict[str, Any]:
    per_step = cluster_analysis.per_step(steps)
    comm_ops, links = outputs["cluster_comm_ops"], outputs["cluster_links"]
    return {
        "ranks": len(set(steps["rank"].to_pylist())),
        "steps": len(per_step),
        "rank_matrix": cluster_analysis.rank_matrix(steps),
        "phase_sources": sources,
        "threshold": thr,
        "per_step": per_step,
        "slow_ranks": outputs["cluster_slow_ranks"].to_pylist(),
        "stage_imbalance": cluster_analysis.stage_imbalance(outputs["cluster_stages"], thr),
        "phase_gaps": cluster_analysis.phase_gaps(steps, thr),
        "links": cluster_analysis.link_summary(links),
        "slow_links": cluster_analysis.slow_links(links),
        "wait_skew": cluster_analysis.wait_skew(comm_ops),
        "late_ranks": cluster_analysis.late_ranks(outputs["cluster_comm_waits"]),
        "out": str(out),
        "tables": str(tables_at),
        "warnings": warnings,
        "errors": errors,
    }


@dataclass
class Comparison:
    """Two sides op by op: ``summary`` (sides, totals, ops), ``tables`` ({"diff": ...})."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)  # the warnings of the analyses that wrote a side's out folder

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def _sides(
    baseline,
    current,
    progress: Progress | None = None,
    window: Window = Window(),
    need_kernels: bool = True,
    peak_tflops: str | None = None,
):
    """Both sides' runs; ``peak_tflops`` (as ``analyze --peak-tflops`` takes it) is op_efficiency's option
    for every run, so each run's op_perf is against that peak, an out folder's as well as a profile's."""
    options = None
    if peak_tflops is not None:
        try:
            options = peak_option(peak_tflops)
        except ValueError as exc:
            raise OptionError(str(exc), "peak_tflops") from None
    sides = []
    for p in (Path(baseline), Path(current)):
        if progress is not None:
            progress.start("phase", f"reading {p}", None)
        sides.append(
            load_side(
                p,
                rule_options={"op_efficiency": options} if options else None,
                window=window,
                need_kernels=need_kernels,
            )
        )
    return sides


def compare(
    baseline: str | Path,
    current: str | Path,
    out: str | Path | None = None,
    *,
    by: str = "type",
    shapes: bool = False,
    level: str = "kernel",
    progress: Progress | None = None,
    force: bool = False,
    steps: str | tuple[int | None, int | None] | None = None,
    time: str | tuple[float | None, float | None] | None = None,
    peak_tflops: str | None = None,
) -> Comparison:
    """Match operators of two sides (profiles, ``analyze`` out folders or folders of repeated runs) by
    op type or name (``shapes``: a different input shape is a different op), or at ``level`` "torch"
    framework ops (aten::mm ...) with their kernels' device time; write diff.parquet and compare.json
    into ``out`` when given. ``progress`` hears of each side's read. A warning says
    when less than half of either side's device time is in ops found on both sides. ``steps`` /
    ``time``: only that window of each run, as ``analyze`` cuts it. ``peak_tflops``: the peak the op groups'
    MFU (base_mfu_pct / cur_mfu_pct) is taken against, as ``analyze --peak-tflops``."""
    if level not in LEVELS:
        raise OptionError(f"level must be one of {', '.join(LEVELS)}, not {level!r}", "level")

    window = window_option(steps, time)
    if level == "torch" and window.active:
        raise OptionError(
            "--steps / --time cut device tasks by step; --level torch compares torch_ops, each framework op's "
            "totals over the whole run: leave the window out or compare --level kernel",
            "steps",
        )
    base, cur = _sides(baseline, current, progress, window, need_kernels=level == "kernel", peak_tflops=peak_tflops)
    bt, ct = [r.tables for r in base], [r.tables for r in cur]
    per_step = None
    if level in HOST_LEVELS:  # sides that recorded different numbers of steps: per step (means)
        counts = (steps_per_run(bt), steps_per_run(ct))
        if None not in counts and counts[0] != counts[1]:
            per_step = counts
    diff = diff_ops(bt, ct, by=by, shapes=shapes, level=level, per_step=per_step)
    share = matched(diff)
    warnings = [w for r in base + cur for w in r.warnings] + _compare_warnings(level, per_step, diff, share)
    summary = {
        "baseline": describe(base),
        "current": describe(cur),
        "totals": compare_totals(bt, ct),
        "ops": {
            "match_by": diff["match_by"][0].as_py() if diff.num_rows else (level if level != "kernel" else by),
            "total": diff.num_rows,
            "matched_share": share,
            "rows": diff.to_pylist(),
        },
    }
    if out is not None:
        out = Path(out)
        summary["out"] = str(out / "diff.parquet")
        with OutputFolder(out, kind="compare", force=force, inputs=[Path(baseline), Path(current)]) as folder:
            write_table(diff, folder.work / "diff.parquet")
            text = dumps({k: v for k, v in summary.items() if k != "ops"})
            atomic_write(folder.work / "compare.json", lambda fh: fh.write(text.encode("utf-8") + b"\n"))
            folder.commit({"baseline": str(baseline), "current": str(current)})
    summary["warnings"] = warnings
    return Comparison(summary, {"diff": diff}, warnings, earlier=[w for r in base + cur for w in r.earlier])


def _compare_warnings(
    level: str, per_step: tuple[float, float] | None, diff: pa.Table, share: dict[str, float | None]
) -> list[str]:
    """What the comparison itself says: sides compared per step, no framework ops or modules at those
    levels, or too little of either side's device time in ops both sides have."""
    out = []
    if per_step is not None:
        out.append(
            f"the sides recorded {per_step[0]:g} and {per_step[1]:g} step(s) per run: framework ops are compared per "
            "step (each side's counts and times divided by its steps)"
        )
    if level == "torch" and not diff.num_rows:
        out.append(
            "no framework ops on either side (torch_ops comes from torch_npu's trace_view.json cpu_op events or "
            "the .db's PYTORCH_API; msprof-only profiles have none)"
        )
    elif level == "module" and not diff.num_rows:
        out.append(
            "no torch modules on either side (recorded with torch_npu's with_stack / with_modules, as "
            "python_function 'nn.Module: X' events or the .db's PYTORCH_API rows of type trace)"
        )
    elif any(v is not None and v < 0.5 for v in share.values()):
        fmt = {k: "-" if v is None else f"{100 * v:.0f}%" for k, v in share.items()}
        hint = "" if level != "kernel" else "; --level torch matches framework ops, whatever the kernels are called"
        out.append(
            f"only {fmt['baseline']} of the baseline's and {fmt['current']} of the current's device time is in ops "
            f"found on both sides: the sides differ in profiler level, naming or workload{hint}"
        )
    return out


@dataclass
class GateResult:
    """The gate's verdicts: ``failed`` (a metric regressed beyond threshold and noise), ``summary``
    (sides, verdicts, warnings, as the JSON prints them), ``tables["verdicts"]``, ``baseline_updated``."""

    failed: bool
    summary: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    baseline_updated: bool = False
    errors: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)  # the warnings of the analyses that wrote a side's out folder

    @property
    def tables(self) -> dict[str, pa.Table]:
        """``verdicts``: one row per metric (medians, delta, p-value, failed), as ``summary["metrics"]``."""
        return {"verdicts": pa.Table.from_pylist(self.summary.get("metrics", []))}

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def load_gate_config(path: Path | None) -> GateConfig:
    """The settings of the TOML file ``path`` (None: the defaults); ValueError names what is wrong in it."""
    return config_from(read_toml(path), path) if path is not None else GateConfig()


def gate_config(config: str | Path | None = None, **changes: Any):
    """The gate settings of ``config`` (a TOML file; None: the defaults) with ``changes`` applied
    (max_regression "5%", alpha, metrics, top_ops, by, steps "3:", min_delta_us)."""
    try:
        cfg = load_gate_config(Path(config) if config is not None else None)
        if changes.get("max_regression") is not None:
            changes["max_regression"] = parse_percent(changes["max_regression"])
        for key, check in (("alpha", check_alpha), ("top_ops", check_top_ops), ("min_delta_us", check_min_delta)):
            if changes.get(key) is not None:
                try:
                    changes[key] = check(changes[key], f"--{key.replace('_', '-')}")
                except ValueError as exc:
                    raise OptionError(str(exc), key) from None
        if isinstance(changes.get("steps"), str):
            changes["steps"] = parse_steps(changes["steps"])
    except OptionError:
        raise
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    extra = [canonical_metric(m) for m in changes.pop("metrics", None) or ()]
    for m in extra:
        if not known_metric(m):
            raise OptionError(
                f"metric {m!r}: expected op:KEY, mfu:KEY, api:NAME, memory:peak_allocated (peak_reserved, unused) "
                "or a step metric such as step_time_us",
                "metric",
            )
    if extra:
        changes["metrics"] = tuple(dict.fromkeys([*cfg.metrics, *extra]))
    return replace(cfg, **{k: v for k, v in changes.items() if v is not None})


def gate(
    baseline: str | Path,
    current: str | Path,
    config=None,
    *,
    update_baseline: str | Path | None = None,
    accept: bool = False,
    progress: Progress | None = None,
    peak_tflops: str | None = None,
) -> GateResult:
    """Fail when ``current`` is slower than ``baseline`` beyond the threshold and beyond noise
    (``config``: a GateConfig from :func:`gate_config`, default settings when None). With
    ``update_baseline``, store ``current`` there when the gate passes (or when ``accept``).
    ``peak_tflops``: the peak mfu:KEY metrics are taken against, as ``analyze --peak-tflops``."""
    base, cur = _sides(baseline, current, progress, peak_tflops=peak_tflops)
    try:
        result = judge(
            [r.tables for r in base], [r.tables for r in cur], config if config is not None else GateConfig()
        )
    except OptionError:
        raise
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    summary = {"baseline": describe(base), "current": describe(cur), **result.to_dict()}
    updated = False
    if update_baseline is not None and (not result.failed or accept):
        store_runs(cur, Path(update_baseline), inputs=[Path(baseline), Path(current)], replaceable=[Path(baseline)])
        updated = True
    earlier = [w for r in base + cur for w in r.earlier]
    return GateResult(result.failed, summary, [w for r in base + cur for w in r.warnings], updated, earlier=earlier)
