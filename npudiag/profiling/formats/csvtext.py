"""Shared reading of msprof / torch_npu summary CSVs, with the real files' quirks.

The real files write timestamps as ``"1736413971558972.912\\t"`` (a trailing TAB), ``N/A`` in numeric
columns, shapes triple-quoted (``\"\"\"32,3,224,224\"\"\"``), CRLF line ends in some torch_npu
releases, and column names that differ between CANN versions. Every column is read as text by
pyarrow's multi-threaded CSV reader, then converted with compute kernels: no Python loop over rows.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from npudiag.errors import InputError

NULL_TOKENS = ["", "N/A", "NA", "n/a", "None", "null", "NULL"]
NO_MODEL_ID = 4294967295  # msprof's "not a model" model id (UINT32_MAX)


@dataclass
class CsvText:
    """A CSV read as all-string columns, plus what went wrong on the way (kept, not fatal)."""

    path: Path
    table: pa.Table
    warnings: list[str] = field(default_factory=list)

    def has(self, *names: str) -> str | None:
        """The first of ``names`` that is a column here (CANN versions rename columns)."""
        present = self.__dict__.get("_names")
        if present is None:
            present = self.__dict__["_names"] = set(self.table.column_names)
        for name in names:
            if name in present:
                return name
        return None


MAX_HEADER_BYTES = 1 << 20  # a profiler CSV's header is a few hundred bytes (a few dozen columns)


def read_header(path: Path) -> list[str]:
    """The column names of a CSV; InputError for what no profiler writes as a header (empty, binary,
    UTF-16, not UTF-8, longer than MAX_HEADER_BYTES): ``analyze`` and ``check`` refuse the same files."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(MAX_HEADER_BYTES + 1)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    if len(first) > MAX_HEADER_BYTES:
        raise InputError(
            path,
            f"a header line longer than {MAX_HEADER_BYTES >> 20} MiB (tens of thousands of columns); a profiler CSV "
            "has a few dozen",
            line=1,
        )
    if not first.strip():
        raise InputError(path, "empty file; expected a CSV header line", line=1)
    if b"\x00" in first:
        raise InputError(path, "binary data where a CSV header was expected", line=1)
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, "header is not UTF-8 text", offset=exc.start) from None
    try:
        names = next(csv.reader(io.StringIO(text)), [])
    except csv.Error as exc:
        raise InputError(path, f"header is not a CSV line ({exc})", line=1) from None
    return [n.strip() for n in names]


