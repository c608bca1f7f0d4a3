"""Rich terminal rendering of the summary: profile span and busy share, hot ops, copies."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from npudiag.report.text import Col, count, pack_lines, plain, table
from npudiag.summary_model import IdleCauses, ProfileTotals, Summary
from npudiag.units import format_bytes


def fmt_us(us: float | None) -> str:
    if us is None:
        return "-"
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.2f}ms"
    return f"{us:.2f}µs"


fmt_bytes = format_bytes


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


def rank_numbers(r: dict[str, Any]) -> list[str]:
    """kernels, span, busy, busy %, kernel time, time lost of a per-rank row, as every renderer shows them."""
    return [
        f"{r['kernels']:,}",
        fmt_us(r["span_us"]),
        fmt_us(r["busy_us"]),
        fmt_pct(r["busy_pct"]),
        fmt_us(r["kernel_time_us"]),
        fmt_us(r.get("time_lost_us")),
    ]


def efficiency_numbers(r: dict[str, Any]) -> list[str]:
    """count, total, TFLOPS, MFU of an op-efficiency row, as every renderer shows them."""
    return [f"{r['kernels']:,}", fmt_us(r["total_us"]), f"{r['tflops']:.1f}", fmt_pct(r.get("mfu_pct"))]


def step_cells(r: dict[str, Any]) -> list[str]:
    """rank, step, step time and the time of each phase (STEP_PHASES) of a step-breakdown row."""
    return [
        "-" if r["rank"] is None else str(r["rank"]),
        "all" if r["step"] is None else str(r["step"]),
        fmt_us(r["step_time_us"] or 0.0),
        *(fmt_us(r.get(key)) for key, _, _ in STEP_PHASES),
    ]


def copy_numbers(r: dict[str, Any]) -> list[str]:
    """count, bytes, time, share of a copies-by-direction row."""
    return [f"{r['count']:,}", fmt_bytes(r["bytes"]), fmt_us(r["time_us"]), fmt_pct(r["share_pct"])]


_BUSY_LABELS = {
    "computing_us": "compute",
    "communication_not_overlapped_us": "comm not overlapped",
    "copy_not_overlapped_us": "copies",
}


# CANN's task types, short, where the terminal is narrower than WIDE columns: a legend under the table names them
WIDE = 100
TASK_TYPE_SHORT = {
    "AI_CORE": "AIC",
    "AI_VECTOR_CORE": "AIV",
    "AI_CPU": "AICPU",
    "COMMUNICATION": "COMM",
    "KERNEL_AICORE": "K_AIC",
    "KERNEL_AIVEC": "K_AIV",
    "KERNEL_AICPU": "K_AICPU",
    "KERNEL_MIX_AIC": "K_MIX_AIC",
    "KERNEL_MIX_AIV": "K_MIX_AIV",
    "HCCL_AI_CPU": "HCCL_AICPU",
    "WRITE_BACK": "WB",
    "INVALID": "INV",
}


def headline(prof: ProfileTotals) -> list[str]:
    """The profile's headline figures, each labelled with what it is. One rank: its span and device
    busy time, split into what kept the device busy (largest first, so a copy-bound run reads as
    one). Several ranks: the wall time, then per-rank means (busy never above 100 % of a span)."""
    n = prof.ranks_with_device_tasks or 1
    busy_parts = prof.busy_parts
    parts = sorted(((busy_parts[k], label) for k, label in _BUSY_LABELS.items() if busy_parts[k]), key=lambda x: -x[0])
    steps = f"steps {prof.steps}"
    if prof.steps_recorded is not None and prof.steps_recorded > prof.steps:
        steps += f" ({prof.steps_recorded} recorded)"
    out = [f"kernels {prof.kernels:,}", steps]
    if n == 1:
        out.append(f"span {fmt_us(prof.span_us)}")
    else:
        out += [
            f"wall time {fmt_us(prof.span_us)}",
            f"per rank (mean of {n}): span {fmt_us(prof.rank_span_sum_us / n)}",
        ]
    busy = f"device busy {fmt_us(prof.device_busy_us / n)} ({fmt_pct(prof.device_busy_pct)} of span)"
    out.append(
        busy + ("".join(f"\x00{'=' if i == 0 else '+'} {label} {fmt_us(v / n)}" for i, (v, label) in enumerate(parts)))
    )
    out.append(f"kernel time {fmt_us(prof.kernel_time_us / n)}")
    if prof.time_lost_us:
        out.append(f"time lost {fmt_us(prof.time_lost_us / n)}")
    return out


def figure_lines(items: list[str], width: int, sep: str = "  ·  ") -> list[str]:
    """``items`` joined by ``sep``, a new line where the next would not fit, so a label stays with
    its number; an item's NUL-separated pieces are joined by a space and may go on the next line."""
    return pack_lines(
        ((sep if k == 0 else " ", piece) for item in items for k, piece in enumerate(item.split("\x00"))), width
    )


