"""What ``npudiag analyze`` and ``npudiag report`` run once their options are parsed.

Imported only when one of them runs, so ``npudiag --help`` never loads pyarrow or pandas.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TransferSpeedColumn

from npudiag import SCHEMA_VERSION, __version__
from npudiag.cli._out import Say
from npudiag.executors import choose_backend
from npudiag.profiling.analysis.derive import DERIVED, derive
from npudiag.profiling.analysis.markers import markers
from npudiag.profiling.analysis.step_breakdown import step_time_warnings
from npudiag.profiling.analysis.summary import build_summary, summary_from_parts, summary_parts
from npudiag.profiling.analysis.window import apply_window, parse_steps, parse_time
from npudiag.profiling.ingest import find_units, ingest
from npudiag.profiling.rank_job import analyze_ranks, summary_parts_of_dataset
from npudiag.profiling.rules import load_rule_file, parse_rule_options
from npudiag.report.chrome_trace import write_chrome_trace
from npudiag.report.html import write_html
from npudiag.report.json_report import render_json
from npudiag.report.terminal import render_terminal
from npudiag.store import OutputWriter, load_outputs, output_manifest


def _default_out(paths: list[Path]) -> Path:
    name = paths[0].resolve().name if paths else "profile"
    if paths and paths[0].is_file():
        name = paths[0].stem
    return Path("npudiag-out") / (name or "profile")


def run_analyze(
    paths: list[Path],
    out: Path | None,
    *,
    top: int = 20,
    by: str = "type",
    json_out: bool = False,
    say: Say = Say(),
    steps: str | None = None,
    start_step: int | None = None,
    stop_step: int | None = None,
    time_window: str | None = None,
    chrome_trace: Path | None = None,
    html_out: Path | None = None,
    rule_file: Path | None = None,
    rule_opt: list[str] = (),  # type: ignore[assignment]
    force: bool = False,
    scheduler: str | None = None,
    dask: bool = False,
    follow_symlinks: bool = False,
) -> None:
    """Read profiler output into Parquet tables, print the summary, say what went wrong (typer.Exit 2)."""
    try:
        overrides = load_rule_file(rule_file) if rule_file is not None else {}
        for rule_id, opts in parse_rule_options(rule_opt).items():
            overrides.setdefault(rule_id, {}).update(opts)
        step_window = parse_steps(steps) if steps else None
        if start_step is not None or stop_step is not None:
            if step_window is not None:
                raise ValueError("give --steps, or --start-step / --stop-step, not both")
            step_window = parse_steps(f"{'' if start_step is None else start_step}:{'' if stop_step is None else stop_step}")
        time_range = parse_time(time_window) if time_window else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    err = Console(stderr=True)
    show_progress = not say.quiet and not json_out and err.is_terminal
    found = find_units(paths, follow_symlinks)
    if not found.units and found.errors:  # nothing readable: say why, write and print nothing else
        say.errors(found.errors)
        raise typer.Exit(2)
    target = out if out is not None else _default_out(paths)
    if len(found.units) > 1 or scheduler or dask:
        if scheduler or dask:  # workers elsewhere resolve paths themselves: give them absolute ones
            target = target.absolute()
        backend = choose_backend(len(found.units), scheduler, dask)
        summary, inputs, errors, read_any = _analyze_ranks(
            found, target, paths, force, backend, overrides, step_window, time_range, top, by, err if show_progress else None
        )
        tables = None  # the whole profile is never in memory; loaded below only for a whole-profile view
    else:
        summary, tables, inputs, errors, read_any = _analyze_one(
            found, target, paths, force, overrides, step_window, time_range, top, by, err if show_progress else None
        )
    if read_any and (chrome_trace is not None or html_out is not None):
        if tables is None:
            tables, _ = load_outputs(target)
        if chrome_trace is not None:
            traces = [Path(f.path) for f in inputs if f.kind == "trace" and f.used_for and f.error is None]
            write_chrome_trace(chrome_trace, tables, markers(tables), summary["findings"], traces)
        if html_out is not None:
            write_html(html_out, summary, tables["copies"])
    if json_out:
        sys.stdout.write(render_json(summary) + "\n")
    elif not say.quiet:
        render_terminal(summary, Console())
    for f in inputs:
        if f.used_for:
            say.detail(f"read {f.path} ({f.kind}) for {', '.join(f.used_for)}")
    # plain writes: an error stays one line whatever the terminal width
    say.warnings(summary.get("warnings", []), "manifest.json" if read_any else None)
    say.errors(errors)
    if errors or not read_any:
        if not read_any and not errors:
            say.errors(["nothing to analyze: no profiler data was read"])
        raise typer.Exit(2)


def _meta(paths: list[Path], errors: list[str], warnings: list[str]) -> dict:
    return {"npudiag_version": __version__, "title": ", ".join(str(p) for p in paths), "errors": errors, "warnings": warnings}


def _analyze_one(found, target, paths, force, overrides, step_window, time_range, top, by, err: Console | None):
    """One rank (or loose files): every table in memory, written as one file each."""
    if err is not None:
        bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                       TimeElapsedColumn(), console=err, transient=True)  # fmt: skip
        with bar:
            task = bar.add_task("reading", total=None)
            profile = ingest(paths, lambda n: bar.advance(task, n), total=lambda t: bar.update(task, total=t), found=found)
    else:
        profile = ingest(paths, found=found)
    read_any = any(f.used_for for f in profile.inputs)
    meta = _meta(paths, profile.errors, profile.warnings)
    tables = dict(profile.tables)
    if step_window is not None or time_range is not None:
        try:
            tables = apply_window(tables, step_window, time_range)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        meta["window"] = {"steps": step_window, "time_us": time_range}
    writer = OutputWriter(target, force=force) if read_any else None
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
    return summary, tables, profile.inputs, profile.errors, read_any


def _analyze_ranks(found, target, paths, force, backend, overrides, step_window, time_range, top, by, err: Console | None):
    """Many ranks: one task per rank (local pool or Dask), each writing its own partitions."""
    writer = OutputWriter(target, force=force)
    try:
        kwargs = {"rule_options": overrides, "steps": step_window, "time_us": time_range}
        if err is not None:
            with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=err, transient=True) as bar:  # fmt: skip
                task = bar.add_task(f"ranks ({backend.name})", total=len(found.units))
                result = analyze_ranks(found, writer, backend, on_rank=lambda n: bar.advance(task, n), **kwargs)
        else:
            result = analyze_ranks(found, writer, backend, **kwargs)
    except BaseException:
        writer.abandon()
        raise
    meta = _meta(paths, result.errors, result.warnings)
    if step_window is not None or time_range is not None:
        meta["window"] = {"steps": step_window, "time_us": time_range, "time_origin": "each rank's first kernel"}
    if result.read_any:
        writer.finish(result.manifest(__version__, SCHEMA_VERSION, overrides))
        meta["out"] = str(target)
    else:
        writer.abandon()
    summary = summary_from_parts(result.parts, top=top, by=by, meta=meta, rules_skipped=result.skipped)
    return summary, result.inputs, result.errors, result.read_any


def run_report(out: Path, *, top: int = 20, by: str = "type", json_out: bool = False, say: Say = Say()) -> None:
    """Re-render the summary of an earlier 'analyze --out' folder, without the raw data."""
    parts = summary_parts_of_dataset(out) if (out / "manifest.json").is_file() else None
    if parts is not None:  # many ranks: rank by rank, never the whole cluster in memory
        manifest = load_outputs(out, names=())[1]
    else:
        tables, manifest = load_outputs(out)
        parts = summary_parts(tables)
    meta = {
        "npudiag_version": __version__,
        "title": str(out),
        "errors": manifest.get("errors", []),
        "warnings": manifest.get("warnings", []),
    }
    rules = manifest.get("rules", {})
    summary = summary_from_parts(parts, top=top, by=by, meta=meta, rules_skipped=rules.get("skipped", {}))
    if json_out:
        sys.stdout.write(render_json(summary) + "\n")
    elif not say.quiet:
        render_terminal(summary, Console(), command="report")
    say.warnings(meta["warnings"], str(out / "manifest.json"))