def read_csv_text(
    path: Path,
    required: tuple[tuple[str, ...], ...] = (),
    *,
    multiline: bool = False,
    text_columns: tuple[str, ...] = (),
    max_columns: int | None = None,
    keep: tuple[str, ...] = (),
) -> CsvText:
    """Read ``path`` with every column as string.

    ``required`` lists alternatives per needed column (e.g. ``("Duration(us)", "Task Duration(us)")``);
    a file with none of one group's names is unusable and raises :class:`InputError`. Rows with the
    wrong number of fields (a truncated last line) are skipped with a warning naming the line.
    """
    names = read_header(path)
    for group in required:
        if not any(n in names for n in group):
            raise InputError(
                path, f"missing column {' or '.join(repr(g) for g in group)}; header has {len(names)} columns", line=1
            )
    warnings: list[str] = []
    include: list[str] | None = None
    if max_columns is not None and len(names) > max_columns:
        # a real export has a few dozen columns; reading tens of thousands costs seconds for nothing
        needed = {n for group in required for n in group} | set(text_columns) | set(keep)
        include = [n for n in names if n in needed]
        include += [n for n in names if n not in needed][: max_columns - len(include)]
        include = list(dict.fromkeys(include))
        warnings.append(
            f"{path}: {len(names)} columns; only the first {len(include)} were read (a profiler CSV has far fewer)"
        )
        names = include
    skipped: list[tuple[int, str]] = []

    def on_invalid(row: pacsv.InvalidRow) -> str:
        try:
            text = row.text
        except UnicodeDecodeError:  # pyarrow decodes the row to give it to us; not UTF-8 text
            text = ""
        skipped.append((row.number if row.number is not None else -1, text))
        return "skip"

    def read(all_text: bool) -> pa.Table:
        skipped.clear()
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=True),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid, newlines_in_values=multiline),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}
                if all_text
                else {n: pa.string() for n in text_columns if n in names},
                include_columns=include or [],
                null_values=NULL_TOKENS,
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )

    # pyarrow decodes a malformed row before handing it to on_invalid; when the row is not UTF-8
    # that fails inside pyarrow and would print "Exception ignored" with a traceback: catch it here
    undecodable: list[BaseException] = []
    previous_hook = sys.unraisablehook

    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, UnicodeDecodeError):
            undecodable.append(unraisable.exc_value)
        else:
            previous_hook(unraisable)

    sys.unraisablehook = hook
    try:
        # fast path: pyarrow infers numeric columns itself; a column whose later rows do not fit the
        # type inferred from the first block makes it fail, and then everything is read as text
        try:
            table = read(all_text=False)
        except pa.ArrowInvalid as exc:
            if "conversion error" not in str(exc).lower() and "in csv column" not in str(exc).lower():
                raise
            table = read(all_text=True)
    except pa.ArrowInvalid as exc:
        if undecodable or "utf8" in str(exc).lower():
            raise InputError(path, "bytes that are not UTF-8 text", line=first_bad_utf8_line(path)) from None
        raise InputError(path, f"not a readable CSV: {_arrow_message(exc)}") from None
    finally:
        sys.unraisablehook = previous_hook
    # the reader's blocks, freed on its threads, handed back before the columns are converted, so
    # the peak is what is live, not what the allocator kept (docs/speed.md)
    pa.default_memory_pool().release_unused()
    if undecodable or any(pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) for f in table.schema):
        # pyarrow types a column holding invalid UTF-8 as binary instead of failing
        raise InputError(path, "bytes that are not UTF-8 text", line=first_bad_utf8_line(path))
    if table.column_names and table.column_names[0].startswith("\ufeff"):
        table = table.rename_columns([table.column_names[0].lstrip("\ufeff"), *table.column_names[1:]])
    table = table.rename_columns([c.strip() for c in table.column_names])
    seen: set[str] = set()
    for c in table.column_names:
        if c in seen:
            raise InputError(path, f"column {c!r} appears twice in the header", line=1)
        seen.add(c)
    if skipped:
        lines = _line_numbers(path, skipped[:5])
        shown = ", ".join(str(n) for n in lines)
        more = f" (+{len(skipped) - 5} more)" if len(skipped) > 5 else ""
        warnings.append(
            f"{path}: skipped {len(skipped)} row(s) with a wrong number of fields "
            f"(expected {len(names)}) at line {shown}{more}"
        )
    if table.num_rows == 0:
        warnings.append(f"{path}: header only, no data rows")
    return CsvText(path, table, warnings)


def first_bad_utf8_line(path: Path) -> int | None:
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return lineno
    return None


def _line_numbers(path: Path, rows: list[tuple[int, str]]) -> list[int | str]:
    """Line numbers of skipped rows; the threaded reader does not know them, so look them up."""
    wanted = {text.rstrip("\r\n"): number for number, text in rows}
    found: dict[str, int] = {}
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if text in wanted and text not in found:
                found[text] = lineno
                if len(found) == len(wanted):
                    break
    return [found.get(t, n if n > 0 else "?") for t, n in ((t.rstrip("\r\n"), n) for n, t in rows)]


def _arrow_message(exc: Exception) -> str:
    text = str(exc).splitlines()[0]
    if "straddling object" in text:
        return "a row longer than the reader's block size (a line of many megabytes is not a profiler CSV row)"
    return text[:200]


