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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from npudiag.errors import InputError, OptionError
from npudiag.report.json_report import json_safe
from npudiag.version import SCHEMA_VERSION, __version__


class Progress(Protocol):
    """Where a long run reports how far it is (the CLI draws a bar; None draws nothing)."""

    def start(self, unit: str, label: str, total: int | None) -> None:
        """``unit`` is "bytes" (one rank read in this process) or "ranks" (one task per rank)."""

    def advance(self, n: int) -> None: ...

    def set_total(self, total: int) -> None: ...


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
    _tables: dict[str, pa.Table] | None = field(default=None, repr=False)

    @property
    def tables(self) -> dict[str, pa.Table]:
        if self._tables is None:
            if self.out is None or not self.read_any:
                return {}
            from npudiag.store import load_outputs

            self._tables = load_outputs(self.out)[0]
        return self._tables

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary or {"errors": self.errors, "warnings": self.warnings})

    @classmethod
    def load(cls, out: str | Path, *, top: int = 20, by: str = "type") -> Analysis:
        return load_output(out, top=top, by=by)


def _window(steps, time) -> tuple[tuple | None, tuple | None]:
    from npudiag.profiling.analysis.window import parse_steps, parse_time

    try:
        step_window = parse_steps(steps) if isinstance(steps, str) else (tuple(steps) if steps is not None else None)
        time_range = parse_time(time) if isinstance(time, str) else (tuple(time) if time is not None else None)
    except ValueError as exc:
        raise OptionError(str(exc), "steps" if "step" in str(exc) else "time") from None
    return step_window, time_range


def _meta(paths: list[Path], errors: list[str], warnings: list[str]) -> dict:
    return {"npudiag_version": __version__, "title": ", ".join(str(p) for p in paths), "errors": errors, "warnings": warnings}


def analyze(
    paths: list[str | Path] | str | Path,
    out: str | Path | None = None,
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
    chrome_trace: str | Path | None = None,
    html: str | Path | None = None,
    progress: Progress | None = None,
    export: bool = False,
    runs: str = "latest",
) -> Analysis:
    """Read profiler output (PROF_* / *_ascend_pt folders, a parent of many, single files).

    ``out``: folder for the Parquet tables and manifest.json; None keeps everything in memory (many
    ranks are then read by a local pool into one table set). ``steps`` ``"10:100"`` or (10, 100);
    ``time`` ``"1.5s:3s"`` or (µs, µs) from the first kernel. ``rule_options``: {rule: {option: value}}.
    ``scheduler`` / ``dask`` run the per-rank work on Dask (``out`` required, on shared storage).
    ``export``: first export what was collected but never exported (msprof / torch_npu, which write
    into those folders). ``runs``: of repeated runs of one process collected side by side, analyse the
    ``"latest"`` or ``"all"`` (each as its own rank)."""
    from npudiag.executors import choose_backend
    from npudiag.profiling.ingest import RUNS, find_units

    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    out = Path(out) if out is not None else None
    step_window, time_range = _window(steps, time)
    overrides = {k: dict(v) for k, v in (rule_options or {}).items()}
    if runs not in RUNS:  # checked before any export runs a tool
        raise OptionError(f"runs must be 'latest' or 'all', not {runs!r}", "runs")
    notes = []
    if export:  # collected but never exported: run msprof's export / torch_npu's parse first
        from npudiag.profiling.collection import export_unexported

        notes = export_unexported(paths, follow_symlinks=follow_symlinks)
    found = find_units(paths, follow_symlinks, runs)
    found.warnings[:0] = notes
    if not found.units and found.errors:  # nothing readable: say why, write nothing
        return Analysis(None, out, errors=list(found.errors), warnings=list(found.warnings))
    if out is not None and (len(found.units) > 1 or scheduler or dask):
        if scheduler or dask:  # workers elsewhere resolve paths themselves: give them absolute ones
            out = out.absolute()
        backend = choose_backend(len(found.units), scheduler, dask)
        result = _analyze_ranks(found, out, paths, force, backend, overrides, step_window, time_range, top, by, progress)
    elif scheduler or dask:
        raise OptionError("running on Dask needs an out folder on shared storage", "out")
    else:
        result = _analyze_one(found, out, paths, force, overrides, step_window, time_range, top, by, progress)
    if result.read_any and (chrome_trace is not None or html is not None):
        _extra_outputs(result, chrome_trace, html, paths)
    return result


