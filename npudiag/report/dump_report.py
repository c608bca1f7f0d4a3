"""Rich rendering of dump parse and dump compare results."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.text import Text

from npudiag.report.escape import md_text
from npudiag.report.markdown import md_document, md_table
from npudiag.report.text import Col, count, plain, table


def _num(v: float | None, fmt: str = ".4g") -> str:
    """A number as the table shows it: nan, inf and -inf spelled out, never cut."""
    if v is None:
        return "-"
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return format(v, fmt)


def _non_finite(r: dict[str, Any]) -> bool:
    """NaN or Inf in the tensor: counted where the data was read, seen in its statistics otherwise (msprobe)."""
    if r["nan_count"] or r["pos_inf_count"] or r["neg_inf_count"]:
        return True
    return any(isinstance(r[k], float) and not math.isfinite(r[k]) for k in ("min", "max", "mean"))


def _nan_inf(r: dict[str, Any]) -> str:
    if r["nan_count"] is None and r["pos_inf_count"] is None and r["neg_inf_count"] is None:
        return "-"  # statistics only: no counts
    return f"{r['nan_count'] or 0}/{(r['pos_inf_count'] or 0) + (r['neg_inf_count'] or 0)}"


_IO_SHORT = {"parameters_grad": "grd"}


def parse_headline(s: dict[str, Any]) -> str:
    """How many files and tensors were read, and how much tensor data (or that there were statistics only)."""
    data = (
        f"{s['tensor_bytes'] / 1e6:.1f} MB of tensor data"
        if s["tensor_bytes"] or not s["tensors"]
        else "statistics only"
    )
    return f"{count(s['files'], 'file')}, {count(s['tensors'], 'tensor')}, {data}"


def non_finite_text(rows: list[dict[str, Any]]) -> str | None:
    """How many tensors hold NaN or Inf, and the first of them in execution order; None when none does."""
    bad = [r for r in rows if _non_finite(r)]
    if not bad:
        return None
    return (
        f"{count(len(bad), 'tensor')} hold{'s' if len(bad) == 1 else ''} NaN/Inf; the first in execution order: "
        f"{bad[0]['op_name']} {bad[0]['io']} {bad[0]['index']}"
    )


PARSE_HEADERS = ["op", "tensor", "type", "shape", "min", "max", "mean", "nan/inf"]


def parse_cells(r: dict[str, Any]) -> list[str]:
    """One tensor's row as every renderer shows it (PARSE_HEADERS)."""
    fmt = "" if r["format"] in ("ND", None) else f" {r['format']}"
    dtype = (r["dtype"] or "").removeprefix("DT_").removeprefix("torch.").removeprefix("mindspore.").lower()
    return [
        r["op_name"] or "?",
        f"{_IO_SHORT.get(r['io'], (r['io'] or '?')[:3])}{r['index']}",
        dtype + fmt,
        "x".join(map(str, r["shape"] or [])),
        _num(r["min"]),
        _num(r["max"]),
        _num(r["mean"]),
        _nan_inf(r),
    ]


def render_parse_terminal(s: dict[str, Any], console: Console, top: int = 20) -> None:
    console.print(Text(f"npudiag dump parse  {parse_headline(s)}", style="bold"))
    rows = s["rows"]
    bad = non_finite_text(rows)
    if bad is not None:
        console.print(plain(bad, style="red"))
    cols = [
        Col("op", "name", 0, min_width=14),
        Col("tensor", "fixed", 0),
        Col("type", "fixed", 3),
        Col("shape", "name", 4, min_width=8),
        Col("min", priority=2),
        Col("max", priority=2),
        Col("mean", priority=1),
        Col("nan/inf", priority=0),
    ]
    console.print(table(console, None, cols, [parse_cells(r) for r in rows[:top]]))
    if len(rows) > top:
        console.print(Text(f"... {len(rows) - top} more in tensors.parquet", style="dim"))


