"""What ``npudiag cluster`` runs once its options are parsed (imported only then): one library call
(``npudiag.profiling.pipeline.cluster``), the render, the exit code."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from npudiag.cli._out import Say, print_text_view
from npudiag.errors import OptionError
from npudiag.profiling import pipeline
from npudiag.report.cluster_report import cluster_markdown, render_cluster_terminal, render_comm_terminal


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
    terminal = print_text_view(view, lambda: result.summary, lambda: cluster_markdown(result.summary), markdown, [path])
    if terminal and not say.quiet:
        console = Console()
        render_cluster_terminal(result.summary, console, per_step=per_step_tables)
        render_comm_terminal(result.summary, console)
    say.warnings(result.warnings, str(Path(result.summary["tables"]) / "manifest.json"))
    say.errors(result.errors)
    if result.errors:
        raise typer.Exit(2)
