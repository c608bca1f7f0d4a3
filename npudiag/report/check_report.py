"""``npudiag check``'s report: per profile, each kind of data with its status, then the problems."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from npudiag.report.escape import md_text
from npudiag.report.markdown import md_document, md_table
from npudiag.report.text import Col, count, plain, say, table

_STYLE = {
    "present": "green",
    "missing": "bold red",
    "partial": "yellow",
    "unreadable": "bold red",
    "not collected": "dim",
}


def _facts(p: Any) -> list[str]:
    """What a profile says of itself: rank, kind, versions, profiler level and export type, world size."""
    facts = [f"rank {p.rank}" if p.rank is not None else "rank ?", p.kind]
    facts += [f"{k} {v}" for k, v in p.versions.items()]
    for key in ("profiler_level", "export_type"):
        v = p.config.get(key)
        if v:
            facts.append(", ".join(map(str, v)) if isinstance(v, list) else str(v))
    if p.world_size:
        facts.append(f"world size {p.world_size}")
    return facts


def _heading(p: Any) -> Text:
    head = plain(str(p.path), style="bold")
    head.append_text(plain("  (" + "; ".join(_facts(p)) + ")"))
    return head


def data_cells(d: Any) -> list[str]:
    """A kind of data's row: its name, status, rows and where it was found (or what records it)."""
    return [
        d.data,
        d.status,
        f"{d.rows:,}" if d.rows is not None else "",
        "; ".join(x for x in (d.found_in, d.note) if x),
    ]


def not_profiled(result: Any) -> str | None:
    missing = result.ranks_not_profiled
    if not missing:
        return None
    shown = ", ".join(map(str, missing[:32])) + (f" and {len(missing) - 32} more" if len(missing) > 32 else "")
    return f"not profiled: rank(s) {shown} (named by the profiles' world size or communication)"


def verdict(result: Any) -> str | None:
    """How many problems in how many profiles, or that every profile is healthy (None with no profile)."""
    n = len(result.problems)
    if n:
        bad = sum(1 for p in result.profiles if p.problems)
        return (
            f"{count(n, 'problem')} ({count(bad, 'profile')} of {len(result.profiles)}; "
            f"{len(result.collection_problems)} across profiles)"
        )
    return f"healthy: no problem found in {count(len(result.profiles), 'profile')}" if result.profiles else None


def render(result: Any, console: Console) -> None:
    cols = [
        Col("data", "fixed", 0),
        Col("status", "fixed", 0),
        Col("rows", "num", 0),
        Col("found in / what records it", "text", 0, min_width=12),
    ]
    for p in result.profiles:
        console.print(_heading(p))
        rows = [[d.data, Text(d.status, style=_STYLE.get(d.status, "")), *data_cells(d)[2:]] for d in p.data]
        console.print(table(console, None, cols, rows))
        for text in p.problems:
            console.print(Text("  problem: ", style="red") + plain(text))
        for note in p.notes:
            console.print(plain(f"  note: {note}", style="dim"))
        console.print()
    for text in result.collection_problems:
        console.print(Text("problem: ", style="red") + plain(text))
    if not_profiled(result):
        console.print(plain(not_profiled(result), style="dim"))
    line = verdict(result)
    if line is not None:
        say(console, Text(line, style="bold red" if result.problems else "green"))


def check_markdown(result: Any) -> str:
    """The collection's health as GitHub-flavoured Markdown: the verdict, then per profile its data table,
    problems and notes (paths and text from the profiles escaped)."""
    line = verdict(result) or "no profile found"
    icon = "❌" if result.problems or not result.profiles else "✅"
    lines = [f"## {icon} npudiag check — {md_text(line)}", ""]
    for p in result.profiles:
        lines += [f"### {md_text(p.path)}", "", md_text("; ".join(_facts(p))), ""]
        rows = [[md_text(c) for c in data_cells(d)] for d in p.data]
        lines += md_table(["Data", "Status", "Rows", "Found in / what records it"], rows, (0, 1, 3)) + [""]
        lines += [f"- **problem:** {md_text(t)}" for t in p.problems]
        lines += [f"- note: {md_text(t)}" for t in p.notes]
        lines += [""] if p.problems or p.notes else []
    lines += [f"- **problem:** {md_text(t)}" for t in result.collection_problems]
    if not_profiled(result):
        lines.append(md_text(not_profiled(result)))
    return md_document(lines)
