"""``npudiag analyze`` and ``npudiag report``: argument parsing and wiring only."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import pyarrow.compute as pc
import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeElapsedColumn, TransferSpeedColumn

from npudiag import SCHEMA_VERSION, __version__
from npudiag.analysis.derive import DERIVED, derive
from npudiag.analysis.markers import markers
from npudiag.analysis.rules import load_rule_file, parse_rule_options
from npudiag.analysis.summary import build_summary
from npudiag.analysis.window import apply_window, parse_steps, parse_time
from npudiag.ingest import ingest
from npudiag.report.chrome_trace import write_chrome_trace
from npudiag.report.html import write_html
from npudiag.report.json_report import render_json
from npudiag.report.terminal import render_terminal
from npudiag.store import OutputWriter, load_outputs, output_manifest


class By(str, Enum):
    type = "type"
    name = "name"


def _default_out(paths: list[Path]) -> Path:
    name = paths[0].resolve().name if paths else "profile"
    if paths and paths[0].is_file():
        name = paths[0].stem
    return Path("npudiag-out") / (name or "profile")


def analyze(
    paths: list[Path] = typer.Argument(..., help="PROF_* or *_ascend_pt folders, a parent of many, or single CSV / JSON / .db files."),
    out: Path = typer.Option(None, "--out", "-o", help="Folder for the Parquet tables and manifest.json [default: ./npudiag-out/<name>]."),
    top: int = typer.Option(20, "--top", min=1, help="How many hot operators to show."),
    by: By = typer.Option(By.type, "--by", help="Group hot operators by op type or op name."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as one JSON document on stdout, nothing else."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    steps: str = typer.Option(None, "--steps", help="Only steps FIRST:LAST (inclusive), e.g. 10:100 to drop warm-up."),
    start_step: int = typer.Option(None, "--start-step", help="Same as --steps START:"),
    stop_step: int = typer.Option(None, "--stop-step", help="Same as --steps :STOP"),
    time_window: str = typer.Option(None, "--time", help="Only what starts in START:END from the first kernel, e.g. 1.5s:3.0s."),
    chrome_trace: Path = typer.Option(
        None, "--chrome-trace", help="Also write a Chrome trace JSON marking exposed copies, idle gaps, findings."
    ),
    html_out: Path = typer.Option(None, "--html", help="Also write one self-contained HTML page of the summary and plots."),
    rule_file: Path = typer.Option(None, "--rule-file", help="TOML file of rule options ([sync_copy] min_bytes = 65536); --rule-opt wins."),
    rule_opt: list[str] = typer.Option([], "--rule-opt", help="Rule threshold RULE.OPTION=VALUE, repeatable (sync_copy.min_bytes=65536)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out folder even though npudiag did not write it."),
) -> None:
    """Read profiler output into Parquet tables and summarise where device time goes."""
    try:
        overrides = load_rule_file(rule_file) if rule_file is not None else {}
        for rule_id, opts in parse_rule_options(rule_opt).items():
            overrides.setdefault(rule_id, {}).update(opts)
        step_window = parse_steps(steps) if steps else None
        if start_step is not None or stop_step is not None:
            step_window = (start_step, stop_step)
        time_range = parse_time(time_window) if time_window else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    err = Console(stderr=True)
    show_progress = not quiet and not json_out and err.is_terminal
    if show_progress:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("reading", total=None)
            profile = ingest(paths, lambda n: bar.advance(task, n), total=lambda t: bar.update(task, total=t))
    else:
        profile = ingest(paths)
    target = out if out is not None else _default_out(paths)
    read_any = any(f.used_for for f in profile.inputs)
    meta = {
        "npudiag_version": __version__,
        "title": ", ".join(str(p) for p in paths),
        "errors": profile.errors,
        "warnings": profile.warnings,
    }
    tables = dict(profile.tables)
    if step_window is not None or time_range is not None:
        try:
            tables = apply_window(tables, step_window, time_range)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        meta["window"] = {"steps": step_window, "time_us": time_range}
    writer = OutputWriter(target, force=force) if read_any else None
    ranks = {r for t in tables.values() if "rank" in t.column_names for r in pc.unique(t["rank"]).to_pylist()}
    by_rank = len(ranks) > 1  # many ranks: hive-partitioned datasets (kernels/rank=N/part-0.parquet)
    if writer is not None:
        for name, table in tables.items():
            writer.submit(name, table, partition_by_rank=by_rank)
    tables, skipped = derive(tables, overrides)
    if writer is not None:
        for name in DERIVED:
            writer.submit(name, tables[name], partition_by_rank=by_rank)
        meta["out"] = str(target)
    summary = build_summary(tables, top=top, by=by.value, meta=meta, rules_skipped=skipped)
    if writer is not None:
        manifest = output_manifest(profile, __version__, SCHEMA_VERSION)
        manifest["rules"] = {"options": overrides, "skipped": skipped}
        manifest["layout"] = "hive-partitioned by rank: <table>/rank=N/part-0.parquet" if by_rank else "one <table>.parquet per table"
        writer.finish(manifest)
    if chrome_trace is not None:
        traces = [Path(f.path) for f in profile.inputs if f.kind == "trace" and f.used_for and f.error is None]
        write_chrome_trace(chrome_trace, tables, markers(tables), summary["findings"], traces)
    if html_out is not None:
        write_html(html_out, summary, tables["copies"])
    if json_out:
        sys.stdout.write(render_json(summary) + "\n")
    else:
        render_terminal(summary, Console())
    # plain writes: an error stays one line whatever the terminal width
    for line in profile.errors:
        sys.stderr.write(f"npudiag: {line}\n")
    if profile.errors or not read_any:
        if not read_any and not profile.errors:
            sys.stderr.write("npudiag: nothing to analyze: no profiler data was read\n")
        raise typer.Exit(2)


def report(
    out: Path = typer.Argument(..., help="A folder written by 'npudiag analyze --out'."),
    top: int = typer.Option(20, "--top", min=1, help="How many hot operators to show."),
    by: By = typer.Option(By.type, "--by", help="Group hot operators by op type or op name."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
) -> None:
    """Re-render the summary of an earlier 'analyze --out' folder, without the raw data."""
    tables, manifest = load_outputs(out)
    meta = {
        "npudiag_version": __version__,
        "title": str(out),
        "errors": manifest.get("errors", []),
        "warnings": manifest.get("warnings", []),
    }
    rules = manifest.get("rules", {})
    summary = build_summary(tables, top=top, by=by.value, meta=meta, rules_skipped=rules.get("skipped", {}))
    if json_out:
        sys.stdout.write(render_json(summary) + "\n")
    else:
        render_terminal(summary, Console())