def render_terminal(summary: Summary, console: Console, command: str = "analyze") -> None:
    """The analysis on a terminal: the headline, then one block each (ranks, hot ops, efficiency, copies,
    memory, steps, idle causes, ranges, findings), then what went wrong and where the tables are."""
    _head(summary, console, command)
    for block in (_ranks, _hot_ops, _efficiency, _copies, _memory, _step_bars, _idle_causes, _ranges, _findings):
        block(summary, console)
    _tail(summary, console)


def _head(summary: Summary, console: Console, command: str) -> None:
    prof = summary.profile
    head = Text(f"npudiag {command}", style="bold")
    if summary.title:
        head.append("  ")
        head.append_text(plain(summary.title, style="dim"))
    console.print(head)
    ranks = f"ranks {prof.ranks}"
    if prof.ranks_with_kernels is not None and prof.ranks_with_kernels != prof.ranks:
        ranks += f" ({prof.ranks_with_kernels} with kernels)"
    for line in figure_lines([ranks, *headline(prof)], console.width):
        console.print(Text(line))
    partial = prof.ranks_without_kernels
    if partial:
        shown = "; ".join(f"rank {r}: {', '.join(names)}" for r, names in list(partial.items())[:6])
        more = f" (+{len(partial) - 6} more)" if len(partial) > 6 else ""
        console.print(plain(f"ranks without kernels, and the data they have: {shown}{more}", style="dim"))


def _ranks(summary: Summary, console: Console) -> None:
    if len(summary.per_rank) <= 1:
        return
    cols = [
        Col("rank", priority=0),
        Col("kernels", priority=2),
        Col("span", priority=0),
        Col("busy", priority=3),
        Col("busy %", priority=0),
        Col("kernel time", priority=4),
        Col("time lost", priority=1),
    ]
    rows = [[str(r["rank"]), *rank_numbers(r)] for r in summary.per_rank]
    console.print(table(console, "Ranks (each rank's own span and busy time)", cols, rows))


def _hot_ops(summary: Summary, console: Console) -> None:
    hot = summary.hot_ops
    if not hot.top:
        console.print(Text("No device kernels found.", style="yellow"))
        return
    title = f"Hot operators by {hot.by} (top {len(hot.top)} of {hot.total_groups}; share of kernel time)"
    short = console.width < WIDE  # task types abbreviated, with a legend of the ones shown
    cols = [
        Col("op " + hot.by, "name", 0, min_width=16),
        Col("task type", "name", 5, min_width=9, max_width=16 if short else 30),
        Col("count", priority=2),
        Col("total", priority=0),
        Col("avg", priority=3),
        Col("min", priority=6),
        Col("max", priority=4),
        Col("share", priority=0),
    ]
    types = [[t for t in (r["task_types"] or "").split(";") if t] for r in hot.top]
    shown = [[TASK_TYPE_SHORT.get(t, t) if short else t for t in ts] for ts in types]
    rows = [[r["key"], " ".join(ts), *hot_op_numbers(r)] for r, ts in zip(hot.top, shown)]
    used = {t for ts in types for t in ts if short and TASK_TYPE_SHORT.get(t, t) != t}
    legend = ", ".join(f"{TASK_TYPE_SHORT[t]} = {t}" for t in sorted(used, key=lambda t: TASK_TYPE_SHORT[t]))
    console.print(table(console, title, cols, rows, caption=f"task types: {legend}" if legend else None))


def _copies(summary: Summary, console: Console) -> None:
    cp = summary.copies
    if not cp.by_direction:
        console.print("No memory copies in this profile.")
        return
    cols = [
        Col("side", "fixed", 0),
        Col("direction", "fixed", 0),
        Col("mode", "fixed", 3),
        Col("count", priority=1),
        Col("bytes", priority=2),
        Col("time", priority=0),
        Col("share of side", priority=4),
    ]
    rows = [[r["side"], r["direction"], r["mode"], *copy_numbers(r)] for r in cp.by_direction]
    host = f", {cp.host_calls:,} host calls" if cp.host_calls else ""
    console.print(table(console, f"Memory copies ({cp.count:,} on the device{host})", cols, rows))
    _copy_stalls(summary, console)


def _tail(summary: Summary, console: Console) -> None:
    """What could not be read, how many warnings there were, and where the tables went."""
    errors = summary.errors
    if errors:
        unread = f"{count(len(errors), 'input file')} could not be read (listed on stderr and in manifest.json)"
        console.print(Text(unread, style="red"))
    warnings = summary.warnings
    if warnings:
        console.print(Text(f"{count(len(warnings), 'warning')} (on stderr and in manifest.json)", style="yellow"))
    if summary.out:
        line = Text("tables written to ")
        line.append_text(plain(summary.out, style="bold"))
        console.print(line)


