"""Rich rendering of a profile diff: the totals of both sides, then the ops that changed most."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from npudiag.report.terminal import fmt_pct, fmt_us
from npudiag.report.text import Col, plain, table
from npudiag.units import shown_name

_COUNT_ROWS = {"kernels", "steps", "copies", "findings"}


def _value(name: str, v: float | None) -> str:
    if v is None:
        return "-"
    return _count(v) if name in _COUNT_ROWS else fmt_us(v)


def _count_change(r: dict[str, Any]) -> str:
    """A count's change as a signed difference (a percent of a handful of findings says little)."""
    return f"{'+' if r['delta'] > 0 else ''}{_count(r['delta'])}"


def _ratio(r: float | None) -> Text:
    if r is None:
        return Text("-")
    pct = (r - 1.0) * 100
    style = "red" if pct > 2 else "green" if pct < -2 else ""
    return Text(f"{pct:+.1f}%", style=style)


def _count(v: float) -> str:
    """Per-run counts: whole for one run, one decimal for a mean over repeated runs."""
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def _change(r: dict[str, Any]) -> str | Text:
    """The ratio (a count: the difference); "=" when nothing changed; "-" when one side does not have the total."""
    if (r["baseline"] is None) != (r["current"] is None):
        return "-"
    if not r["delta"]:
        return "="
    return _count_change(r) if r["metric"] in _COUNT_ROWS else _ratio(r["ratio"])


def render_compare_terminal(result: dict[str, Any], console: Console, top: int = 20) -> None:
    head = Text("npudiag compare", style="bold")
    head.append("  ")
    head.append_text(plain(f"{result['baseline']['path']}  ->  {result['current']['path']}", style="dim"))
    console.print(head)
    cols = [Col("", "fixed", 0), Col("baseline", priority=0), Col("current", priority=0), Col("change", priority=0)]
    rows = [
        [shown_name(r["metric"]), _value(r["metric"], r["baseline"]), _value(r["metric"], r["current"]), _change(r)]
        for r in result["totals"]["rows"]
    ]
    console.print(table(console, "Totals (per run)", cols, rows))
    ops = result["ops"]
    torch = ops["match_by"] in ("torch", "module")  # rows with host time
    module = ops["match_by"] == "module"
    what = "Modules (by path)" if module else "Framework ops" if torch else f"Operators by {ops['match_by']}"
    title = f"{what}, largest change first ({min(top, len(ops['rows']))} of {ops['total']})"
    # framework op names are long (aten::convolution_backward): they keep room before the host-self columns do
    cols = [
        Col("module" if module else "op", "name", 0, min_width=28 if torch else 16),
        Col("count", priority=3),
        Col("base", priority=1),
        Col("current", priority=1),
        Col("delta", priority=0),
        Col("change", priority=0),
        Col("avg base", priority=2),
        Col("avg cur", priority=2),
    ]
    if torch:
        host = "host" if module else "host self"
        cols += [Col(f"{host} base", priority=4), Col(f"{host} cur", priority=4)]
    shown = ops["rows"][:top]
    mfu = any(r.get("base_mfu_pct") is not None or r.get("cur_mfu_pct") is not None for r in shown)
    if mfu:  # the op groups' MFU where their FLOPs and the peak are known
        cols += [Col("MFU base", priority=3), Col("MFU cur", priority=3)]
    rows = []
    for r in shown:
        mark = {"added": " (new)", "removed": " (gone)"}.get(r["status"], "")
        count = (
            _count(r["base_count"])
            if r["base_count"] == r["cur_count"]
            else f"{_count(r['base_count'])}→{_count(r['cur_count'])}"
        )
        delta = r["delta_total_us"]
        row = [
            plain(r["key"] + mark),
            count,
            fmt_us(r["base_total_us"]),
            fmt_us(r["cur_total_us"]),
            Text(
                ("+" if delta > 0 else "") + fmt_us(delta), style="red" if delta > 0 else "green" if delta < 0 else ""
            ),
            _ratio(r["ratio"]),
            fmt_us(r["base_avg_us"]),
            fmt_us(r["cur_avg_us"]),
        ]
        if torch:
            row += [fmt_us(r["base_host_self_us"]), fmt_us(r["cur_host_self_us"])]
        if mfu:
            row += [fmt_pct(r.get("base_mfu_pct")), fmt_pct(r.get("cur_mfu_pct"))]
        rows.append(row)
    caption = (
        "base, current: device time of the kernels launched inside the module (its nested modules' included), per run; avg: per "
        "call; host: the module's host time"
        if module
        else "base, current: device time of the kernels each op launched, per run; avg: per call; host self: the op's own host time"
        if torch
        else "base, current: the op's total device time per run; avg: per call"
        + ("; MFU: % of the chip's peak" if mfu else "")
    )
    console.print(table(console, title, cols, rows, caption=caption))
    share = ops.get("matched_share") or {}
    if any(v is not None and v < 0.5 for v in share.values()):
        fmt = ", ".join(f"{k} {'-' if v is None else f'{100 * v:.0f}%'}" for k, v in share.items())
        console.print(Text(f"Matched on both sides: {fmt} of the device time (see the warning).", style="yellow"))
    if result.get("out"):
        console.print(plain(f"diff table: {result['out']}", style="dim"))
