"""``dump parse`` as a library call: walk a dump tree and turn every tensor into a row of tensors.parquet.

Files are processed one at a time (header read, tensors memory-mapped and summarised block by
block), so memory does not grow with the size of the dump. A file that fails is reported with
its byte offset and the rest are still parsed.
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from npudiag.dump.formats import msprobe_json
from npudiag.dump.formats.dump_file import DumpName, parse_dump_name, read_dump, tensor_array, to_original_shape
from npudiag.dump.tensor_stats import tensor_stats
from npudiag.errors import InputError, writing
from npudiag.output import UniqueNames
from npudiag.safeio import inside, is_regular, small_int, text_of
from npudiag.schemas import TENSORS

STATS_HEADER = "Input/Output,Index,Data Size,Data Type,Format,Shape"
_TIME_DIR = re.compile(r"^[0-9]{14}$")
_INT64_MAX = (1 << 63) - 1
SKIP_NAMES = {"mapping.csv", "acl.json"}
ROWS_PER_BATCH = 8192


@dataclass
class DumpRun:
    table: pa.Table
    files: int = 0
    errors: list[str] = field(default_factory=list)
    tensor_bytes: int = 0


def dump_mapping(folder: Path, errors: list[str]) -> dict[str, str]:
    """mapping.csv: digit file names (for names too long for the file system) -> the real name. A
    mapping that cannot be read is one error line; the files of its folder keep their own names."""
    m = folder / "mapping.csv"
    if not is_regular(m):
        return {}
    out = {}
    try:
        for _line, row in _csv_rows(m):
            if len(row) >= 2:
                out[row[0].strip()] = row[1].strip()
    except InputError as exc:
        errors.append(exc.one_line())
    return out


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of a small CSV; a field over the csv module's limit (128 KiB), an unclosed
    quote or a NUL byte is an InputError naming the line."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.reader(fh)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise InputError(path, f"not a readable CSV ({exc})", line=reader.line_num) from None
            yield reader.line_num, row


def path_info(root: Path, f: Path) -> dict[str, Any]:
    """time / device / model / model_id / iteration from
    ``{dump_path}/{time}/{device_id}/{model}/{model_id}/{iteration}/file``."""
    parts = f.relative_to(root).parts[:-1] if root in f.parents else f.parent.parts
    info: dict[str, Any] = {
        "time_dir": None,
        "device_id": None,
        "model_name": None,
        "model_id": None,
        "iteration": None,
    }
    idx = next((i for i, p in enumerate(parts) if _TIME_DIR.match(p)), None)
    if idx is None:
        return info
    rest = parts[idx:]
    info["time_dir"] = rest[0]
    if len(rest) > 1:
        info["device_id"] = small_int(rest[1])
    if len(rest) > 2:
        info["model_name"] = text_of(rest[2])
    if len(rest) > 3:
        info["model_id"] = small_int(rest[3], 0, _INT64_MAX)
    if len(rest) > 4:
        info["iteration"] = small_int(rest[4], 0, _INT64_MAX)
    return info


def dump_files(root: Path, errors: list[str] | None = None) -> Iterator[Path]:
    """The regular files under ``root`` (links, FIFOs and devices never; folders that cannot be read
    are noted in ``errors``), in path order."""
    if root.is_file():
        yield root
        return
    found = []

    def unreadable(exc: OSError) -> None:
        if errors is not None:
            errors.append(f"{text_of(exc.filename)}: cannot read ({exc.strerror})")

    for dirpath, _dirs, names in os.walk(root, onerror=unreadable):
        for n in names:
            p = Path(dirpath) / n
            if n in SKIP_NAMES or p.suffix == ".npy":
                continue
            try:
                regular = stat.S_ISREG(p.lstat().st_mode)
            except OSError:
                continue
            if regular:
                found.append(p)
    yield from sorted(found)


def dump_name(f: Path, mapping: dict[str, str]) -> tuple[DumpName | None, str]:
    name = text_of(f.name)  # a name that is not UTF-8 is shown with U+FFFD, never a crash
    stem = name[:-4] if name.endswith((".csv", ".bin")) else name
    real = mapping.get(stem, mapping.get(name, stem))
    return parse_dump_name(real), real


def _base_row(f: Path, name: DumpName | None, info: dict[str, Any]) -> dict[str, Any]:
    return {
        "file": text_of(f),
        "op_type": name.op_type if name else None,
        "op_name": name.op_name if name else None,
        "task_id": name.task_id if name else None,
        "stream_id": name.stream_id if name else None,
        "timestamp_us": name.timestamp if name else None,
        **info,
    }


def _float(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None  # "NA": the statistic failed on the device


def _stats_rows(f: Path, base: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    reader = _csv_rows(f)
    header = next(reader, (1, []))[1]
    if ",".join(h.strip() for h in header[:6]) != STATS_HEADER:
        raise InputError(f, f"not a dump statistics CSV (expected a header starting {STATS_HEADER!r})", line=1)
    cols = [h.strip() for h in header]
    for lineno, row in reader:
        if not row:
            continue
        if len(row) != len(cols):
            raise InputError(f, f"{len(row)} fields, the header has {len(cols)}", line=lineno)
        r = dict(zip(cols, row))
        shape = [n for x in r["Shape"].split("x") if (n := _int(x)) is not None]
        count = r.get("Count")
        rows.append(
            {
                **base,
                "offset": None,
                "source": "stats_csv",
                "io": r["Input/Output"].strip().lower(),
                "index": _need_int(f, lineno, "Index", r["Index"]),
                "dtype": r["Data Type"].strip(),
                "format": r["Format"].strip(),
                "shape": shape,
                "original_shape": [],
                "size_bytes": _int(r["Data Size"]),
                "element_count": _int(count) if _int(count) is not None else _elements(shape) if shape else None,
                "min": _float(r.get("Min Value", "NA")),
                "max": _float(r.get("Max Value", "NA")),
                "mean": _float(r.get("Avg Value", "NA")),
                "std": None,
                "l2norm": _float(r.get("l2norm", r.get("L2Norm Value", "NA"))),
                "nan_count": _int(r.get("Nan Count")),
                "pos_inf_count": _int(r.get("Positive Inf Count")),
                "neg_inf_count": _int(r.get("Negative Inf Count")),
                "zero_count": None,
            }
        )
    return rows


def _int(v: str | None) -> int | None:
    """A count, or None where the device wrote NA (or something no int64 holds)."""
    return small_int(v, 0, _INT64_MAX) if v is not None else None


def _need_int(f: Path, lineno: int, column: str, v: str) -> int:
    n = small_int(v)
    if n is None:
        raise InputError(f, f"column {column!r}: {v[:40]!r} is not a tensor index", line=lineno)
    return n


def _elements(shape: list[int]) -> int | None:
    n = math.prod(shape)
    return n if n < 1 << 63 else None


class _Chunks:
    """A file numpy writes through ``write`` (not ``tofile``), so a full disk is the OSError it is
    (ENOSPC), not numpy's "1024 requested and 992 written"."""

    def __init__(self, fh) -> None:
        self.write = fh.write


