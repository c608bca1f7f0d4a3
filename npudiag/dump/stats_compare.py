"""``dump compare`` of two msprobe dumps: tensor statistics side by side, as msprobe's statistics compare,
and in tensor mode the saved tensors themselves, as msprobe's tensor compare.

msprobe dumps (``dump.json``, :mod:`npudiag.dump.formats.msprobe_json`) hold each tensor's Max, Min,
Mean and L2 norm; in tensor mode (``task: tensor``) each tensor is also saved (``.pt`` / ``.npy`` in
``dump_tensor_data/``), and where both sides saved a tensor its data are compared too
(:mod:`npudiag.dump.tensor_metrics`: cosine, Euclidean distance, max absolute and relative error,
the shares of elements within 0.1 % and 0.5 %). Tensors and scalar arguments
match by msprobe's name (``Functional.conv2d.0.forward.input.1``), the n-th occurrence of a name with
the n-th. For each statistic: the difference (mine - golden) and the relative error
|diff / golden| x 100 % (none where golden is 0), as msprobe's ``Max diff`` and ``MaxRelativeErr``.

The verdicts are msprobe's (26.x), per call (an API or module call, its inputs and outputs):
``error`` where mine's max or min is NaN/Inf and golden's are finite, where dtype, shape or
requires_grad differ, where a scalar argument differs, or where the inputs agree (every input's
L2-norm relative error below 0.1) and an output's L2-norm relative error is above 0.5 (the error
starts in this call); ``warning`` on the first output where its L2-norm relative error is more than
10 times the largest input's (above 0.1 where the inputs agree exactly). Where the call's tensors
were compared as data (tensor mode) the two data rules take the place of those two: ``error`` on
the first output where every input (parameters included) has more than 90 % of its elements within
0.1 % and an output under 10 %; ``warning`` on the first output where the inputs' lowest cosine is
above 0.9 and more than 0.1 above the outputs' lowest. Calls msprobe ignores
(``to``, ``empty``, ``__setitem__`` ...) are not judged; for collectives whose inputs differ by rank
(``_all_gather_base`` ...) only their outputs are. A tensor fails on ``error``.

With several dump.json files (``step{N}/rank{R}/``), each of mine is compared with the golden one at
the same relative path; with one on each side, those two.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.dump.formats import msprobe_json
from npudiag.dump.formats.saved_tensor import read_saved_tensor
from npudiag.dump.tensor_metrics import METRICS, tensor_metrics
from npudiag.errors import InputError
from npudiag.schemas import STATS_COMPARE

STATS = ("max", "min", "mean", "l2norm")
# msprobe's statistics-compare thresholds, on the L2 norm's relative error (a fraction)
INPUTS_AGREE = 0.1  # every input below this: the inputs agree
OUTPUT_DIVERGES = 0.5  # an output above this while the inputs agree: error
WARN_RATIO = 10.0  # an output's error this many times the inputs': warning
# calls msprobe does not judge, by the API name (the second part of the call's name)
IGNORED = {
    "empty",
    "empty_like",
    "numpy",
    "to",
    "__setitem__",
    "empty_with_format",
    "new_empty_strided",
    "new_empty",
    "empty_strided",
}
INPUTS_IGNORED = {"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"}
# msprobe's tensor-mode thresholds: the share of elements within 0.1 %, and the cosine
INPUTS_CLOSE = 0.9  # every input's share above this ...
OUTPUT_FAR = 0.1  # ... and an output's below this: error
COSINE_INPUTS = 0.9  # the inputs' lowest cosine above this ...
COSINE_DROP = 0.1  # ... and more than this above the outputs' lowest: warning
SAVED = (".pt", ".npy")


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


def _diff(a: float | None, b: float | None) -> tuple[float | None, float | None]:
    """(mine - golden, relative error %) of one statistic; the relative error is None where golden is 0."""
    if a is None or b is None:
        return None, None
    if math.isnan(a) or math.isnan(b):
        return math.nan, None
    if math.isinf(a) or math.isinf(b):
        return (
            (0.0, 0.0)
            if a == b
            else (a - b if not (math.isinf(a) and math.isinf(b)) else math.copysign(math.inf, a), None)
        )
    diff = a - b
    return diff, (abs(diff / b) * 100.0 if b != 0 else None)


def _norm_error(r: dict[str, Any]) -> float | None:
    """The L2 norm's relative error as a fraction, where there is one (msprobe skips 0, N/A, inf, nan)."""
    pct = r["l2norm_relative_error_pct"]
    return None if pct is None or not math.isfinite(pct) or pct == 0 else pct / 100.0


