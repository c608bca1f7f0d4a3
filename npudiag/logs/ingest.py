"""``logs parse`` as a library call: stream every source into log_events.parquet, keep what triage needs.

Memory stays bounded by the number of problem records (errors, warnings, records with error
codes or without a level), not by the size of the logs: every batch is written to Parquet as
soon as it is parsed and only its problem rows are kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from npudiag.errors import InputError
from npudiag.executors import threads
from npudiag.logs.formats.ascend_log import LogParser
from npudiag.logs.formats.log_common import QUIET_LEVELS, cap_message
from npudiag.logs.sources import LogSource
from npudiag.schemas import LOG_EVENTS
from npudiag.store import atomic_write

# kept for triage only when they carry an error code (warnings) or a device fault event (RAS event ids
# are written at EVENT level by the device's event log)
_KEEP_ONLY_WITH_CODES = pa.array([*QUIET_LEVELS, "WARNING"])
_FAULT_EVENT = r"event_id[=:]0x[0-9A-Fa-f]{8}|HBM MULTI BIT ECC|Fault RAS occurs"
_INFO = pa.array(list(QUIET_LEVELS))
_CATALOGUE = (
    r"(?:^|[^A-Za-z0-9_])[EW][0-9A-Z]\d{4}(?:[^A-Za-z0-9_]|$)"  # an information record naming a CANN error code
)
_EITHER = f"(?i:{_FAULT_EVENT})|{_CATALOGUE}"  # one pass over the quiet records finds the few that may be either
MAX_PROBLEM_ROWS = 500_000  # triage looks at the first this many problem records; counts cover all
TRIAGE_MESSAGE_CHARS = 2_048  # triage reads the start of a message (log_events.parquet keeps it whole)


WRITE_ROWS = 65_536  # rows per Parquet row group of log_events
WRITE_BYTES = 16 << 20  # or fewer, when their messages are long


@dataclass
class LogsRun:
    problems: pa.Table  # the LOG_EVENTS rows triage looks at
    totals: dict[str, Any]
    errors: list[str] = field(default_factory=list)
    first_records: dict[str, Any] = field(default_factory=dict)  # file -> its earliest record's timestamp


def _quiet_marks(batch: pa.RecordBatch, quiet: pa.Array) -> tuple[np.ndarray, int]:
    """Which records of a ``quiet`` level state a device fault event (they are kept for triage), and how many
    information records name a CANN error code (counted, never taken as errors): one RE2 pass for both over
    the quiet records, then each pattern on the few it found."""
    fault = np.zeros(batch.num_rows, bool)
    if not pc.any(quiet).as_py():
        return fault, 0
    messages = batch["message"].filter(quiet)
    hit = pc.fill_null(pc.match_substring_regex(messages, _EITHER), False)
    if not pc.any(hit).as_py():
        return fault, 0
    at = np.flatnonzero(quiet.to_numpy(zero_copy_only=False))[hit.to_numpy(zero_copy_only=False)]
    found = messages.filter(hit)
    fault[at[pc.match_substring_regex(found, _FAULT_EVENT, ignore_case=True).to_numpy(zero_copy_only=False)]] = True
    info = pc.is_in(batch["level"].take(pa.array(at)), _INFO)
    named = pc.sum(pc.match_substring_regex(found.filter(info), _CATALOGUE)).as_py()
    return fault, int(named or 0)


def _problem_rows(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, int]:
    """The records triage looks at (loud ones, quiet ones with a code or a device fault; long messages cut to
    what triage reads), and how many information records name a code (:func:`_quiet_marks`)."""
    quiet = pc.fill_null(pc.is_in(batch["level"], _KEEP_ONLY_WITH_CODES), False)
    fault, named = _quiet_marks(batch, quiet)
    has_codes = pc.greater(pc.fill_null(pc.list_value_length(batch["error_codes"]), 0), 0)
    keep = pc.or_(pc.or_(pc.invert(quiet), has_codes), pa.array(fault))
    found = batch.filter(keep)
    i = found.schema.get_field_index("message")
    messages = found.column(i)
    long = pc.greater(pc.utf8_length(messages), TRIAGE_MESSAGE_CHARS)
    if not pc.any(long).as_py():
        return found, named
    cut = [cap_message(m, TRIAGE_MESSAGE_CHARS) for m in messages.filter(long).to_pylist()]  # the long ones only
    return found.set_column(i, "message", pc.replace_with_mask(messages, long, pa.array(cut, pa.string()))), named


class _RowGroups:
    """log_events' row groups written on a thread of their own (Parquet's encoding and compression release
    the GIL) while the next ones are parsed: at most one row group in flight, so memory stays bounded."""

    def __init__(self, writer: pq.ParquetWriter) -> None:
        self.writer = writer
        self.flight: Future[None] | None = None

    def write(self, table: pa.Table) -> None:
        self.wait()
        self.flight = threads("logs-write", 1).submit(self.writer.write_table, table)

    def wait(self) -> None:
        flight, self.flight = self.flight, None
        if flight is not None:
            flight.result()  # a failed write (a full disk) is raised here, in the caller's thread

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.writer.close()


def read_logs(
    sources: list[LogSource],
    events_path: Path | None,
    progress: Callable[[int], None] | None = None,
    device: int | None = None,
) -> LogsRun:
    """Parse ``sources`` one after the other; a source that fails is reported and the rest go on."""
    problems: list[pa.RecordBatch] = []
    levels: Counter[str] = Counter()
    files: Counter[str] = Counter()
    errors: list[str] = []
    lines = kept = dropped = catalogue = 0
    prefixes: list[dict[str, str]] = []
    first_records: dict[str, Any] = {}

    def run(writer: _RowGroups | None) -> None:
        nonlocal lines, kept, dropped, catalogue
        pending: list[pa.RecordBatch] = []  # small files' batches, written as one row group
        pending_rows = pending_bytes = 0

        def flush() -> None:
            nonlocal pending_rows, pending_bytes
            if writer is not None and pending:
                writer.write(pa.Table.from_batches(pending, schema=LOG_EVENTS))
            pending.clear()
            pending_rows = pending_bytes = 0

        for src in sources:
            parser = LogParser(src.ctx)
            try:
                for batch in parser.parse(src.open_lines()):
                    if device is not None:
                        batch = batch.filter(pc.fill_null(pc.equal(batch["device_id"], device), False))
                    if writer is not None:
                        pending.append(batch)
                        pending_rows += batch.num_rows
                        pending_bytes += batch.nbytes
                        if pending_rows >= WRITE_ROWS or pending_bytes >= WRITE_BYTES:
                            flush()
                    for lv, n in zip(*_value_counts(batch["level"])):
                        levels[lv] += n
                    files[src.ctx.file] += batch.num_rows
                    earliest = pc.min(batch["timestamp"]).as_py() if batch.num_rows else None
                    if earliest is not None and (
                        src.ctx.file not in first_records or earliest < first_records[src.ctx.file]
                    ):
                        first_records[src.ctx.file] = earliest
                    found, named = _problem_rows(batch)
                    catalogue += named
                    keep = found.slice(0, max(MAX_PROBLEM_ROWS - kept, 0))
                    if keep.num_rows:
                        problems.append(keep)
                    kept += keep.num_rows
                    dropped += found.num_rows - keep.num_rows
            except InputError as exc:
                errors.append(exc.one_line())
            except (OSError, EOFError, ValueError) as exc:  # a truncated archive member, an unreadable file
                errors.append(f"{src.ctx.file}: cannot read ({exc})")
            lines += parser.lines
            if parser.prefix_kind is not None:
                prefixes.append({"file": src.ctx.file, "prefix": parser.prefix_kind})
            if progress is not None:
                progress(src.size_bytes)
        flush()

    if events_path is not None:

        def write(fh) -> None:
            writer = _RowGroups(pq.ParquetWriter(fh, LOG_EVENTS, compression="snappy"))
            try:
                run(writer)
            finally:
                writer.close()

        atomic_write(events_path, write)
    else:
        run(None)
    # one chunk: triage runs dozens of kernels over it, each paying per chunk (one per file before)
    table = (
        pa.Table.from_batches(problems, schema=LOG_EVENTS).combine_chunks() if problems else LOG_EVENTS.empty_table()
    )
    table = of_the_process(table)
    totals = {
        "files": len(files),
        "lines": lines,
        "records": sum(files.values()),
        "errors": levels.get("ERROR", 0) + levels.get("FATAL", 0),
        "warnings": levels.get("WARNING", 0),
        "by_level": dict(levels),
        "problem_records_not_triaged": dropped,
        # information records that name an error code (GE registering its code catalogue at start-up):
        # counted, never taken as errors
        "info_records_naming_codes": catalogue,
        "line_prefixes": prefixes,
    }
    if dropped:
        totals["note"] = (
            f"triage looked at the first {MAX_PROBLEM_ROWS:,} error records; {dropped:,} later ones are only counted"
        )
    return LogsRun(table, totals, errors, first_records)


def of_the_process(table: pa.Table) -> pa.Table:
    """The device and rank of a record that states none, from the other records of its process (file and
    pid) where they state exactly one: a plog's process runs on one device as one rank, and HCCL states
    them once (its LINK_ERROR_INFO table, a socket timeout) for the records around. A process whose
    records name two devices or two ranks is left as each record states."""
    if not table.num_rows:
        return table
    rows = table.select(["file", "pid"]).append_column("i", pa.array(np.arange(table.num_rows)))
    for col in ("device_id", "rank"):
        if table[col].null_count in (0, table.num_rows):
            continue
        g = table.group_by(["file", "pid"]).aggregate([(col, "count_distinct"), (col, "min")])
        one = g.filter(pc.equal(g[f"{col}_count_distinct"], 1)).select(["file", "pid", f"{col}_min"])
        if not one.num_rows:
            continue
        hit = rows.join(one, ["file", "pid"], join_type="inner")
        fill = np.full(table.num_rows, -1, np.int64)
        fill[hit["i"].to_numpy()] = hit[f"{col}_min"].to_numpy(zero_copy_only=False)
        stated = pa.array(fill, pa.int64(), mask=fill < 0).cast(table.schema.field(col).type)
        table = table.set_column(table.schema.get_field_index(col), col, pc.coalesce(table[col], stated))
    return table


def _value_counts(arr: pa.Array) -> tuple[list[str], list[int]]:
    vc = pc.value_counts(pc.fill_null(arr, "(none)"))
    return vc.field("values").to_pylist(), vc.field("counts").to_pylist()
