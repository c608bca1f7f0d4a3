"""Rich rendering of a profile diff: the totals of both sides, then the ops that changed most."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from npudiag.report.escape import md_text
from npudiag.report.markdown import md_document, md_table
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
    return Text(ratio_text(r), style=_ratio_style(r))


def ratio_text(r: float | None) -> str:
    """A ratio as a signed percent change (1.05 -> +5.0%), "-" where there is none."""
    return "-" if r is None else f"{(r - 1.0) * 100:+.1f}%"


def _ratio_style(r: float | None) -> str:
    pct = 0.0 if r is None else (r - 1.0) * 100
    return "red" if pct > 2 else "green" if pct < -2 else ""


def _count(v: float) -> str:
    """Per-run counts: whole for one run, one decimal for a mean over repeated runs."""
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def change_text(r: dict[str, Any]) -> str:
    """A total's change: the ratio (a count: the difference); "=" when nothing changed; "-" when one side does
    not have the total."""
    if (r["baseline"] is None) != (r["current"] is None):
        return "-"
    if not r["delta"]:
        return "="
    return _count_change(r) if r["metric"] in _COUNT_ROWS else ratio_text(r["ratio"])


def _change(r: dict[str, Any]) -> str | Text:
    text = change_text(r)
    return Text(text, style=_ratio_style(r["ratio"])) if text.endswith("%") else text


def total_cells(r: dict[str, Any]) -> list[str]:
    """A totals row: the metric, baseline, current and change."""
    return [
        shown_name(r["metric"]),
        _value(r["metric"], r["baseline"]),
        _value(r["metric"], r["current"]),
        change_text(r),
    ]


def ops_shape(ops: dict[str, Any], top: int) -> tuple[bool, bool, str]:
    """Whether the rows are framework ops with host time (torch), whether they are modules, and the table's title."""
    torch = ops["match_by"] in ("torch", "module")
    module = ops["match_by"] == "module"
    what = "Modules (by path)" if module else "Framework ops" if torch else f"Operators by {ops['match_by']}"
    return torch, module, f"{what}, largest change first ({min(top, len(ops['rows']))} of {ops['total']})"


def has_mfu(rows: list[dict[str, Any]]) -> bool:
    return any(r.get("base_mfu_pct") is not None or r.get("cur_mfu_pct") is not None for r in rows)


def op_cells(r: dict[str, Any], torch: bool, mfu: bool) -> list[str]:
    """An op row after its name: count (base→current where it changed), base, current, delta, change, the
    averages, then host time (framework ops) and MFU where shown."""
    count = (
        _count(r["base_count"])
        if r["base_count"] == r["cur_count"]
        else f"{_count(r['base_count'])}→{_count(r['cur_count'])}"
    )
    delta = r["delta_total_us"]
    cells = [
        count,
        fmt_us(r["base_total_us"]),
        fmt_us(r["cur_total_us"]),
        ("+" if delta > 0 else "") + fmt_us(delta),
        ratio_text(r["ratio"]),
        fmt_us(r["base_avg_us"]),
        fmt_us(r["cur_avg_us"]),
    ]
    if torch:
        cells += [fmt_us(r["base_host_self_us"]), fmt_us(r["cur_host_self_us"])]
    if mfu:
        cells += [fmt_pct(r.get("base_mfu_pct")), fmt_pct(r.get("cur_mfu_pct"))]
    return cells


def op_label(r: dict[str, Any]) -> str:
    return r["key"] + {"added": " (new)", "removed": " (gone)"}.get(r["status"], "")


def ops_caption(torch: bool, module: bool, mfu: bool) -> str:
    if module:
        return (
            "base, current: device time of the kernels launched inside the module (its nested modules' included), "
            "per run; avg: per call; host: the module's host time"
        )
    if torch:
        return (
            "base, current: device time of the kernels each op launched, per run; avg: per "
            "call; host self: the op's own host time"
        )
    return "base, current: the op's total device time per run; avg: per call" + (
        "; MFU: % of the chip's peak" if mfu else ""
    )


