"""What ``npudiag cluster`` runs once its options are parsed (imported only then)."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pyarrow.compute as pc
import typer
from rich.console import Console

from npudiag import SCHEMA_VERSION, __version__
from npudiag.cli._out import Say
from npudiag.errors import InputError
from npudiag.executors import choose_backend
from npudiag.profiling.analysis.cluster import (
    cluster_csv,
    link_summary,
    parallel_indices,
    phase_median,
    rank_matrix,
    rank_steps,
    slow_links,
    slow_ranks,
    wait_skew,
    with_parallel,
)  # fmt: skip
from npudiag.profiling.analysis.gate import parse_percent
from npudiag.profiling.ingest import find_units
from npudiag.profiling.rank_job import analyze_ranks
from npudiag.profiling.runs import is_out_folder
from npudiag.report.cluster_report import render_cluster_terminal, render_comm_terminal
from npudiag.report.json_report import render_json
from npudiag.store import OutputWriter, load_outputs, load_rank_rows, write_table, write_text


def run_cluster(
    path: Path,
    threshold: str,
    out: Path,
    *,
    json_out: bool = False,
    scheduler: str | None = None,
    dask: bool = False,
    per_step_tables: bool = False,
    allow_duplicate_ranks: bool = False,
    say: Say = Say(),
) -> None:
    """Analyse every rank (or read an 'analyze --out' folder), write the cluster tables, print the view."""
    try:
        thr = parse_percent(threshold)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    errors: list[str] = []
    warnings: list[str] = []
    if is_out_folder(path):
        dataset = path
    else:
        dataset = (out / "tables").absolute()
        found = find_units([path])
        if not found.units:
            raise InputError(path, found.errors[0] if found.errors else "no profiler data found")
        if found.duplicate_ranks and not allow_duplicate_ranks:
            rank, folders = next(iter(found.duplicate_ranks.items()))
            raise InputError(
                path,
                f"rank {rank} is declared by {len(folders)} folders ({', '.join(folders)}); ranks of one cluster must differ "
                "(several runs mixed?): --allow-duplicate-ranks merges them renumbered",
            )
        writer = OutputWriter(dataset)
        try:
            result = analyze_ranks(found, writer, choose_backend(len(found.units), scheduler, dask), hash_inputs=False)
        except BaseException:
            writer.abandon()
            raise
        if not result.read_any:
            writer.abandon()
            raise InputError(path, result.errors[0] if result.errors else "no profiler data found")
        writer.finish(result.manifest(__version__, SCHEMA_VERSION))
        errors, warnings = result.errors, result.warnings
    tables, manifest = load_outputs(dataset, names=("steps", "step_breakdown", "comm_links", "comm_ops"))
    args = next((u["distributed_args"] for u in manifest.get("units", []) if u.get("distributed_args")), None)
    steps = with_parallel(rank_steps(tables), parallel_indices(args))
    slow = slow_ranks(steps, lambda ranks: load_rank_rows(dataset, "kernels", ranks), thr)
    links, comm_ops = tables["comm_links"], tables["comm_ops"]
    write_table(links, out / "cluster_links.parquet")
    write_table(comm_ops, out / "cluster_comm_ops.parquet")
    write_table(steps, out / "cluster_steps.parquet")
    write_table(slow, out / "cluster_slow_ranks.parquet")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header, rows = cluster_csv(steps)
    w.writerow(header)
    w.writerows(rows)
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
        "rank_matrix": rank_matrix(steps),
        "threshold": thr,
        "per_step": per_step,
        "slow_ranks": slow.to_pylist(),
        "links": link_summary(links),
        "slow_links": slow_links(links),
        "wait_skew": wait_skew(comm_ops),
        "out": str(out),
        "tables": str(dataset),
        "warnings": warnings,
        "errors": errors,
    }
    if json_out:
        sys.stdout.write(render_json(summary) + "\n")
    elif not say.quiet:
        console = Console()
        render_cluster_terminal(summary, console, per_step=per_step_tables)
        render_comm_terminal(summary, console)
    say.warnings(warnings, str(dataset / "manifest.json"))
    say.errors(errors)
    if errors:
        raise typer.Exit(2)
