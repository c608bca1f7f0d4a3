"""Rich rendering of a profile diff: the totals of both sides, then the ops that changed most."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from npudiag.report.terminal import fmt_us

_COUNT_ROWS = {"kernels", "steps", "copies", "findings"}


def _value(name: str, v: float | None) -> str:
    if v is None:
        return "-"
    return _count(v) if name in _COUNT_ROWS else fmt_us(v)


def _ratio(r: float | None) -> Text:
    if r is None:
        return Text("-")
    pct = (r - 1.0) * 100
    style = "red" if pct > 2 else "green" if pct < -2 else ""
    return Text(f"{pct:+.1f}%", style=style)


def _count(v: float) -> str:
    """Per-run counts: whole for one run, one decimal for a mean over repeated runs."""
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def render_compare_terminal(result: dict[str, Any], console: Console, top: int = 20) -> None:
    head = Text("npudiag compare", style="bold")
    head.append(f"  {result['baseline']['path']}  ->  {result['current']['path']}", style="dim")
    console.print(head)
    t = Table(title="Totals (per run)", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("", "baseline", "current", "change"):
        t.add_column(col, justify="left" if not col else "right")
    for r in result["totals"]["rows"]:
        delta = r["delta"]
        t.add_row(r["metric"], _value(r["metric"], r["baseline"]), _value(r["metric"], r["current"]), _ratio(r["ratio"]) if delta else "=")
    console.print(t)
    ops = result["ops"]
    d = Table(
        title=f"Operators by {ops['match_by']}, largest change first ({min(top, len(ops['rows']))} of {ops['total']})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    d.add_column("op", overflow="fold", ratio=1, min_width=16)
    wide = console.width >= 110  # the averages only when they fit
    for col in ("count", "total base", "total cur", "delta", "change") + (("avg base", "avg cur") if wide else ()):
        d.add_column(col, justify="right", no_wrap=True)
    for r in ops["rows"][:top]:
        mark = {"added": Text(" (new)", style="red"), "removed": Text(" (gone)", style="green")}.get(r["status"], Text(""))
        count = _count(r["base_count"]) if r["base_count"] == r["cur_count"] else f"{_count(r['base_count'])}→{_count(r['cur_count'])}"
        delta = r["delta_total_us"]
        d.add_row(
            Text(r["key"]) + mark,
            count,
            fmt_us(r["base_total_us"]),
            fmt_us(r["cur_total_us"]),
            Text(("+" if delta > 0 else "") + fmt_us(delta), style="red" if delta > 0 else "green" if delta < 0 else ""),
            _ratio(r["ratio"]),
            *((fmt_us(r["base_avg_us"]), fmt_us(r["cur_avg_us"])) if wide else ()),
        )
    console.print(d)
    if result.get("out"):
        console.print(Text(f"diff table: {result['out']}", style="dim"))
