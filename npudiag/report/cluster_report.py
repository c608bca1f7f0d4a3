"""Rich rendering of the cluster view: ranks x step phases, shaded by distance from the median rank."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from npudiag.report.escape import md_text
from npudiag.report.markdown import md_document, md_table
from npudiag.report.terminal import fmt_us
from npudiag.report.text import Col, count, plain, table

PHASES = [
    ("computing_us", "computing"), ("communication_not_overlapped_us", "comm (not overl.)"), ("free_us", "free"), ("bubble_us", "bubble"),
    ("stage_us", "task span"),
]  # fmt: skip
# the glossary's words for the columns, under the matrix
_WORDS = (
    "task span: the step's first to last device task (torch_npu's Stage); free: gaps between device tasks plus the "
    "exposed copies (step_trace_time.csv's Free)"
)


def phase_text(v: float | None, med: float | None) -> str:
    """A rank's phase time and its difference from the median rank's ("-" where it has none)."""
    if v is None:
        return "-"
    return fmt_us(v) if not med else f"{fmt_us(v)} {(v - med) / med * 100:+.0f}%"


def _cell(v: float | None, med: float | None) -> Text:
    dev = (v - med) / med if v is not None and med else 0.0
    style = "bold red" if dev > 0.10 else "red" if dev > 0.05 else "green" if dev < -0.05 else ""
    return Text(phase_text(v, med), style=style)


def worst_text(r: dict[str, Any]) -> str:
    return "-" if r["worst_step"] is None else f"{r['worst_step']} ({fmt_us(r['worst_stage_us'])})"


def slow_rank_cells(r: dict[str, Any]) -> list[str]:
    """A slow rank's row: step, rank, task span, excess over the median, cause, the three slower ops."""
    ops = ", ".join(f"{o['op']} +{fmt_us(o['delta_us'])}" for o in json.loads(r["slower_ops"] or "[]")[:3])
    return [
        str(r["step"]),
        str(r["rank"]),
        fmt_us(r["stage_us"]),
        f"+{r['excess_pct']:.1f}%",
        f"{r['cause']} +{fmt_us(r['cause_excess_us'])}",
        ops,
    ]


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = sorted(r[key] for r in rows if r.get(key) is not None)
    return (
        None
        if not vals
        else (vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2)
    )


MATRIX_ROWS = 24  # more ranks than this: the slowest and fastest, and how many are between


def render_cluster_terminal(s: dict[str, Any], console: Console, per_step: bool = False) -> None:
    """The rank matrix (mean phases per step against the median rank), each step's (``per_step``), the slow ranks
    and the pipeline stages' imbalance."""
    console.print(Text(f"npudiag cluster  {count(s['ranks'], 'rank')}, {count(s['steps'], 'step')}", style="bold"))
    if s.get("rank_matrix"):
        console.print(_matrix_table(s, console))
        _render_sources(s.get("phase_sources"), console)
    for step in s["per_step"] if per_step else []:
        med = {k: step["median"].get(k) for k, _ in PHASES}
        rows = [[str(r["rank"]), *[_cell(r[k], med[k]) for k, _ in PHASES]] for r in step["rows"]]
        title = f"step {step['step']}: per rank (difference from the median rank)"
        console.print(table(console, title, _phase_cols(), rows))
    console.print(_slow_ranks_table(s, console))
    _render_stages(s.get("stage_imbalance"), console)


def _phase_cols() -> list[Col]:
    """rank, then the phases; the task span is a key column, the phases go in their order when space is short."""
    return [Col("rank", priority=0)] + [
        Col(label, priority=0 if k == "stage_us" else i + 1) for i, (k, label) in enumerate(PHASES)
    ]


def _matrix_table(s: dict[str, Any], console: Console) -> Table:
    """Every rank's mean phases (more than MATRIX_ROWS ranks: the 16 slowest and the 8 fastest)."""
    matrix = s["rank_matrix"]
    med = {k: _median(matrix, k) for k, _ in PHASES}
    rest = len(matrix) - MATRIX_ROWS if len(matrix) > MATRIX_ROWS else 0  # shown: the 16 slowest, the 8 fastest
    shown = matrix[:16] + matrix[-8:] if rest else matrix
    rows = [[str(r["rank"]), *[_cell(r[k], med[k]) for k, _ in PHASES], worst_text(r)] for r in shown]
    if rest:
        rows.insert(16, [Text("…", style="dim"), *[Text("") for _ in PHASES], Text("")])
    title = f"Ranks over {count(s['steps'], 'step')}: mean per step, difference from the median rank (slowest first)"
    caption = f"… {rest} ranks between the 16 slowest and the 8 fastest (all in --json and cluster_steps.parquet)"
    return table(
        console, title, [*_phase_cols(), Col("worst step", "fixed", 6)], rows, caption=caption if rest else None
    )


