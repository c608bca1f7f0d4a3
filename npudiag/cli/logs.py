"""``npudiag logs export | level | parse``: argument parsing and wiring only (the work is imported when run)."""

from __future__ import annotations

import shlex
import sys
from enum import Enum
from pathlib import Path

import typer

from npudiag.cli._out import FORCE, MARKDOWN, QUIET, TEXT_VIEW, VERBOSE, Say, TextView, print_text_view, stdout_view
from npudiag.logs.msnpureport import DEFAULT_TIMEOUT_S

PARSE_EXAMPLE = """\b
Examples:
  npudiag logs parse ascend/log --out npudiag-out/logs
  dmesg | npudiag logs parse - --json"""

EXPORT_EXAMPLE = """\b
Example:
  npudiag logs export --type slog --out npudiag-logs/today"""

LEVEL_EXAMPLE = """\b
Examples:
  npudiag logs level --global info --device 0
  npudiag logs level --host --global debug --module RUNTIME:debug"""

app = typer.Typer(
    help="CANN logs: export them with msnpureport, set device log levels, parse and triage them.", no_args_is_help=True
)


class ExportType(str, Enum):
    all = "all"
    slog = "slog"
    bbox = "bbox"
    stackcore = "stackcore"
    vmcore = "vmcore"
    module = "module"


def _map_large_buffers() -> None:
    """Archives are inflated in buffers of up to tens of MB (a highly compressed member: 1,000 : 1).
    glibc raises its mmap threshold to the largest buffer freed, after which such buffers come from
    the heap and fragment it: a 1 GB-inflating archive peaked at 380 - 465 MB with 140 MB in use.
    A fixed threshold of 1 MiB maps them and gives them back (235 - 270 MB); it costs system time on
    plain logs, so it is set only for archives. No effect where the C library is not glibc, or when
    the user set MALLOC_MMAP_THRESHOLD_."""
    import contextlib
    import ctypes
    import os

    if os.environ.get("MALLOC_MMAP_THRESHOLD_") is not None:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD


def _analyse(
    paths: list[str],
    out: Path | None,
    view: str,
    device: int | None = None,
    say: Say = Say(),
    force: bool = False,
    markdown: Path | None = None,
) -> int:
    """Parse, triage, write tables, print (``view``: terminal, json or markdown); returns the exit code (2 when
    any input was unusable)."""
    from rich.console import Console

    from npudiag.cli._progress import Bar
    from npudiag.logs.pipeline import parse_logs
    from npudiag.report.logs_report import logs_markdown, render_logs_terminal

    if any(p.endswith((".gz", ".tgz", ".tar", ".bz2", ".xz", ".zip")) for p in paths):
        _map_large_buffers()
    err = Console(stderr=True)
    with Bar.shown(err, view != "terminal" or say.quiet) as bar:
        run = parse_logs(paths, out, device=device, progress=bar, force=force)
    if run.summary is None:  # nothing readable: say why, print nothing else
        say.warnings(run.warnings)
        say.errors(run.errors)
        return 2
    inputs = [Path(p) for p in paths if p != "-"]
    if (
        print_text_view(view, lambda: run.summary, lambda: logs_markdown(run.summary), markdown, inputs)
        and not say.quiet
    ):
        render_logs_terminal(run.summary, Console())
    if out is not None:
        say.info(f"tables: {out}/log_events.parquet, {out}/triage.parquet")
    say.warnings(run.warnings, str(out / "summary.json") if out is not None else None)
    say.errors(run.errors)
    return 2 if run.errors else 0