def _extra_outputs(result: Analysis, chrome_trace: str | Path | None, html: str | Path | None, inputs: list[Path]) -> None:
    from npudiag.profiling.analysis.markers import markers
    from npudiag.report.chrome_trace import write_chrome_trace
    from npudiag.report.html import write_html

    tables = result.tables
    if chrome_trace is not None:
        traces = [Path(f.path) for f in result.inputs if f.kind == "trace" and f.used_for and f.error is None]
        notes = write_chrome_trace(Path(chrome_trace), tables, markers(tables), result.summary["findings"], traces, inputs)
        if notes:
            result.warnings.append(f"{chrome_trace}: {len(notes)} number(s) JSON cannot hold written as null (first: {notes[0]})")
    if html is not None:
        write_html(Path(html), result.summary, tables["copies"], inputs)


def _analyze_one(found, target, paths, force, overrides, step_window, time_range, top, by, progress) -> Analysis:
    """One rank (or loose files, or in memory): every table in memory, written as one file each."""
    from npudiag.profiling.analysis.derive import DERIVED, derive
    from npudiag.profiling.analysis.step_breakdown import step_time_warnings
    from npudiag.profiling.analysis.summary import build_summary
    from npudiag.profiling.analysis.window import apply_window
    from npudiag.profiling.ingest import ingest
    from npudiag.store import OutputWriter, output_manifest

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
    tables = dict(profile.tables)
    if step_window is not None or time_range is not None:
        try:
            tables = apply_window(tables, step_window, time_range)
        except ValueError as exc:
            raise OptionError(str(exc), "steps" if step_window is not None else "time") from None
        meta["window"] = {"steps": step_window, "time_us": time_range}
    writer = OutputWriter(target, force=force, inputs=paths) if read_any and target is not None else None
    try:
        if writer is not None:
            for name, table in tables.items():
                writer.submit(name, table)
        tables, skipped = derive(tables, overrides)
        profile.warnings.extend(step_time_warnings(tables["step_breakdown"]))
        if writer is not None:
            for name in DERIVED:
                writer.submit(name, tables[name])
            meta["out"] = str(target)
        summary = build_summary(tables, top=top, by=by, meta=meta, rules_skipped=skipped)
        if writer is not None:
            manifest = output_manifest(profile, __version__, SCHEMA_VERSION)
            manifest["rules"] = {"options": overrides, "skipped": skipped}
            manifest["layout"] = "one <table>.parquet per table"
            writer.finish(manifest)
    finally:
        if writer is not None:
            writer.abandon()
    return Analysis(summary, target if writer is not None else None, profile.inputs, profile.errors, profile.warnings, read_any, tables)


def _analyze_ranks(found, target, paths, force, backend, overrides, step_window, time_range, top, by, progress) -> Analysis:
    """Many ranks: one task per rank (local pool or Dask), each writing its own partitions."""
    from npudiag.profiling.analysis.summary import summary_from_parts
    from npudiag.profiling.rank_job import analyze_ranks
    from npudiag.store import OutputWriter

    writer = OutputWriter(target, force=force, inputs=paths)
    try:
        kwargs = {"rule_options": overrides, "steps": step_window, "time_us": time_range}
        if progress is not None:
            progress.start("ranks", f"ranks ({backend.name})", len(found.units))
            kwargs["on_rank"] = progress.advance
        result = analyze_ranks(found, writer, backend, **kwargs)
    except BaseException as exc:
        writer.folder.explain(exc)
        writer.abandon()
        raise
    meta = _meta(paths, result.errors, result.warnings)
    if step_window is not None or time_range is not None:
        meta["window"] = {"steps": step_window, "time_us": time_range, "time_origin": "each rank's first kernel"}
    try:
        if result.read_any:
            writer.finish(result.manifest(__version__, SCHEMA_VERSION, overrides))
            meta["out"] = str(target)
    finally:
        writer.abandon()
    summary = summary_from_parts(result.parts, top=top, by=by, meta=meta, rules_skipped=result.skipped)
    # the whole profile is never in memory: .tables loads the --out folder on first use
    return Analysis(summary, target if result.read_any else None, result.inputs, result.errors, result.warnings, result.read_any)


