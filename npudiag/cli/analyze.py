"""``npudiag analyze``: the options; the work is in ``_analyze_run``, imported when run."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from npudiag.cli._out import (
    FORCE,
    HOT_BY,
    HOT_TOP,
    MARKDOWN,
    PEAK_TFLOPS,
    QUIET,
    SAVE,
    SUMMARY_JSON,
    VERBOSE,
    VIEW,
    By,
    Say,
    View,
)

ANALYZE_EXAMPLE = """\b
Example:
  npudiag analyze fixtures/sample_torch --out npudiag-out/torch --steps 2:"""


class Runs(str, Enum):
    latest = "latest"
    all = "all"


def analyze(
    paths: list[Path] = typer.Argument(
        ..., metavar="PATH", help="PROF_* or *_ascend_pt folders, a parent of many, or single CSV / JSON / .db files."
    ),
    out: Path = typer.Option(
        None, "--out", "-o", help="Folder for the Parquet tables and manifest.json [default: ./npudiag-out/<name>]."
    ),
    top: int = HOT_TOP,
    by: By = HOT_BY,
    json_out: bool = SUMMARY_JSON,
    view: View = VIEW,
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
    steps: str = typer.Option(None, "--steps", help="Only steps FIRST:LAST (inclusive), e.g. 10:100 to drop warm-up."),
    start_step: int = typer.Option(None, "--start-step", help="Same as --steps START:"),
    stop_step: int = typer.Option(None, "--stop-step", help="Same as --steps :STOP"),
    time_window: str = typer.Option(
        None, "--time", help="Only what starts in START:END from each rank's first device task, e.g. 1.5s:3.0s."
    ),
    chrome_trace: Path = typer.Option(
        None, "--chrome-trace", help="Also write a Chrome trace JSON marking exposed copies, idle gaps, findings."
    ),
    html_out: Path = typer.Option(
        None, "--html", help="Also write one self-contained HTML page of the summary and plots."
    ),
    markdown: Path = MARKDOWN,
    save: list[Path] = SAVE,
    rule_file: Path = typer.Option(
        None, "--rule-file", help="TOML file of rule options ([sync_copy] min_bytes = 65536); --rule-opt wins."
    ),
    rule_opt: list[str] = typer.Option(
        [], "--rule-opt", help="Rule threshold RULE.OPTION=VALUE, repeatable (sync_copy.min_bytes=65536)."
    ),
    peak_tflops: str = PEAK_TFLOPS,
    force: bool = FORCE,
    scheduler: str = typer.Option(
        None,
        "--scheduler",
        help="Run the per-rank work on this Dask scheduler (tcp://HOST:PORT); inputs and --out on shared storage.",
    ),
    dask: bool = typer.Option(
        False, "--dask", help="Run the per-rank work on a local Dask cluster (one worker per core)."
    ),
    follow_symlinks: bool = typer.Option(
        False,
        "--follow-symlinks",
        help="Read files that links inside the input point to outside it (not followed by default).",
    ),
    export: bool = typer.Option(
        False,
        "--export",
        help="First export data collected but never exported (msprof --export=on, torch_npu's analyse).",
    ),
    runs: Runs = typer.Option(
        Runs.latest,
        "--runs",
        help="Repeated runs of one process in one folder: analyse the latest, or all (each as a rank).",
    ),
) -> None:
    """Read profiler output into Parquet tables and summarise where device time goes."""
    from npudiag.cli._analyze_run import run_analyze

    run_analyze(
        paths,
        out,
        top=top,
        by=by.value,
        json_out=json_out,
        view=view.value,
        say=Say(quiet, verbose),
        steps=steps,
        start_step=start_step,
        stop_step=stop_step,
        time_window=time_window,
        chrome_trace=chrome_trace,
        html_out=html_out,
        markdown=markdown,
        save=save,
        rule_file=rule_file,
        rule_opt=rule_opt,
        peak_tflops=peak_tflops,
        force=force,
        scheduler=scheduler,
        dask=dask,
        follow_symlinks=follow_symlinks,
        export=export,
        runs=runs.value,
    )
