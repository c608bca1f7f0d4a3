"""``npudiag report``: the summary of an earlier ``analyze --out`` folder, re-rendered (heavy imports when run)."""

from __future__ import annotations

from pathlib import Path

import typer

from npudiag.cli._out import HOT_BY, HOT_TOP, MARKDOWN, QUIET, SAVE, SUMMARY_JSON, VERBOSE, VIEW, By, Say, View

REPORT_EXAMPLE = """\b
Example:
  npudiag report npudiag-out/torch --top 5"""


def report(
    out: Path = typer.Argument(..., metavar="OUT", help="A folder written by 'npudiag analyze --out'."),
    top: int = HOT_TOP,
    by: By = HOT_BY,
    json_out: bool = SUMMARY_JSON,
    view: View = VIEW,
    chrome_trace: Path = typer.Option(
        None, "--chrome-trace", help="Also write a Chrome trace JSON marking exposed copies, idle gaps, findings."
    ),
    html_out: Path = typer.Option(
        None, "--html", help="Also write one self-contained HTML page of the summary and plots."
    ),
    markdown: Path = MARKDOWN,
    save: list[Path] = SAVE,
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Re-render the summary of an earlier 'analyze --out' folder, without the raw data."""
    from npudiag.cli._analyze_run import run_report

    run_report(
        out,
        top=top,
        by=by.value,
        json_out=json_out,
        view=view.value,
        say=Say(quiet, verbose),
        chrome_trace=chrome_trace,
        html_out=html_out,
        markdown=markdown,
        save=save,
    )
