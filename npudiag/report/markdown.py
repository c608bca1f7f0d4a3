"""An analysis summary as GitHub-flavoured Markdown (a CI job summary, a pull-request comment).

The same figures as the terminal view, from the same cell helpers (:mod:`npudiag.report.terminal`), as
Markdown tables with the numbers right-aligned; every text from the inputs (op names, titles, advice)
goes through :func:`~npudiag.report.escape.md_text`, so a name cannot end a cell, start markup or
inject HTML. Nothing is cut: a table has every row the summary holds.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from npudiag.report.escape import md_text
from npudiag.report.terminal import (
    MEMORY_HEADERS,
    copy_numbers,
    efficiency_numbers,
    fmt_us,
    headline,
    held_rows,
    hot_op_numbers,
    idle_cause_items,
    memory_row,
    rank_numbers,
    step_cells,
)
from npudiag.summary_model import Summary


def md_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int | Collection[int] = 0
) -> list[str]:
    """A Markdown table: text columns left-aligned (the first ``text_columns``, or those at the indexes given),
    numbers right-aligned. Cells are already Markdown (escaped by the caller where they come from inputs)."""
    text = range(text_columns) if isinstance(text_columns, int) else text_columns
    align = ["---" if i in text else "---:" for i in range(len(headers))]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def render_markdown(summary: Summary, command: str = "analyze") -> str:
    """The summary of one analysis (``analyze`` or ``report``) as one Markdown document."""
    prof = summary.profile
    title = f" — {md_text(summary.title)}" if summary.title else ""
    lines = [f"## npudiag {command}{title}", ""]
    figures = [f"ranks {prof.ranks}", *headline(prof)]
    lines += [" · ".join(md_text(f.replace("\x00", " ")) for f in figures), ""]
    lines += _ranks(summary) + _hot_ops(summary) + _efficiency(summary) + _copies(summary) + _memory(summary)
    lines += _steps(summary) + _idle(summary) + _findings(summary)
    lines += [f"> **Could not read:** {md_text(e)}" for e in summary.errors]
    lines += [f"> **Warning:** {md_text(w)}" for w in summary.warnings]
    return md_document(lines)


def md_document(lines: list[str]) -> str:
    """The lines as one document: no trailing blank line, one final newline."""
    return "\n".join(lines).rstrip("\n") + "\n"


def section(title: str, body: list[str]) -> list[str]:
    """A ``###`` section around ``body`` (a table, lines); nothing when ``body`` is empty."""
    return [f"### {title}", "", *body, ""] if body else []


def _ranks(summary: Summary) -> list[str]:
    ranks = summary.per_rank
    if len(ranks) < 2:
        return []
    rows = [[str(r["rank"]), *rank_numbers(r)] for r in ranks]
    headers = ["rank", "kernels", "span", "busy", "busy %", "kernel time", "time lost"]
    return section("Ranks (each rank's own span and busy time)", md_table(headers, rows))


def _hot_ops(summary: Summary) -> list[str]:
    hot = summary.hot_ops
    if not hot.top:
        return ["No device kernels found.", ""]
    title = f"Hot operators by {hot.by} (top {len(hot.top)} of {hot.total_groups}; share of kernel time)"
    rows = [
        [md_text(r["key"]), md_text(" ".join(t for t in (r["task_types"] or "").split(";") if t)), *hot_op_numbers(r)]
        for r in hot.top
    ]
    headers = ["op " + hot.by, "task type", "count", "total", "avg", "min", "max", "share"]
    return section(title, md_table(headers, rows, text_columns=2))


def _efficiency(summary: Summary) -> list[str]:
    found = [r for r in summary.op_efficiency if r.get("tflops") is not None]
    if not found:
        return []
    rows = [[md_text(r["op_type"]), *efficiency_numbers(r), md_text(r.get("bound") or "-")] for r in found]
    body = md_table(["op type", "count", "total", "TFLOPS", "MFU", "bound"], rows, text_columns=1)
    if all(r.get("mfu_pct") is None for r in found):
        body += ["", "MFU needs the peak: `--peak-tflops`."]
    return section("Operator efficiency (FLOPs from shapes)", body)


def _copies(summary: Summary) -> list[str]:
    cp = summary.copies
    if not cp.by_direction:
        return ["No memory copies in this profile.", ""]
    host = f", {cp.host_calls:,} host calls" if cp.host_calls else ""
    rows = [
        [md_text(r["side"]), md_text(r["direction"]), md_text(r["mode"]), *copy_numbers(r)] for r in cp.by_direction
    ]
    headers = ["side", "direction", "mode", "count", "bytes", "time", "share of side"]
    return section(f"Memory copies ({cp.count:,} on the device{host})", md_table(headers, rows, text_columns=3))


def _memory(summary: Summary) -> list[str]:
    ranks = summary.memory.ranks
    if not ranks:
        return []
    rows = [[md_text(c) for c in memory_row(m)] for m in ranks]
    out = section("Device memory at the allocation peak", md_table(MEMORY_HEADERS, rows, text_columns=2))
    if len(ranks) == 1 and ranks[0].get("held_at_peak"):
        held = [[md_text(c) for c in row] for row in held_rows(ranks[0])]
        out += section("Held at the memory peak", md_table(["held by op", "blocks", "bytes", "share"], held, 1))
    return out


def _steps(summary: Summary) -> list[str]:
    steps = summary.step_breakdown
    if not steps:
        return []
    rows = [step_cells(r) for r in steps]
    headers = ["rank", "step", "step time", "before", "compute", "comm", "copy", "free", "after"]
    return section("Step breakdown", md_table(headers, rows))


def _idle(summary: Summary) -> list[str]:
    idle = summary.idle_causes
    if not idle.idle_us:
        return []
    return section(
        f"Device idle in steps {fmt_us(idle.idle_us)}, by cause",
        [f"- {md_text(item)}" for item in idle_cause_items(idle)],
    )


def _findings(summary: Summary) -> list[str]:
    findings = summary.findings
    body = []
    for f in findings:
        rank = "all ranks" if f["rank"] is None else f"rank {f['rank']}"
        lost = f", {fmt_us(f['time_lost_us'])} lost" if f.get("time_lost_us") else ""
        body.append(f"- **{md_text(f['severity'])}** {md_text(f['rule_id'])} ({rank}{lost}): {md_text(f['title'])}")
        body.append(f"  {md_text(f['advice'])}")
    body += [f"- skipped {md_text(rule)}: {md_text(why)}" for rule, why in summary.rules_skipped.items()]
    if not findings:
        body = ["No findings.", *body]
    return section(f"Findings ({len(findings)}), most time lost first", body)
