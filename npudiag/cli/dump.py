"""``npudiag dump``: author configs (the group's own options), ``check``, ``parse``, ``compare``.

Wiring only; what does the work is imported when a command runs (``--help`` stays light).
"""

from __future__ import annotations

import functools
import json
import sys
from enum import Enum
from pathlib import Path

import typer

from npudiag.cli._out import FORCE, MARKDOWN, QUIET, TEXT_VIEW, VERBOSE, Say, TextView, print_text_view, stdout_view

AUTHOR_EXAMPLE = """\b
Examples:
  npudiag dump --layers conv1,relu1 --path ./dump --acl-json acl.json
  npudiag dump --layers conv1 --format msprobe --out config.json"""

CHECK_EXAMPLE = """\b
Example:
  npudiag dump check acl.json"""

PARSE_EXAMPLE = """\b
Example:
  npudiag dump parse dump --out npudiag-out/dump --top 5"""

COMPARE_EXAMPLE = """\b
Example:
  npudiag dump compare dump golden --out npudiag-out/dump-compare"""

app = typer.Typer(
    help="Accuracy dumps: write the acl.json dump section, check it, parse dump files, compare two dumps.",
    epilog=AUTHOR_EXAMPLE,
)


class DumpMode(str, Enum):
    all = "all"
    input = "input"
    output = "output"


class DumpData(str, Enum):
    tensor = "tensor"
    stats = "stats"


class Exception_(str, Enum):
    brief = "brief"
    norm = "norm"
    detail = "detail"


class DumpLevel(str, Enum):
    op = "op"
    kernel = "kernel"
    all = "all"


MSPROBE_VERSION_HELP = (
    "The msprobe release the config is for, e.g. 8.3.0 (task names differ) "
    "[default: the installed one, else the newest]."
)


