"""Rich rendering of a log triage summary: what failed first, the codes, the known failures, the timeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


def _ts(t: datetime | None) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S.%f")


def _where(r: dict[str, Any]) -> str:
    parts = [f"{r['file']}:{r['line']}"]
    if r.get("device_id") is not None:
        parts.append(f"device {r['device_id']}")
    if r.get("rank") is not None:
        parts.append(f"rank {r['rank']}")
    return ", ".join(parts)


def render_logs_terminal(s: dict[str, Any], console: Console) -> None:
    head = Text("npudiag logs", style="bold")
    head.append(f"  {s['files']} files, {s['records']:,} records, {s['errors']:,} errors, {s['warnings']:,} warnings", style="dim")
    console.print(head)
    if s.get("note"):
        console.print(Text(s["note"], style="yellow"))
    root = s["root_cause"]
    first = s["first_error"]
    if root is not None:
        body = Text()
        body.append(f"{root['title']}\n", style="bold red")
        body.append(f"{root['meaning']}\n")
        body.append("first seen: ", style="dim")
        body.append(f"{_ts(root['first_timestamp'])}  {root['first_file']}:{root['first_line']}\n")
        body.append("log: ", style="dim")
        body.append(f"{root['example']}\n")
        if root["checks"]:
            body.append("check next:\n", style="bold")
            for c in root["checks"]:
                body.append(f"  • {c}\n")
        body.append("fix: ", style="bold green")
        body.append(root["fix"])
        console.print(Panel(body, title="Root-cause candidate (earliest known failure)", title_align="left", border_style="red"))
    elif first is not None:
        console.print(Panel(Text(first["message"]), title=f"First error: {_where(first)}", title_align="left", border_style="red"))
    else:
        console.print(Text("No errors found.", style="green"))
    if first is not None and root is not None:
        console.print(
            Text(f"First error in time: {_ts(first['timestamp'])} {first['module'] or ''} {_where(first)}: {first['message'][:160]}")
        )
    if s["error_codes"]:
        t = Table(title="Error codes", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        t.add_column("code", no_wrap=True)
        t.add_column("count", justify="right")
        t.add_column("first seen", no_wrap=True)
        t.add_column("meaning", overflow="fold", ratio=1)
        for r in s["error_codes"][:30]:
            t.add_row(r["code"], f"{r['count']:,}", _ts(r["first_timestamp"]), r["meaning"] or "")
        console.print(t)
    if s["findings"]:
        t = Table(title="Known failures (knowledge base)", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        t.add_column("failure", overflow="fold", ratio=2)
        t.add_column("role")
        t.add_column("count", justify="right")
        t.add_column("first seen", no_wrap=True)
        t.add_column("fix", overflow="fold", ratio=3)
        for f in s["findings"][:30]:
            t.add_row(f["title"], f["role"], f"{f['count']:,}", _ts(f["first_timestamp"]), f["fix"])
        console.print(t)
    if len(s["first_failure_by_rank"]) > 1:
        t = Table(title="First error per rank (earliest first)", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        for col in ("rank", "time", "where", "message"):
            t.add_column(col, overflow="fold")
        for r in s["first_failure_by_rank"][:16]:
            t.add_row(str(r["rank"]), _ts(r["timestamp"]), f"{r['file']}:{r['line']}", r["message"][:120])
        console.print(t)
    counts = []
    for key, label in (("by_module", "module"), ("by_device", "device_id")):
        if s[key]:
            counts.append(f"{label}: " + ", ".join(f"{r[label] if r[label] is not None else '?'} {r['count']}" for r in s[key][:12]))
    for line in counts:
        console.print(Text(f"errors by {line}", style="dim"))
    if s["timeline"]:
        t = Table(title="Timeline of errors", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        t.add_column("time", no_wrap=True)
        t.add_column("module")
        t.add_column("codes")
        t.add_column("message", overflow="fold", ratio=1)
        for r in s["timeline"][:20]:
            t.add_row(_ts(r["timestamp"]), r["module"] or "", ",".join(r["error_codes"]), r["message"][:200])
        console.print(t)