def load_output(
    out: str | Path, *, top: int = 20, by: str = "type", chrome_trace: str | Path | None = None, html: str | Path | None = None
) -> Analysis:
    """The summary of an earlier ``analyze`` out folder, rebuilt from its tables (rank by rank for a
    partitioned one, never the whole cluster in memory); ``.tables`` loads on first use.
    ``chrome_trace`` / ``html`` write what ``analyze`` would have (the Chrome trace takes the
    original traces the manifest lists where they are still there, else its marks alone)."""
    from npudiag.profiling.analysis.summary import summary_from_parts, summary_parts
    from npudiag.profiling.rank_job import summary_parts_of_dataset
    from npudiag.store import load_outputs

    out = Path(out)
    parts = summary_parts_of_dataset(out) if (out / "manifest.json").is_file() else None
    tables = None
    if parts is not None:
        manifest = load_outputs(out, names=())[1]
    else:
        tables, manifest = load_outputs(out)
        parts = summary_parts(tables)
    errors, warnings = list(manifest.get("errors", [])), list(manifest.get("warnings", []))
    meta = {"npudiag_version": __version__, "title": str(out), "errors": errors, "warnings": warnings}
    summary = summary_from_parts(parts, top=top, by=by, meta=meta, rules_skipped=manifest.get("rules", {}).get("skipped", {}))
    result = Analysis(summary, out, [], errors, warnings, True, tables)
    if chrome_trace is not None or html is not None:
        from npudiag.profiling.ingest import InputFile

        listed = [i for i in manifest.get("inputs", []) if isinstance(i, dict) and isinstance(i.get("path"), str)]
        result.inputs = [InputFile(i["path"], str(i.get("kind")), None, 0, used_for=list(i.get("used_for") or []), error=i.get("error"))
                         for i in listed if Path(i["path"]).is_file()]  # fmt: skip
        gone = [i["path"] for i in listed if i.get("kind") == "trace" and i.get("used_for") and not Path(i["path"]).is_file()]
        if chrome_trace is not None and gone:
            result.warnings.append(f"{chrome_trace}: {len(gone)} original trace(s) are no longer there ({gone[0]}); "
                                   "the Chrome trace holds npudiag's marks only for them")  # fmt: skip
        _extra_outputs(result, chrome_trace, html, [out])
    return result