# torch's other names of one dtype (torch.float is torch.float32 ...)
_DTYPE_ALIASES = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "chalf": "complex32",
}


def dtype_key(name: Any) -> Any:
    """A dtype as both frameworks name it: PyTorch's ``torch.bfloat16`` and MindSpore's ``BFloat16`` are
    one dtype (lower case, the framework prefix dropped, torch's aliases resolved)."""
    if not isinstance(name, str):
        return name
    key = name.strip().lower()
    if key.startswith("torch."):
        key = key.removeprefix("torch.")
        return _DTYPE_ALIASES.get(key, key)
    for prefix in ("mindspore.", "ms.", "numpy.", "np."):
        key = key.removeprefix(prefix)
    return key


def _non_finite(v: float | None) -> bool:
    return v is not None and not math.isfinite(v)


def judge_call(rows: list[dict[str, Any]]) -> None:
    """msprobe's statistics-compare verdicts for the rows of one call (in place: ``result``, ``passed``,
    ``fail_reason``)."""
    parts = rows[0]["op_name"].split(".")
    api = parts[1] if len(parts) > 1 else ""
    inputs = [r for r in rows if r["io"] != "output"]
    outputs = [r for r in rows if r["io"] == "output"]
    notes: dict[int, list[tuple[str, str]]] = {id(r): [] for r in rows}
    judged = [] if api in IGNORED else outputs if api in INPUTS_IGNORED else inputs + outputs
    for r in judged:
        notes[id(r)] += _row_notes(r)
    if api not in IGNORED and api not in INPUTS_IGNORED:
        for r in inputs:
            if r["_scalar"] and r["my_max"] != r["golden_max"]:
                notes[id(r)].append(("error", "scalar argument differs"))
        if any(r.get("_saved") for r in rows):  # tensor mode: both sides saved the call's tensors
            _judge_data(inputs, outputs, notes)  # the statistics rules are not msprobe's in tensor mode
        else:
            _judge_norms(inputs, outputs, notes)
    for r in rows:
        levels = [lv for lv, _ in notes[id(r)]]
        r["result"] = "error" if "error" in levels else ("warning" if levels else "pass")
        r["passed"] = r["result"] != "error"
        r["fail_reason"] = "; ".join(m for _, m in notes[id(r)]) or None


def _row_notes(r: dict[str, Any]) -> list[tuple[str, str]]:
    """One tensor's own problems: NaN/Inf only in mine's statistics, and requires_grad, dtype or shape differing."""
    notes = []
    golden_finite = not (_non_finite(r["golden_max"]) or _non_finite(r["golden_min"]))
    if golden_finite and (_non_finite(r["my_max"]) or _non_finite(r["my_min"])):
        notes.append(("error", "NaN/Inf in mine's max or min, not in golden's"))
    for what, a, b in (
        ("requires_grad", r["_my_requires_grad"], r["_golden_requires_grad"]),
        ("dtype", r["dtype"], r["golden_dtype"]),
        ("shape", r["shape"], r["golden_shape"]),
    ):
        same = dtype_key(a) == dtype_key(b) if what == "dtype" else a == b
        if a is not None and b is not None and not same:
            notes.append(("error", f"{what} differs ({a} vs {b})"))
    return notes


def _judge_norms(
    inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], notes: dict[int, list[tuple[str, str]]]
) -> None:
    """The statistics rules: an output whose L2 norm is off while the inputs agree is an error; an output error
    over WARN_RATIO times the inputs' a warning."""
    in_max = max((e for e in map(_norm_error, inputs) if e is not None), default=0.0)
    if in_max < INPUTS_AGREE:
        for r in outputs:
            e = _norm_error(r)
            if e is not None and e > OUTPUT_DIVERGES:
                why = f"inputs agree, output's L2 norm off by {100 * e:.1f}% (> {100 * OUTPUT_DIVERGES:.0f}%)"
                notes[id(r)].append(("error", why))
    out_max = max((e for e in map(_norm_error, outputs) if e is not None), default=0.0)
    if outputs and (out_max > WARN_RATIO * in_max if in_max else out_max > INPUTS_AGREE):
        notes[id(outputs[0])].append(("warning", "output's L2-norm error is over 10 times the inputs'"))


