"""The dump pipelines the CLI and the library share: binary dumps → tables → summary.

``parse_dump`` reads a dump folder (binary dump files and statistics CSVs) into the tensors table
(and .npy arrays); ``compare_dumps`` compares two dumps tensor by tensor and names the first op
whose output goes wrong. Each writes its tables into ``out`` when given and returns a result with
``.summary``, ``.tables`` and ``to_dict()``. Nothing here prints.
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.errors import InputError
from npudiag.report.json_report import json_safe


@dataclass
class DumpParse:
    """``tables["tensors"]``: one row per input/output tensor; ``summary``: files, tensors, bytes,
    seconds, errors (files skipped, each naming the file and what was wrong)."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    errors: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """The tensors in execution order (timestamp, then task id)."""
        t = self.tables["tensors"]
        return t.sort_by([("timestamp_us", "ascending"), ("task_id", "ascending")]).to_pylist() if t.num_rows else []

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def parse_dump(path: str | Path, out: str | Path | None = None, *, npy: str | Path | None = None) -> DumpParse:
    """Parse every dump file under ``path``; write tensors.parquet and summary.json into ``out`` when
    given, one .npy per tensor into ``npy`` when given. A missing ``path`` is an InputError."""
    from npudiag.dump.ingest import parse_dump_tree
    from npudiag.store import write_json, write_table

    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or folder")
    t0 = time.perf_counter()
    run = parse_dump_tree(path, Path(npy) if npy is not None else None)
    summary = {
        "files": run.files,
        "tensors": run.table.num_rows,
        "tensor_bytes": run.tensor_bytes,
        "seconds": time.perf_counter() - t0,
        "errors": run.errors,
    }
    if out is not None:
        out = Path(out)
        summary["out"] = str(out)
        write_table(run.table, out / "tensors.parquet")
        write_json(summary, out / "summary.json")
    return DumpParse(summary, {"tensors": run.table}, run.errors)


@dataclass
class DumpComparison:
    """``tables["compare"]``: one row per matched tensor with its metrics and verdict; ``summary``:
    counts, the first failing output, the worst tensors; ``failed`` when any tensor fails."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.summary["tensors_failed"])

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def compare_dumps(
    mine: str | Path,
    golden: str | Path,
    out: str | Path | None = None,
    *,
    mapping: str | Path | None = None,
    cosine: float = 0.99,
    red: float = 0.05,
    kl: float = 0.005,
) -> DumpComparison:
    """Compare dump ``mine`` with ``golden`` (dump folders or .npy folders); a tensor passes when its
    cosine similarity >= ``cosine``, relative Euclidean distance < ``red`` and KL divergence < ``kl``.
    ``mapping``: CSV of my_op_name,golden_op_name. Writes compare.parquet and msaccucmp's
    result_<time>.csv into ``out`` when given."""
    from npudiag.dump.accuracy import Thresholds
    from npudiag.dump.compare import CSV_COLUMNS, compare_summary, msaccucmp_csv_rows
    from npudiag.dump.compare import compare_dumps as compare_trees
    from npudiag.store import write_table, write_text

    mine, golden = Path(mine), Path(golden)
    for p in (mine, golden):
        if not p.exists():
            raise InputError(p, "no such file or folder")
    run = compare_trees(mine, golden, Path(mapping) if mapping is not None else None, Thresholds(cosine, red, kl))
    summary = compare_summary(run)
    if out is not None:
        out = Path(out)
        write_table(run.table, out / "compare.parquet")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        w.writerows(msaccucmp_csv_rows(run.table))
        csv_path = out / f"result_{time.strftime('%Y%m%d%H%M%S')}.csv"
        write_text(buf.getvalue(), csv_path)
        summary["out"] = [str(out / "compare.parquet"), str(csv_path)]
    return DumpComparison(summary, {"compare": run.table}, run.errors)
