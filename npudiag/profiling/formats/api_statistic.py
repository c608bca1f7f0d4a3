"""api_statistic_*.csv / api_statistic.csv → ``api_statistic`` (host API time per level and name)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from npudiag import schemas
from npudiag.profiling.formats.csvtext import read_csv_text, to_float, to_int, to_text
from npudiag.profiling.formats.registry import Format, one_table, register


def read_api_statistic(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    ct = read_csv_text(path, (("API Name",), ("Time(us)",), ("Count",)))
    n = ct.table.num_rows
    cols = {
        "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
        "level": to_text(ct, ct.has("Level")),
        "api_name": to_text(ct, "API Name"),
        "time_us": to_float(ct, "Time(us)"),
        "count": to_int(ct, "Count"),
        "avg_us": to_float(ct, ct.has("Avg(us)")),
        "min_us": to_float(ct, ct.has("Min(us)")),
        "max_us": to_float(ct, ct.has("Max(us)")),
        "variance": to_float(ct, ct.has("Variance")),
    }
    present = {k: v for k, v in cols.items() if v is not None}
    return schemas.conform(pa.table(present), schemas.API_STATISTIC), ct.warnings


register(
    Format(
        "api_statistic",
        re.compile(r"^api_statistic[^/]*\.csv$"),
        lambda path, rank: one_table(read_api_statistic(path, rank), "api_statistic"),
        ("api_statistic",),
        headers=(frozenset({"API Name", "Level", "Time(us)", "Count"}),),
        append=True,
        totals=True,
    )
)
