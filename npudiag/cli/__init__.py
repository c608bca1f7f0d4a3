"""The ``npudiag`` command: a thin Typer layer over the library (no analysis logic here)."""

from __future__ import annotations

import os
import sys

import typer

from npudiag import __version__
from npudiag.cli import analyze as _analyze
from npudiag.cli import cluster as _cluster
from npudiag.cli import compare as _compare
from npudiag.cli import dump as _dump
from npudiag.cli import logs as _logs
from npudiag.cli import profile as _profile
from npudiag.errors import InputError

app = typer.Typer(
    name="npudiag",
    help="Diagnostics for Huawei Ascend NPU (CANN) profiles: msprof and torch_npu profiler output.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"npudiag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Diagnostics for Huawei Ascend NPU (CANN) profiles."""


app.command("analyze")(_analyze.analyze)
app.command("report")(_analyze.report)
app.command("compare")(_compare.compare)
app.command("gate")(_compare.gate_cmd)
app.add_typer(_logs.app, name="logs")
app.add_typer(_dump.app, name="dump")
app.command("profile", context_settings=_profile.PROFILE_CONTEXT)(_profile.profile)
app.command("doctor")(_profile.doctor)
app.command("cluster")(_cluster.cluster)


def main() -> None:
    """Entry point: bad input is one line on stderr and exit 2, never a traceback."""
    try:
        app()
    except InputError as exc:
        print(f"npudiag: {exc.one_line()}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("npudiag: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - last line of defence for the user
        if os.environ.get("NPUDIAG_DEBUG"):
            raise
        print(f"npudiag: internal error: {type(exc).__name__}: {exc} (set NPUDIAG_DEBUG=1 for a traceback)", file=sys.stderr)
        sys.exit(3)
