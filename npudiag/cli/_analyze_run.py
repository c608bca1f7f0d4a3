"""What ``npudiag analyze`` and ``npudiag report`` run once their options are parsed: one library
call (``npudiag.profiling.pipeline``), the render, the exit code.

Imported only when one of them runs, so ``npudiag --help`` never loads pyarrow or pandas.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import typer
from rich.console import Console

from npudiag.cli._out import Say, stdout_view
from npudiag.cli._progress import Bar
from npudiag.errors import OptionError
from npudiag.profiling import pipeline
from npudiag.report.chrome_trace import write_chrome_trace
from npudiag.report.renderers import RENDERERS, Renderer, SummaryView, for_path, write_view
from npudiag.report.terminal import render_terminal
from npudiag.summary_model import Summary


def _default_out(paths: list[Path]) -> Path:
    """``npudiag-out/<name of the first input>``: one plain folder name, whatever the input is called
    (``...csv`` must not make it ``npudiag-out/..``)."""
    from npudiag.safeio import safe_name

    name = paths[0].resolve().name if paths else "profile"
    if paths and paths[0].is_file():
        name = paths[0].stem
    return Path("npudiag-out") / safe_name(name or "profile")


def _rule_options(rule_file: Path | None, rule_opt: list[str]) -> dict:
    from npudiag.profiling.rules import load_rule_file, parse_rule_options

    overrides = load_rule_file(rule_file) if rule_file is not None else {}
    for rule_id, opts in parse_rule_options(rule_opt).items():
        overrides.setdefault(rule_id, {}).update(opts)
    return overrides


def _steps(
    steps: str | None, start_step: int | None, stop_step: int | None
) -> str | tuple[int | None, int | None] | None:
    if start_step is None and stop_step is None:
        return steps
    if steps is not None:
        raise typer.BadParameter("give --steps, or --start-step / --stop-step, not both")
    return (start_step, stop_step)


def file_views(html_out: Path | None, markdown: Path | None, save: list[Path]) -> list[tuple[Renderer, Path]]:
    """The summary files asked for: ``--html``, ``--markdown`` and each ``--save FILE`` by its extension
    (typer.BadParameter naming the extensions there are, before anything is read)."""
    named = [(RENDERERS[name], path) for name, path in (("html", html_out), ("markdown", markdown)) if path is not None]
    try:
        return named + [(for_path(path), path) for path in save]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--save") from None


def write_views(
    result: pipeline.Analysis,
    chrome_trace: Path | None,
    files: list[tuple[Renderer, Path]],
    inputs: list[Path],
    command: str = "analyze",
) -> SummaryView:
    """The Chrome trace of an analysis and its summary ``files`` (:func:`file_views`), where asked for;
    what they could not hold goes into the result's warnings. Returns the summary's view, which has
    kept each text it rendered for the same text on stdout."""
    if chrome_trace is not None:
        view = pipeline.timeline_of(result)
        result.warnings.extend(f"{chrome_trace}: {w}" for w in view.warnings)
        notes = write_chrome_trace(chrome_trace, view, inputs)
        if notes:
            result.warnings.append(
                f"{chrome_trace}: {len(notes)} number(s) JSON cannot hold written as null (first: {notes[0]})"
            )
    view = SummaryView(result.summary, command, lambda name: result.tables[name])
    for renderer, path in files:
        write_view(renderer, path, view, inputs)
    return view


def run_analyze(
    paths: list[Path],
    out: Path | None,
    *,
    top: int = 20,
    by: str = "type",
    json_out: bool = False,
    view: str = "terminal",
    say: Say = Say(),
    steps: str | None = None,
    start_step: int | None = None,
    stop_step: int | None = None,
    time_window: str | None = None,
    chrome_trace: Path | None = None,
    html_out: Path | None = None,
    markdown: Path | None = None,
    save: list[Path] = (),  # type: ignore[assignment]
    rule_file: Path | None = None,
    rule_opt: list[str] = (),  # type: ignore[assignment]
    peak_tflops: str | None = None,
    force: bool = False,
    scheduler: str | None = None,
    dask: bool = False,
    follow_symlinks: bool = False,
    export: bool = False,
    runs: str = "latest",
) -> None:
    """Read profiler output into Parquet tables, print the summary, say what went wrong (typer.Exit 2)."""
    view = stdout_view(view, json_out)
    files = file_views(html_out, markdown, list(save))
    try:
        rules = _rule_options(rule_file, rule_opt)
        if peak_tflops is not None:
            from npudiag.profiling.analysis.op_perf import peak_option

            rules.setdefault("op_efficiency", {}).update(peak_option(peak_tflops))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    err = Console(stderr=True)
    show_progress = not say.quiet and view == "terminal" and err.is_terminal  # a document on stdout: no bar, as --json
    try:
        with Bar(err) if show_progress else contextlib.nullcontext() as bar:
            result = pipeline.analyze(
                paths,
                out if out is not None else _default_out(paths),
                steps=_steps(steps, start_step, stop_step),
                time=time_window,
                rule_options=rules,
                top=top,
                by=by,
                force=force,
                scheduler=scheduler,
                dask=dask,
                follow_symlinks=follow_symlinks,
                export=export,
                runs=runs,
                progress=bar,
            )
    except OptionError as exc:
        raise typer.BadParameter(str(exc)) from None
    written = write_views(result, chrome_trace, files, paths) if result.read_any else None
    show_analysis(result, say, view=view, written=written)


def _print_view(result: pipeline.Analysis, view: str, say: Say, command: str, written: SummaryView | None) -> None:
    """The summary on stdout: the terminal view (not with --quiet), or a file renderer's text (always; not
    rendered again when ``written``, the view the files were written from, has it)."""
    if view != "terminal":
        summary_view = written or SummaryView(result.summary, command, lambda name: result.tables[name])
        sys.stdout.write(summary_view.text(RENDERERS[view]))
    elif not say.quiet:
        render_terminal(Summary.of(result.summary), Console(), command=command)


def show_analysis(
    result: pipeline.Analysis, say: Say, view: str = "terminal", written: SummaryView | None = None
) -> None:
    """Print an analysis (``view``: the terminal summary, json, markdown or html), its warnings and errors;
    typer.Exit 2 when nothing could be read or a file was bad."""
    if result.summary is None:  # nothing readable: say why, print nothing else
        say.errors(result.errors)
        raise typer.Exit(2)
    _print_view(result, view, say, "analyze", written)
    for f in result.inputs:
        if f.used_for:
            say.detail(f"read {f.path} ({f.kind}) for {', '.join(f.used_for)}")
    # plain writes: an error stays one line whatever the terminal width
    say.warnings(result.summary.get("warnings", []), "manifest.json" if result.read_any else None)
    say.errors(result.errors)
    if result.errors or not result.read_any:
        if not result.read_any and not result.errors:
            say.errors(["nothing to analyze: no profiler data was read"])
        raise typer.Exit(2)


def run_report(
    out: Path,
    *,
    top: int = 20,
    by: str = "type",
    json_out: bool = False,
    view: str = "terminal",
    say: Say = Say(),
    chrome_trace: Path | None = None,
    html_out: Path | None = None,
    markdown: Path | None = None,
    save: list[Path] = (),  # type: ignore[assignment]
) -> None:
    """Re-render the summary of an earlier 'analyze --out' folder, without the raw data."""
    view = stdout_view(view, json_out)
    files = file_views(html_out, markdown, list(save))
    result = pipeline.load_output(out, top=top, by=by)
    earlier = list(result.warnings)  # what analyze said when it wrote the folder: not news now
    del result.warnings[:]
    written = write_views(result, chrome_trace, files, [out], command="report")
    _print_view(result, view, say, "report", written)
    say.warnings(result.warnings)
    say.earlier(earlier, str(out / "manifest.json"))
