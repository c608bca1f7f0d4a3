"""``npudiag check PATH...``: collection health before analysis (heavy imports when run)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from npudiag.cli._out import QUIET, VERBOSE, Say

CHECK_EXAMPLE = """\b
Examples:
  npudiag check PROF_000001_...
  npudiag check cluster_run/ --json"""


def check(
    paths: list[Path] = typer.Argument(
        ..., metavar="PATH...", help="Profile folders (*_ascend_pt, PROF_*), folders of them, or profiler files."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print what was found as JSON."),
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Check a collection before analysing it: the data each rank holds or lacks and the switch that records it, raw data not
    exported, missing ranks, versions (exit 1 on a problem, 2 when nothing is readable)."""
    from rich.console import Console

    from npudiag.profiling.health import check as run_check
    from npudiag.report.check_report import render
    from npudiag.report.json_report import render_json

    say = Say(quiet, verbose)
    result = run_check(paths)
    say.warnings(result.warnings)
    say.errors(result.errors)
    if json_out:
        sys.stdout.write(render_json(result.to_dict()) + "\n")
    elif quiet:
        say.errors(result.problems)
    else:
        render(result, Console())
    if not result.profiles:
        raise typer.Exit(2)
    if not result.healthy:
        raise typer.Exit(1)
