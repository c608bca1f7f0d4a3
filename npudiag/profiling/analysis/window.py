"""The analysis window: restrict every table to some steps or to a time range.

``--steps 10:100`` keeps steps 10 to 100 inclusive (by the kernels' Step Id, or the steps table's
start times); ``--time 1.5s:3.0s`` keeps what starts in that range, measured from the first kernel
of the profile. Kernels are cut by their own step or start; host calls and copies by the time range
the kept kernels cover on their rank, so warm-up noise leaves every table alike.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_TIME = re.compile(r"^\s*([0-9.]+)\s*(us|µs|ms|s)?\s*$")
_UNIT = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1e6}


class WindowError(ValueError):
    """The window holds nothing of this profile (the message names what the profile has)."""


class CutError(ValueError):
    """The profile cannot be cut that way (steps asked of kernels without step ids, time of none)."""


@dataclass(frozen=True)
class Window:
    """The part of a profile to analyse: ``steps`` (first, last) step ids and/or ``time_us`` (start,
    end) microseconds from each rank's first kernel; either side of each may be open (None)."""

    steps: tuple[int | None, int | None] | None = None
    time_us: tuple[float | None, float | None] | None = None

    @classmethod
    def of(cls, steps=None, time=None) -> Window:
        """From ``"10:100"`` / (10, 100) steps and ``"1.5s:3s"`` / (µs, µs) time; ValueError names the option."""
        return cls(
            parse_steps(steps) if isinstance(steps, str) else (_checked_steps(*steps, steps_spec(steps)) if steps is not None else None),
            parse_time(time) if isinstance(time, str) else (tuple(time) if time is not None else None),
        )

    @property
    def active(self) -> bool:
        return self.steps is not None or self.time_us is not None

    @property
    def option(self) -> str:
        """The option a problem with this window is blamed on."""
        return "steps" if self.steps is not None else "time"

    def cut(self, tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
        """``tables`` restricted to the window (unchanged when it is not active): see :func:`apply_window`."""
        return apply_window(tables, self.steps, self.time_us) if self.active else tables


def parse_steps(spec: str) -> tuple[int | None, int | None]:
    """``"10:100"`` -> (10, 100); ``"10:"`` and ``":100"`` leave one side open; ``"7"`` is one step."""
    first, sep, last = spec.partition(":")
    try:
        lo = int(first) if first.strip() else None
        hi = int(last) if last.strip() else None
    except ValueError:
        raise ValueError(f"--steps {spec!r}: expected FIRST:LAST step ids, e.g. 10:100") from None
    if not sep:
        hi = lo
    return _checked_steps(lo, hi, spec)


def _checked_steps(lo: int | None, hi: int | None, spec: str) -> tuple[int | None, int | None]:
    for v in (lo, hi):
        if v is not None and not -(2**62) < v < 2**62:
            raise ValueError(f"--steps {spec!r}: {v} is not a step id")
    if lo is not None and hi is not None and hi < lo:
        raise ValueError(f"--steps {spec!r}: last step is before the first")
    return lo, hi


def parse_time(spec: str) -> tuple[float | None, float | None]:
    """``"1.5s:3.0s"`` -> (1.5e6, 3.0e6) microseconds from the profile's first kernel; a bare number is seconds."""
    first, sep, last = spec.partition(":")
    if not sep:
        raise ValueError(f"--time {spec!r}: expected START:END, e.g. 1.5s:3.0s")
    out = []
    for part in (first, last):
        if not part.strip():
            out.append(None)
            continue
        m = _TIME.match(part)
        if not m:
            raise ValueError(f"--time {spec!r}: {part!r} is not a time (use us, ms or s)")
        try:
            value = float(m.group(1)) * _UNIT[m.group(2)]
        except ValueError:
            raise ValueError(f"--time {spec!r}: {part!r} is not a time (use us, ms or s)") from None
        if not math.isfinite(value) or value > 1e15:
            raise ValueError(f"--time {spec!r}: {part!r} is beyond any profile")
        out.append(value)
    lo, hi = out
    if lo is not None and hi is not None and hi < lo:
        raise ValueError(f"--time {spec!r}: the end is before the start")
    return lo, hi


def _between(col: pa.ChunkedArray, lo: float | None, hi: float | None) -> pa.ChunkedArray:
    mask = pc.is_valid(col)
    if lo is not None:
        mask = pc.and_(mask, pc.greater_equal(col, lo))
    if hi is not None:
        mask = pc.and_(mask, pc.less_equal(col, hi))
    return pc.fill_null(mask, False)


def _rank_ranges(kernels: pa.Table) -> dict[object, tuple[float, float]]:
    if kernels.num_rows == 0:
        return {}
    ends = pc.add(kernels["start_us"], pc.fill_null(kernels["duration_us"], 0.0))
    t = pa.table({"rank": kernels["rank"], "s": kernels["start_us"], "e": ends})
    g = t.group_by("rank").aggregate([("s", "min"), ("e", "max")])
    return {r: (s, e) for r, s, e in zip(g["rank"].to_pylist(), g["s_min"].to_pylist(), g["e_max"].to_pylist())}


def _cut_by_time(table: pa.Table, ranges: dict[object, tuple[float, float]], column: str = "start_us") -> pa.Table:
    """The rows of ``table`` whose ``column`` lies in their rank's range."""
    if table.num_rows == 0:
        return table
    lo, hi = _range_columns(table, ranges)
    starts = pc.fill_null(table[column], np.nan).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        return table.filter(pa.array((starts >= lo) & (starts <= hi)))


def apply_window(
    tables: dict[str, pa.Table], steps: tuple[int | None, int | None] | None = None, time: tuple[float | None, float | None] | None = None
) -> dict[str, pa.Table]:
    """Tables restricted to the window; CutError when the profile cannot be cut that way, WindowError
    when the window holds none of its kernels."""
    out = dict(tables)
    kernels = tables["kernels"]
    if steps is not None:
        lo, hi = steps
        if kernels.num_rows and pc.all(pc.is_null(kernels["step"])).as_py():
            raise CutError("--steps: this profile's kernels carry no step ids (use --time instead)")
        step_col = kernels["step"]
        mask = pc.is_valid(step_col)
        if lo is not None:
            mask = pc.and_(mask, pc.greater_equal(step_col, lo))
        if hi is not None:
            mask = pc.and_(mask, pc.less_equal(step_col, hi))
        out["kernels"] = kernels.filter(pc.fill_null(mask, False))
        st = tables["steps"]
        if st.num_rows:
            out["steps"] = st.filter(_between(st["step"].cast(pa.float64(), safe=False), lo, hi))
    if time is not None:
        if kernels.num_rows == 0:
            raise CutError("--time: no kernels to measure the profile start from")
        origin = pc.min(kernels["start_us"]).as_py()
        lo = None if time[0] is None else origin + time[0]
        hi = None if time[1] is None else origin + time[1]
        out["kernels"] = out["kernels"].filter(_between(out["kernels"]["start_us"], lo, hi))
    if kernels.num_rows and out["kernels"].num_rows == 0:
        raise WindowError(_empty_window(kernels, tables.get("steps"), steps, time))
    ranges = _rank_ranges(out["kernels"])
    for name in ("api_calls", "copies", "host_ops", "ranges"):
        if name in tables:
            out[name] = _cut_by_time(tables[name], ranges)
    if "memory_timeline" in tables:
        out["memory_timeline"] = _cut_by_time(tables["memory_timeline"], ranges, "ts_us")
    if "op_memory" in tables:
        out["op_memory"] = _held_in(tables["op_memory"], ranges)
    return out


def _empty_window(kernels: pa.Table, steps_table: pa.Table | None, steps, time) -> str:
    """Why a window holds nothing, with what the profile has: the step ids or the time it spans."""
    if steps is not None:
        ids = pc.unique(kernels["step"].drop_null()).to_numpy(zero_copy_only=False)
        if steps_table is not None and steps_table.num_rows:
            ids = np.union1d(ids, steps_table["step"].drop_null().to_numpy(zero_copy_only=False))
        return f"--steps {steps_spec(steps)}: no step of this profile is in that window; it has {describe_steps(np.unique(ids))}"
    ends = pc.add(kernels["start_us"], pc.fill_null(kernels["duration_us"], 0.0))
    span = (pc.max(ends).as_py() or 0.0) - (pc.min(kernels["start_us"]).as_py() or 0.0)
    lo = "" if time[0] is None else _fmt_time(time[0])
    hi = "" if time[1] is None else _fmt_time(time[1])
    whole = _fmt_time(span)
    return f"--time {lo}:{hi}: no kernel starts in that window; this profile spans {whole} from its first kernel (--time 0s:{whole})"


def steps_spec(steps: tuple[int | None, int | None]) -> str:
    """A steps window as the user writes it: ``3:9``, ``3:``, ``:9``."""
    return f"{'' if steps[0] is None else steps[0]}:{'' if steps[1] is None else steps[1]}"


def describe_steps(ids) -> str:
    """The step ids a profile has (sorted, distinct, at least one), as a window message says them."""
    n = len(ids)
    first, last = int(ids[0]), int(ids[-1])
    if n == 1:
        return f"step {first} only (--steps {first})"
    if last - first + 1 == n:
        return f"steps {first} to {last} (--steps {first}:{last})"
    shown = ", ".join(str(int(i)) for i in ids[:8])
    return f"{n:,} steps: {shown}{', …' if n > 8 else ''} (--steps {first}:{last})"


def _fmt_time(us: float) -> str:
    if us == 0:
        return "0s"
    if us >= 1e6:
        return f"{us / 1e6:.6g}s"
    if us >= 1e3:
        return f"{us / 1e3:.6g}ms"
    return f"{us:.6g}us"


def _held_in(blocks: pa.Table, ranges: dict[object, tuple[float, float]]) -> pa.Table:
    """The memory blocks held at some time of their rank's range: allocated before its end (or before
    the profile) and released after its start (or never, while profiling)."""
    if blocks.num_rows == 0:
        return blocks
    lo, hi = _range_columns(blocks, ranges)
    alloc = pc.fill_null(blocks["alloc_us"], -np.inf).to_numpy(zero_copy_only=False)
    release = pc.fill_null(blocks["release_us"], np.inf).to_numpy(zero_copy_only=False)
    return blocks.filter(pa.array((alloc <= hi) & (release >= lo)))


def _range_columns(table: pa.Table, ranges: dict[object, tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's rank range (lo, hi); NaN where its rank has no kernels in the window."""
    keys = list(ranges)
    pos = pc.index_in(table["rank"], value_set=pa.array(keys, table["rank"].type)).to_numpy(zero_copy_only=False)
    lo_of = np.array([ranges[k][0] for k in keys] + [np.nan])
    hi_of = np.array([ranges[k][1] for k in keys] + [np.nan])
    idx = np.where(np.isnan(pos.astype(float)), len(keys), pos).astype(np.int64)
    return lo_of[idx], hi_of[idx]
