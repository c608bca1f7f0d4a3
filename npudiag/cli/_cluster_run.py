"""What ``npudiag cluster`` runs once its options are parsed (imported only then): one library call
(``npudiag.profiling.pipeline.cluster``), the render, the exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from npudiag.cli._out import Say
from npudiag.errors import OptionError
from npudiag.profiling import pipeline
from npudiag.report.cluster_report import cluster_markdown, render_cluster_terminal, render_comm_terminal
from npudiag.report.json_report import render_json
from npudiag.report.renderers import write_text


def run_cluster(
    path: Path,
    threshold: str,
    out: Path,
    *,
    view: str = "terminal",
    markdown: Path | None = None,
    scheduler: str | None = None,
    dask: bool = False,
    per_step_tables: bool = False,
    allow_duplicate_ranks: bool = False,
    force: bool = False,
    say: Say = Say(),
) -> None:
    """Analyse every rank (or read an 'analyze --out' folder), write the cluster tables, print the view
    (``view``: terminal, json or markdown) and write the Markdown summary to ``markdown``."""
    try:
        result = pipeline.cluster(
            path,
            out,
            threshold=threshold,
            scheduler=scheduler,
            dask=dask,
            allow_duplicate_ranks=allow_duplicate_ranks,
            force=force,
        )
    except OptionError as exc:
        raise typer.BadParameter(str(exc)) from None
    if markdown is not None:
        write_text(markdown, cluster_markdown(result.summary), appendable=True, inputs=[path])
    if view == "json":
        sys.stdout.write(render_json(result.summary) + "\n")
    elif view == "markdown":
        sys.stdout.write(cluster_markdown(result.summary))
    elif not say.quiet:
        console = Console()
        render_cluster_terminal(result.summary, console, per_step=per_step_tables)
        render_comm_terminal(result.summary, console)
    say.warnings(result.warnings, str(Path(result.summary["tables"]) / "manifest.json"))
    say.errors(result.errors)
    if result.errors:
        raise typer.Exit(2)
