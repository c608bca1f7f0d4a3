"""The logs pipeline the CLI and the library share: log files → events → triage → summary.

``parse_logs`` finds the log sources under each path (ascend/log trees, msnpureport exports,
archives, single files, ``-`` for stdin), parses them one after the other (a file that fails is
reported and the rest go on), triages the problems against the knowledge base and returns a
result with ``.summary``, ``.tables`` and ``to_dict()``. Nothing here prints.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from npudiag.errors import InputError
from npudiag.executors import threads
from npudiag.logs.clock import describe as describe_clock
from npudiag.logs.clock import file_offsets, to_host_clock
from npudiag.logs.ingest import read_logs
from npudiag.logs.sources import find_sources
from npudiag.logs.triage import distinct_records, load_kb, summarise, triage_table
from npudiag.output import OutputFolder, atomic_write, dumps, json_safe
from npudiag.progress import Progress
from npudiag.store import write_table


@dataclass
class LogTriage:
    """``summary``: what failed first, where and what to do, with counts; ``tables``: ``triage`` (one
    row per problem kind) and ``problems`` (the error/warning events triage looked at); the full
    event table is ``out/log_events.parquet``. ``summary`` is None when no log was readable."""

    summary: dict[str, Any] | None
    tables: dict[str, pa.Table]
    out: Path | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(self.summary or {"input_errors": self.errors, "input_warnings": self.warnings})


def parse_logs(
    paths: list[str | Path] | str | Path,
    out: str | Path | None = None,
    *,
    device: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> LogTriage:
    """Parse and triage the logs under ``paths``; write log_events.parquet, triage.parquet and
    summary.json into ``out`` when given (the folder written whole, see ``npudiag.output``).
    ``device``: only that device's logs. ``progress`` hears of the parse."""

    paths = [str(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    out = Path(out) if out is not None else None
    warnings: list[str] = []
    errors: list[str] = []
    sources = []
    for p in paths:
        try:
            sources.extend(find_sources(p, warnings))
        except InputError as exc:
            errors.append(exc.one_line())
    if not sources:  # nothing readable: say why, write nothing
        return LogTriage(None, {}, None, errors, warnings)
    inputs = [Path(p) for p in paths if p != "-"]
    with contextlib.ExitStack() as stack:
        folder = (
            stack.enter_context(OutputFolder(out, kind="logs parse", force=force, inputs=inputs))
            if out is not None
            else None
        )
        events = folder.work / "log_events.parquet" if folder is not None else None
        if progress is not None:
            total = sum(s.size_bytes for s in sources)
            progress.start("phase", f"parsing {len(sources)} log file(s), {total / 1e6:.1f} MB", None)
        kb_read = threads("logs-kb", 1).submit(load_kb)  # read while the logs are parsed (their threads wait)
        run = read_logs(sources, events, device=device)
        errors += run.errors
        kb = kb_read.result()
        # device files written in another time zone than the host's: their records in host time, said once
        offsets = file_offsets(run.first_records)
        problems = to_host_clock(run.problems, offsets)
        problems, repeated = distinct_records(problems)  # a renamed copy of a log counts once
        totals = dict(run.totals)
        for levels, key in ((("ERROR", "FATAL"), "errors"), (("WARNING",), "warnings")):
            totals[key] -= _count(run.problems, levels) - _count(problems, levels)
        triage = triage_table(problems, kb)
        summary = summarise(problems, triage, kb, totals)
        summary["repeated_files"] = repeated
        summary["clock_offsets"] = list(offsets.values())
        if offsets:
            summary["clock_note"] = describe_clock(offsets)
        summary["inputs"] = paths
        summary["input_errors"] = errors
        summary["input_warnings"] = warnings
        if folder is not None:
            write_table(triage, folder.work / "triage.parquet")
            text = dumps(summary) + "\n"
            atomic_write(folder.work / "summary.json", lambda fh: fh.write(text.encode("utf-8")))
            folder.commit({"inputs": paths})
            summary["out"] = str(out)
    return LogTriage(summary, {"triage": triage, "problems": problems}, out, errors, warnings)


def _count(events: pa.Table, levels: tuple[str, ...]) -> int:
    return (
        int(pc.sum(pc.fill_null(pc.is_in(events["level"], pa.array(levels)), False)).as_py() or 0)
        if events.num_rows
        else 0
    )