class NpyFolder:
    """One ``.npy`` per tensor in ``folder`` (a folder npudiag is staging), named
    ``{op}.{input|output}.{index}.npy`` after the op name from the dump (or its mapping.csv): a file
    name, never a path, and never the same twice (:class:`~npudiag.output.UniqueNames`).
    ``tensors`` lists [file, op name, io, index] for the folder's manifest, so a reader gets the
    exact op name back whatever the file name had to become."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names = UniqueNames()
        self.tensors: list[list[Any]] = []

    def save(self, source: Path, op_name: str, io: str, index: int, array: np.ndarray) -> None:
        name = self.names(op_name, f".{io}.{index}.npy")
        target = self.folder / name
        if not inside(target, self.folder):
            raise InputError(source, f"op name {op_name[:80]!r} would write outside {self.folder}")
        with writing(target), open(target, "wb") as fh:
            np.save(_Chunks(fh), array)
        self.tensors.append([name, op_name, io, index])


def parse_dump_tree(root: Path, npy: NpyFolder | None = None, progress: Callable[[int], None] | None = None) -> DumpRun:
    rows: list[dict[str, Any]] = []
    batches: list[pa.Table] = []
    errors: list[str] = []
    files = 0
    tensor_bytes = 0
    mappings: dict[Path, dict[str, str]] = {}
    for f in dump_files(root, errors):
        if f.parent not in mappings:
            mappings[f.parent] = dump_mapping(f.parent, errors)
        name, real = dump_name(f, mappings[f.parent])
        base = _base_row(f, name, path_info(root, f))
        try:
            if f.suffix == ".csv":
                rows.extend(_stats_rows(f, base))
                files += 1
                continue
            if f.name == msprobe_json.FILE_NAME:  # msprobe's statistics of a step and rank
                rows.extend(msprobe_json.read_msprobe_dump(f))
                files += 1
                continue
            if name is None and not f.name.endswith(".bin"):
                continue  # not a dump file name: README, logs...
            dump = read_dump(f)
            files += 1
            for spec in dump.tensors:
                arr = tensor_array(f, spec)
                stats: dict[str, Any] = {"element_count": None}
                shape = spec.shape
                if arr is not None:
                    stats = tensor_stats(arr)
                    if npy is not None and spec.io in ("input", "output"):
                        npy.save(f, real, spec.io, spec.index, to_original_shape(np.asarray(arr), spec)[0])
                tensor_bytes += spec.size_bytes
                rows.append(
                    {
                        **base,
                        "op_name": base["op_name"] or dump.op_name or None,
                        "offset": spec.offset,
                        "source": "bin",
                        "io": spec.io,
                        "index": spec.index,
                        "dtype": spec.dtype_name,
                        "format": spec.format_name,
                        "shape": shape,
                        "original_shape": spec.original_shape,
                        "size_bytes": spec.size_bytes,
                        **{k: stats.get(k) for k in TENSORS.names if k in stats},
                    }
                )
        except InputError as exc:
            errors.append(exc.one_line())
        except (OSError, ValueError) as exc:
            errors.append(f"{text_of(f)}: cannot read ({exc})")
        if progress is not None:
            progress(1)
        if len(rows) >= ROWS_PER_BATCH:  # rows as Arrow as they come: a dict per row costs 10x the memory
            batches.append(pa.Table.from_pylist(rows, schema=TENSORS))
            rows.clear()
    if rows or not batches:
        batches.append(pa.Table.from_pylist(rows, schema=TENSORS) if rows else TENSORS.empty_table())
    table = pa.concat_tables(batches).combine_chunks() if len(batches) > 1 else batches[0]
    return DumpRun(table, files, errors, tensor_bytes)