@dataclass
class Cluster:
    """The cross-rank view: ``summary`` (rank × phase matrix, per-step medians, slow ranks, links,
    wait skew), ``tables`` (cluster_steps, cluster_slow_ranks, cluster_stages, cluster_links, cluster_comm_ops)."""

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
    from npudiag.executors import choose_backend
    from npudiag.output import OutputFolder, atomic_write, csv_cell
    from npudiag.profiling.analysis import cluster as cl
    from npudiag.profiling.analysis.gate import parse_percent
    from npudiag.profiling.ingest import find_units
    from npudiag.profiling.rank_job import analyze_ranks
    from npudiag.profiling.runs import is_out_folder
    from npudiag.store import TableSet, load_outputs, load_rank_rows, write_table

    path, out = Path(path), Path(out)
    try:
        thr = parse_percent(threshold)
    except ValueError as exc:
        raise OptionError(str(exc), "threshold") from None
    errors: list[str] = []
    warnings: list[str] = []
    found = None
    if not is_out_folder(path):
        found = find_units([path])
        if not found.units:  # the error line names its file already: said once
            why = found.errors[0] if found.errors else "no profiler data found"
            raise InputError(path, why.removeprefix(f"{path}: "))
        if found.duplicate_ranks and not allow_duplicate_ranks:
            rank, folders = next(iter(found.duplicate_ranks.items()))
            raise InputError(
                path,
                f"rank {rank} is declared by {len(folders)} folders ({', '.join(folders)}); ranks of one cluster must differ "
                "(several runs mixed?): --allow-duplicate-ranks merges them renumbered",
            )
    with OutputFolder(out, kind="cluster", force=force, inputs=[path]) as folder:
        if found is None:
            dataset = path
        else:  # every rank analysed into tables/ of the folder being staged
            dataset = folder.work / "tables"
            writer = TableSet(dataset)
            try:
                result = analyze_ranks(found, writer, choose_backend(len(found.units), scheduler, dask), hash_inputs=False)
                if not result.read_any:
                    raise InputError(path, result.errors[0] if result.errors else "no profiler data found")
                writer.close_with(result.manifest(__version__, SCHEMA_VERSION))
            except BaseException:
                writer.cancel()
                raise
            errors, warnings = result.errors, result.warnings
        tables, manifest = load_outputs(dataset, names=("steps", "step_breakdown", "comm_links", "comm_ops"))
        args = next((u["distributed_args"] for u in manifest.get("units", []) if u.get("distributed_args")), None)
        rows = cl.rank_steps(tables)
        steps = cl.with_parallel(rows, cl.parallel_indices(args, pc.unique(rows["rank"]).drop_null().to_pylist()))
        slow = cl.slow_ranks(steps, lambda ranks: load_rank_rows(dataset, "kernels", ranks), thr)
        stage_rows = cl.stages(steps)
        outputs = {"cluster_links": tables["comm_links"], "cluster_comm_ops": tables["comm_ops"], "cluster_steps": steps,
                   "cluster_slow_ranks": slow, "cluster_stages": stage_rows}  # fmt: skip
        for name, table in outputs.items():
            write_table(table, folder.work / f"{name}.parquet")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        header, rows = cl.cluster_csv(steps)
        w.writerow(header)
        w.writerows([csv_cell(v) for v in row] for row in rows)
        atomic_write(folder.work / "cluster_step_trace_time.csv", lambda fh: fh.write(buf.getvalue().encode("utf-8")))
        folder.commit({"input": str(path), "tables": "tables" if found is not None else str(dataset)})
    tables_at = (out / "tables").absolute() if found is not None else dataset
    per_step = []
    for step in sorted(set(steps["step"].to_pylist()), key=lambda s: (s is None, s)):
        sub = steps.filter(pc.equal(steps["step"], step)) if step is not None else steps.filter(pc.is_null(steps["step"]))
        median = {c: cl.phase_median(sub, c) for c in sub.column_names if c.endswith("_us")}
        per_step.append({"step": step, "rows": sub.to_pylist(), "median": median})
    summary = {
        "ranks": len(set(steps["rank"].to_pylist())),
        "steps": len(per_step),
        "rank_matrix": cl.rank_matrix(steps),
        "threshold": thr,
        "per_step": per_step,
        "slow_ranks": slow.to_pylist(),
        "stage_imbalance": cl.stage_imbalance(stage_rows, thr),
        "phase_gaps": cl.phase_gaps(steps, thr),
        "links": cl.link_summary(tables["comm_links"]),
        "slow_links": cl.slow_links(tables["comm_links"]),
        "wait_skew": cl.wait_skew(tables["comm_ops"]),
        "out": str(out),
        "tables": str(tables_at),
        "warnings": warnings,
        "errors": errors,
    }
    return Cluster(summary, outputs, errors, warnings)


