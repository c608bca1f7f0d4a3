"""Rich rendering of the cluster view: ranks x step phases, shaded by distance from the median rank."""

from __future__ import annotations

import json
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from npudiag.report.terminal import fmt_us

PHASES = [
    ("computing_us", "computing"), ("communication_not_overlapped_us", "comm (not overl.)"), ("free_us", "free"), ("bubble_us", "bubble"),
    ("stage_us", "stage"),
]  # fmt: skip


def _cell(v: float | None, med: float | None) -> Text:
    if v is None:
        return Text("-")
    if not med:
        return Text(fmt_us(v))
    dev = (v - med) / med
    style = "bold red" if dev > 0.10 else "red" if dev > 0.05 else "green" if dev < -0.05 else ""
    return Text(f"{fmt_us(v)} {dev * 100:+.0f}%", style=style)


def render_cluster_terminal(s: dict[str, Any], console: Console, max_ranks: int = 64) -> None:
    console.print(Text(f"npudiag cluster  {s['ranks']} ranks, {s['steps']} steps", style="bold"))
    for step in s["per_step"]:
        rows = step["rows"]
        med = {k: step["median"].get(k) for k, _ in PHASES}
        t = Table(
            title=f"step {step['step']}: per rank (difference from the median rank)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        t.add_column("rank", justify="right")
        for _, label in PHASES:
            t.add_column(label, justify="right", no_wrap=True)
        for r in rows[:max_ranks]:
            t.add_row(str(r["rank"]), *[_cell(r[k], med[k]) for k, _ in PHASES])
        console.print(t)
    if s["slow_ranks"]:
        t = Table(title="Slow ranks", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        for col in ("step", "rank", "stage", "vs median", "cause", "slower ops"):
            t.add_column(col, overflow="fold")
        for r in s["slow_ranks"]:
            ops = ", ".join(f"{o['op']} +{fmt_us(o['delta_us'])}" for o in json.loads(r["slower_ops"] or "[]")[:3])
            t.add_row(
                str(r["step"]),
                str(r["rank"]),
                fmt_us(r["stage_us"]),
                f"+{r['excess_pct']:.1f}%",
                f"{r['cause']} +{fmt_us(r['cause_excess_us'])}",
                ops,
            )
        console.print(t)
    else:
        console.print(Text("No slow rank: every rank is within the threshold of the median (or within its noise).", style="green"))


def render_comm_terminal(s: dict[str, Any], console: Console) -> None:
    if s["links"]:
        t = Table(title="Communication by transport", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        for col in ("transport", "links", "bytes", "time", "GB/s", "slowest link GB/s"):
            t.add_column(col, justify="right" if col != "transport" else "left")
        for r in s["links"]:
            bw = "-" if r["bandwidth_gbps"] is None else f"{r['bandwidth_gbps']:.1f}"
            t.add_row(
                r["transport"] or "?",
                str(r["links"]),
                f"{(r['bytes'] or 0) / 1e6:,.1f} MB",
                fmt_us(r["time_us"]),
                bw,
                f"{r['min_link_bandwidth_gbps'] or 0:.1f}",
            )
        console.print(t)
    for r in s["slow_links"][:10]:
        link = f"slow link {r['src_rank']}->{r['dst_rank']} ({r['transport']}, {r['op_name']}): {r['bandwidth_gbps']:.1f} GB/s"
        console.print(Text(f"{link}, {r['ratio'] * 100:.0f}% of the median {r['median_bandwidth_gbps']:.1f} GB/s", style="red"))
    if s["wait_skew"]:
        t = Table(
            title="Collectives with the widest wait-time spread (others waited for the late rank)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        for col in ("step", "op", "ranks", "max wait", "min wait", "late rank"):
            t.add_column(col, overflow="fold")
        for r in s["wait_skew"][:10]:
            t.add_row(r["step"], r["op_name"], str(r["ranks"]), fmt_us(r["max_wait_us"]), fmt_us(r["min_wait_us"]), str(r["late_rank"]))
        console.print(t)
