"""``npudiag cluster PATH``: the options; the work is in ``_cluster_run``, imported when run."""

from __future__ import annotations

from pathlib import Path

import typer

from npudiag.cli._out import FORCE, MARKDOWN, QUIET, TEXT_VIEW, VERBOSE, Say, TextView, stdout_view

CLUSTER_EXAMPLE = """\b
Example (a folder of rank folders, e.g. 8 *_ascend_pt):
  npudiag cluster cluster_prof --threshold 5% --out npudiag-out/cluster"""


def cluster(
    path: Path = typer.Argument(
        ...,
        metavar="PATH",
        help=(
            "A folder of rank folders (*_ascend_pt with profiler_info_N.json, or PROF_* per "
            "device), or an 'analyze --out' folder."
        ),
    ),
    threshold: str = typer.Option(
        "5%", "--threshold", help="A rank is slow when its step is this much over the median (and beyond noise)."
    ),
    out: Path = typer.Option(
        Path("npudiag-out/cluster"),
        "--out",
        "-o",
        help="Folder for cluster_*.parquet, cluster_step_trace_time.csv and tables/.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
    view: TextView = TEXT_VIEW,
    markdown: Path = MARKDOWN,
    scheduler: str = typer.Option(
        None, "--scheduler", help="Run the per-rank work on this Dask scheduler (tcp://HOST:PORT)."
    ),
    dask: bool = typer.Option(False, "--dask", help="Run the per-rank work on a local Dask cluster."),
    per_step_tables: bool = typer.Option(
        False, "--per-step", help="Also print one table per step (every rank's phases in that step)."
    ),
    allow_duplicate_ranks: bool = typer.Option(
        False,
        "--allow-duplicate-ranks",
        help="Merge rank folders that declare the same rank id, renumbering all but the first.",
    ),
    force: bool = FORCE,
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Which rank is slow in each step, and why (compute, communication wait, free time, slower ops)."""
    from npudiag.cli._cluster_run import run_cluster

    run_cluster(
        path,
        threshold,
        out,
        view=stdout_view(view.value, json_out),
        markdown=markdown,
        scheduler=scheduler,
        dask=dask,
        per_step_tables=per_step_tables,
        allow_duplicate_ranks=allow_duplicate_ranks,
        force=force,
        say=Say(quiet, verbose),
    )