def _efficiency(summary: Summary, console: Console) -> None:
    """Operator efficiency, where an op type's FLOPs are known (op_perf): achieved TFLOPS, MFU, bound."""
    rows = [r for r in summary.op_efficiency if r.get("tflops") is not None]
    if not rows:
        return
    cols = [
        Col("op type", "name", 0, min_width=12),
        Col("count", priority=3),
        Col("total", priority=2),
        Col("TFLOPS", priority=0),
        Col("MFU", priority=0),
        Col("bound", "name", 1, min_width=5),
    ]
    body = [[r["op_type"], *efficiency_numbers(r), r.get("bound") or "-"] for r in rows]
    caption = None if any(r.get("mfu_pct") is not None for r in rows) else "MFU needs the peak: --peak-tflops"
    console.print(table(console, "Operator efficiency (FLOPs from shapes)", cols, body, caption=caption))


MEMORY_HEADERS = ["rank", "allocator", "peak allocated", "reserved", "unused", "step", "op at peak", "process"]


def memory_row(m: dict[str, Any]) -> list[str]:
    """One rank's memory figures as every renderer shows them (MEMORY_HEADERS)."""
    return [
        "-" if m["rank"] is None else str(m["rank"]),
        m.get("allocator") or "-",
        fmt_bytes(m.get("peak_allocated_bytes")),
        fmt_bytes(m.get("reserved_at_peak_bytes", m.get("peak_reserved_bytes"))),
        fmt_bytes(m.get("fragmentation_bytes")),
        "-" if m.get("peak_step") is None else str(m["peak_step"]),
        m.get("peak_op") or "-",
        fmt_bytes(m.get("process_peak_reserved_bytes")),
    ]


def held_rows(m: dict[str, Any]) -> list[list[str]]:
    """op, blocks, bytes, share of what a rank holds at its peak, then what no operator_memory block explains."""
    rows = [
        [h["op_name"], f"{h['blocks']:,}", fmt_bytes(h["bytes"]), fmt_pct(h["share_pct"])]
        for h in m.get("held_at_peak", [])
    ]
    rest = m.get("unattributed_at_peak_bytes")
    if rest:
        share = 100.0 * rest / m["peak_allocated_bytes"] if m.get("peak_allocated_bytes") else None
        rows.append(["(in no operator_memory block)", "-", fmt_bytes(rest), fmt_pct(share)])
    return rows


def _memory(summary: Summary, console: Console) -> None:
    ranks = summary.memory.ranks
    if not ranks:
        return
    kinds = {"allocator": ("fixed", 5), "op at peak": ("name", 4)}
    order = {"rank": 0, "peak allocated": 0, "reserved": 2, "unused": 1, "step": 3, "process": 6}
    cols = [
        Col(
            h,
            kinds.get(h, ("num",))[0],
            kinds[h][1] if h in kinds else order[h],
            min_width=12 if h == "op at peak" else 8,
        )
        for h in MEMORY_HEADERS
    ]
    rows = [memory_row(m) for m in ranks]
    console.print(table(console, "Device memory at the allocation peak", cols, rows))
    held = ranks[0].get("held_at_peak", []) if len(ranks) == 1 else []
    if held:
        cols = [
            Col("held by op", "name", 0, min_width=16),
            Col("blocks", priority=2),
            Col("bytes", priority=0),
            Col("share", priority=1),
        ]
        rows = held_rows(ranks[0])
        console.print(table(console, "Held at the memory peak", cols, rows))


_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _findings(summary: Summary, console: Console) -> None:
    findings = summary.findings
    if findings:
        cols = [
            Col("severity", "fixed", 0),
            Col("rule", "fixed", 2),
            Col("rank", priority=3),
            Col("time lost", priority=1),
            Col("finding and advice", "text", 0, min_width=24),
        ]
        rows = []
        for f in findings:
            text = plain(f["title"], style="bold")
            text.append("\n")
            text.append_text(plain(f["advice"], style="dim"))
            rank = "all" if f["rank"] is None else str(f["rank"])
            rows.append(
                [
                    Text(f["severity"], style=_SEVERITY_STYLE.get(f["severity"], "")),
                    f["rule_id"],
                    rank,
                    fmt_us(f["time_lost_us"]),
                    text,
                ]
            )
        console.print(table(console, f"Findings ({len(findings)}), most time lost first", cols, rows))
    else:
        console.print("No findings.")
    for rule, why in summary.rules_skipped.items():
        console.print(plain(f"SKIPPED {rule}: {why}", style="dim"))