def dump_parse_markdown(s: dict[str, Any], top: int = 20) -> str:
    """The parsed dump as GitHub-flavoured Markdown: the counts, the first NaN/Inf, the first ``top`` tensors
    (the terminal's cells; op names and shapes from the dumps escaped)."""
    rows = s["rows"]
    lines = [f"## npudiag dump parse — {parse_headline(s)}", ""]
    bad = non_finite_text(rows)
    if bad is not None:
        lines += [f"> **{md_text(bad)}**", ""]
    body = [[md_text(c) if i < 4 else c for i, c in enumerate(parse_cells(r))] for r in rows[:top]]
    lines += md_table(PARSE_HEADERS, body, text_columns=4)
    if len(rows) > top:
        lines += ["", f"{len(rows) - top:,} more tensors in tensors.parquet."]
    return md_document(lines)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


_VERDICT_STYLE = {"NO": "red", "warn": "yellow", "yes": "green"}


def _verdict_text(r: dict[str, Any]) -> str:
    """The pass cell of msprobe's verdicts: NO (error), warn (warning) or yes."""
    return {"error": "NO", "warning": "warn"}.get(r.get("result"), "yes")


def _styled(cells: list[str], at: int) -> list[str | Text]:
    """Cells for the terminal: the pass cell (``at``) coloured."""
    return [Text(c, style=_VERDICT_STYLE[c]) if i == at else c for i, c in enumerate(cells)]


def _share(v: float | None) -> str:
    return "-" if v is None else "nan" if v != v else f"{100 * v:.1f}%"


DATA_HEADERS = ["#", "tensor", "cosine", "max abs", "max rel", "<0.1%", "<0.5%", "pass"]
DATA_TITLE = "Tensors furthest from golden by their data (<0.1%: elements within 0.1 % of golden)"


def data_cells(r: dict[str, Any]) -> list[str]:
    """Tensor mode: a tensor's msprobe data metrics."""
    return [
        str(r["order"]),
        r["tensor_name"],
        _num(r["cosine"], ".6f"),
        _num(r["max_abs_err"]),
        _num(r["max_relative_err"]),
        _share(r["one_thousandth_err_ratio"]),
        _share(r["five_thousandths_err_ratio"]),
        _verdict_text(r),
    ]


STATS_HEADERS = ["#", "tensor", "max Δ%", "min Δ%", "mean Δ%", "norm Δ%", "pass"]
STATS_TITLE = (
    "Tensors that fail, then those warned, then the rest; the furthest moved first (relative error of mine to golden)"
)


def stats_cells(r: dict[str, Any], why: bool) -> list[str]:
    """Statistics mode: the relative change of each statistic, the verdict, and why it fails (when any does)."""
    pcts = [_pct(r[f"{k}_relative_error_pct"]) for k in ("max", "min", "mean", "l2norm")]
    return [str(r["order"]), r["tensor_name"], *pcts, _verdict_text(r), *([r["fail_reason"] or ""] if why else [])]


BINARY_HEADERS = ["#", "op", "tensor", "cosine", "max abs", "max rel", "RED", "KL", "<1/1000", "pass"]
BINARY_TITLE = "Worst tensors by cosine similarity"


def binary_cells(r: dict[str, Any]) -> list[str]:
    """Binary dumps: msaccucmp's metrics of a tensor."""
    return [
        str(r["order"]),
        r["op_name"],
        f"{r['io']}{r['index']}",
        _num(r["cosine_similarity"], ".6f"),
        _num(r["max_absolute_error"]),
        _num(r["max_relative_error"]),
        _num(r["relative_euclidean_distance"]),
        _num(r["kl_divergence"]),
        _num(r["one_thousandth_ratio"], ".3f"),
        "yes" if r["passed"] else "NO",
    ]


def compare_headline(s: dict[str, Any]) -> str:
    if s.get("mode") != "statistics":
        return f"{count(s['tensors_compared'], 'tensor')} compared, {count(s['outputs_failed'], 'output')} fail"
    compared = count(s["tensors_compared"], "tensor")
    failed, warned = count(s["outputs_failed"], "output"), s.get("tensors_warned", 0)
    how = "statistics and data" if s.get("data") else "statistics"
    return f"{compared} and arguments compared by {how}, {failed} fail, {warned} warned"


