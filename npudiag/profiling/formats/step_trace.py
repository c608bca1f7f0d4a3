"""step_trace_time.csv (torch_npu) and step_trace_*.csv (msprof) → ``steps``.

torch_npu gives per-step durations only (Computing, Communication(Not Overlapped), Free, Stage...);
msprof's step_trace gives absolute FP start / BP end / iteration end per ``Iteration ID``, from which
each step's start and end are known.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.formats.csvtext import read_csv_text, to_float, to_int
from npudiag.profiling.formats.registry import Format, one_table, register

_DURATIONS = {
    "computing_us": "Computing",
    "communication_not_overlapped_us": "Communication(Not Overlapped)",
    "overlapped_us": "Overlapped",
    "communication_us": "Communication",
    "free_us": "Free",
    "bubble_us": "Bubble",
    "communication_not_overlapped_exclude_receive_us": "Communication(Not Overlapped and Exclude Receive)",
    "preparing_us": "Preparing",
    "fp_bp_us": "FP to BP Time(us)",
    "data_aug_bound_us": "Data Aug Bound(us)",
}


def read_steps(path: Path, rank: int | None = None) -> tuple[pa.Table, list[str]]:
    ct = read_csv_text(path, (("Step", "Iteration ID"),))
    n = ct.table.num_rows
    cols: dict[str, object] = {
        "source": pa.repeat(pa.scalar("step_trace", pa.string()), n),
        "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
        "device_id": to_int(ct, ct.has("Device_id"), bits=32),
        "step": to_int(ct, ct.has("Step", "Iteration ID")),
    }
    for canonical, name in _DURATIONS.items():
        cols[canonical] = to_float(ct, ct.has(name))
    stage = to_float(ct, ct.has("Stage"))
    iteration = to_float(ct, ct.has("Iteration Time(us)"))
    cols["step_time_us"] = stage if stage is not None else iteration
    cols["stage_us"] = stage
    end = to_float(ct, ct.has("Iteration End(us)"))
    if end is not None and iteration is not None:
        cols["end_us"] = end
        cols["start_us"] = pc.subtract(end, iteration)
    present = {k: v for k, v in cols.items() if v is not None}
    table = schemas.conform(pa.table(present), schemas.STEPS)
    return _checked(table, path), ct.warnings + _problems(table, path)


_TIME_COLUMNS = [n for n in schemas.STEPS.names if n.endswith("_us")]


def _bad(col: pa.ChunkedArray) -> np.ndarray:
    v = pc.fill_null(col, 0.0).to_numpy(zero_copy_only=False)
    return ~np.isfinite(v) | (v < 0) | (np.abs(v) > 1e17)


def _problems(table: pa.Table, path: Path) -> list[str]:
    out = []
    for name in _TIME_COLUMNS:
        bad = (
            _bad(table[name])
            if not name.startswith(("start", "end"))
            else ~np.isfinite(pc.fill_null(table[name], 0.0).to_numpy())
        )
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            out.append(
                f"{path}: {int(bad.sum())} {name} value(s) negative or not finite (first at data row {i + 1}: "
                f"{table[name][i].as_py()}); ignored"
            )
    return out


def _checked(table: pa.Table, path: Path) -> pa.Table:
    """Negative or non-finite phase values are nulls (a step time that is null is the tasks' span)."""
    for name in _TIME_COLUMNS:
        col = table[name]
        bad = _bad(col) if not name.startswith(("start", "end")) else ~np.isfinite(pc.fill_null(col, 0.0).to_numpy())
        if bad.any():
            cleaned = pc.if_else(pa.array(bad), pa.scalar(None, pa.float64()), col)
            table = table.set_column(table.schema.get_field_index(name), name, cleaned)
    return table


register(
    Format(
        "step_trace",
        re.compile(r"^step_trace[^/]*\.csv$"),
        lambda path, rank: one_table(read_steps(path, rank), "steps"),
        ("steps",),
        headers=(frozenset({"Step", "Computing", "Stage"}), frozenset({"Iteration ID", "Iteration Time(us)"})),
        sources={"steps": 0},
    )
)
