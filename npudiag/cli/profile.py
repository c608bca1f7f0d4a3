"""``npudiag profile``: the options, then the collection and its analysis (heavy imports when run)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from npudiag.cli._out import FORCE, VERBOSE, Say
from npudiag.profiling.msprof_switches import PROFILE_SWITCHES

PROFILE_EXAMPLE = """\b
Examples:
  npudiag profile --task-time l1 --start-step 3 -- python train.py
  npudiag profile --dry-run --mode env -- ./infer --batch 8
  npudiag profile --emit torch --start-step 3 --stop-step 5"""

PROFILE_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}


class CollectMode(str, Enum):
    cli = "cli"
    env = "env"
    acl_json = "acl-json"


class Emit(str, Enum):
    env = "env"
    acl_json = "acl-json"
    command = "command"
    torch = "torch"


# msprof's own names for what npudiag calls otherwise
_MSPROF_NAMES = {
    "--output": "--collect-dir",
    "--application": "the program after the options (npudiag profile [OPTIONS] ./app)",
}


def unknown_option(given: str, ctx: typer.Context) -> str:
    """One line for an option ``profile`` does not know: the close npudiag option, msprof's name for
    one, or how to pass an msprof switch through."""
    import difflib

    name = given.split("=", 1)[0]
    known = [o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
    close = difflib.get_close_matches(name, [*known, *_MSPROF_NAMES], n=1, cutoff=0.6)
    if close and close[0] in _MSPROF_NAMES:
        hint = f"msprof's {close[0]} is {_MSPROF_NAMES[close[0]]} here"
    elif close:
        hint = f"did you mean {close[0]}?"
    else:
        hint = f"an msprof switch npudiag has no option for goes through --msprof-arg={given}"
    return f"no such option: {name}; {hint} (a program whose name starts with '-' is given by its path, ./-name)"


def profile(
    ctx: typer.Context,
    app_argv: list[str] = typer.Argument(
        None,
        metavar="APP [ARGS]...",
        help="The program to profile and its arguments (use -- before it if its arguments look like options).",
    ),
    mode: CollectMode = typer.Option(
        CollectMode.cli,
        "--mode",
        help=(
            "cli: run msprof with the app; env: PROFILING_MODE/PROFILING_OPTIONS; acl-json: "
            "the profiler section of acl.json."
        ),
    ),
    collect_dir: Path = typer.Option(
        Path("npudiag-prof"), "--collect-dir", help="Where msprof collects (msprof --output); it creates PROF_* inside."
    ),
    memory: bool = typer.Option(
        False,
        "--memory",
        help="What npudiag's memory rows need: --task-memory on and --sys-hardware-mem on (HBM/DDR timeline).",
    ),
    msprof_arg: list[str] = typer.Option(
        [],
        "--msprof-arg",
        help="Pass this msprof switch through (e.g. --msprof-arg=--task-memory=on), checked first; repeatable.",
    ),
    start_step: int = typer.Option(
        None,
        "--start-step",
        help="First step to keep (applied at analysis; see docs/profile.md for the torch_npu schedule).",
    ),
    stop_step: int = typer.Option(None, "--stop-step", help="Last step to keep."),
    acl_json: Path = typer.Option(
        Path("acl.json"), "--acl-json", help="The acl.json to write or merge into (--mode acl-json, --emit acl-json)."
    ),
    emit: Emit = typer.Option(
        None,
        "--emit",
        help=(
            "Only write the configuration (env file, acl.json, the shell-quoted command, or "
            "a torch_npu.profiler snippet) and exit."
        ),
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print exactly what would run (command, environment, acl.json) and exit."
    ),
    no_analyze: bool = typer.Option(False, "--no-analyze", help="Collect only; do not run the analysis."),
    out: Path = typer.Option(None, "--out", "-o", help="Analysis output folder [default: ./npudiag-out/<PROF name>]."),
    timeout: float = typer.Option(
        None,
        "--timeout",
        help="Stop the run (SIGTERM, then SIGKILL) after this many seconds; partial data is analysed.",
    ),
    force: bool = FORCE,
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="Print only warnings and errors: no report, no progress (the program's own output still shows).",
    ),
    verbose: bool = VERBOSE,
    **switches: str | int | None,  # one option per msprof switch of PROFILE_SWITCHES (see _with_switches)
) -> None:
    """Collect a profile with msprof (or its env / acl.json methods), then analyze it."""
    from npudiag.errors import OptionError
    from npudiag.profiling import collection
    from npudiag.profiling import msprof as mp

    say = Say(quiet, verbose)
    app = list(app_argv or [])
    if app and app[0].startswith("-") and app[0] != "-":  # an option npudiag does not know, not the program
        raise sys.modules[typer.BadParameter.__module__].UsageError(unknown_option(app[0], ctx), ctx=ctx)
    opts = mp.ProfileOptions(
        output=collect_dir.absolute(),
        memory=memory,
        extra=list(msprof_arg),
        **{sw.attr: switches[sw.param] for sw in PROFILE_SWITCHES},
    )
    steps = (start_step, stop_step)
    try:
        if emit is not None:
            text = collection.configuration(opts, emit.value, app, acl_json=acl_json, steps=steps)
            if emit is Emit.acl_json:  # the file is the output
                say.info(f"wrote the profiler section into {acl_json} (pass it to aclInit)")
            else:
                sys.stdout.write(text)
            return
        if not app:
            raise OptionError("give the program to profile: npudiag profile [OPTIONS] ./app [ARGS]...")
        plan = collection.plan(opts, app, method=mode.value, acl_json=acl_json, steps=steps)
    except OptionError as exc:
        flag = {"stop_step": "--stop-step", "start_step": "--start-step"}.get(exc.option or "")
        raise typer.BadParameter(f"{flag}: {exc}" if flag else str(exc)) from None
    if dry_run:
        sys.stdout.write(plan.describe())
        return
    code = _collect_and_analyze(plan, opts, timeout, say, analyze=not no_analyze, out=out, force=force)
    if code:
        raise typer.Exit(code)


def _collect_and_analyze(
    plan: Any, opts: Any, timeout: float | None, say: Say, *, analyze: bool, out: Path | None, force: bool
) -> int:
    """Run the plan (its acl.json section written first), say what was collected and, with ``analyze``, analyze
    it into ``out`` (None: ./npudiag-out/<PROF name>); the exit code."""
    from npudiag.profiling import collection

    if plan.acl_section is not None:
        collection.write_acl_section(plan.acl_json, plan.acl_section)
        say.info(f"profiler section written to {plan.acl_json}; the app must pass it to aclInit")
    result = collection.collect(
        plan.argv,
        opts.output,
        plan.env,
        msprof=plan.msprof,
        timeout_s=timeout,
        needs_msprof=plan.method == "cli",
        tell=say.info,
    )
    say.warnings(result.warnings)
    if not result.prof_dirs:
        say.errors([f"no PROF_* folder appeared in {opts.output} (exit code {result.returncode})"])
        return result.returncode or 2
    say.info("collected " + ", ".join(str(p) for p in result.prof_dirs))
    code = result.returncode
    if analyze:
        from npudiag.cli._analyze_run import show_analysis
        from npudiag.profiling import pipeline

        target = out if out is not None else Path("npudiag-out") / result.prof_dirs[0].name
        try:
            show_analysis(pipeline.analyze_collected(result, target, steps=plan.window, force=force), say)
        except typer.Exit as exc:
            code = code or exc.exit_code
        say.info(f"layout: {opts.output}/ (raw msprof data)  {target}/ (npudiag tables, manifest.json)")
    return code


def _with_switches(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with one option per msprof switch of PROFILE_SWITCHES (named as msprof names it, None: msprof's
    default), placed after --collect-dir: the switches are declared once, in the switch table."""
    params = list(inspect.signature(command).parameters.values())
    at = next(i for i, p in enumerate(params) if p.name == "collect_dir") + 1
    made = [
        inspect.Parameter(
            sw.param,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(None, sw.switch, help=sw.help),
            annotation=sw.kind,
        )
        for sw in PROFILE_SWITCHES
    ]
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params[at:] if p.kind is not p.VAR_KEYWORD]
    command.__signature__ = inspect.Signature(params[:at] + made + keyword)  # type: ignore[attr-defined]
    return command


profile = _with_switches(profile)
