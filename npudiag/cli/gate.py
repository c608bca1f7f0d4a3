"""``npudiag gate``: argument parsing, one library call, the render and the exit code (heavy imports when run)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from npudiag.cli._out import (
    MARKDOWN,
    PEAK_TFLOPS,
    STEPS_EACH_RUN,
    TEXT_VIEW,
    VERBOSE,
    By,
    Say,
    TextView,
    print_text_view,
    stdout_view,
)

if TYPE_CHECKING:
    from npudiag.profiling.analysis.gate import GateConfig

CONFIG_FILE = "npudiag-gate.toml"  # read from the current folder when --config is not given

GATE_EXAMPLE = """\b
Example (CI):
  npudiag gate fixtures/sample_torch fixtures/sample_torch --steps 2: --quiet"""


def _config(
    config: Path | None,
    max_regression: str | None,
    alpha: float | None,
    metric: list[str],
    top_ops: int | None,
    by: By | None,
    steps: str | None,
    min_delta_us: float | None,
) -> GateConfig:
    from npudiag.profiling.pipeline import gate_config

    if config is None and Path(CONFIG_FILE).is_file():
        config = Path(CONFIG_FILE)
    return gate_config(
        config,
        max_regression=max_regression,
        alpha=alpha,
        metrics=metric,
        top_ops=top_ops,
        by=by.value if by is not None else None,
        steps=steps,
        min_delta_us=min_delta_us,
    )


def gate_cmd(
    baseline: Path = typer.Argument(
        ..., metavar="BASELINE", help="Baseline: a profile, an 'analyze --out' folder, or a folder of repeated runs."
    ),
    current: Path = typer.Argument(..., metavar="CURRENT", help="Current: the same kinds of input as the baseline."),
    max_regression: str = typer.Option(
        None, "--max-regression", help="Allowed slow-down of each metric: 5% or 0.05 [default: 5%]."
    ),
    metric: list[str] = typer.Option(
        [],
        "--metric",
        help="Also gate this metric (op:KEY, mfu:KEY, api:NAME, module:PATH, a step_breakdown column); repeatable.",
    ),
    config: Path = typer.Option(None, "--config", help=f"Gate settings TOML [default: ./{CONFIG_FILE} when present]."),
    alpha: float = typer.Option(None, "--alpha", help="Significance level of the Mann-Whitney test [default: 0.002]."),
    top_ops: int = typer.Option(
        None, "--top-ops", min=0, max=1000, help="Gate the N hottest ops of each side [default: 10]."
    ),
    by: By = typer.Option(None, "--by", help="Op metrics by op type or op name [default: type]."),
    steps: str = STEPS_EACH_RUN,
    min_delta_us: float = typer.Option(
        None, "--min-delta-us", help="Ignore changes smaller than this [default: 0.2% of the step time]."
    ),
    peak_tflops: str = PEAK_TFLOPS,
    junit: Path = typer.Option(None, "--junit", help="Write JUnit XML (one testcase per metric) for Jenkins / GitLab."),
    markdown: Path = MARKDOWN,
    json_out: bool = typer.Option(False, "--json", help="Print the verdicts as JSON on stdout, nothing else."),
    view: TextView = TEXT_VIEW,
    update_baseline: Path = typer.Option(
        None, "--update-baseline", help="When the gate passes, store CURRENT here as the new baseline."
    ),
    accept: bool = typer.Option(
        False, "--accept", help="With --update-baseline: store it even though it regressed (and exit 0)."
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="Print only warnings, errors and the metrics that failed (on stderr); --json still prints.",
    ),
    verbose: bool = VERBOSE,
) -> None:
    """Fail (exit 1) when CURRENT is slower than BASELINE beyond the threshold and beyond noise."""
    from rich.console import Console

    from npudiag.cli._progress import Bar
    from npudiag.errors import OptionError
    from npudiag.output import write_file
    from npudiag.profiling import pipeline
    from npudiag.report.gate_report import failed_lines, gate_junit, gate_markdown, render_gate_terminal

    if accept and update_baseline is None:  # alone it would turn the gate off without a word
        raise typer.BadParameter(
            "--accept only goes with --update-baseline (store a baseline that regressed); "
            "to let this change pass, raise --max-regression or the metric's limit in the config",
            param_hint="--accept",
        )
    say = Say(quiet, verbose)
    shown = stdout_view(view.value, json_out)
    try:
        cfg = _config(config, max_regression, alpha, metric, top_ops, by, steps, min_delta_us)
        with Bar.shown(Console(stderr=True), quiet or shown != "terminal") as bar:
            result = pipeline.gate(
                baseline,
                current,
                cfg,
                update_baseline=update_baseline,
                accept=accept,
                progress=bar,
                peak_tflops=peak_tflops,
            )
    except OptionError as exc:
        raise typer.BadParameter(_flagged(exc)) from None
    data = result.summary
    say.warnings(result.warnings)
    say.earlier(result.earlier, "the manifest.json of the out folders read")
    if junit is not None:
        write_file(junit, gate_junit(data, str(baseline), str(current)), inputs=[baseline, current])
    as_markdown = lambda: gate_markdown(data, str(baseline), str(current))  # noqa: E731
    terminal = print_text_view(shown, lambda: data, as_markdown, markdown, [baseline, current])
    if terminal and not quiet:
        render_gate_terminal(data, Console(), f"{baseline}  ->  {current}")
    elif terminal:
        say.warnings(data["warnings"])
        say.errors(failed_lines(data))
    if update_baseline is not None:
        if result.baseline_updated:
            say.info(f"stored {current} as the baseline in {update_baseline}")
        else:
            say.errors([f"baseline {update_baseline} not updated: the gate failed (use --accept to store it anyway)"])
    if result.failed and not accept:
        raise typer.Exit(1)


def _flagged(exc) -> str:
    """The library names the value; the CLI adds the flag it came from."""
    text, name = str(exc), exc.option or ""
    flag = {"alpha": "--alpha", "metric": "--metric"}.get(name)
    return flag + text[len(name) :] if flag and text.startswith(name + " ") else text