def _lowest(rows: list[dict[str, Any]], metric: str) -> float:
    """The lowest finite value of ``metric`` over ``rows``, 1.0 where none has one (msprobe's default)."""
    return min((r[metric] for r in rows if r[metric] is not None and math.isfinite(r[metric])), default=1.0)


def _judge_data(
    inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], notes: dict[int, list[tuple[str, str]]]
) -> None:
    if not outputs:
        return
    share_in, share_out = _lowest(inputs, "one_thousandth_err_ratio"), _lowest(outputs, "one_thousandth_err_ratio")
    if share_in > INPUTS_CLOSE and share_out < OUTPUT_FAR:
        notes[id(outputs[0])].append(
            (
                "error",
                f"the inputs agree (at least {100 * share_in:.1f}% of each one's elements within 0.1 %), "
                f"an output does not ({100 * share_out:.1f}%)",
            )
        )
    cos_in, cos_out = _lowest(inputs, "cosine"), _lowest(outputs, "cosine")
    if cos_in > COSINE_INPUTS and cos_in - cos_out > COSINE_DROP:
        notes[id(outputs[0])].append(("warning", f"cosine drops from {cos_in:.4f} (inputs) to {cos_out:.4f} (outputs)"))


def _saved(r: dict[str, Any], g: dict[str, Any]) -> bool:
    """Whether both sides of a matched pair saved the tensor to a file (tensor mode)."""
    return str(r.get("file") or "").endswith(SAVED) and str(g.get("file") or "").endswith(SAVED)


def _data(r: dict[str, Any], g: dict[str, Any], errors: list[str]) -> dict[str, float | None]:
    """The tensor metrics of a matched pair where both sides saved the tensor (tensor mode)."""
    if r.get("scalar") or not _saved(r, g):
        return dict.fromkeys(METRICS)
    try:
        values, _why = tensor_metrics(read_saved_tensor(Path(r["file"])), read_saved_tensor(Path(g["file"])))
    except InputError as exc:
        errors.append(exc.one_line())
        return dict.fromkeys(METRICS)
    return values


