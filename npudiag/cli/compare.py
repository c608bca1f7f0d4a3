"""``npudiag compare``: argument parsing, one library call, the render (heavy imports when run)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from npudiag.cli._out import (
    FORCE,
    MARKDOWN,
    PEAK_TFLOPS,
    QUIET,
    STEPS_EACH_RUN,
    TEXT_VIEW,
    VERBOSE,
    By,
    Say,
    TextView,
    print_text_view,
    stdout_view,
)

COMPARE_EXAMPLE = """\b
Examples:
  npudiag compare fixtures/sample_msprof fixtures/sample_torch --top 5
  npudiag compare fixtures/sample_torch fixtures/sample_torch --level torch"""


class CompareLevel(str, Enum):
    kernel = "kernel"
    torch = "torch"
    module = "module"


def compare(
    baseline: Path = typer.Argument(
        ..., metavar="BASELINE", help="Baseline: a profile, an 'analyze --out' folder, or a folder of repeated runs."
    ),
    current: Path = typer.Argument(..., metavar="CURRENT", help="Current: the same kinds of input as the baseline."),
    by: By = typer.Option(By.type, "--by", help="Match operators by op type or by op name."),
    level: CompareLevel = typer.Option(
        CompareLevel.kernel,
        "--level",
        help="kernel: device kernels; torch: framework ops (aten::mm ...) with their kernels' device time; "
        "module: torch modules by path with the device time of the kernels launched inside.",
    ),
    shapes: bool = typer.Option(False, "--shapes", help="Same op with other input shapes is a different kernel."),
    top: int = typer.Option(20, "--top", min=1, max=1_000_000, help="How many operators to show."),
    out: Path = typer.Option(
        Path("npudiag-out/compare"), "--out", "-o", help="Folder for diff.parquet and compare.json."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON on stdout, nothing else."),
    view: TextView = TEXT_VIEW,
    markdown: Path = MARKDOWN,
    steps: str = STEPS_EACH_RUN,
    time_window: str = typer.Option(
        None, "--time", help="Only what starts in START:END from each rank's first device task, e.g. 1s:3s."
    ),
    peak_tflops: str = PEAK_TFLOPS,
    force: bool = FORCE,
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Diff two profiles operator by operator, with copies, idle time, findings and step time."""
    from rich.console import Console

    from npudiag.cli._progress import Bar
    from npudiag.errors import OptionError
    from npudiag.profiling import pipeline
    from npudiag.report.compare_report import compare_markdown, render_compare_terminal

    say = Say(quiet, verbose)
    shown = stdout_view(view.value, json_out)
    try:
        with Bar.shown(Console(stderr=True), quiet or shown != "terminal") as bar:
            result = pipeline.compare(
                baseline,
                current,
                out,
                by=by.value,
                shapes=shapes,
                level=level.value,
                progress=bar,
                force=force,
                steps=steps,
                time=time_window,
                peak_tflops=peak_tflops,
            )
    except OptionError as exc:
        raise typer.BadParameter(str(exc)) from None
    say.warnings(result.warnings)
    say.earlier(result.earlier, "the manifest.json of the out folders read")
    as_markdown = lambda: compare_markdown(result.summary, top=top)  # noqa: E731
    if print_text_view(shown, lambda: result.summary, as_markdown, markdown, [baseline, current]) and not quiet:
        render_compare_terminal(result.summary, Console(), top=top)