def clean_text(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Strip the TAB that msprof appends to timestamps and the quotes around shapes (one pass)."""
    if not pa.types.is_string(col.type):
        return col.cast(pa.string())
    col = pc.utf8_trim(col, characters=' \t\r\n"')
    return pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)


def to_float(ct: CsvText, name: str | None, label: str | None = None) -> pa.ChunkedArray | None:
    """Column ``name`` as float64; values that are not numbers become an InputError with the row."""
    if name is None:
        return None
    raw = ct.table.column(name)
    if pa.types.is_floating(raw.type) or pa.types.is_integer(raw.type) or pa.types.is_null(raw.type):
        return raw.cast(pa.float64(), safe=False)
    if not pa.types.is_string(raw.type):
        raw = raw.cast(pa.string())
    try:
        return raw.cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # timestamps carry a trailing TAB; null tokens may carry blanks
    col = pc.utf8_trim_whitespace(raw)
    col = pc.if_else(pc.is_in(col, pa.array(NULL_TOKENS)), pa.scalar(None, pa.string()), col)
    try:
        return col.cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = _first_bad_number(col)
        raise InputError(
            ct.path,
            f"column {label or name!r} has {bad[1]!r} where a number was expected",
            line=bad[0] + 2,
        ) from None


def to_int(ct: CsvText, name: str | None, label: str | None = None, bits: int = 64) -> pa.ChunkedArray | None:
    """Column ``name`` as int64; NaN/inf become null, and a value no ``bits``-bit integer holds is an
    InputError with its row (never a silently wrapped number)."""
    if name is None:
        return None
    raw = ct.table.column(name)
    values = raw.cast(pa.float64(), safe=False) if pa.types.is_integer(raw.type) else to_float(ct, name, label)
    finite = pc.if_else(pc.is_finite(values), values, pa.scalar(None, pa.float64()))
    limit = float(1 << (bits - 1))
    out_of_range = pc.fill_null(pc.greater_equal(pc.abs(finite), limit), False)
    if pc.any(out_of_range).as_py():
        i = int(pc.index(out_of_range, True).as_py())
        raise InputError(
            ct.path, f"column {label or name!r} has {raw[i].as_py()!r}, too large for a {bits}-bit integer", line=i + 2
        )
    if pa.types.is_integer(raw.type):
        return raw.cast(pa.int64())
    return pc.cast(pc.floor(finite), pa.int64(), safe=False)


def _first_bad_number(col: pa.ChunkedArray) -> tuple[int, str]:
    values = col.to_pylist()
    for i, v in enumerate(values):
        if v is None:
            continue
        try:
            float(v)
        except ValueError:
            return i, v
    return 0, "?"


_DECIMAL = r"^(?P<i>-?\d+)(?:\.(?P<f>\d{0,3})\d*)?$"
_EXACT3 = r"^-?(\d{1,15}|[1-8]\d{15})\.\d{3}$"


def to_ns(ct: CsvText, name: str | None) -> pa.ChunkedArray | None:
    """A microsecond timestamp column as exact int64 nanoseconds, parsed from its text (no float rounding)."""
    if name is None:
        return None
    raw = ct.table.column(name)
    if not pa.types.is_string(raw.type):
        return pc.cast(pc.round(pc.multiply(raw.cast(pa.float64()), 1000.0)), pa.int64(), safe=False)
    text = pc.utf8_trim_whitespace(raw)
    # the form every real file writes (16 digits, a point, 3 decimals): the digits without the point
    # are the nanoseconds; a bound on the digits keeps the cast inside int64
    if pc.all(pc.fill_null(pc.match_substring_regex(text, _EXACT3), True)).as_py():
        return pc.replace_substring(text, ".", "", max_replacements=1).cast(pa.int64())
    m = pc.extract_regex(text, _DECIMAL)
    digits = pc.struct_field(m, "i")
    # whole microseconds whose nanoseconds fit int64 (|us| < 9,223,372,036,854,775); others are null
    # and the float start stands (17 digits passed here before and wrapped around)
    digits = pc.if_else(pc.less_equal(pc.utf8_length(digits), 17), digits, pa.scalar(None, pa.string()))
    whole = digits.cast(pa.int64())
    whole = pc.if_else(pc.less(pc.abs(whole), 9_223_372_036_854_775), whole, pa.scalar(None, pa.int64()))
    frac = pc.utf8_rpad(pc.struct_field(m, "f"), 3, "0").cast(pa.int64())
    # the fraction has the number's sign: "-1.5" is -1500 ns, "-0.5" is -500 ns
    frac = pc.if_else(pc.fill_null(pc.starts_with(text, "-"), False), pc.negate(frac), frac)
    return pc.add(pc.multiply(whole, 1000), frac)


def to_text(ct: CsvText, name: str | None) -> pa.ChunkedArray | None:
    return clean_text(ct.table.column(name)) if name is not None else None


_UNIT_SUFFIXES = [
    ("(us)", "_us"),
    ("(%)", "_pct"),
    ("(gb/s)", "_gbps"),
    ("(mb/s)", "_mbps"),
    ("(kb)", "_kb"),
    ("(mb)", "_mb"),
    ("(b)", "_bytes"),
]


def normalise_column_name(name: str) -> str:
    """``aic_mte2_time(us)`` -> ``aic_mte2_time_us``, ``cube_utilization(%)`` -> ``cube_utilization_pct``."""
    out = name.strip().lower()
    for unit, suffix in _UNIT_SUFFIXES:
        if out.endswith(unit):
            out = out[: -len(unit)] + suffix
    out = re.sub(r"[^0-9a-z]+", "_", out).strip("_")
    return out or "column"
