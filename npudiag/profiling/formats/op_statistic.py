"""op_statistic_*.csv / op_statistic.csv → ``op_statistic`` (kept to cross-check our aggregates)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from npudiag import schemas
from npudiag.profiling.formats.csvtext import read_csv_text, to_float, to_int, to_text
from npudiag.profiling.formats.registry import Format, one_table, register


def read_op_statistic(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    ct = read_csv_text(path, (("OP Type",), ("Count",), ("Total Time(us)",)))
    n = ct.table.num_rows
    cols = {
        "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
        "device_id": to_int(ct, ct.has("Device_id"), bits=32),
        "op_type": to_text(ct, "OP Type"),
        "core_type": to_text(ct, ct.has("Core Type")),
        "count": to_int(ct, "Count"),
        "total_us": to_float(ct, "Total Time(us)"),
        "min_us": to_float(ct, ct.has("Min Time(us)")),
        "avg_us": to_float(ct, ct.has("Avg Time(us)")),
        "max_us": to_float(ct, ct.has("Max Time(us)")),
        "ratio_pct": to_float(ct, ct.has("Ratio(%)")),
    }
    present = {k: v for k, v in cols.items() if v is not None}
    return schemas.conform(pa.table(present), schemas.OP_STATISTIC), ct.warnings


register(
    Format(
        "op_statistic",
        re.compile(r"^op_statistic[^/]*\.csv$"),
        lambda path, rank: one_table(read_op_statistic(path, rank), "op_statistic"),
        ("op_statistic",),
        headers=(frozenset({"OP Type", "Core Type", "Count", "Total Time(us)"}),),
        append=True,
        totals=True,
    )
)
