"""Rich rendering of dump parse and dump compare results."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.text import Text

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


def render_parse_terminal(s: dict[str, Any], console: Console, top: int = 20) -> None:
    data = (
        f"{s['tensor_bytes'] / 1e6:.1f} MB of tensor data"
        if s["tensor_bytes"] or not s["tensors"]
        else "statistics only"
    )
    numbers = f"{count(s['files'], 'file')}, {count(s['tensors'], 'tensor')}, {data}"
    console.print(Text(f"npudiag dump parse  {numbers}", style="bold"))
    rows = s["rows"]
    bad = [r for r in rows if _non_finite(r)]
    if bad:
        console.print(
            plain(
                f"{count(len(bad), 'tensor')} hold{'s' if len(bad) == 1 else ''} NaN/Inf; the first in execution order: "
                f"{bad[0]['op_name']} {bad[0]['io']} {bad[0]['index']}",
                style="red",
            )
        )
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
    body = []
    for r in rows[:top]:
        fmt = "" if r["format"] in ("ND", None) else f" {r['format']}"
        dtype = (r["dtype"] or "").removeprefix("DT_").removeprefix("torch.").removeprefix("mindspore.").lower()
        body.append(
            [
                r["op_name"] or "?",
                f"{_IO_SHORT.get(r['io'], (r['io'] or '?')[:3])}{r['index']}",
                dtype + fmt,
                "x".join(map(str, r["shape"] or [])),
                _num(r["min"]),
                _num(r["max"]),
                _num(r["mean"]),
                _nan_inf(r),
            ]
        )
    console.print(table(console, None, cols, body))
    if len(rows) > top:
        console.print(Text(f"... {len(rows) - top} more in tensors.parquet", style="dim"))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def _verdict(r: dict[str, Any]) -> Text:
    return {"error": Text("NO", style="red"), "warning": Text("warn", style="yellow")}.get(
        r.get("result"), Text("yes", style="green")
    )


def _render_data_rows(s: dict[str, Any], console: Console) -> None:
    """Tensor mode: the tensors furthest from golden by their data (msprobe's tensor metrics)."""
    cols = [
        Col("#", priority=3),
        Col("tensor", "name", 0, min_width=16),
        Col("cosine", priority=0),
        Col("max abs", priority=1),
        Col("max rel", priority=2),
        Col("<0.1%", priority=0),
        Col("<0.5%", priority=4),
        Col("pass", "fixed", 0),
    ]
    body = [
        [
            str(r["order"]),
            r["tensor_name"],
            _num(r["cosine"], ".6f"),
            _num(r["max_abs_err"]),
            _num(r["max_relative_err"]),
            _share(r["one_thousandth_err_ratio"]),
            _share(r["five_thousandths_err_ratio"]),
            _verdict(r),
        ]
        for r in s["worst"]
    ]
    title = "Tensors furthest from golden by their data (<0.1%: elements within 0.1 % of golden)"
    console.print(table(console, title, cols, body))


def _share(v: float | None) -> str:
    return "-" if v is None else "nan" if v != v else f"{100 * v:.1f}%"


def _render_stats_compare(s: dict[str, Any], console: Console) -> None:
    """Two msprobe dumps: statistics side by side (max, min, mean, L2 norm)."""
    compared = count(s["tensors_compared"], "tensor")
    failed, warned = count(s["outputs_failed"], "output"), s.get("tensors_warned", 0)
    how = "statistics and data" if s.get("data") else "statistics"
    numbers = f"{compared} and arguments compared by {how}, {failed} fail, {warned} warned"
    console.print(Text(f"npudiag dump compare  {numbers}", style="bold"))
    first = s["first_failing_output"]
    if first:
        stats = ", ".join(
            f"{k} {_num(first['my_' + k])} vs {_num(first['golden_' + k])}" for k in ("max", "min", "mean", "l2norm")
        )
        if s.get("data"):
            stats = f"cosine {_num(first['cosine'], '.6f')}, max abs error {_num(first['max_abs_err'])}, " + stats
        console.print(
            plain(
                f"First failing output in execution order (the likely origin of the accuracy loss): #{first['order']} "
                f"{first['tensor_name']}: {stats}; {first['fail_reason']}",
                style="bold red",
            )
        )
    else:
        console.print(Text("Every compared output passes.", style="green"))
    if s.get("data"):
        _render_data_rows(s, console)
    else:
        cols = [
            Col("#", priority=3),
            Col("tensor", "name", 0, min_width=16),
            Col("max Δ%", priority=1),
            Col("min Δ%", priority=4),
            Col("mean Δ%", priority=2),
            Col("norm Δ%", priority=0),
            Col("pass", "fixed", 0),
        ]
        why = any(r["fail_reason"] for r in s["worst"])
        if why:  # a tensor that fails with every change at 0 % fails for another reason (dtype, shape, NaN): say which
            cols.append(Col("why", "text", 1, min_width=16))
        body = []
        for r in s["worst"]:
            body.append(
                [
                    str(r["order"]),
                    r["tensor_name"],
                    _pct(r["max_relative_error_pct"]),
                    _pct(r["min_relative_error_pct"]),
                    _pct(r["mean_relative_error_pct"]),
                    _pct(r["l2norm_relative_error_pct"]),
                    _verdict(r),
                ]
                + ([r["fail_reason"] or ""] if why else [])
            )
        title = "Tensors that fail, then those warned, then the rest; the furthest moved first (relative error of mine to golden)"
        console.print(table(console, title, cols, body))
    if s["unmatched"]:
        console.print(
            plain(
                f"{len(s['unmatched'])} tensors without a golden match, e.g. {', '.join(s['unmatched'][:5])}",
                style="yellow",
            )
        )


def render_compare_terminal(s: dict[str, Any], console: Console) -> None:
    if s.get("mode") == "statistics":
        _render_stats_compare(s, console)
        return
    numbers = f"{count(s['tensors_compared'], 'tensor')} compared, {count(s['outputs_failed'], 'output')} fail"
    console.print(Text(f"npudiag dump compare  {numbers}", style="bold"))
    first = s["first_failing_output"]
    if first:
        console.print(
            plain(
                f"First failing output in execution order (the likely origin of the accuracy loss): #{first['order']} "
                f"{first['op_type'] or ''} {first['op_name']} output {first['index']}: cosine {_num(first['cosine_similarity'])}, "
                f"max abs error {_num(first['max_absolute_error'])}; {first['fail_reason']}",
                style="bold red",
            )
        )
    else:
        console.print(Text("Every compared output passes.", style="green"))
    cols = [
        Col("#", priority=3),
        Col("op", "name", 0, min_width=14),
        Col("tensor", "fixed", 0),
        Col("cosine", priority=0),
        Col("max abs", priority=1),
        Col("max rel", priority=2),
        Col("RED", priority=4),
        Col("KL", priority=5),
        Col("<1/1000", priority=6),
        Col("pass", "fixed", 0),
    ]
    body = []
    for r in s["worst"]:
        body.append(
            [
                str(r["order"]),
                r["op_name"],
                f"{r['io']}{r['index']}",
                _num(r["cosine_similarity"], ".6f"),
                _num(r["max_absolute_error"]),
                _num(r["max_relative_error"]),
                _num(r["relative_euclidean_distance"]),
                _num(r["kl_divergence"]),
                _num(r["one_thousandth_ratio"], ".3f"),
                Text("yes", style="green") if r["passed"] else Text("NO", style="red"),
            ]
        )
    console.print(table(console, "Worst tensors by cosine similarity", cols, body))
    if s["unmatched"]:
        console.print(
            plain(
                f"{len(s['unmatched'])} tensors without a golden match, e.g. {', '.join(s['unmatched'][:5])}",
                style="yellow",
            )
        )