def matched_note(ops: dict[str, Any]) -> str | None:
    """The shares matched on both sides, when one is under half (the warning says more)."""
    share = ops.get("matched_share") or {}
    if not any(v is not None and v < 0.5 for v in share.values()):
        return None
    fmt = ", ".join(f"{k} {'-' if v is None else f'{100 * v:.0f}%'}" for k, v in share.items())
    return f"Matched on both sides: {fmt} of the device time (see the warning)."


def render_compare_terminal(result: dict[str, Any], console: Console, top: int = 20) -> None:
    head = Text("npudiag compare", style="bold")
    head.append("  ")
    head.append_text(plain(f"{result['baseline']['path']}  ->  {result['current']['path']}", style="dim"))
    console.print(head)
    cols = [Col("", "fixed", 0), Col("baseline", priority=0), Col("current", priority=0), Col("change", priority=0)]
    rows = [[*total_cells(r)[:3], _change(r)] for r in result["totals"]["rows"]]
    console.print(table(console, "Totals (per run)", cols, rows))
    ops = result["ops"]
    torch, module, title = ops_shape(ops, top)
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
    mfu = has_mfu(shown)
    if mfu:  # the op groups' MFU where their FLOPs and the peak are known
        cols += [Col("MFU base", priority=3), Col("MFU cur", priority=3)]
    rows = []
    for r in shown:
        cells: list[Any] = op_cells(r, torch, mfu)
        delta = r["delta_total_us"]
        cells[3] = Text(cells[3], style="red" if delta > 0 else "green" if delta < 0 else "")
        cells[4] = _ratio(r["ratio"])
        rows.append([plain(op_label(r)), *cells])
    console.print(table(console, title, cols, rows, caption=ops_caption(torch, module, mfu)))
    note = matched_note(ops)
    if note is not None:
        console.print(Text(note, style="yellow"))
    if result.get("out"):
        console.print(plain(f"diff table: {result['out']}", style="dim"))


def compare_markdown(result: dict[str, Any], top: int = 20) -> str:
    """The comparison as GitHub-flavoured Markdown (a CI job summary): the same totals and op rows as the
    terminal, every name from the inputs escaped in its cell."""
    base, cur = md_text(result["baseline"]["path"]), md_text(result["current"]["path"])
    lines = ["## npudiag compare", "", f"Baseline {base} vs current {cur}.", "", "### Totals (per run)", ""]
    # names from the inputs are escaped; the numbers are npudiag's own text
    totals = [[md_text(c) if i == 0 else c for i, c in enumerate(total_cells(r))] for r in result["totals"]["rows"]]
    lines += md_table(["", "Baseline", "Current", "Change"], totals, text_columns=1) + [""]
    ops = result["ops"]
    torch, module, title = ops_shape(ops, top)
    shown = ops["rows"][:top]
    mfu = has_mfu(shown)
    headers = ["Module" if module else "Op", "Count", "Base", "Current", "Delta", "Change", "Avg base", "Avg cur"]
    if torch:
        host = "Host" if module else "Host self"
        headers += [f"{host} base", f"{host} cur"]
    if mfu:
        headers += ["MFU base", "MFU cur"]
    rows = [[md_text(op_label(r)), *op_cells(r, torch, mfu)] for r in shown]
    lines += [f"### {md_text(title)}", ""] + md_table(headers, rows, text_columns=1)
    lines += ["", f"_{md_text(ops_caption(torch, module, mfu))}_"]
    note = matched_note(ops)
    if note is not None:
        lines += ["", f"> **Note:** {md_text(note)}"]
    warnings = [f"> **Warning:** {md_text(w)}" for w in result.get("warnings", [])]
    lines += ["", *warnings] if warnings else []
    return md_document(lines)
