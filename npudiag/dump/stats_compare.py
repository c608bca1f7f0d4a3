"""``dump compare`` of two msprobe dumps: tensor statistics side by side, as msprobe's summary compare.

msprobe dumps (``dump.json``, :mod:`npudiag.dump.formats.msprobe_json`) hold each tensor's Max, Min,
Mean and L2 norm, not its data, so the comparison is of statistics. Tensors match by msprobe's name
(``Functional.conv2d.0.forward.input.1``), the n-th occurrence of a name with the n-th. For each
statistic: the difference (mine - golden) and the relative error |diff / golden| x 100 % (none where
golden is 0), as msprobe's ``Max diff`` and ``MaxRelativeErr``. A tensor fails when a statistic
moves by more than half its magnitude, |diff| > 0.5 x (max(|mine|, |golden|) + 1e-10) (msprobe's
"Need double check api accuracy" warning), or when a statistic is NaN or Inf on one side and finite
on the other (NaN/Inf appearing where the golden run had none is where accuracy went wrong).

With several dump.json files (``step{N}/rank{R}/``), each of mine is compared with the golden one at
the same relative path; with one on each side, those two.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.dump.formats import msprobe_json
from npudiag.errors import InputError
from npudiag.schemas import STATS_COMPARE

STATS = ("max", "min", "mean", "l2norm")
MAGNITUDE = 0.5  # a statistic that moves by more than half its size fails the tensor (msprobe's rule)
EPSILON = 1e-10


def msprobe_files(root: Path) -> list[Path]:
    """msprobe's dump.json files under ``root`` (or ``root`` itself), in path order."""
    if root.is_file():
        return [root] if root.name == msprobe_json.FILE_NAME else []
    return sorted(p for p in root.rglob(msprobe_json.FILE_NAME) if p.is_file() and not p.is_symlink())


def _pairs(mine: Path, golden: Path, errors: list[str]) -> list[tuple[Path, Path]]:
    m, g = msprobe_files(mine), msprobe_files(golden)
    if not g:
        raise InputError(golden, "no msprobe dump.json to compare MINE's with (GOLDEN must be an msprobe dump too)")
    if len(m) == 1 and len(g) == 1:
        return [(m[0], g[0])]
    by_rel = {p.relative_to(golden) if golden.is_dir() else Path(p.name): p for p in g}
    pairs = []
    for p in m:
        rel = p.relative_to(mine) if mine.is_dir() else Path(p.name)
        if rel in by_rel:
            pairs.append((p, by_rel[rel]))
        else:
            errors.append(f"{p}: no golden dump.json at {golden / rel}; not compared")
    return pairs


def _compare(a: float | None, b: float | None) -> tuple[float | None, float | None, str | None]:
    """(diff, relative error %, why it fails or None) of one statistic."""
    if a is None or b is None:
        return None, None, None
    if math.isfinite(a) != math.isfinite(b):
        return a - b if not (math.isnan(a) or math.isnan(b)) else math.nan, None, "NaN/Inf on one side only"
    if not math.isfinite(a):
        return (0.0 if a == b else math.nan), None, None
    diff = a - b
    rel = abs(diff / b) * 100.0 if b != 0 else None
    why = "moves by more than half its magnitude" if abs(diff) > MAGNITUDE * (max(abs(a), abs(b)) + EPSILON) else None
    return diff, rel, why


