"""``npudiag logs export | level | parse``: argument parsing and wiring only."""

from __future__ import annotations

import shlex
import sys
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console

from npudiag.analysis.triage import load_kb, summarise, triage_table
from npudiag.cli._out import tell
from npudiag.collect import msnpureport as mr
from npudiag.errors import InputError, writing
from npudiag.ingest_logs import parse_logs
from npudiag.log_sources import find_sources
from npudiag.report.json_report import render_json
from npudiag.report.logs_report import render_logs_terminal
from npudiag.store import write_json, write_table

app = typer.Typer(help="CANN logs: export them with msnpureport, set device log levels, parse and triage them.", no_args_is_help=True)


class ExportType(str, Enum):
    all = "all"
    slog = "slog"
    bbox = "bbox"
    stackcore = "stackcore"
    vmcore = "vmcore"
    module = "module"


def _analyse(paths: list[str], out: Path | None, json_out: bool, device: int | None = None) -> int:
    """Parse, triage, write tables, print; returns the exit code (2 when any input was unusable)."""
    warnings: list[str] = []
    errors: list[str] = []
    sources = []
    for p in paths:
        try:
            sources.extend(find_sources(p, warnings))
        except InputError as exc:
            errors.append(exc.one_line())
    if not sources:  # nothing readable: say why, write nothing
        for w in warnings:
            tell(f"warning: {w}")
        for e in errors:
            tell(e)
        return 2
    if out is not None:
        with writing(out):
            out.mkdir(parents=True, exist_ok=True)
    err = Console(stderr=True)
    total = sum(s.size_bytes for s in sources)
    if sources and err.is_terminal and not json_out:
        with err.status(f"parsing {len(sources)} log file(s), {total / 1e6:.1f} MB"):
            run = parse_logs(sources, out / "log_events.parquet" if out else None, device=device)
    else:
        run = parse_logs(sources, out / "log_events.parquet" if out else None, device=device)
    errors += run.errors
    kb = load_kb()
    triage = triage_table(run.problems, kb)
    summary = summarise(run.problems, triage, kb, run.totals)
    summary["inputs"] = paths
    summary["input_errors"] = errors
    summary["input_warnings"] = warnings
    if out is not None:
        write_table(triage, out / "triage.parquet")
        write_json(summary, out / "summary.json")
        summary["out"] = str(out)
    if json_out:
        sys.stdout.write(render_json(summary) + "\n")
    else:
        render_logs_terminal(summary, Console())
        if out is not None:
            Console(stderr=True).print(f"[dim]tables: {out}/log_events.parquet, {out}/triage.parquet[/dim]")
    for w in warnings:
        tell(f"warning: {w}")
    for e in errors:
        tell(f"{e}")
    return 2 if errors or not sources else 0


@app.command("parse")
def parse(
    paths: list[str] = typer.Argument(
        ..., metavar="PATH", help="Export folders, host log folders, .log files, .tar.gz archives, or - for stdin."
    ),
    out: Path = typer.Option(Path("npudiag-out/logs"), "--out", "-o", help="Folder for log_events.parquet, triage.parquet, summary.json."),
    json_out: bool = typer.Option(False, "--json", help="Print the triage summary as JSON on stdout, nothing else."),
    device: int = typer.Option(None, "--device", "-d", help="Only records of this device."),
) -> None:
    """Parse CANN host/device logs and pasted console output; say what failed first and what to do."""
    code = _analyse(paths, out, json_out, device)
    if code:
        raise typer.Exit(code)


@app.command("export")
def export(
    out: Path = typer.Option(None, "--out", "-o", help="Where the export goes [default: ./npudiag-logs/<timestamp>]; never overwritten."),
    kind: ExportType = typer.Option(ExportType.all, "--type", "-t", help="What to export (msnpureport -t)."),
    force: bool = typer.Option(False, "--force", "-f", help="Everything plus historical maintenance info (msnpureport -f)."),
    device: int = typer.Option(None, "--device", "-d", help="Parse only this device's records (msnpureport always exports all)."),
    also_host: bool = typer.Option(False, "--also-host", help="Also copy the host logs ($ASCEND_PROCESS_LOG_PATH or ~/ascend/log)."),
    archive: bool = typer.Option(False, "--archive", help="Also write <out>.tar.gz for sending to support."),
    timeout: float = typer.Option(mr.DEFAULT_TIMEOUT_S, "--timeout", help="Seconds before msnpureport is killed."),
    json_out: bool = typer.Option(False, "--json", help="Print the triage summary as JSON on stdout."),
) -> None:
    """Export device logs with msnpureport, then parse and triage them."""
    try:
        result = mr.export_logs(out, kind.value, force, mr.echo_stderr, timeout)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    except mr.ToolError as exc:
        tell(f"{exc}")
        raise typer.Exit(2) from None
    tell(f"export in {result.folder}")
    if also_host:
        notes: list[str] = []
        copied = mr.copy_host_logs(result.folder, notes)
        tell(f"host logs: {', '.join(map(str, copied)) or 'none found'}")
        for note in notes:
            tell(f"warning: {note}")
    if archive:
        tell(f"archive {mr.write_archive(result.folder)}")
    code = _analyse([str(result.folder)], result.folder.with_name(result.folder.name + "-npudiag"), json_out, device)
    if code:
        raise typer.Exit(code)


@app.command("level")
def level(
    global_level: str = typer.Option(None, "--global", "-g", help="Device global log level: error, warning, info, debug, null."),
    module: list[str] = typer.Option([], "--module", "-m", help="MODULE:LEVEL, e.g. RUNTIME:debug; repeatable."),
    event: str = typer.Option(None, "--event", "-e", help="enable or disable device event logs."),
    device: int = typer.Option(None, "--device", "-d", help="Device id (msnpureport default 0; devices 0-3 and 4-7 share a setting)."),
    request: bool = typer.Option(False, "--request", "-r", help="Print the current device levels."),
    host: bool = typer.Option(False, "--host", help="Only print the host-side environment variables with the same meaning."),
) -> None:
    """Set device log levels through msnpureport, or print the host-side equivalent (--host)."""
    try:
        calls = mr.level_commands(global_level, module, event, device, request)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    for name in mr.unknown_modules(module):
        tell(f"warning: {name} is not in slog.h's module list; msnpureport will say if it knows it")
    if host:
        for k, v in mr.host_level_env(global_level, module, event).items():
            sys.stdout.write(f"export {k}={shlex.quote(v)}\n")  # meant for eval: quoted
        return
    try:
        tool = mr.require_msnpureport()
        for args in calls:
            tell(f"{tool} {' '.join(args)}")
            mr.run_tool(tool, args, Path.cwd(), lambda line: sys.stdout.write(line + "\n"), 120.0)
    except mr.ToolError as exc:
        tell(f"{exc}")
        raise typer.Exit(2) from None
