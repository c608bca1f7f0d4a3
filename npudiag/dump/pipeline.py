"""The dump pipelines the CLI and the library share: binary dumps → tables → summary.

``parse_dump`` reads a dump folder (binary dump files and statistics CSVs) into the tensors table
(and .npy arrays); ``compare_dumps`` compares two dumps tensor by tensor and names the first op
whose output goes wrong. Each writes its tables into ``out`` when given and returns a result with
``.summary``, ``.tables`` and ``to_dict()``. Nothing here prints.
"""

from __future__ import annotations

import contextlib
import csv
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.dump.accuracy import Thresholds
from npudiag.dump.compare import CSV_COLUMNS, compare_summary, compare_trees, msaccucmp_csv_rows
from npudiag.dump.ingest import NpyFolder, parse_dump_tree
from npudiag.dump.stats_compare import compare_msprobe, csv_columns, msprobe_files, stats_summary, summary_csv_rows
from npudiag.errors import InputError, OptionError
from npudiag.output import FolderTarget, OutputFolder, atomic_write, csv_cell, dumps, json_safe
from npudiag.store import write_table


@dataclass
class DumpParse:
    """``tables["tensors"]``: one row per input/output tensor; ``summary``: files, tensors, bytes,
    seconds, errors (files skipped, each naming the file and what was wrong)."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """The tensors in execution order (timestamp, then task id)."""
        t = self.tables["tensors"]
        return t.sort_by([("timestamp_us", "ascending"), ("task_id", "ascending")]).to_pylist() if t.num_rows else []

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary)


def parse_dump(
    path: str | Path, out: str | Path | None = None, *, npy: str | Path | None = None, force: bool = False
) -> DumpParse:
    """Parse every dump file under ``path``; write tensors.parquet and summary.json into ``out`` when
    given, one .npy per tensor into ``npy`` when given (each folder written whole, see
    ``npudiag.output``). A missing ``path`` is an InputError."""

    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or folder")
    _distinct_outputs(("--out", out), ("--npy", npy))
    if out is not None:  # checked before the parse: a refusal costs nothing
        FolderTarget(out, force=force, inputs=[path])
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        arrays = None
        if npy is not None:
            npy_folder = stack.enter_context(
                OutputFolder(npy, kind="dump parse --npy", force=force, inputs=[path], option="--npy")
            )
            arrays = NpyFolder(npy_folder.work)
        run = parse_dump_tree(path, arrays)
        summary = {
            "files": run.files,
            "tensors": run.table.num_rows,
            "tensor_bytes": run.tensor_bytes,
            "seconds": time.perf_counter() - t0,
            "errors": run.errors,
        }
        if arrays is not None:
            npy_folder.commit({"input": str(path), "tensors": arrays.tensors})
            summary["npy"] = str(npy)
        if out is not None:
            summary["out"] = str(out)
            with OutputFolder(out, kind="dump parse", force=force, inputs=[path]) as folder:
                write_table(run.table, folder.work / "tensors.parquet")
                _write_json(summary, folder.work / "summary.json")
                folder.commit({"input": str(path)})
    return DumpParse(summary, {"tensors": run.table}, run.errors)


def _distinct_outputs(*outputs: tuple[str, str | Path | None]) -> None:
    """Two output folders of one run may not be one folder, nor one inside the other (the swap of
    one would take the other with it)."""
    given = [(flag, Path(p).absolute()) for flag, p in outputs if p is not None]
    for i, (fa, a) in enumerate(given):
        for fb, b in given[i + 1 :]:
            if a == b or a in b.parents or b in a.parents:
                raise OptionError(
                    f"{fa} {a} and {fb} {b} must be separate folders, neither inside the other", fa.lstrip("-")
                )


def _write_json(obj: Any, path: Path) -> None:

    text = dumps(obj) + "\n"
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


@dataclass
class DumpComparison:
    """``tables["compare"]``: one row per matched tensor with its metrics and verdict; ``summary``:
    counts, the first failing output, the worst tensors; ``failed`` when any tensor fails."""

    summary: dict[str, Any]
    tables: dict[str, pa.Table]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

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
    force: bool = False,
) -> DumpComparison:
    """Compare dump ``mine`` with ``golden`` (dump folders or .npy folders); a tensor passes when its
    cosine similarity >= ``cosine``, relative Euclidean distance < ``red`` and KL divergence < ``kl``.
    Two msprobe dumps (dump.json statistics) are compared statistic by statistic instead
    (``npudiag.dump.stats_compare``): stats_compare.parquet and msprobe's compare_result_<time>.csv.
    ``mapping``: CSV of my_op_name,golden_op_name. Writes compare.parquet and msaccucmp's
    result_<time>.csv into ``out`` when given."""

    mine, golden = Path(mine), Path(golden)
    for p in (mine, golden):
        if not p.exists():
            raise InputError(p, "no such file or folder")
    inputs = [mine, golden] + ([Path(mapping)] if mapping is not None else [])
    if out is not None:  # checked before the comparison: a refusal costs nothing
        FolderTarget(out, force=force, inputs=inputs)
    if msprobe_files(mine):  # msprobe's statistics: compared as its summary compare does
        return _compare_statistics(mine, golden, out, inputs, force)
    run = compare_trees(mine, golden, Path(mapping) if mapping is not None else None, Thresholds(cosine, red, kl))
    summary = compare_summary(run)
    if out is not None:
        out = Path(out)
        csv_name = f"result_{time.strftime('%Y%m%d%H%M%S')}.csv"
        with OutputFolder(out, kind="dump compare", force=force, inputs=inputs) as folder:
            write_table(run.table, folder.work / "compare.parquet")
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(CSV_COLUMNS)
            w.writerows([csv_cell(v) for v in row] for row in msaccucmp_csv_rows(run.table))
            atomic_write(folder.work / csv_name, lambda fh: fh.write(buf.getvalue().encode("utf-8")))
            folder.commit({"mine": str(mine), "golden": str(golden)})
        summary["out"] = [str(out / "compare.parquet"), str(out / csv_name)]
    return DumpComparison(summary, {"compare": run.table}, run.errors)


def _compare_statistics(
    mine: Path, golden: Path, out: str | Path | None, inputs: list[Path], force: bool
) -> DumpComparison:
    table, unmatched, errors = compare_msprobe(mine, golden)
    if not table.num_rows and not errors:
        raise InputError(mine, f"no tensor matches one of {golden} by msprobe's name (different model or dump level?)")
    summary = stats_summary(table, unmatched, errors)
    if out is not None:
        out = Path(out)
        csv_name = f"compare_result_{time.strftime('%Y%m%d%H%M%S')}.csv"
        with OutputFolder(out, kind="dump compare", force=force, inputs=inputs) as folder:
            write_table(table, folder.work / "stats_compare.parquet")
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(csv_columns(table))
            w.writerows([csv_cell(v) for v in row] for row in summary_csv_rows(table))
            atomic_write(folder.work / csv_name, lambda fh: fh.write(buf.getvalue().encode("utf-8")))
            folder.commit({"mine": str(mine), "golden": str(golden)})
        summary["out"] = [str(out / "stats_compare.parquet"), str(out / csv_name)]
    return DumpComparison(summary, {"compare": table}, errors)
