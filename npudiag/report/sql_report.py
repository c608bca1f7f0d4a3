"""A query's rows as a terminal table, CSV or JSON (``npudiag sql``)."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pyarrow as pa
from rich.console import Console

from npudiag.output import csv_cell, dumps
from npudiag.report.escape import clean_json
from npudiag.report.text import Col, clean, plain, table

MAX_SHOWN = 200  # rows drawn as a table; CSV and JSON carry them all


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):  # the digits a sum's rounding leaves (0.30000000000000004) are not shown
        return repr(round(v, 6)) if math.isfinite(v) else str(v)
    return str(v)


def render_table(result: pa.Table, console: Console) -> None:
    """A table when every column fits the terminal at its natural width; otherwise one block per row,
    a column per line (as psql's expanded display), so no column is dropped and no value is cut."""
    rows = [[_cell(v) for v in row.values()] for row in result.slice(0, MAX_SHOWN).to_pylist()]
    names = result.column_names
    natural = sum(max([len(n)] + [len(r[j]) for r in rows]) + 2 for j, n in enumerate(names))
    if natural <= console.width:
        cols = [
            Col(name, "num" if pa.types.is_integer(t) or pa.types.is_floating(t) else "text", priority=0)
            for name, t in zip(names, result.schema.types)
        ]
        console.print(table(console, None, cols, rows))
    else:
        label = max(len(n) for n in names)
        for i, row in enumerate(rows, 1):
            console.print(plain(f"-- row {i} --", style="dim"))
            for name, value in zip(names, row):
                console.print(plain(f"{name.ljust(label)}  {value}"), soft_wrap=False)
    more = result.num_rows - len(rows)
    console.print(
        plain(
            f"{result.num_rows:,} row(s)"
            + (f"; the first {len(rows)} shown (--format csv or json gives all)" if more else ""),
            style="dim",
        )
    )


def render_csv(result: pa.Table, terminal: bool = False) -> str:
    """The rows as CSV; for a terminal (``terminal``) the text of every cell escaped as the other views
    escape it (a value from an input could move the cursor, clear the screen or reverse the line)."""
    cell = (lambda v: csv_cell(clean(v) if isinstance(v, str) else v)) if terminal else csv_cell
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([cell(c) for c in result.column_names])
    for row in result.to_pylist():
        w.writerow([cell(v) for v in row.values()])
    return buf.getvalue()


def render_json(result: pa.Table, terminal: bool = False) -> str:
    """The rows as JSON (no raw control character: JSON escapes them); for a terminal the invisible and
    bidi characters JSON keeps are escaped as well."""
    text = dumps(result.to_pylist(), indent=None)
    return (clean_json(text) if terminal else text) + "\n"
