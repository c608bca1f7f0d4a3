"""What every command says besides its report, and the options more than one command takes (each
declared once here).

Messages go to stderr as ``npudiag: ...`` lines with input text escaped (never raw control
characters). ``-q/--quiet`` keeps only warnings and errors (no report, no progress, no "wrote X");
``-v/--verbose`` shows every warning instead of the first few, and what was read. Light on purpose:
``npudiag --help`` imports this module and must not pull in pandas, pyarrow or numpy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from npudiag.report.escape import clean

MAX_WARNINGS = 5


class By(str, Enum):
    type = "type"
    name = "name"


class View(str, Enum):
    terminal = "terminal"
    json = "json"
    markdown = "markdown"
    html = "html"


VIEW = typer.Option(
    View.terminal,
    "--format",
    help="What goes to stdout: the terminal summary, or the same summary as JSON, Markdown or one HTML page.",
)


class TextView(str, Enum):
    """What a command with no HTML page prints on stdout."""

    terminal = "terminal"
    json = "json"
    markdown = "markdown"


TEXT_VIEW = typer.Option(
    TextView.terminal,
    "--format",
    help="What goes to stdout: the terminal summary, or the same summary as JSON or Markdown.",
)


def stdout_view(view: str, json_out: bool) -> str:
    """``--json`` is ``--format json``; with another --format it is a contradiction."""
    if json_out and view not in ("terminal", "json"):
        raise typer.BadParameter(
            f"--json and --format {view} ask for two outputs on stdout; give one", param_hint="--format"
        )
    return "json" if json_out else view


def print_text_view(
    view: str, json_doc: Callable[[], Any], markdown: Callable[[], str], to: Path | None, inputs: Iterable[Path]
) -> bool:
    """Write the Markdown view to ``to`` (appended where it is GitHub's job summary) and print the JSON or
    Markdown view when ``view`` asks for one, the Markdown rendered once for both; True when the terminal
    view is still to be shown."""
    from npudiag.report.json_report import render_json
    from npudiag.report.renderers import write_text

    text = markdown() if to is not None or view == "markdown" else ""
    if to is not None:
        write_text(to, text, appendable=True, inputs=inputs)
    if view == "json":
        sys.stdout.write(render_json(json_doc()) + "\n")
    elif view == "markdown":
        sys.stdout.write(text)
    return view == "terminal"


HOT_TOP = typer.Option(20, "--top", min=1, max=1_000_000, help="How many hot operators to show.")
HOT_BY = typer.Option(By.type, "--by", help="Group hot operators by op type or op name.")
SUMMARY_JSON = typer.Option(False, "--json", help="Print the summary as one JSON document on stdout, nothing else.")
STEPS_EACH_RUN = typer.Option(None, "--steps", help="Only steps FIRST:LAST of each run, e.g. 3: to drop warm-up.")

QUIET = typer.Option(
    False, "--quiet", "-q", help="Print only warnings and errors: no report, no progress (--json still prints)."
)
FORCE = typer.Option(
    False,
    "--force",
    help=(
        "Replace --out even when it holds files npudiag did not write (never a file, an "
        "input, HOME, / or the working folder)."
    ),
)
PEAK_TFLOPS = typer.Option(
    None,
    "--peak-tflops",
    help="The chip's peak for MFU: one number, or per dtype (fp16=295,int8=590); else from device info.",
)
SAVE = typer.Option(
    [],
    "--save",
    help="Also write the summary to FILE in the format its extension names (.json, .md, .html); repeatable.",
)
MARKDOWN = typer.Option(
    None, "--markdown", help="Write a Markdown summary, e.g. to $GITHUB_STEP_SUMMARY (appended there)."
)
VERBOSE = typer.Option(False, "--verbose", "-v", help="Print every warning (not only the first 5) and each input read.")


def tell(message: str) -> None:
    """``npudiag: message`` on stderr, control characters in it escaped."""
    sys.stderr.write(f"npudiag: {clean(message)}\n")


@dataclass(frozen=True)
class Say:
    """The stderr voice of one command run."""

    quiet: bool = False
    verbose: bool = False

    def info(self, message: str) -> None:
        """What npudiag did (wrote X, ran Y): not shown with --quiet."""
        if not self.quiet:
            tell(message)

    def detail(self, message: str) -> None:
        """Shown only with --verbose."""
        if self.verbose:
            tell(message)

    def warnings(self, warnings: Iterable[str], where: str | None = None) -> None:
        """The first warnings (every one with --verbose), and how many more there are and where."""
        ws = list(dict.fromkeys(warnings))
        shown = ws if self.verbose else ws[:MAX_WARNINGS]
        for w in shown:
            tell(f"warning: {w}")
        if len(ws) > len(shown):
            rest = len(ws) - len(shown)
            tell(f"... and {rest} more warning(s){f' in {where}' if where else ''} (-v shows them all)")

    def earlier(self, warnings: Iterable[str], where: str | None = None) -> None:
        """The warnings an earlier analysis gave when it wrote an out folder this run reads (a CI
        baseline): said when that analysis ran; again only with --verbose, else counted in one line
        (not with --quiet)."""
        ws = list(dict.fromkeys(warnings))
        if self.verbose:
            for w in ws:
                tell(f"warning (from the analysis that wrote it): {w}")
        elif ws:
            self.info(f"{len(ws)} warning(s) of the earlier analysis{f' in {where}' if where else ''} (-v shows them)")

    def errors(self, errors: Iterable[str]) -> None:
        for e in errors:
            tell(e)
