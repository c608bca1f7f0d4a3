"""Renderers of ``npudiag doctor``'s checks (each a dict: name, ok, found, fix): terminal and Markdown."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from npudiag.report.escape import md_text
from npudiag.report.markdown import md_document, md_table
from npudiag.report.text import Col, table

HEADERS = ["tool", "status", "found", "fix"]


def _cells(c: dict[str, Any]) -> list[str]:
    return [c["name"], "ok" if c["ok"] else "missing", c["found"] or "", c["fix"] or ""]


def render_doctor_terminal(checks: list[dict[str, Any]], console: Console) -> None:
    cols = [
        Col("tool", "fixed", 0),
        Col("status", "fixed", 0),
        Col("found", "text", 2, min_width=12),
        Col("fix", "text", 0, min_width=24),
    ]
    rows = []
    for c in checks:
        name, status, found, fix = _cells(c)
        rows.append([name, Text(status, style="green" if c["ok"] else "red"), found, fix])
    console.print(table(console, None, cols, rows))


def doctor_markdown(checks: list[dict[str, Any]]) -> str:
    """The checks as a GitHub-flavoured Markdown table (paths and fixes escaped), under a verdict heading."""
    missing = sum(not c["ok"] for c in checks)
    verdict = "every tool found" if not missing else f"{missing} of {len(checks)} missing"
    lines = [f"## {'✅' if not missing else '❌'} npudiag doctor — {verdict}", ""]
    lines += md_table(HEADERS, [[md_text(x) for x in _cells(c)] for c in checks], text_columns=4)
    return md_document(lines)