def _slow_ranks_table(s: dict[str, Any], console: Console) -> Table | Text:
    if not s["slow_ranks"]:
        return Text(
            "No slow rank: every rank is within the threshold of the median (or within its noise).", style="green"
        )
    cols = [
        Col("step", priority=0),
        Col("rank", priority=0),
        Col("stage", priority=1),
        Col("vs median", priority=0),
        Col("cause", "fixed", 0),
        Col("slower ops", "text", 2, min_width=16),
    ]
    rows = [slow_rank_cells(r) for r in s["slow_ranks"][:30]]
    more = f" (first 30 of {len(s['slow_ranks'])})" if len(s["slow_ranks"]) > 30 else ""
    return table(console, f"Slow ranks{more}", cols, rows)


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8])
    return f"rank {shown}" if len(ranks) == 1 else f"ranks {shown}{', …' if len(ranks) > 8 else ''}"


def _render_sources(src: dict[str, Any] | None, console: Console) -> None:
    """Where the phases come from (the profiler's step_trace_time.csv, else npudiag's breakdown of the
    kernels), in the glossary's words, and the figures of analyze where they differ."""
    if not src:
        return
    said = []
    if src["step_trace"]:
        said.append(f"from the profiler's step_trace_time.csv for {_ranks_text(src['step_trace'])}")
    if src["kernels"]:
        said.append(f"from the kernels (as analyze) for {_ranks_text(src['kernels'])}")
    console.print(plain(f"Phases {' and '.join(said)}. {_WORDS}.", style="dim"))
    for d in src["differs"][:2]:
        console.print(
            plain(
                f"rank {d['rank']} step {d['step']}: analyze counts free {fmt_us(d['kernels_free_us'])} (here "
                f"{fmt_us(d['free_us'])}) and task span {fmt_us(d['kernels_stage_us'])} (here {fmt_us(d['stage_us'])}) "
                "from the kernels, device copies included",
                style="dim",
            )
        )
    if len(src["differs"]) > 2:
        console.print(plain(f"… and {len(src['differs']) - 2} more rank steps (--json: phase_sources)", style="dim"))


def _render_stages(imb: dict[str, Any] | None, console: Console) -> None:
    """Pipeline stages side by side (mean per step over each stage's ranks) and the verdict."""
    if not imb:
        return
    phases = [p for p in PHASES if p[0] != "bubble_us"]
    cols = [Col("stage", priority=0), Col("ranks", "text", 3, min_width=6)] + [
        Col(label, priority=0 if k == "computing_us" else i + 1) for i, (k, label) in enumerate(phases)
    ]
    rows = [
        [str(r["pp_index"]), ",".join(str(x) for x in r["ranks"]), *[plain(fmt_us(r[k])) for k, _ in phases]]
        for r in imb["stages"]
    ]
    console.print(table(console, "Pipeline stages: mean per step over each stage's ranks", cols, rows))
    share = f"{imb['share'] * 100:.1f}% of the step" if imb["share"] is not None else "no step time"
    if imb["imbalanced"]:
        head = (
            f"Stage imbalance: stage {imb['slowest_stage']} computes {fmt_us(imb['gap_us'])} more per step than stage "
        )
        console.print(
            Text(
                head + f"{imb['fastest_stage']} ({share}); time lost about {fmt_us(imb['time_lost_us'])}.",
                style="yellow",
            )
        )
        console.print(Text(imb["advice"]))
    else:
        console.print(
            Text(f"Stages balanced: computing differs by {fmt_us(imb['gap_us'])} per step ({share}).", style="green")
        )