def compare_rows(mine: list[dict[str, Any]], golden: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The comparison rows of two dumps' tensors (rows of the tensors table), and the names of mine with no golden match."""
    pool: dict[str, list[dict[str, Any]]] = {}
    for g in golden:
        pool.setdefault(g["tensor_name"], []).append(g)
    order: dict[str, int] = {}
    rows, unmatched = [], []
    for r in mine:
        order.setdefault(r["op_name"], len(order))
        candidates = pool.get(r["tensor_name"])
        if not candidates:
            unmatched.append(r["tensor_name"])
            continue
        g = candidates.pop(0)
        row = {"order": order[r["op_name"]], "op_type": r["op_type"], "op_name": r["op_name"], "io": r["io"], "index": r["index"],
               "tensor_name": r["tensor_name"], "golden_name": g["tensor_name"], "dtype": r["dtype"], "golden_dtype": g["dtype"],
               "shape": r["shape"], "golden_shape": g["shape"]}  # fmt: skip
        reasons = []
        compared = False
        for s in STATS:
            a, b = r[s], g[s]
            row[f"my_{s}"], row[f"golden_{s}"] = a, b
            diff, rel, why = _compare(a, b)
            row[f"{s}_diff"], row[f"{s}_relative_error_pct"] = diff, rel
            compared |= diff is not None
            if why:
                reasons.append(f"{s} {why}")
        notes = []
        if r["shape"] != g["shape"]:
            notes.append("shapes differ")
        if r["dtype"] != g["dtype"]:
            notes.append("dtypes differ")
        row["passed"] = (not reasons) if compared else None
        row["fail_reason"] = "; ".join(reasons + notes) or (None if compared else "no statistics on either side")
        rows.append(row)
    return rows, unmatched


def compare_msprobe(mine: Path, golden: Path) -> tuple[pa.Table, list[str], list[str]]:
    """The STATS_COMPARE table of two msprobe dumps, the tensors of mine with no match, and the errors."""
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    unmatched: list[str] = []
    offset = 0
    for m, g in _pairs(mine, golden, errors):
        try:
            mine_rows, golden_rows = msprobe_json.read_msprobe_dump(m), msprobe_json.read_msprobe_dump(g)
        except InputError as exc:
            errors.append(exc.one_line())
            continue
        got, missing = compare_rows(mine_rows, golden_rows)
        for r in got:  # calls numbered on through the files (ranks, steps) in path order
            r["order"] += offset
        offset += len({r["op_name"] for r in mine_rows})
        rows += got
        unmatched += missing
    table = pa.Table.from_pylist(rows, schema=STATS_COMPARE) if rows else STATS_COMPARE.empty_table()
    return table, unmatched, errors


def stats_summary(table: pa.Table, unmatched: list[str], errors: list[str], worst: int = 10) -> dict[str, Any]:
    """What ``dump compare`` prints of a statistics comparison: counts, the first failing output in
    execution order (where the error starts), the tensors whose statistics moved most."""
    rows = table.to_pylist()
    failing = [r for r in rows if r["io"] == "output" and r["passed"] is False]
    first = min(failing, key=lambda r: r["order"]) if failing else None

    def moved(r: dict[str, Any]) -> float:
        errs = [r[f"{s}_relative_error_pct"] for s in STATS if r[f"{s}_relative_error_pct"] is not None]
        return max(errs) if errs else (math.inf if r["passed"] is False else -1.0)

    ranked = sorted(rows, key=lambda r: (r["passed"] is not False, -moved(r), r["order"], r["io"], r["index"]))
    return {
        "mode": "statistics",
        "tensors_compared": len(rows),
        "tensors_failed": sum(1 for r in rows if r["passed"] is False),
        "outputs_failed": len(failing),
        "first_failing_output": first,
        "worst": ranked[:worst],
        "unmatched": unmatched,
        "errors": errors,
    }


# msprobe's summary-compare columns, less the Requires_grad ones (the tensors table does not keep them)
SUMMARY_CSV_COLUMNS = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape", "Max diff", "Min diff",
    "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr", "NPU max", "NPU min",
    "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm", "Result", "Err_message",
]  # fmt: skip


def _cell(v: Any) -> str:
    if v is None:
        return "N/A"
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    return str(v)


def summary_csv_rows(table: pa.Table) -> list[list[str]]:
    """The comparison in msprobe's summary-compare CSV columns (relative errors as ``12.5%``)."""
    out = []
    for r in table.to_pylist():
        rel = [("N/A" if r[f"{s}_relative_error_pct"] is None else f"{r[f'{s}_relative_error_pct']}%") for s in STATS]
        result = "" if r["passed"] is not False else "Warning"
        names = [r["tensor_name"], r["golden_name"], _cell(r["dtype"]), _cell(r["golden_dtype"]), str(r["shape"]), str(r["golden_shape"])]
        out.append([*names, *(_cell(r[f"{s}_diff"]) for s in STATS), *rel, *(_cell(r[f"my_{s}"]) for s in STATS),
                    *(_cell(r[f"golden_{s}"]) for s in STATS), result, r["fail_reason"] or ""])  # fmt: skip
    return out