def _release(dc, text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    release = dc.msprobe_release(text)
    if release is None:
        raise typer.BadParameter(f"{text!r} is not a release number like 8.3.0", param_hint="--msprobe-version")
    return release


class Fmt(str, Enum):
    acl = "acl"
    msprobe = "msprobe"


@app.callback(invoke_without_command=True)
def author(
    ctx: typer.Context,
    layers: str = typer.Option(None, "--layers", help="Comma-separated op names to dump (dump_list[].layer)."),
    model: str = typer.Option(None, "--model", help="The model_name the layers belong to [CANN default: every model]."),
    mode: DumpMode = typer.Option(DumpMode.output, "--mode", help="dump_mode."),
    path: str = typer.Option("./dump", "--path", help="dump_path (where dump files land)."),
    steps: str = typer.Option(None, "--steps", help="Iterations to dump, e.g. 0,5-9 (dump_step)."),
    data: DumpData = typer.Option(DumpData.tensor, "--data", help="dump_data: whole tensors or statistics only."),
    level: DumpLevel = typer.Option(None, "--level", help="dump_level: op, kernel or all [CANN default all]."),
    overflow: bool = typer.Option(
        False, "--overflow", help="Overflow dump (acl.json: dump_debug on; msprobe: nan_check); stands alone."
    ),
    single_op: bool = typer.Option(False, "--single-op", help="Dump single-operator calls (dump_op_switch on)."),
    exception: Exception_ = typer.Option(
        None, "--exception", help="AI Core exception dump (dump_scene aic_err_<brief|norm|detail>_dump); stands alone."
    ),
    acl_json: Path = typer.Option(
        Path("acl.json"), "--acl-json", help="The acl.json to write or merge into (other sections are kept)."
    ),
    fmt: Fmt = typer.Option(
        Fmt.acl, "--format", help="acl: acl.json dump section; msprobe: msprobe's config.json for PyTorch."
    ),
    out: Path = typer.Option(
        None, "--out", "-o", help="With --format msprobe: where to write config.json [default: ./config.json]."
    ),
    msprobe_version: str = typer.Option(None, "--msprobe-version", help=MSPROBE_VERSION_HELP),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Write the file only: no JSON on stdout, no how-to on stderr."
    ),
) -> None:
    """Write the acl.json dump section (or msprobe's config.json) for the layers to dump."""
    if ctx.invoked_subcommand is not None:
        return
    from npudiag.dump import config as dc

    say = Say(quiet)
    # an option the chosen format does not use is a usage error, never silently dropped
    given = {name for name in ("acl_json", "out", "model", "single_op", "msprobe_version") if _given(ctx, name)}
    unused = (
        {"acl_json": "--acl-json", "model": "--model", "single_op": "--single-op"}
        if fmt is Fmt.msprobe
        else {"out": "--out", "msprobe_version": "--msprobe-version"}
    )
    for name, flag in unused.items():
        if name in given:
            where = (
                "msprobe's config.json goes to --out" if fmt is Fmt.msprobe else "the dump section goes to --acl-json"
            )
            raise sys.modules[typer.BadParameter.__module__].UsageError(
                f"{flag} does not go with --format {fmt.value} ({where})", ctx=ctx
            )
    layer_list = [x.strip() for x in layers.split(",") if x.strip()] if layers else None
    if exception is not None and fmt is Fmt.msprobe:
        raise typer.BadParameter(
            "--exception writes acl.json's dump_scene; msprobe has no such task for PyTorch", param_hint="--exception"
        )
    if not (layer_list or model or overflow or single_op or exception):
        sys.stdout.write(ctx.get_help() + "\n")
        raise typer.Exit(0)
    try:
        if fmt is Fmt.msprobe:
            cfg = dc.msprobe_config(
                path,
                layer_list,
                mode.value,
                steps,
                data.value,
                level.value if level else None,
                overflow,
                _release(dc, msprobe_version),
            )
            target = out or Path("config.json")
            dc.write_msprobe_config(target, cfg)
            say.info(f'wrote {target}; use it with msprobe\'s PrecisionDebugger(config_path="{target}")')
            return
        section = dc.dump_section(
            path,
            layer_list,
            model,
            mode.value,
            steps,
            data.value,
            level.value if level else None,
            overflow,
            single_op,
            exception.value if exception else None,
        )
        dc.write_dump_section(acl_json, section)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if quiet:
        return
    sys.stdout.write(json.dumps({"dump": section}, indent=4) + "\n")
    say.info(f"dump section written to {acl_json}")
    sys.stderr.write(dc.usage_text(acl_json, section) + "\n")


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the user gave option ``name`` (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


@app.command("check", epilog=CHECK_EXAMPLE)
def check(
    acl_json: Path = typer.Argument(..., metavar="ACL_JSON", help="The acl.json to validate."),
    msprobe_version: str = typer.Option(None, "--msprobe-version", help=MSPROBE_VERSION_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the problems; the exit code says the rest."),
) -> None:
    """Validate an acl.json dump section the way CANN's dump config converter does (or msprobe's config.json)."""
    from npudiag.dump import config as dc

    kind, problems = dc.check_dump_config(acl_json, _release(dc, msprobe_version))
    say = Say(quiet)
    say.errors(problems)
    if kind == "dump section":
        say.warnings(dc.environment_notes())
    if problems:
        raise typer.Exit(2)
    if not quiet:
        sys.stdout.write(f"{acl_json}: {kind} OK\n")


@app.command("parse", epilog=PARSE_EXAMPLE)
def parse(
    dump_path: Path = typer.Argument(
        ...,
        metavar="DUMP",
        help="A dump tree ({dump_path}/{time}/{device}/...), a folder of dump files, one file, or an msprobe dump.",
    ),
    out: Path = typer.Option(Path("npudiag-out/dump"), "--out", "-o", help="Folder for tensors.parquet."),
    npy: Path = typer.Option(
        None, "--npy", help="Also write one .npy per input/output tensor here (in its original layout)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    view: TextView = TEXT_VIEW,
    markdown: Path = MARKDOWN,
    top: int = typer.Option(20, "--top", min=1, max=1_000_000, help="How many tensors to show."),
    force: bool = FORCE,
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
) -> None:
    """Parse binary dump files, statistics CSVs and msprobe's dump.json into tensors.parquet (and .npy arrays)."""
    from rich.console import Console

    from npudiag.dump.pipeline import parse_dump
    from npudiag.report.dump_report import dump_parse_markdown, render_parse_terminal

    say = Say(quiet, verbose)
    shown = stdout_view(view.value, json_out)
    run = parse_dump(dump_path, out, npy=npy, force=force)
    summary = run.summary
    rows = functools.cache(run.rows)  # sorted once, for whichever views ask
    terminal = print_text_view(
        shown,
        lambda: {**summary, "tensors_table": rows()[:top]},
        lambda: dump_parse_markdown({**summary, "rows": rows()}, top),
        markdown,
        [dump_path],
    )
    if terminal and not quiet:
        render_parse_terminal({**summary, "rows": rows()}, Console(), top)
    say.errors(run.errors)
    if run.errors:
        say.errors([f"{len(run.errors)} file(s) skipped; the others are in {out}/tensors.parquet"])
        raise typer.Exit(2)
    if summary["files"] == 0:
        say.errors([f"{dump_path}: no dump files found"])
        raise typer.Exit(2)


@app.command("compare", epilog=COMPARE_EXAMPLE)
def compare(
    mine: Path = typer.Argument(
        ..., metavar="MINE", help="My dump (a dump tree, a folder of dump files, or an msprobe dump)."
    ),
    golden: Path = typer.Argument(
        ..., metavar="GOLDEN", help="Golden: another dump, or a folder of {op}.{input|output}.{index}.npy files."
    ),
    mapping: Path = typer.Option(None, "--mapping", help="CSV of my_op_name,golden_op_name for renamed ops."),
    out: Path = typer.Option(
        Path("npudiag-out/dump-compare"),
        "--out",
        "-o",
        help="Folder for the tables: compare.parquet and result_<time>.csv (binary dumps), stats_compare.parquet and "
        "compare_result_<time>.csv (msprobe dumps).",
    ),
    cosine: float = typer.Option(0.99, "--cosine", help="Pass when cosine similarity >= this."),
    red: float = typer.Option(0.05, "--red", help="Pass when relative Euclidean distance < this."),
    kl: float = typer.Option(0.005, "--kl", help="Pass when KL divergence < this."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    view: TextView = TEXT_VIEW,
    markdown: Path = MARKDOWN,
    no_fail: bool = typer.Option(
        False, "--no-fail", help="Exit 0 even when tensors fail the thresholds (the tables still say so)."
    ),
    force: bool = FORCE,
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="Print only warnings, errors and the first failing op (on stderr); --json still prints.",
    ),
    verbose: bool = VERBOSE,
) -> None:
    """Compare two dumps tensor by tensor; name the first op whose output goes wrong (exit 1 when tensors fail).

    MINE (the run under test) comes first and GOLDEN (the reference) second, as msaccucmp's -m / -g and
    msprobe's target / golden paths: the reverse of compare and gate, which take BASELINE (the
    reference) first."""
    from rich.console import Console

    from npudiag.dump.pipeline import compare_dumps
    from npudiag.report.dump_report import dump_compare_markdown, render_compare_terminal

    say = Say(quiet, verbose)
    shown = stdout_view(view.value, json_out)
    run = compare_dumps(mine, golden, out, mapping=mapping, cosine=cosine, red=red, kl=kl, force=force)
    summary = run.summary
    terminal = print_text_view(shown, lambda: summary, lambda: dump_compare_markdown(summary), markdown, [mine, golden])
    if terminal and not quiet:
        render_compare_terminal(summary, Console())
    elif terminal and summary["first_failing_output"] is not None:
        say.errors(
            [
                (
                    f"{summary['tensors_failed']} tensor(s) fail; first failing op: "
                    f"{summary['first_failing_output']['op_name']}"
                )
            ]
        )
    say.errors(run.errors)
    if run.errors:
        raise typer.Exit(2)
    if run.failed and not no_fail:
        raise typer.Exit(1)
