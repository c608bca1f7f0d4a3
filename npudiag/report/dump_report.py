"""Rich rendering of dump parse and dump compare results."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


def _num(v: float | None, fmt: str = ".4g") -> str:
    return "-" if v is None or v != v else format(v, fmt)


def render_parse_terminal(s: dict[str, Any], console: Console, top: int = 20) -> None:
    console.print(
        Text(
            f"npudiag dump parse  {s['files']} files, {s['tensors']} tensors, {s['tensor_bytes'] / 1e6:.1f} MB of tensor data", style="bold"
        )
    )
    rows = s["rows"]
    bad = [r for r in rows if (r["nan_count"] or 0) or (r["pos_inf_count"] or 0) or (r["neg_inf_count"] or 0)]
    if bad:
        console.print(
            Text(
                f"{len(bad)} tensors hold NaN/Inf; the first in execution order: {bad[0]['op_name']} {bad[0]['io']} {bad[0]['index']}",
                style="red",
            )
        )
    t = Table(box=box.SIMPLE_HEAD, show_edge=False)
    t.add_column("op", overflow="fold", ratio=1, min_width=14)
    for col in ("tensor", "type", "shape", "min", "max", "mean", "nan/inf"):
        t.add_column(col, no_wrap=True, justify="right" if col in ("min", "max", "mean", "nan/inf") else "left")
    for r in rows[:top]:
        fmt = "" if r["format"] in ("ND", None) else f" {r['format']}"
        t.add_row(
            r["op_name"] or "?", f"{r['io'][:3]}{r['index']}", (r["dtype"] or "").removeprefix("DT_").lower() + fmt,
            "x".join(map(str, r["shape"] or [])), _num(r["min"]), _num(r["max"]), _num(r["mean"]),
            f"{r['nan_count'] or 0}/{(r['pos_inf_count'] or 0) + (r['neg_inf_count'] or 0)}",
        )  # fmt: skip
    console.print(t)
    if len(rows) > top:
        console.print(Text(f"... {len(rows) - top} more in tensors.parquet", style="dim"))


def render_compare_terminal(s: dict[str, Any], console: Console) -> None:
    console.print(Text(f"npudiag dump compare  {s['tensors_compared']} tensors compared, {s['outputs_failed']} outputs fail", style="bold"))
    first = s["first_failing_output"]
    if first:
        console.print(
            Text(
                f"First failing output in execution order (the likely origin of the accuracy loss): #{first['order']} "
                f"{first['op_type'] or ''} {first['op_name']} output {first['index']}: cosine {_num(first['cosine_similarity'])}, "
                f"max abs error {_num(first['max_absolute_error'])}; {first['fail_reason']}",
                style="bold red",
            )
        )
    else:
        console.print(Text("Every compared output passes.", style="green"))
    t = Table(title="Worst tensors by cosine similarity", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    t.add_column("#", no_wrap=True)
    t.add_column("op", overflow="fold", ratio=1, min_width=14)
    for col in ("tensor", "cosine", "max abs", "max rel", "RED", "KL", "<1/1000", "pass"):
        t.add_column(col, no_wrap=True, justify="right")
    for r in s["worst"]:
        t.add_row(
            str(r["order"]), r["op_name"], f"{r['io']}{r['index']}", _num(r["cosine_similarity"], ".6f"), _num(r["max_absolute_error"]),
            _num(r["max_relative_error"]), _num(r["relative_euclidean_distance"]), _num(r["kl_divergence"]),
            _num(r["one_thousandth_ratio"], ".3f"), Text("yes", style="green") if r["passed"] else Text("NO", style="red"),
        )  # fmt: skip
    console.print(t)
    if s["unmatched"]:
        console.print(Text(f"{len(s['unmatched'])} tensors without a golden match, e.g. {', '.join(s['unmatched'][:5])}", style="yellow"))
