"""One self-contained HTML page of the summary: tables plus inline SVG plots, no scripts, no fetches.

It draws from the same summary (:class:`npudiag.summary_model.Summary`) as the terminal and Markdown
renderers (plus the copies table for the copy timeline), so it opens offline, in a mail attachment or a CI
artifact viewer."""

from __future__ import annotations

import html
import math
from typing import Any

import pyarrow as pa

from npudiag.report.terminal import (
    MEMORY_HEADERS,
    copy_numbers,
    efficiency_numbers,
    fmt_pct,
    fmt_us,
    headline,
    held_rows,
    hot_op_numbers,
    memory_row,
)
from npudiag.summary_model import Summary

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child,td.l{text-align:left}.critical{color:#b00020;font-weight:bold}.warning{color:#a66a00}
.info{color:#0b6e99}.advice{color:#555;font-size:.92em}svg text{font-size:11px}
"""
_PHASES = [
    ("before_first_task_us", "before first task", "#4dd0e1"),
    ("computing_us", "computing", "#4caf50"),
    ("communication_not_overlapped_us", "communication not overlapped", "#ab47bc"),
    ("copy_not_overlapped_us", "copy not overlapped", "#ffb300"),
    ("free_us", "free", "#bdbdbd"),
    ("after_last_task_us", "after last task", "#e0e0e0"),
]


def _e(x: object) -> str:
    return html.escape("" if x is None else str(x))


def _table(headers: list[str], rows: list[list[str]], left: int = 1, text_cols: tuple[int, ...] = ()) -> str:
    """Cells are HTML already (escaped by the caller); the first ``left`` and ``text_cols`` align left."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="l">{c}</td>' if i < left or i in text_cols else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _hbars(items: list[tuple[str, float, str]], width: int = 700, bar_h: int = 16) -> str:
    """Horizontal bars: (label, value, text) each; scaled to the largest value."""
    if not items:
        return ""
    top = max(v for _, v, _ in items) or 1.0
    h = bar_h + 4
    parts = [f'<svg role="img" width="{width}" height="{h * len(items)}" xmlns="http://www.w3.org/2000/svg">']
    for i, (label, value, text) in enumerate(items):
        w = max(1, int((width - 400) * value / top))
        y = i * h
        parts.append(f'<text x="0" y="{y + bar_h - 3}">{_e(label[:40])}</text>')
        parts.append(f'<rect x="260" y="{y}" width="{w}" height="{bar_h}" fill="#42a5f5"/>')
        parts.append(f'<text x="{265 + w}" y="{y + bar_h - 3}">{_e(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _step_svg(rows: list[dict[str, Any]], width: int = 700, bar_h: int = 16) -> str:
    if not rows:
        return ""
    h = bar_h + 4
    parts = [f'<svg role="img" width="{width}" height="{h * len(rows) + 24}" xmlns="http://www.w3.org/2000/svg">']
    for i, r in enumerate(rows):
        total = r["step_time_us"] or 0.0
        x = 120.0
        y = i * h
        parts.append(
            f'<text x="0" y="{y + bar_h - 3}">rank {_e(r["rank"])} step '
            f"{_e('all' if r['step'] is None else r['step'])}</text>"
        )
        for key, name, color in _PHASES:
            w = (width - 130) * (r[key] or 0.0) / total if total else 0.0
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                f'fill="{color}"><title>{name}: {fmt_us(r[key])}</title></rect>'
            )
            x += w
    y = len(rows) * h + 14
    x = 0
    for _, name, color in _PHASES:
        parts.append(
            f'<rect x="{x}" y="{y - 10}" width="10" height="10" fill="{color}"/><text '
            f'x="{x + 14}" y="{y}">{name}</text>'
        )
        x += 20 + 7 * len(name)
    parts.append("</svg>")
    return "".join(parts)


def _copy_timeline(copies: pa.Table, width: int = 700, height: int = 60) -> str:
    if copies.num_rows == 0:
        return ""
    rows = copies.select(["side", "start_us", "duration_us"]).to_pylist()
    starts = [r["start_us"] for r in rows if r["start_us"] is not None]
    if not starts:
        return ""
    lo = min(starts)
    hi = max(r["start_us"] + (r["duration_us"] or 0.0) for r in rows if r["start_us"] is not None)
    span = (hi - lo) or 1.0
    parts = [f'<svg role="img" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
    parts.append('<text x="0" y="14">device</text><text x="0" y="44">host</text>')
    for r in rows[:20000]:  # enough to show the pattern; the Parquet file has all
        if r["start_us"] is None:
            continue
        x = 60 + (width - 70) * (r["start_us"] - lo) / span
        w = max(0.5, (width - 70) * (r["duration_us"] or 0.0) / span)
        y = 2 if r["side"] == "device" else 32
        parts.append(
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="18" '
            f'fill="{"#ef6c00" if r["side"] == "device" else "#6d4c41"}"/>'
        )
    parts.append(
        f'<text x="60" y="{height - 2}">0</text><text x="{width - 80}" y="{height - 2}">{_e(fmt_us(span))}</text></svg>'
    )
    return "".join(parts)


def _roofline(rows: list[dict[str, Any]], width: int = 700, height: int = 360) -> str:
    """Achieved TFLOPS against FLOPs per byte, one point per op type, both axes logarithmic, with the
    peak as the compute roof. The memory roof (the chip's bandwidth) is not in any profile, so it is
    not drawn: a point far below the roof at low intensity is bound by memory traffic."""
    pts = [r for r in rows if r.get("tflops") and r.get("flops_per_byte")]
    if not pts:
        return ""
    peak = max((r.get("peak_tflops") or 0.0) for r in pts)
    xs = [math.log10(r["flops_per_byte"]) for r in pts]
    ys = [math.log10(r["tflops"]) for r in pts] + ([math.log10(peak)] if peak else [])
    x0, x1 = math.floor(min(xs)) - 0.5, math.ceil(max(xs)) + 0.5
    y0, y1 = math.floor(min(ys)) - 0.5, math.ceil(max(ys)) + 0.5
    left, bottom, right, top = 60, height - 40, width - 20, 20

    def px(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * (right - left)

    def py(v: float) -> float:
        return bottom - (v - y0) / (y1 - y0) * (bottom - top)

    parts = [
        f'<svg role="img" aria-label="roofline" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#999"/>',
    ]
    for d in range(math.ceil(x0), math.floor(x1) + 1):
        parts.append(f'<text x="{px(d) - 10:.1f}" y="{bottom + 14}">1e{d}</text>')
    for d in range(math.ceil(y0), math.floor(y1) + 1):
        parts.append(f'<text x="{left - 40}" y="{py(d) + 4:.1f}">1e{d}</text>')
    parts.append(f'<text x="{(left + right) / 2 - 60:.0f}" y="{height - 6}">FLOPs per byte (log)</text>')
    parts.append(f'<text x="4" y="{top - 6}">TFLOPS (log)</text>')
    if peak:
        y = py(math.log10(peak))
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#c00" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{right - 150}" y="{y - 4:.1f}" fill="#c00">peak {peak:.1f} TFLOPS</text>')
    placed: list[tuple[float, float]] = []  # label positions so far: a label near another moves down a line
    for r, x in sorted(zip(pts, xs, strict=True), key=lambda p: -p[0]["tflops"]):
        cx, cy = px(x), py(math.log10(r["tflops"]))
        mfu = f", MFU {fmt_pct(r['mfu_pct'])}" if r.get("mfu_pct") is not None else ""
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="#0b6e99"><title>{_e(r["op_type"])}: '
            f"{r['tflops']:.1f} TFLOPS{_e(mfu)}</title></circle>"
        )
        ly = cy + 4
        while any(abs(ly - y) < 12 and abs(cx - x_) < 120 for x_, y in placed):
            ly += 12
        placed.append((cx, ly))
        parts.append(f'<text x="{cx + 7:.1f}" y="{ly:.1f}">{_e(r["op_type"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(summary: Summary, copies: pa.Table) -> str:
    """One self-contained page: the headline, then the findings, steps, hot operators, operator efficiency,
    copies (with ``copies``' timeline) and memory, each a section of its own."""
    prof = summary.profile
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>npudiag: {_e(summary.title)}</title>"]
    out.append(f"<style>{_CSS}</style></head><body>")
    out.append(f"<h1>npudiag analyze <small>{_e(summary.title)}</small></h1>")
    figures = " · ".join([f"ranks {prof.ranks}", *headline(prof)]).replace("\x00", " ")
    out.append(f"<p>{_e(figures)}</p>")
    for section in (_findings_html, _steps_html, _hot_ops_html, _efficiency_html):
        out += section(summary)
    out += _copies_html(summary, copies) + _memory_html(summary)
    out.append("</body></html>\n")
    return "".join(out)


def _findings_html(summary: Summary) -> list[str]:
    findings = summary.findings
    rows = [
        [
            f'<span class="{_e(f["severity"])}">{_e(f["severity"])}</span>',
            _e(f["rule_id"]),
            _e("all" if f["rank"] is None else f["rank"]),
            _e(fmt_us(f["time_lost_us"])),
            f'{_e(f["title"])}<div class="advice">{_e(f["advice"])}</div>',
        ]
        for f in findings
    ]
    out = [f"<h2>Findings ({len(findings)})</h2>"]
    out.append(_table(["severity", "rule", "rank", "time lost", "finding"], rows, left=2, text_cols=(4,)))
    return out + [f"<p class='advice'>SKIPPED {_e(rule)}: {_e(why)}</p>" for rule, why in summary.rules_skipped.items()]


def _steps_html(summary: Summary) -> list[str]:
    return ["<h2>Step breakdown</h2>" + _step_svg(summary.step_breakdown)] if summary.step_breakdown else []


def _hot_ops_html(summary: Summary) -> list[str]:
    hot = summary.hot_ops
    bars = [(r["key"], r["total_us"], f"{fmt_us(r['total_us'])} · {fmt_pct(r['share_pct'])}") for r in hot.top]
    rows = [[_e(r["key"]), _e(r["task_types"]), *hot_op_numbers(r)] for r in hot.top]
    headers = ["op", "task type", "count", "total", "avg", "min", "max", "share"]
    return [f"<h2>Hot operators by {_e(hot.by)}</h2>", _hbars(bars), _table(headers, rows, left=2)]


def _efficiency_html(summary: Summary) -> list[str]:
    eff = [r for r in summary.op_efficiency if r.get("tflops") is not None]
    if not eff:
        return []
    rows = [
        [
            _e(r["op_type"]),
            *(_e(c) for c in efficiency_numbers(r)),
            f"{r['flops_per_byte']:.1f}" if r.get("flops_per_byte") else "-",
            _e(r.get("bound") or "-"),
        ]
        for r in eff
    ]
    headers = ["op type", "count", "total", "TFLOPS", "MFU", "FLOPs / byte", "bound"]
    return ["<h2>Operator efficiency (FLOPs from shapes)</h2>", _table(headers, rows, left=1), _roofline(eff)]


def _copies_html(summary: Summary, copies: pa.Table) -> list[str]:
    cp = summary.copies
    host = f", {cp.host_calls:,} host calls" if cp.host_calls else ""
    rows = [[_e(r["side"]), _e(r["direction"]), _e(r["mode"]), *copy_numbers(r)] for r in cp.by_direction]
    headers = ["side", "direction", "mode", "count", "bytes", "time", "share of side"]
    return [
        f"<h2>Memory copies ({cp.count:,} on the device{host})</h2>",
        _table(headers, rows, left=3),
        _copy_timeline(copies),
    ]


def _memory_html(summary: Summary) -> list[str]:
    ranks = summary.memory.ranks
    if not ranks:
        return []
    out = ["<h2>Device memory at the allocation peak</h2>"]
    out.append(_table(MEMORY_HEADERS, [[_e(c) for c in memory_row(m)] for m in ranks], left=2, text_cols=(6,)))
    for m in ranks[:8]:
        if m.get("held_at_peak"):
            out.append(f"<p>Held at the peak of rank {_e(m['rank'])}</p>")
            out.append(_table(["op", "blocks", "bytes", "share"], [[_e(c) for c in r] for r in held_rows(m)]))
    return out