def _gbps(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 0.1 else f"{v:.2g}"


def render_comm_terminal(s: dict[str, Any], console: Console) -> None:
    if s["links"]:
        cols = [
            Col("transport", "fixed", 0),
            Col("links", priority=2),
            Col("bytes", priority=1),
            Col("time", priority=0),
            Col("GB/s", priority=0),
            Col("slowest link GB/s", priority=3),
        ]
        rows = [
            [
                r["transport"] or "?",
                str(r["links"]),
                f"{(r['bytes'] or 0) / 1e6:,.1f} MB",
                fmt_us(r["time_us"]),
                _gbps(r["bandwidth_gbps"]),
                _gbps(r["min_link_bandwidth_gbps"]),
            ]
            for r in s["links"]
        ]
        console.print(table(console, "Communication by transport", cols, rows))
    for r in s["slow_links"][:10]:
        link = (
            f"slow link {r['src_rank']}->{r['dst_rank']} ({r['transport']}, {r['op_name']}): "
            f"{_gbps(r['bandwidth_gbps'])} GB/s"
        )
        console.print(
            plain(
                f"{link}, {r['ratio'] * 100:.0f}% of the median {_gbps(r['median_bandwidth_gbps'])} GB/s", style="red"
            )
        )
    for r in s.get("late_ranks", [])[:5]:
        doing = f"; no kernel data for rank {r['late_rank']}"
        if r["late_idle_us"] is not None:
            comm = f", communicated {fmt_us(r['late_comm_us'])}" if r.get("late_comm_us") else ""
            host = ""
            if r.get("late_host_cause"):
                host = f", mostly held up by {r['late_host_cause']} ({r['late_host_kind']})"
            doing = (
                f"; meanwhile its device computed {fmt_us(r['late_busy_us'])}{comm} and was "
                f"idle {fmt_us(r['late_idle_us'])}{host}"
            )
        console.print(
            plain(
                f"rank {r['late_rank']} made {r['ranks_waiting']} rank(s) wait "
                f"{fmt_us(r['late_by_us'])} in {r['step']} "
                f"({r['op_name']}){doing}",
                style="yellow",
            )
        )
    if s["wait_skew"]:
        cols = [
            Col("step", "fixed", 2),
            Col("op", "name", 0, min_width=12),
            Col("ranks", priority=3),
            Col("max wait", priority=0),
            Col("min wait", priority=1),
            Col("late rank", priority=0),
        ]
        shown = s["wait_skew"][:10]
        rows = [
            [
                r["step"],
                r["op_name"],
                str(r["ranks"]),
                fmt_us(r["max_wait_us"]),
                fmt_us(r["min_wait_us"]),
                str(r["late_rank"]) + (" *" if r.get("peer_not_profiled") else ""),
            ]
            for r in shown
        ]
        console.print(
            table(
                console,
                "Collectives with the widest wait-time spread (late rank: the one that entered last)",
                cols,
                rows,
            )
        )
        if any(r.get("peer_not_profiled") for r in shown):
            console.print(
                plain(
                    "  * the late rank waited 1 ms or more too: every profiled rank waited, on a rank not in the data"
                )
            )


def cluster_markdown(s: dict[str, Any]) -> str:
    """The cluster view as GitHub-flavoured Markdown: every rank's mean phases beside the median rank's, then
    every slow rank with its cause and slower ops (op names escaped in their cells)."""
    lines = [f"## npudiag cluster — {count(s['ranks'], 'rank')}, {count(s['steps'], 'step')}", ""]
    matrix = s.get("rank_matrix", [])
    if matrix:
        med = {k: _median(matrix, k) for k, _ in PHASES}
        rows = [[str(r["rank"]), *[phase_text(r[k], med[k]) for k, _ in PHASES], worst_text(r)] for r in matrix]
        lines += ["### Ranks: mean per step, difference from the median rank (slowest first)", ""]
        lines += md_table(["Rank", *(label for _, label in PHASES), "Worst step"], rows) + ["", f"_{_WORDS}_", ""]
    if s["slow_ranks"]:
        rows = [[*c[:5], md_text(c[5])] for c in map(slow_rank_cells, s["slow_ranks"])]
        headers = ["Step", "Rank", "Stage", "Vs median", "Cause", "Slower ops"]
        lines += ["### Slow ranks", ""] + md_table(headers, rows, (4, 5)) + [""]
    else:
        lines += ["No slow rank: every rank is within the threshold of the median (or within its noise).", ""]
    lines += [f"> **Warning:** {md_text(w)}" for w in s.get("warnings", [])]
    return md_document(lines)