def first_failing_text(s: dict[str, Any]) -> str | None:
    """The first failing output in execution order, with its figures and reason; None when every output passes."""
    first = s["first_failing_output"]
    if not first:
        return None
    lead = "First failing output in execution order (the likely origin of the accuracy loss):"
    if s.get("mode") != "statistics":
        return (
            f"{lead} #{first['order']} {first['op_type'] or ''} {first['op_name']} output {first['index']}: cosine "
            f"{_num(first['cosine_similarity'])}, max abs error "
            f"{_num(first['max_absolute_error'])}; {first['fail_reason']}"
        )
    stats = ", ".join(
        f"{k} {_num(first['my_' + k])} vs {_num(first['golden_' + k])}" for k in ("max", "min", "mean", "l2norm")
    )
    if s.get("data"):
        stats = f"cosine {_num(first['cosine'], '.6f')}, max abs error {_num(first['max_abs_err'])}, " + stats
    return f"{lead} #{first['order']} {first['tensor_name']}: {stats}; {first['fail_reason']}"


def worst_table(s: dict[str, Any]) -> tuple[str, list[str], list[list[str]]]:
    """The worst tensors' table of any mode: its title, headers and rows (text cells; the verdict under "pass")."""
    if s.get("mode") != "statistics":
        return BINARY_TITLE, BINARY_HEADERS, [binary_cells(r) for r in s["worst"]]
    if s.get("data"):
        return DATA_TITLE, DATA_HEADERS, [data_cells(r) for r in s["worst"]]
    # a tensor that fails with every change at 0 % fails for another reason (dtype, shape, NaN): say which
    why = any(r["fail_reason"] for r in s["worst"])
    headers = STATS_HEADERS + (["why"] if why else [])
    return STATS_TITLE, headers, [stats_cells(r, why) for r in s["worst"]]


# how each column shows on a narrow terminal: (kind, priority, min_width); key columns have priority 0
_COLUMNS = {
    "#": ("num", 3, 8),
    "tensor": ("name", 0, 16),
    "op": ("name", 0, 14),
    "cosine": ("num", 0, 8),
    "max abs": ("num", 1, 8),
    "max rel": ("num", 2, 8),
    "<0.1%": ("num", 0, 8),
    "<0.5%": ("num", 4, 8),
    "max Δ%": ("num", 1, 8),
    "min Δ%": ("num", 4, 8),
    "mean Δ%": ("num", 2, 8),
    "norm Δ%": ("num", 0, 8),
    "why": ("text", 1, 16),
    "RED": ("num", 4, 8),
    "KL": ("num", 5, 8),
    "<1/1000": ("num", 6, 8),
    "pass": ("fixed", 0, 8),
}


def render_compare_terminal(s: dict[str, Any], console: Console) -> None:
    console.print(Text(f"npudiag dump compare  {compare_headline(s)}", style="bold"))
    first = first_failing_text(s)
    if first is not None:
        console.print(plain(first, style="bold red"))
    else:
        console.print(Text("Every compared output passes.", style="green"))
    title, headers, rows = worst_table(s)
    cols = [Col(h, *_COLUMNS[h]) for h in headers]
    if s.get("mode") != "statistics":
        cols[2] = Col("tensor", "fixed", 0)  # binary dumps: the tensor column is input0 / output1
    at = headers.index("pass")
    console.print(table(console, title, cols, [_styled(r, at) for r in rows]))
    if s["unmatched"]:
        console.print(
            plain(
                f"{len(s['unmatched'])} tensors without a golden match, e.g. {', '.join(s['unmatched'][:5])}",
                style="yellow",
            )
        )


def dump_compare_markdown(s: dict[str, Any]) -> str:
    """The dump comparison as GitHub-flavoured Markdown: the verdict, the first failing output, the worst tensors
    (the terminal's cells; names from the dumps escaped in their cells)."""
    first = first_failing_text(s)
    icon = "❌" if first is not None else "✅"
    lines = [f"## {icon} npudiag dump compare — {compare_headline(s)}", ""]
    lines += [f"**{md_text(first)}**" if first is not None else "Every compared output passes.", ""]
    title, headers, rows = worst_table(s)
    names = {headers.index(h) for h in ("tensor", "op", "why") if h in headers}
    body = [[md_text(c) if i in names else c for i, c in enumerate(r)] for r in rows]
    lines += [f"### {md_text(title)}", ""] + md_table(headers, body) + [""]
    if s["unmatched"]:
        lines.append(
            f"> **Note:** {len(s['unmatched'])} tensors without a golden match, e.g. "
            f"{md_text(', '.join(s['unmatched'][:5]))}"
        )
    return md_document(lines)
