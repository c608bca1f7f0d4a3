"""``npudiag sql OUT QUERY``: a read-only SQL query over an out folder's tables (heavy imports when run)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from npudiag.cli._out import VERBOSE, Say

SQL_EXAMPLE = """\b
Examples:
  npudiag sql npudiag-out/torch "SELECT op_type, sum(duration_us) AS us FROM kernels GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
  npudiag sql npudiag-out/torch "SHOW TABLES"
  npudiag sql npudiag-out/torch "DESCRIBE idle_gaps"
  npudiag sql npudiag-out/torch "SELECT * FROM step_breakdown" --format csv"""


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def sql(
    out: Path = typer.Argument(
        ..., metavar="OUT", help="An out folder (analyze, cluster, logs parse, dump parse): its tables are views."
    ),
    query: str = typer.Argument(..., metavar="QUERY", help="SELECT statements (DuckDB's SQL); nothing is written."),
    fmt: OutputFormat = typer.Option(
        OutputFormat.table, "--format", "-f", help="table (the first 200 rows), csv or json (every row)."
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="Print only errors: no table (--format csv and json still print; the exit code says if the query ran).",
    ),
    verbose: bool = VERBOSE,
) -> None:
    """Query the tables of an out folder with SQL, read-only (kernels, steps, step_breakdown ...)."""
    from rich.console import Console

    from npudiag import sql as library
    from npudiag.errors import OptionError
    from npudiag.report.sql_report import render_csv, render_json, render_table

    say = Say(quiet, verbose)
    try:
        done = library.query(out, query)
    except OptionError as exc:
        say.errors([f"query: {exc}"])
        raise typer.Exit(2) from None
    result, terminal = done.tables["result"], sys.stdout.isatty()
    if fmt is OutputFormat.csv:
        sys.stdout.write(render_csv(result, terminal))
    elif fmt is OutputFormat.json:
        sys.stdout.write(render_json(result, terminal))
    elif not quiet:
        render_table(result, Console())
    say.warnings(done.warnings)