@app.command("parse", epilog=PARSE_EXAMPLE)
def parse(
    paths: list[str] = typer.Argument(
        ..., metavar="PATH", help="Export folders, host log folders, .log files, .tar.gz archives, or - for stdin."
    ),
    out: Path = typer.Option(
        Path("npudiag-out/logs"), "--out", "-o", help="Folder for log_events.parquet, triage.parquet, summary.json."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the triage summary as JSON on stdout, nothing else."),
    view: TextView = TEXT_VIEW,
    markdown: Path = MARKDOWN,
    device: int = typer.Option(None, "--device", "-d", min=0, max=1023, help="Only records of this device."),
    force: bool = FORCE,
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Parse CANN host/device logs and pasted console output; say what failed first and what to do."""
    code = _analyse(paths, out, stdout_view(view.value, json_out), device, Say(quiet, verbose), force, markdown)
    if code:
        raise typer.Exit(code)


@app.command("export", epilog=EXPORT_EXAMPLE)
def export(
    out: Path = typer.Option(
        None, "--out", "-o", help="Where the export goes [default: ./npudiag-logs/<timestamp>]; never overwritten."
    ),
    kind: ExportType = typer.Option(ExportType.all, "--type", "-t", help="What to export (msnpureport -t)."),
    history: bool = typer.Option(
        False, "--history", help="Everything plus historical maintenance info (msnpureport -f)."
    ),
    events: bool = typer.Option(
        False, "--events", help="Everything plus the device's bbox event information (msnpureport -a)."
    ),
    since: str = typer.Option(
        None,
        "--since",
        metavar="last",
        help="last: keep only the files earlier exports into the same folder did not hold (same path, size and sha256; "
        "recorded in npudiag-exported.json there). msnpureport itself always exports everything.",
    ),
    device: int = typer.Option(
        None,
        "--device",
        "-d",
        min=0,
        max=1023,
        help="Parse only this device's records (msnpureport always exports all).",
    ),
    also_host: bool = typer.Option(
        False, "--also-host", help="Also copy the host logs ($ASCEND_PROCESS_LOG_PATH or ~/ascend/log)."
    ),
    archive: bool = typer.Option(False, "--archive", help="Also write <out>.tar.gz for sending to support."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT_S, "--timeout", help="Seconds before msnpureport is killed."),
    json_out: bool = typer.Option(False, "--json", help="Print the triage summary as JSON on stdout."),
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Export device logs with msnpureport, then parse and triage them."""
    from npudiag.logs import msnpureport as mr

    say = Say(quiet, verbose)
    if since is not None and since != "last":
        raise typer.BadParameter(f"--since takes 'last' (the files earlier exports did not hold), not {since!r}")
    try:
        result = mr.export_logs(
            out,
            kind.value,
            history,
            mr.echo_stderr if not quiet else lambda _line: None,
            timeout,
            events=events,
            since_last=since == "last",
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    except mr.ToolError as exc:
        say.errors([str(exc)])
        raise typer.Exit(2) from None
    say.info(f"export in {result.folder}")
    if result.kept is not None:
        say.info(
            f"{result.kept} file(s) new or changed since the last export, "
            f"{result.skipped} already exported (record: {result.record})"
        )
    if also_host:
        notes: list[str] = []
        copied = mr.copy_host_logs(result.folder, notes)
        say.info(f"host logs: {', '.join(map(str, copied)) or 'none found'}")
        say.warnings(notes)
    if archive:
        say.info(f"archive {mr.write_archive(result.folder)}")
    if result.kept == 0 and not also_host:
        say.info("nothing new since the last export: nothing to parse")
        return
    code = _analyse(
        [str(result.folder)],
        result.folder.with_name(result.folder.name + "-npudiag"),
        stdout_view("terminal", json_out),
        device,
        say,
    )
    if code:
        raise typer.Exit(code)


@app.command("level", epilog=LEVEL_EXAMPLE)
def level(
    global_level: str = typer.Option(
        None, "--global", "-g", help="Device global log level: error, warning, info, debug, null."
    ),
    module: list[str] = typer.Option([], "--module", "-m", help="MODULE:LEVEL, e.g. RUNTIME:debug; repeatable."),
    event: str = typer.Option(None, "--event", "-e", help="enable or disable device event logs."),
    device: int = typer.Option(
        None,
        "--device",
        "-d",
        min=0,
        max=1023,
        help="Device id (msnpureport default 0; devices 0-3 and 4-7 share a setting).",
    ),
    request: bool = typer.Option(False, "--request", "-r", help="Print the current device levels."),
    host: bool = typer.Option(
        False, "--host", help="Only print the host-side environment variables with the same meaning."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Do not echo the msnpureport commands; print only what they print."
    ),
) -> None:
    """Set device log levels through msnpureport, or print the host-side equivalent (--host)."""
    from npudiag.logs import msnpureport as mr

    say = Say(quiet)
    try:
        calls = mr.level_commands(global_level, module, event, device, request)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    say.warnings(
        f"{name} is not in slog.h's module list; msnpureport will say if it knows it"
        for name in mr.unknown_modules(module)
    )
    if host:
        for k, v in mr.host_level_env(global_level, module, event).items():
            sys.stdout.write(f"export {k}={shlex.quote(v)}\n")  # meant for eval: quoted
        return
    try:
        tool = mr.require_msnpureport()
        for args in calls:
            say.info(f"{tool} {' '.join(args)}")
            mr.run_tool(tool, args, Path.cwd(), lambda line: sys.stdout.write(line + "\n"), 120.0)
    except mr.ToolError as exc:
        say.errors([str(exc)])
        raise typer.Exit(2) from None