STEP_PHASES = [
    ("before_first_task_us", "P", "cyan"),
    ("computing_us", "C", "green"),
    ("communication_not_overlapped_us", "M", "magenta"),
    ("copy_not_overlapped_us", "Y", "yellow"),
    ("free_us", ".", "grey50"),
    ("after_last_task_us", "_", "grey50"),
]


def _step_bars(summary: Summary, console: Console) -> None:
    rows = summary.step_breakdown
    if not rows:
        return
    cols = [Col("rank", priority=0), Col("step", priority=0), Col("step time", priority=0)]
    phase_cols = [
        Col("before", priority=4),
        Col("compute", priority=1),
        Col("comm", priority=2),
        Col("copy", priority=3),
        Col("free", priority=2),
        Col("after", priority=5),
    ]
    body = [step_cells(r) for r in rows]
    # the bar gets what the numbers leave, up to 40 characters; none below 10
    numbers = sum(max(len(c.header), max(len(b[i]) for b in body)) + 2 for i, c in enumerate(cols + phase_cols))
    width = min(40, console.width - numbers - 2)
    # the legend goes with the chart: without the bars the title says only what the table is
    legend = Text("Step breakdown")
    if width >= 10:
        legend = Text.from_markup(
            "Step breakdown  [cyan]P[/] before first task  [green]C[/] computing  [magenta]M[/] comm not "
            "overlapped  [yellow]Y[/] copy  . free  _ after last task"
        )
        for r, b in zip(rows, body):
            total = r["step_time_us"] or 0.0
            bar = Text()
            for key, ch, style in STEP_PHASES:
                n = round(width * (r[key] or 0.0) / total) if total else 0
                bar.append(ch * n, style=style)
            b.insert(3, bar)
        cols = cols + [Col("breakdown", "fixed", 5)]
    console.print(table(console, legend, cols + phase_cols, body))


_KIND_WORDS = {"sync": "sync", "host_api": "host call", "op_compile": "op compile", "dispatch": "issued late"}


def idle_cause_items(idle: IdleCauses) -> list[str]:
    """``12.0 ms acl@aclrtSynchronizeStream (sync)`` ... for the largest causes of device idle time."""
    out = []
    for c in idle.causes:
        if c["cause"] is None:
            out.append(f"{fmt_us(c['idle_us'])} nothing recorded says why")
        else:
            out.append(f"{fmt_us(c['idle_us'])} {c['cause']} ({_KIND_WORDS.get(c['kind'], c['kind'])})")
    return out


def _idle_causes(summary: Summary, console: Console) -> None:
    idle = summary.idle_causes
    if not idle.idle_us:
        return
    lines = figure_lines(idle_cause_items(idle), console.width - 2, sep="  ·  ")
    head = Text(f"Device idle in steps {fmt_us(idle.idle_us)}, by cause:", style="bold")
    console.print(head)
    for line in lines:
        console.print(plain("  " + line))
    if idle.advice:
        source = f" (source: {idle.source})" if idle.source else ""
        console.print(Text("  most of it: " + idle.advice + source, style="dim"))


_RANGE_TITLES = {"module": "Modules", "mstx": "mstx ranges"}


def _ranges(summary: Summary, console: Console) -> None:
    """The module tree (and mstx ranges) with the most device time: host time, device time of the kernels
    launched inside (nested ranges included), kernels."""
    for kind, block in summary.ranges.items():
        rows = block.tree
        if not rows:
            continue
        cols = [
            Col(kind, "name", 0, min_width=16),
            Col("calls", priority=2),
            Col("host", priority=1),
            Col("device", priority=0),
            Col("kernels", priority=3),
        ]
        body = [
            [
                "  " * int(r["depth"]) + r["name"],
                f"{r['calls']:,}",
                fmt_us(r["host_us"]),
                fmt_us(r["device_us"]),
                f"{r['kernels']:,}",
            ]
            for r in rows
        ]
        title = (
            f"{_RANGE_TITLES.get(kind, kind)} by device time of the kernels launched inside ({block.ranges:,} recorded)"
        )
        console.print(table(console, title, cols, body))


_STALL_RULES = {
    "sync_copy": "host blocked in synchronous copies",
    "unoverlapped_copy": "copy time with no compute beside it",
    "small_copies": "saving if small copies were merged",
}


def _copy_stalls(summary: Summary, console: Console) -> None:
    lines = []
    for rule, label in _STALL_RULES.items():
        hits = [f for f in summary.findings if f["rule_id"] == rule]
        if hits:
            lost = sum(f["time_lost_us"] or 0.0 for f in hits)
            count = sum(f["count"] for f in hits)
            lines.append(f"{fmt_us(lost):>10}  {label} ({count:,} copies)")
        elif rule in summary.rules_skipped:
            lines.append(f"{'skipped':>10}  {label}: {summary.rules_skipped[rule]}")
    if lines:
        console.print(Panel("\n".join(lines), title="Copy stalls", title_align="left", expand=False))