@dataclass
class Comparison:
    """Two sides op by op: ``summary`` (sides, totals, ops), ``tables`` ({"diff": ...})."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def _sides(baseline, current, status=None, window=None):
    from npudiag.profiling.runs import load_side

    sides = []
    for p in (Path(baseline), Path(current)):
        if status is None:
            sides.append(load_side(p, window=window))
        else:
            with status(p):
                sides.append(load_side(p, window=window))
    return sides


def compare(
    baseline: str | Path,
    current: str | Path,
    out: str | Path | None = None,
    *,
    by: str = "type",
    shapes: bool = False,
    level: str = "kernel",
    status=None,
    force: bool = False,
    steps: str | tuple[int | None, int | None] | None = None,
    time: str | tuple[float | None, float | None] | None = None,
) -> Comparison:
    """Match operators of two sides (profiles, ``analyze`` out folders or folders of repeated runs) by
    op type or name (``shapes``: a different input shape is a different op), or at ``level`` "torch"
    framework ops (aten::mm ...) with their kernels' device time; write diff.parquet and compare.json
    into ``out`` when given. ``status(path)`` is a context manager around each read. A warning says
    when less than half of either side's device time is in ops found on both sides. ``steps`` /
    ``time``: only that window of each run, as ``analyze`` cuts it."""
    from npudiag.output import OutputFolder, atomic_write, dumps
    from npudiag.profiling.analysis.compare import LEVELS, compare_totals, diff_ops, matched
    from npudiag.profiling.runs import describe
    from npudiag.store import write_table

    if level not in LEVELS:
        raise OptionError(f"level must be one of {', '.join(LEVELS)}, not {level!r}", "level")

    step_window, time_range = _window(steps, time)
    window = (step_window, time_range) if step_window is not None or time_range is not None else None
    base, cur = _sides(baseline, current, status, window)
    bt, ct = [r.tables for r in base], [r.tables for r in cur]
    diff = diff_ops(bt, ct, by=by, shapes=shapes, level=level)
    share = matched(diff)
    warnings = [w for r in base + cur for w in r.warnings]
    if level == "torch" and not diff.num_rows:
        warnings.append("no framework ops on either side (torch_ops comes from torch_npu's trace_view.json cpu_op events or "
                        "the .db's PYTORCH_API; msprof-only profiles have none)")  # fmt: skip
    elif any(v is not None and v < 0.5 for v in share.values()):
        fmt = {k: "-" if v is None else f"{100 * v:.0f}%" for k, v in share.items()}
        hint = "" if level == "torch" else "; --level torch matches framework ops, whatever the kernels are called"
        warnings.append(f"only {fmt['baseline']} of the baseline's and {fmt['current']} of the current's device time is in ops "
                        f"found on both sides: the sides differ in profiler level, naming or workload{hint}")  # fmt: skip
    summary = {
        "baseline": describe(base),
        "current": describe(cur),
        "totals": compare_totals(bt, ct),
        "ops": {
            "match_by": diff["match_by"][0].as_py() if diff.num_rows else ("torch" if level == "torch" else by),
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
    return Comparison(summary, {"diff": diff}, warnings)


@dataclass
class GateResult:
    """The gate's verdicts: ``failed`` (a metric regressed beyond threshold and noise), ``summary``
    (sides, verdicts, warnings, as the JSON prints them), ``baseline_updated``."""

    failed: bool
    summary: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    baseline_updated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def gate_config(config: str | Path | None = None, **changes: Any):
    """The gate settings of ``config`` (a TOML file; None: the defaults) with ``changes`` applied
    (max_regression "5%", alpha, metrics, top_ops, by, steps "3:", min_delta_us)."""
    from npudiag.profiling.analysis.gate import load_config, parse_percent
    from npudiag.profiling.analysis.metrics import known_metric
    from npudiag.profiling.analysis.window import parse_steps

    try:
        cfg = load_config(Path(config) if config is not None else None)
        if changes.get("max_regression") is not None:
            changes["max_regression"] = parse_percent(changes["max_regression"])
        if changes.get("alpha") is not None and not 0 < changes["alpha"] < 1:
            raise OptionError(f"alpha must be between 0 and 1, got {changes['alpha']}", "alpha")
        if isinstance(changes.get("steps"), str):
            changes["steps"] = parse_steps(changes["steps"])
    except OptionError:
        raise
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    extra = list(changes.pop("metrics", None) or ())
    for m in extra:
        if not known_metric(m):
            raise OptionError(
                f"metric {m!r}: expected op:KEY, api:NAME, memory:peak_allocated (peak_reserved, unused) "
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
    status=None,
) -> GateResult:
    """Fail when ``current`` is slower than ``baseline`` beyond the threshold and beyond noise
    (``config``: a GateConfig from :func:`gate_config`, default settings when None). With
    ``update_baseline``, store ``current`` there when the gate passes (or when ``accept``)."""
    from npudiag.profiling.analysis.gate import GateConfig
    from npudiag.profiling.analysis.gate import gate as run_gate
    from npudiag.profiling.runs import describe, store_runs

    base, cur = _sides(baseline, current, status)
    try:
        result = run_gate([r.tables for r in base], [r.tables for r in cur], config if config is not None else GateConfig())
    except OptionError:
        raise
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    summary = {"baseline": describe(base), "current": describe(cur), **result.as_dict()}
    updated = False
    if update_baseline is not None and (not result.failed or accept):
        store_runs(cur, Path(update_baseline), inputs=[Path(baseline), Path(current)], replaceable=[Path(baseline)])
        updated = True
    return GateResult(result.failed, summary, [w for r in base + cur for w in r.warnings], updated)
