"""``npudiag cluster DIR``: wiring only."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import typer
from rich.console import Console

from npudiag.analysis.cluster import (
    CLUSTER_CSV_HEADER,
    cluster_csv_rows,
    link_summary,
    phase_median,
    rank_steps,
    slow_links,
    slow_ranks,
    wait_skew,
)  # fmt: skip
from npudiag.analysis.derive import derive
from npudiag.analysis.gate import parse_percent
from npudiag.discover import communication_files
from npudiag.errors import InputError
from npudiag.formats.communication import read_communication, read_matrix
from npudiag.ingest import ingest
from npudiag.report.cluster_report import render_cluster_terminal, render_comm_terminal
from npudiag.report.json_report import render_json
from npudiag.schemas import COMM_LINKS, COMM_OPS
from npudiag.store import write_table, write_text


def cluster(
    path: Path = typer.Argument(..., help="A folder of rank folders (*_ascend_pt with profiler_info_N.json, or PROF_* per device)."),
    threshold: str = typer.Option(
        "5%", "--threshold", help="A rank is slow when its step is this much over the median (and beyond noise)."
    ),
    out: Path = typer.Option(
        Path("npudiag-out/cluster"), "--out", "-o", help="Folder for cluster_*.parquet and cluster_step_trace_time.csv."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
) -> None:
    """Which rank is slow in each step, and why (compute, communication wait, free time, slower ops)."""
    try:
        thr = parse_percent(threshold)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    profile = ingest([path], hash_inputs=False)
    if not any(f.used_for for f in profile.inputs):
        raise InputError(path, profile.errors[0] if profile.errors else "no profiler data found")
    tables, _ = derive(profile.tables)
    steps = rank_steps(tables)
    slow = slow_ranks(steps, tables, thr)
    links_parts, ops_parts = [], []
    for rank, matrix, comm in communication_files(path):
        try:
            if matrix is not None:
                links_parts.append(read_matrix(matrix, rank))
            if comm is not None:
                ops_parts.append(read_communication(comm, rank))
        except InputError as exc:
            profile.errors.append(exc.one_line())
    links = pa.concat_tables(links_parts) if links_parts else COMM_LINKS.empty_table()
    comm_ops = pa.concat_tables(ops_parts) if ops_parts else COMM_OPS.empty_table()
    write_table(links, out / "cluster_links.parquet")
    write_table(comm_ops, out / "cluster_comm_ops.parquet")
    write_table(steps, out / "cluster_steps.parquet")
    write_table(slow, out / "cluster_slow_ranks.parquet")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CLUSTER_CSV_HEADER)
    w.writerows(cluster_csv_rows(steps))
    write_text(buf.getvalue(), out / "cluster_step_trace_time.csv")
    per_step = []
    for step in sorted(set(steps["step"].to_pylist()), key=lambda s: (s is None, s)):
        sub = steps.filter(pc.equal(steps["step"], step)) if step is not None else steps.filter(pc.is_null(steps["step"]))
        rows = sub.to_pylist()
        median = {c: phase_median(sub, c) for c in sub.column_names if c.endswith("_us")}
        per_step.append({"step": step, "rows": rows, "median": median})
    summary = {
        "ranks": len(set(steps["rank"].to_pylist())),
        "steps": len(per_step),
        "threshold": thr,
        "per_step": per_step,
        "slow_ranks": slow.to_pylist(),
        "links": link_summary(links),
        "slow_links": slow_links(links),
        "wait_skew": wait_skew(comm_ops),
        "out": str(out),
        "warnings": profile.warnings,
        "errors": profile.errors,
    }
    if json_out:
        sys.stdout.write(render_json(summary) + "\n")
    else:
        console = Console()
        render_cluster_terminal(summary, console)
        render_comm_terminal(summary, console)
    for e in profile.errors:
        sys.stderr.write(f"npudiag: {e}\n")
    if profile.errors:
        raise typer.Exit(2)
