"""``npudiag check``'s report: per profile, each kind of data with its status, then the problems."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from npudiag.report.text import Col, count, plain, say, table

_STYLE = {
    "present": "green",
    "missing": "bold red",
    "partial": "yellow",
    "unreadable": "bold red",
    "not collected": "dim",
}


def _heading(p: Any) -> Text:
    facts = [f"rank {p.rank}" if p.rank is not None else "rank ?", p.kind]
    facts += [f"{k} {v}" for k, v in p.versions.items()]
    for key in ("profiler_level", "export_type"):
        v = p.config.get(key)
        if v:
            facts.append(", ".join(map(str, v)) if isinstance(v, list) else str(v))
    if p.world_size:
        facts.append(f"world size {p.world_size}")
    head = plain(str(p.path), style="bold")
    head.append_text(plain("  (" + "; ".join(facts) + ")"))
    return head


def render(result: Any, console: Console) -> None:
    cols = [
        Col("data", "fixed", 0),
        Col("status", "fixed", 0),
        Col("rows", "num", 0),
        Col("found in / what records it", "text", 0, min_width=12),
    ]
    for p in result.profiles:
        console.print(_heading(p))
        rows = [
            [
                d.data,
                Text(d.status, style=_STYLE.get(d.status, "")),
                f"{d.rows:,}" if d.rows is not None else "",
                "; ".join(x for x in (d.found_in, d.note) if x),
            ]
            for d in p.data
        ]
        console.print(table(console, None, cols, rows))
        for text in p.problems:
            console.print(Text("  problem: ", style="red") + plain(text))
        for note in p.notes:
            console.print(plain(f"  note: {note}", style="dim"))
        console.print()
    for text in result.collection_problems:
        console.print(Text("problem: ", style="red") + plain(text))
    if result.ranks_not_profiled:
        missing = result.ranks_not_profiled
        shown = ", ".join(map(str, missing[:32])) + (f" and {len(missing) - 32} more" if len(missing) > 32 else "")
        console.print(
            plain(f"not profiled: rank(s) {shown} (named by the profiles' world size or communication)", style="dim")
        )
    n = len(result.problems)
    if n:
        bad = sum(1 for p in result.profiles if p.problems)
        say(
            console,
            Text(
                f"{count(n, 'problem')} ({count(bad, 'profile')} of {len(result.profiles)}; "
                f"{len(result.collection_problems)} across profiles)",
                style="bold red",
            ),
        )
    elif result.profiles:
        say(console, Text(f"healthy: no problem found in {count(len(result.profiles), 'profile')}", style="green"))
