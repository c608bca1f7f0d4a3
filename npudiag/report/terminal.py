"""Rich terminal rendering of the summary: profile span and busy share, hot ops, copies."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


def fmt_us(us: float | None) -> str:
    if us is None:
        return "-"
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.2f}ms"
    return f"{us:.2f}µs"


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def fmt_pct(p: float | None) -> str:
    return "-" if p is None else f"{p:.1f}%"


def hot_op_numbers(r: dict[str, Any]) -> list[str]:
    """count, total, avg, min, max, share of a hot-op row, as every renderer shows them."""
    return [
        f"{r['count']:,}",
        fmt_us(r["total_us"]),
        fmt_us(r["avg_us"]),
        fmt_us(r["min_us"]),
        fmt_us(r["max_us"]),
        fmt_pct(r["share_pct"]),
    ]


def copy_numbers(r: dict[str, Any]) -> list[str]:
    """count, bytes, time, share of a copies-by-direction row."""
    return [f"{r['count']:,}", fmt_bytes(r["bytes"]), fmt_us(r["time_us"]), fmt_pct(r["share_pct"])]


def render_terminal(summary: dict[str, Any], console: Console) -> None:
    prof = summary["profile"]
    head = Text()
    head.append("npudiag analyze", style="bold")
    if summary.get("title"):
        head.append(f"  {summary['title']}", style="dim")
    console.print(head)
    console.print(
        f"ranks {prof['ranks']}  ·  kernels {prof['kernels']:,}  ·  span {fmt_us(prof['span_us'])}  ·  "
        f"device busy {fmt_us(prof['device_busy_us'])} ({fmt_pct(prof['device_busy_pct'])})  ·  "
        f"kernel time {fmt_us(prof['kernel_time_us'])}  ·  steps {prof['steps']}"
    )
    if len(summary.get("per_rank", [])) > 1:
        t = Table(title="Ranks", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
        for c in ("rank", "kernels", "span", "busy", "busy %", "kernel time"):
            t.add_column(c, justify="right", no_wrap=True)
        for r in summary["per_rank"]:
            t.add_row(
                str(r["rank"]),
                f"{r['kernels']:,}",
                fmt_us(r["span_us"]),
                fmt_us(r["busy_us"]),
                fmt_pct(r["busy_pct"]),
                fmt_us(r["kernel_time_us"]),
            )
        console.print(t)

    hot = summary["hot_ops"]
    if hot["top"]:
        title = f"Hot operators by {hot['by']} (top {len(hot['top'])} of {hot['total_groups']})"
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
        t.add_column("op " + hot["by"], overflow="fold", ratio=1, min_width=12)
        t.add_column("task type", overflow="fold", max_width=14)
        for c in ("count", "total", "avg", "min", "max", "share"):
            t.add_column(c, justify="right", no_wrap=True)
        for r in hot["top"]:
            t.add_row(r["key"], r["task_types"], *hot_op_numbers(r))
        console.print(t)
    else:
        console.print("[yellow]No device kernels found.[/]")

    cp = summary["copies"]
    if cp["by_direction"]:
        t = Table(title=f"Memory copies ({cp['count']:,})", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
        for c in ("side", "direction", "mode", "count", "bytes", "time", "share of side"):
            t.add_column(c, justify="right" if c in ("count", "bytes", "time", "share of side") else "left")
        for r in cp["by_direction"]:
            t.add_row(r["side"], r["direction"], r["mode"], *copy_numbers(r))
        console.print(t)
        _copy_stalls(summary, console)
    else:
        console.print("No memory copies in this profile.")

    _step_bars(summary, console)
    _findings(summary, console)

    errors = summary.get("errors", [])
    if errors:
        console.print(f"[red]{len(errors)} input file(s) could not be read[/] (listed on stderr and in manifest.json)")
    warnings = summary.get("warnings", [])
    if warnings:
        console.print(f"[yellow]{len(warnings)} warning(s)[/] (listed in manifest.json)")
    if summary.get("out"):
        console.print(f"tables written to [bold]{summary['out']}[/]", highlight=False)


_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _findings(summary: dict[str, Any], console: Console) -> None:
    findings = summary.get("findings", [])
    if findings:
        t = Table(
            title=f"Findings ({len(findings)}), most time lost first",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            padding=(0, 1, 0, 0),
        )
        t.add_column("severity", no_wrap=True)
        t.add_column("rule", no_wrap=True)
        t.add_column("rank", justify="right", no_wrap=True)
        t.add_column("time lost", justify="right", no_wrap=True)
        t.add_column("finding and advice", ratio=1, overflow="fold")
        for f in findings:
            text = Text(f["title"], style="bold")
            text.append("\n" + f["advice"], style="dim")
            rank = "all" if f["rank"] is None else str(f["rank"])
            t.add_row(
                Text(f["severity"], style=_SEVERITY_STYLE.get(f["severity"], "")), f["rule_id"], rank, fmt_us(f["time_lost_us"]), text
            )
        console.print(t)
    else:
        console.print("No findings.")
    for rule, why in summary.get("rules_skipped", {}).items():
        console.print(f"[dim]SKIPPED {rule}: {why}[/]", highlight=False)


_PHASES = [
    ("computing_us", "C", "green"),
    ("communication_not_overlapped_us", "M", "magenta"),
    ("copy_not_overlapped_us", "Y", "yellow"),
    ("free_us", ".", "grey50"),
]


def _step_bars(summary: dict[str, Any], console: Console) -> None:
    rows = summary.get("step_breakdown", [])
    if not rows:
        return
    width = max(10, min(40, console.width - 62))
    t = Table(
        title="Step breakdown  [green]C[/] computing  [magenta]M[/] communication not overlapped  [yellow]Y[/] copy not overlapped  . free",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    for c in ("rank", "step", "step time"):
        t.add_column(c, justify="right", no_wrap=True)
    t.add_column("breakdown", no_wrap=True)
    for c in ("compute", "comm", "copy", "free"):
        t.add_column(c, justify="right", no_wrap=True)
    for r in rows:
        total = r["step_time_us"] or 0.0
        bar = Text()
        for key, ch, style in _PHASES:
            n = round(width * (r[key] or 0.0) / total) if total else 0
            bar.append(ch * n, style=style)
        t.add_row(
            "-" if r["rank"] is None else str(r["rank"]),
            "all" if r["step"] is None else str(r["step"]),
            fmt_us(total),
            bar,
            fmt_us(r["computing_us"]),
            fmt_us(r["communication_not_overlapped_us"]),
            fmt_us(r["copy_not_overlapped_us"]),
            fmt_us(r["free_us"]),
        )
    console.print(t)


_STALL_RULES = {
    "sync_copy": "host blocked in synchronous copies",
    "unoverlapped_copy": "copy time with no compute beside it",
    "small_copies": "saving if small copies were merged",
}


def _copy_stalls(summary: dict[str, Any], console: Console) -> None:
    lines = []
    for rule, label in _STALL_RULES.items():
        hits = [f for f in summary.get("findings", []) if f["rule_id"] == rule]
        if hits:
            lost = sum(f["time_lost_us"] or 0.0 for f in hits)
            count = sum(f["count"] for f in hits)
            lines.append(f"{fmt_us(lost):>10}  {label} ({count:,} copies)")
        elif rule in summary.get("rules_skipped", {}):
            lines.append(f"{'skipped':>10}  {label}: {summary['rules_skipped'][rule]}")
    if lines:
        console.print(Panel("\n".join(lines), title="Copy stalls", title_align="left", expand=False))
