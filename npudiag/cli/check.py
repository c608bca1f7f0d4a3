"""``npudiag check PATH...``: collection health before analysis (heavy imports when run)."""

from __future__ import annotations

from pathlib import Path

import typer

from npudiag.cli._out import MARKDOWN, QUIET, TEXT_VIEW, VERBOSE, Say, TextView, print_text_view, stdout_view

CHECK_EXAMPLE = """\b
Examples:
  npudiag check PROF_000001_...
  npudiag check cluster_run/ --json"""


def check(
    paths: list[Path] = typer.Argument(
        ..., metavar="PATH...", help="Profile folders (*_ascend_pt, PROF_*), folders of them, or profiler files."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print what was found as JSON."),
    view: TextView = TEXT_VIEW,
    markdown: Path = MARKDOWN,
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Check a collection before analysing it: the data each rank holds or lacks and the switch that records it, raw
    data not
    exported, missing ranks, versions (exit 1 on a problem, 2 when nothing is readable)."""
    from rich.console import Console

    from npudiag.profiling.health import check as run_check
    from npudiag.report.check_report import check_markdown, render

    say = Say(quiet, verbose)
    shown = stdout_view(view.value, json_out)
    result = run_check(paths)
    say.warnings(result.warnings)
    say.errors(result.errors)
    terminal = print_text_view(shown, result.to_dict, lambda: check_markdown(result), markdown, paths)
    if terminal and quiet:
        say.errors(result.problems)
    elif terminal:
        render(result, Console())
    if not result.profiles:
        raise typer.Exit(2)
    if not result.healthy:
        raise typer.Exit(1)
