"""``npudiag doctor``: what the machine has of the toolkit, msprof, msnpureport, the driver and npu-smi (heavy
imports when run)."""

from __future__ import annotations

from pathlib import Path

import typer

from npudiag.cli._out import MARKDOWN, TEXT_VIEW, Say, TextView, print_text_view, stdout_view

DOCTOR_EXAMPLE = """\b
Example:
  npudiag doctor --json"""


def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    view: TextView = TEXT_VIEW,
    markdown: Path = MARKDOWN,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only what is missing and its fix (on stderr)."),
) -> None:
    """Check the CANN toolkit, msprof, msnpureport, driver and npu-smi, with the fix for each (exit 1 when one is
    missing)."""
    from rich.console import Console

    from npudiag.collect import toolkit
    from npudiag.report.doctor_report import doctor_markdown, render_doctor_terminal

    shown = stdout_view(view.value, json_out)
    checks = [c.to_dict() for c in toolkit.doctor()]
    ok = all(c["ok"] for c in checks)
    terminal = print_text_view(
        shown, lambda: {"checks": checks, "ok": ok}, lambda: doctor_markdown(checks), markdown, []
    )
    if terminal and quiet:
        Say().errors(
            f"{c['name']} missing: {c['fix']}" if c["fix"] else f"{c['name']} missing" for c in checks if not c["ok"]
        )
    elif terminal:
        render_doctor_terminal(checks, Console())
    if not ok:
        raise typer.Exit(1)
