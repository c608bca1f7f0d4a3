"""``npudiag doctor``: what the machine has of the toolkit, msprof, msnpureport, the driver and npu-smi (heavy
imports when run)."""

from __future__ import annotations

import sys

import typer

from npudiag.cli._out import Say

DOCTOR_EXAMPLE = """\b
Example:
  npudiag doctor --json"""


def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only what is missing and its fix (on stderr)."),
) -> None:
    """Check the CANN toolkit, msprof, msnpureport, driver and npu-smi, with the fix for each (exit 1 when one is
    missing)."""
    from rich.console import Console
    from rich.text import Text

    from npudiag.collect import toolkit
    from npudiag.report.json_report import render_json
    from npudiag.report.text import Col, table

    checks = toolkit.doctor()
    if json_out:
        sys.stdout.write(render_json({"checks": [c.to_dict() for c in checks], "ok": all(c.ok for c in checks)}) + "\n")
    elif quiet:
        Say().errors(f"{c.name} missing: {c.fix}" if c.fix else f"{c.name} missing" for c in checks if not c.ok)
    else:
        console = Console()
        cols = [
            Col("tool", "fixed", 0),
            Col("status", "fixed", 0),
            Col("found", "text", 2, min_width=12),
            Col("fix", "text", 0, min_width=24),
        ]
        rows = [
            [c.name, Text("ok", style="green") if c.ok else Text("missing", style="red"), c.found or "", c.fix or ""]
            for c in checks
        ]
        console.print(table(console, None, cols, rows))
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