def compare_rows(
    mine: list[dict[str, Any]], golden: list[dict[str, Any]], errors: list[str] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The comparison rows of two dumps' tensors and scalar arguments (read with ``scalars``), with
    msprobe's verdicts, and the names of mine with no golden match; a saved tensor that cannot be read
    is a line in ``errors`` and leaves its row without data metrics."""
    errors = [] if errors is None else errors
    pool: dict[str, list[dict[str, Any]]] = {}
    for g in golden:
        pool.setdefault(g["tensor_name"], []).append(g)
    order: dict[str, int] = {}
    calls: dict[str, list[dict[str, Any]]] = {}
    unmatched = []
    for r in mine:
        order.setdefault(r["op_name"], len(order))
        candidates = pool.get(r["tensor_name"])
        if not candidates:
            unmatched.append(r["tensor_name"])
            continue
        g = candidates.pop(0)
        row = {
            "order": order[r["op_name"]],
            "op_type": r["op_type"],
            "op_name": r["op_name"],
            "io": r["io"],
            "index": r["index"],
            "tensor_name": r["tensor_name"],
            "golden_name": g["tensor_name"],
            "dtype": r["dtype"],
            "golden_dtype": g["dtype"],
            "shape": r["shape"],
            "golden_shape": g["shape"],
            "_scalar": bool(r.get("scalar")),
            "_my_requires_grad": r.get("requires_grad"),
            "_golden_requires_grad": g.get("requires_grad"),
        }
        for s in STATS:
            row[f"my_{s}"], row[f"golden_{s}"] = r[s], g[s]
            row[f"{s}_diff"], row[f"{s}_relative_error_pct"] = _diff(r[s], g[s])
        row["_saved"] = _saved(r, g)
        row.update(_data(r, g, errors))
        calls.setdefault(r["op_name"], []).append(row)
    rows = []
    for group in calls.values():
        judge_call(group)
        rows += group
    return rows, unmatched


def compare_msprobe(mine: Path, golden: Path) -> tuple[pa.Table, list[str], list[str]]:
    """The STATS_COMPARE table of two msprobe dumps, the tensors of mine with no match, and the errors."""
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    unmatched: list[str] = []
    offset = 0
    for m, g in _pairs(mine, golden, errors):
        try:
            mine_rows, golden_rows = (
                msprobe_json.read_msprobe_dump(m, scalars=True),
                msprobe_json.read_msprobe_dump(g, scalars=True),
            )
        except InputError as exc:
            errors.append(exc.one_line())
            continue
        got, missing = compare_rows(mine_rows, golden_rows, errors)
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
    # where the error starts: the first failing output, else the first call with a failing input (a scalar that differs)
    failing_any = failing or [r for r in rows if r["passed"] is False]
    first = min(failing_any, key=lambda r: r["order"]) if failing_any else None

    warned = [r for r in rows if r["result"] == "warning"]
    data = has_data(table)

    def moved(r: dict[str, Any]) -> float:
        if data:  # the share of elements off by 0.1 % or more, then how far the cosine fell
            share, cos = r["one_thousandth_err_ratio"], r["cosine"]
            if share is None or share != share:
                return math.inf if r["passed"] is False else -1.0
            return (1.0 - share) + (0.0 if cos is None or cos != cos else (1.0 - cos))
        errs = [r[f"{s}_relative_error_pct"] for s in STATS if r[f"{s}_relative_error_pct"] is not None]
        return max(errs) if errs else (math.inf if r["passed"] is False else -1.0)

    # failing tensors first, then warned ones, then the rest; within each, the furthest moved first
    rank = {"error": 0, "warning": 1}
    ranked = sorted(rows, key=lambda r: (rank.get(r["result"], 2), -moved(r), r["order"], r["io"], r["tensor_name"]))
    return {
        "mode": "statistics",
        "data": data,  # tensor mode: the saved tensors were compared too
        "tensors_compared": len(rows),
        "tensors_failed": sum(1 for r in rows if r["passed"] is False),
        "outputs_failed": len(failing),
        "tensors_warned": len(warned),
        "first_failing_output": first,
        "worst": ranked[:worst],
        "unmatched": unmatched,
        "errors": errors,
    }


def has_data(table: pa.Table) -> bool:
    """Whether any tensor was compared by its data (tensor mode)."""
    return any(table[m].null_count < table.num_rows for m in METRICS) if table.num_rows else False


# msprobe's tensor-compare columns before the statistics (tensor mode)
TENSOR_CSV_COLUMNS = [
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
]
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


def csv_columns(table: pa.Table) -> list[str]:
    """The CSV's header: msprobe's summary-compare columns, or in tensor mode its tensor-compare ones."""
    if has_data(table):
        return [*SUMMARY_CSV_COLUMNS[:6], *TENSOR_CSV_COLUMNS, *SUMMARY_CSV_COLUMNS[14:]]
    return SUMMARY_CSV_COLUMNS


def summary_csv_rows(table: pa.Table) -> list[list[str]]:
    """The comparison in ``csv_columns`` (relative errors as ``12.5%``; a data metric that could not be
    computed as ``unsupported``)."""
    out = []
    data = has_data(table)
    for r in table.to_pylist():
        rel = [("N/A" if r[f"{s}_relative_error_pct"] is None else f"{r[f'{s}_relative_error_pct']}%") for s in STATS]
        result = r["result"]
        names = [
            r["tensor_name"],
            r["golden_name"],
            _cell(r["dtype"]),
            _cell(r["golden_dtype"]),
            str(r["shape"]),
            str(r["golden_shape"]),
        ]
        middle = (
            ["unsupported" if r[m] is None else _cell(r[m]) for m in METRICS]
            if data
            else [*(_cell(r[f"{s}_diff"]) for s in STATS), *rel]
        )
        out.append(
            [
                *names,
                *middle,
                *(_cell(r[f"my_{s}"]) for s in STATS),
                *(_cell(r[f"golden_{s}"]) for s in STATS),
                result,
                r["fail_reason"] or "",
            ]
        )
    return out
