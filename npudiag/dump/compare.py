"""``dump compare`` as a library call: match MY_DUMP's tensors to golden ones and measure the error.

GOLDEN is another dump tree, or a folder of ``.npy`` files named ``{name}.{input|output}.{index}.npy``
where ``name`` is either the op name or the whole dump file name (``{op_type}.{op_name}.{task}.{stream}.{ts}``,
what ``npudiag dump parse --npy`` and msaccucmp's conversion write). A mapping CSV
(``my_op_name,golden_op_name`` per line) matches renamed ops.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from npudiag.dump.accuracy import Thresholds, compare_arrays
from npudiag.dump.formats.dump_file import parse_dump_name, read_dump, tensor_array, to_original_shape
from npudiag.dump.ingest import dump_files, dump_mapping, dump_name
from npudiag.errors import InputError
from npudiag.output import npudiag_manifest
from npudiag.safeio import read_text_limited
from npudiag.schemas import COMPARE

Key = tuple[str, str, int]  # op name, io, index


@dataclass
class _Entry:
    op_type: str | None
    op_name: str
    io: str
    index: int
    order: tuple[int, int, str]
    dtype: str
    shape: list[int]
    load: Callable[[], np.ndarray | None]
    name: str


@dataclass
class CompareRun:
    table: pa.Table
    unmatched: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _dump_entries(root: Path, errors: list[str]) -> list[_Entry]:
    out: list[_Entry] = []
    mappings: dict[Path, dict[str, str]] = {}
    for f in dump_files(root, errors):
        if f.parent not in mappings:  # file names too long for the file system: mapping.csv, as dump parse reads it
            mappings[f.parent] = dump_mapping(f.parent, errors)
        name, _ = dump_name(f, mappings[f.parent])
        if name is None or f.suffix == ".csv":
            continue
        try:
            dump = read_dump(f)
        except InputError as exc:
            errors.append(exc.one_line())
            continue
        for spec in dump.tensors:
            if spec.io not in ("input", "output"):
                continue

            def load(f: Path = f, spec=spec) -> np.ndarray | None:
                a = tensor_array(f, spec)
                return None if a is None else to_original_shape(np.asarray(a), spec)[0]

            order = (name.timestamp or 0, name.task_id or 0, f.name)
            out.append(
                _Entry(
                    name.op_type,
                    name.op_name,
                    spec.io,
                    spec.index,
                    order,
                    spec.dtype_name,
                    spec.original_shape or spec.shape,
                    load,
                    f.name,
                )
            )
    return out


def _npy_names(root: Path) -> dict[str, tuple[str, str, int]]:
    """File name -> (op name, io, index) from the manifest ``dump parse --npy`` wrote, where the
    exact op name is kept whatever its file name had to become; {} for other folders."""
    manifest = npudiag_manifest(root) or {}
    names = {}
    for row in manifest.get("tensors", []) if isinstance(manifest.get("tensors"), list) else []:
        ok = isinstance(row, list) and len(row) == 4 and isinstance(row[0], str) and isinstance(row[1], str)
        if ok and row[2] in ("input", "output") and isinstance(row[3], int) and not isinstance(row[3], bool):
            names[row[0]] = (row[1], row[2], row[3])
    return names


def _npy_entries(root: Path) -> list[_Entry]:
    out = []
    known = _npy_names(root)
    for f in sorted(root.rglob("*.npy")):
        if f.parent == root and f.name in known:
            name, io_, index = known[f.name]
            dn = parse_dump_name(name)
            out.append(
                _Entry(
                    dn.op_type if dn else None,
                    dn.op_name if dn else name,
                    io_,
                    index,
                    (0, 0, f.name),
                    "npy",
                    [],
                    lambda f=f: _load_npy(f),
                    f.name,
                )
            )
            continue
        parts = f.name[:-4].split(".")
        if len(parts) < 3 or parts[-2] not in ("input", "output") or not re.fullmatch("[0-9]{1,9}", parts[-1]):
            continue
        base = ".".join(parts[:-2])
        dn = parse_dump_name(base)
        op = dn.op_name if dn else base
        out.append(
            _Entry(
                dn.op_type if dn else None,
                op,
                parts[-2],
                int(parts[-1]),
                (0, 0, f.name),
                "npy",
                [],
                lambda f=f: _load_npy(f),
                f.name,
            )
        )
    return out


def _read_mapping(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    if not path.exists():
        raise InputError(path, "no such file (the --mapping CSV of my op name,golden op name)")
    text = read_text_limited(path, 256 << 20)
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise InputError(path, f"not a CSV of my op name,golden op name ({exc})") from None
    return {row[0].strip(): row[1].strip() for row in rows if len(row) >= 2 and not row[0].startswith("#")}


def _load_npy(f: Path) -> np.ndarray:
    """A golden .npy of numbers; InputError naming the file for anything else (Python objects,
    strings, a truncated or garbage file). Object arrays are never loaded (numpy's default)."""
    try:
        arr = np.load(f, mmap_mode="r")
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f, f"not a readable .npy array ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biufc":
        raise InputError(f, f"holds {getattr(arr, 'dtype', type(arr))} values; expected a numeric array")
    return arr


def compare_trees(
    mine: Path, golden: Path, mapping: Path | None = None, thresholds: Thresholds | None = None
) -> CompareRun:
    errors: list[str] = []
    my_entries = _dump_entries(mine, errors)
    if not my_entries:
        raise InputError(mine, "no dump files with tensors found" + (f" ({errors[0]})" if errors else ""))
    npy = any(golden.rglob("*.npy")) if golden.is_dir() else False
    gold_entries = _npy_entries(golden) if npy else _dump_entries(golden, errors)
    if not gold_entries:
        raise InputError(
            golden, "no golden tensors found (expected a dump tree or {name}.{input|output}.{index}.npy files)"
        )
    names = _read_mapping(mapping)
    pool: dict[Key, list[_Entry]] = {}
    for g in gold_entries:
        pool.setdefault((g.op_name, g.io, g.index), []).append(g)
    my_entries.sort(key=lambda e: e.order)
    op_order: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    unmatched = []
    for e in my_entries:
        op_order.setdefault(e.op_name, len(op_order))
        key = (names.get(e.op_name, e.op_name), e.io, e.index)
        candidates = pool.get(key)
        if not candidates:
            unmatched.append(f"{e.op_name}:{e.io}:{e.index}")
            continue
        g = candidates.pop(0)  # the n-th occurrence matches the n-th (repeated ops, iterations)
        base = {
            "order": op_order[e.op_name],
            "op_type": e.op_type,
            "op_name": e.op_name,
            "io": e.io,
            "index": e.index,
            "golden_name": g.name,
            "dtype": e.dtype,
            "golden_dtype": g.dtype,
            "shape": e.shape,
        }
        try:
            x, y = e.load(), g.load()
        except InputError as exc:
            errors.append(exc.one_line())
            rows.append({**base, "passed": None, "fail_reason": f"not compared: {exc.problem}"})
            continue
        if x is None or y is None:
            rows.append({**base, "passed": None, "fail_reason": "data type kept raw (no numeric comparison)"})
            continue
        rows.append({**base, **compare_arrays(x, y, thresholds)})
    table = pa.Table.from_pylist(rows, schema=COMPARE) if rows else COMPARE.empty_table()
    return CompareRun(table, unmatched, errors)


def compare_summary(run: CompareRun, worst: int = 10) -> dict[str, Any]:
    rows = run.table.to_pylist()
    outputs = [r for r in rows if r["io"] == "output"]
    failing = [r for r in outputs if r["passed"] is False]
    first = min(failing, key=lambda r: r["order"]) if failing else None

    # lowest cosine first (NaN before all); cosines equal to 12 decimals (1.0 and 0.9999999999999998 are
    # the same tensor summed in another order) keep execution order, so the list is the same on every CPU
    def worst_first(r: dict[str, Any]) -> tuple:
        cos = r["cosine_similarity"]
        return (round(cos, 12) if cos == cos else -2, r["order"], r["io"], r["index"])

    by_cos = sorted((r for r in rows if r["cosine_similarity"] is not None), key=worst_first)
    return {
        "tensors_compared": len(rows),
        "tensors_failed": sum(1 for r in rows if r["passed"] is False),
        "outputs_failed": len(failing),
        "first_failing_output": first,
        "worst": by_cos[:worst],
        "unmatched": run.unmatched,
        "errors": run.errors,
    }


CSV_COLUMNS = [
    "Index", "OpSequence", "OpType", "NPUDump", "DataType", "GroundTruth", "DataType", "TensorIndex", "Shape", "CosineSimilarity",
    "MaxAbsoluteError", "AccumulatedRelativeError", "RelativeEuclideanDistance", "KullbackLeiblerDivergence", "StandardDeviation",
    "MeanAbsoluteError", "RootMeanSquareError", "MaxRelativeError", "MeanRelativeError", "CompareFailReason",
]  # fmt: skip


def _fmt(v: Any) -> str:
    if v is None:
        return "NaN"
    if isinstance(v, float):
        return "NaN" if v != v else f"{v:.6f}"
    return str(v)


def msaccucmp_csv_rows(table: pa.Table) -> list[list[str]]:
    out = []
    for i, r in enumerate(table.to_pylist()):
        std = (
            "NaN"
            if r["my_mean"] is None
            else f"({r['my_mean']:.3f};{r['my_std']:.3f}),({r['golden_mean']:.3f};{r['golden_std']:.3f})"
        )
        out.append(
            [
                str(i),
                str(r["order"]),
                r["op_type"] or "",
                r["op_name"],
                r["dtype"],
                r["golden_name"],
                r["golden_dtype"],
                f"{r['op_name']}:{r['io']}:{r['index']}",
                "(" + ",".join(map(str, r["shape"] or [])) + ")",
                _fmt(r["cosine_similarity"]),
                _fmt(r["max_absolute_error"]),
                _fmt(r["accumulated_relative_error"]),
                _fmt(r["relative_euclidean_distance"]),
                _fmt(r["kl_divergence"]),
                std,
                _fmt(r["mean_absolute_error"]),
                _fmt(r["root_mean_square_error"]),
                _fmt(r["max_relative_error"]),
                _fmt(r["mean_relative_error"]),
                r["fail_reason"] or "",
            ]
        )
    return out
