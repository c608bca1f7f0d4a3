"""Per-step samples of a named metric, the unit of evidence ``gate`` tests.

One sample is one step of one run (a run without step ids is a single sample: the whole profile),
so repeated runs and many steps both add evidence. With several ranks a step's time is that of
the slowest rank (the step ends when the last rank does); other metrics are the mean over ranks.

Metric names:

- ``step_time_us``: the step's time (the glossary's, npudiag.profiling.analysis.quantities)
- ``device_busy_us``: computing + communication not overlapped + copy not overlapped
- ``copy_exposed_us``: copy not overlapped (device copy time with neither compute nor communication)
- ``idle_us``: free time (step time - device busy)
- any other step_breakdown column: ``computing_us``, ``communication_us``, ``overlapped_us``, ...
- ``op:KEY``: summed device time of op group KEY (op type, or op name with ``by="name"``)
- ``api:NAME``: summed host time of CANN API NAME (e.g. ``api:aclrtMemcpy``) within the step
- ``module:PATH``: the device time of the kernels launched inside torch module PATH (the ranges
  table's path, ``DistributedDataParallel_0/AlexNet_0``; nested modules included), summed over the
  module's calls that start within the step's recorded range (steps table, host clock)
- ``mfu:KEY``: the MFU (percent of the chip's peak, npudiag.profiling.analysis.op_perf.group_mfu) of op
  group KEY's compute kernels in the step, over every rank; higher is better. A step in which none of
  KEY's kernels has a known MFU gives no sample (never 0)
- ``memory:peak_allocated``, ``memory:peak_reserved``, ``memory:unused``: bytes, the step's peak of
  the allocator (npudiag.profiling.analysis.memory) and reserved − allocated at that peak; over ranks the
  largest (the rank closest to running out decides)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.profiling.analysis.context import RuleContext, step_starts
from npudiag.profiling.analysis.hot_ops import op_key
from npudiag.profiling.analysis.memory import allocator_samples, memory_ranks, step_of
from npudiag.profiling.analysis.op_perf import group_mfu
from npudiag.schemas import STEP_BREAKDOWN

ALIASES = {
    "copy_exposed_us": ("copy_not_overlapped_us",),
    "idle_us": ("free_us",),
}
STEP_COLUMNS = [f.name for f in STEP_BREAKDOWN if f.name.endswith("_us")]
DEFAULT_METRICS = ["step_time_us", "device_busy_us", "copy_exposed_us", "idle_us"]
StepWindow = tuple[int | None, int | None] | None


MEMORY_METRICS = ("memory:peak_allocated", "memory:peak_reserved", "memory:unused")


def known_metric(name: str) -> bool:
    return (
        name in ALIASES
        or name in STEP_COLUMNS
        or name in MEMORY_METRICS
        or (name.startswith(("op:", "api:", "module:", "mfu:")) and len(name) > name.index(":") + 1)
    )


HIGHER_IS_BETTER = ("mfu:",)


def canonical_metric(name: str) -> str:
    """A metric as a user may write it: its id (``step_time_us``) or the name the reports show
    without the unit (``step_time``, :func:`npudiag.units.shown_name`)."""
    plain = ":" not in name  # op:KEY, api:NAME ... are names of the user's, never completed
    return name + "_us" if plain and not known_metric(name) and known_metric(name + "_us") else name


def metric_unit(name: str) -> str:
    """``bytes`` for the memory metrics, ``pct`` for MFU, ``us`` for every other."""
    return "bytes" if name in MEMORY_METRICS else "pct" if name.startswith("mfu:") else "us"


def higher_is_better(name: str) -> bool:
    """Whether a larger value of the metric is the better one (MFU); time and bytes are better smaller."""
    return name.startswith(HIGHER_IS_BETTER)


def _memory_samples(tables: dict[str, pa.Table], metric: str, window: StepWindow) -> list[float]:
    ctx = RuleContext(tables)
    ids = _step_ids(tables["kernels"], window)
    per_step: dict[int | None, float] = {}
    for rank in memory_ranks(tables):
        comp, t = allocator_samples(ctx.for_rank("memory_timeline", rank))
        if comp is None or t.num_rows == 0:
            continue
        alloc = pc.fill_null(t["allocated_bytes"], -1).to_numpy(zero_copy_only=False).astype(float)
        reserved = pc.fill_null(t["reserved_bytes"], -1).to_numpy(zero_copy_only=False).astype(float)
        bounds, steps = step_starts(ctx, rank)
        step = (
            step_of(t["ts_us"].to_numpy(zero_copy_only=False), bounds, steps)
            if ids is not None
            else np.full(len(alloc), -1)
        )
        for k in ids if ids is not None else [None]:
            sel = np.flatnonzero(step == (k if k is not None else -1))
            if len(sel) == 0:
                continue
            if metric == "memory:peak_reserved":
                value = float(reserved[sel].max())
            else:
                i = sel[int(np.argmax(alloc[sel]))]
                value = float(alloc[i]) if metric == "memory:peak_allocated" else float(reserved[i] - alloc[i])
            per_step[k] = max(per_step.get(k, value), value)
    return [v for _, v in sorted(per_step.items(), key=lambda kv: (kv[0] is None, kv[0])) if v >= 0]


def _in_window(step: int | None, window: StepWindow) -> bool:
    if window is None or step is None:
        return True
    lo, hi = window
    return (lo is None or step >= lo) and (hi is None or step <= hi)


def _breakdown_samples(tables: dict[str, pa.Table], metric: str, window: StepWindow) -> list[float]:
    sb = tables["step_breakdown"]
    cols = ALIASES.get(metric, (metric,))
    per_step: dict[int | None, list[float]] = {}
    steps = sb["step"].to_pylist()
    values = np.zeros(sb.num_rows)
    for c in cols:
        values = values + np.nan_to_num(sb[c].to_numpy(zero_copy_only=False).astype(float))
    for step, v in zip(steps, values.tolist()):
        if _in_window(step, window):
            per_step.setdefault(step, []).append(v)
    reduce = max if metric == "step_time_us" else (lambda vs: sum(vs) / len(vs))
    return [reduce(v) for _, v in sorted(per_step.items(), key=lambda kv: (kv[0] is None, kv[0]))]


def _step_ids(kernels: pa.Table, window: StepWindow) -> list[int] | None:
    """The run's step ids inside ``window``; None when the run has no step ids (one whole-run sample)."""
    ids = sorted(pc.unique(pc.drop_null(kernels["step"])).to_pylist()) if kernels.num_rows else []
    if not ids:
        return None
    return [s for s in ids if _in_window(s, window)]


def _n_ranks(kernels: pa.Table) -> int:
    return max(1, int(pc.count_distinct(kernels["rank"]).as_py() or 1))


def _op_samples(tables: dict[str, pa.Table], key: str, by: str, window: StepWindow) -> list[float]:
    k = tables["kernels"]
    ids = _step_ids(k, window)
    sel = pc.equal(op_key(k, by), key)
    chosen = k.filter(pc.fill_null(sel, False))
    dur = pc.fill_null(chosen["duration_us"], 0.0)
    n = _n_ranks(k)
    if ids is None:
        return [float(pc.sum(dur).as_py() or 0.0) / n]
    g = pa.table({"step": chosen["step"], "d": dur}).group_by("step").aggregate([("d", "sum")])
    totals = dict(zip(g["step"].to_pylist(), g["d_sum"].to_pylist()))
    return [float(totals.get(s, 0.0)) / n for s in ids]


def _mfu_samples(tables: dict[str, pa.Table], key: str, by: str, window: StepWindow) -> list[float]:
    perf = tables.get("op_perf")
    if perf is None or not perf.num_rows:
        return []
    perf = perf.filter(pc.fill_null(pc.equal(op_key(perf, by), key), False))
    ids = _step_ids(tables["kernels"], window)
    if ids is None:
        g = group_mfu(perf, pa.repeat(pa.scalar(0), perf.num_rows))
        return [float(v) for v in g["mfu_pct"].to_pylist()]
    g = group_mfu(perf, perf["step"])
    by_step = dict(zip(g["key"].to_pylist(), g["mfu_pct"].to_pylist()))
    return [float(by_step[s]) for s in ids if s in by_step]


def _step_bounds(kernels: pa.Table, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    g = pa.table(
        {
            "step": kernels["step"],
            "s": kernels["start_us"],
            "e": pc.add(kernels["start_us"], pc.fill_null(kernels["duration_us"], 0.0)),
        }
    )
    g = g.group_by("step").aggregate([("s", "min"), ("e", "max")])
    lo = dict(zip(g["step"].to_pylist(), g["s_min"].to_pylist()))
    hi = dict(zip(g["step"].to_pylist(), g["e_max"].to_pylist()))
    return np.array([lo[s] for s in ids], float), np.array([hi[s] for s in ids], float)


def _api_samples(tables: dict[str, pa.Table], name: str, window: StepWindow) -> list[float]:
    k, api = tables["kernels"], tables["api_calls"]
    calls = api.filter(pc.fill_null(pc.equal(api["name"], name), False))
    ids = _step_ids(k, window)
    n = _n_ranks(k)
    dur = np.nan_to_num(calls["duration_us"].to_numpy(zero_copy_only=False).astype(float))
    if ids is None:
        return [float(dur.sum()) / n]
    lo, hi = _step_bounds(k, ids)
    start = np.nan_to_num(calls["start_us"].to_numpy(zero_copy_only=False).astype(float), nan=-np.inf)
    out = []
    for a, b in zip(lo, hi):
        inside = (start >= a) & (start <= b)
        out.append(float(dur[inside].sum()) / n)
    return out


def _module_samples(tables: dict[str, pa.Table], path: str, window: StepWindow) -> list[float]:
    r = tables.get("ranges")
    if r is None or r.num_rows == 0:
        return [0.0]
    calls = r.filter(pc.fill_null(pc.and_(pc.equal(r["kind"], "module"), pc.equal(r["path"], path)), False))
    n = (
        _n_ranks(tables["kernels"])
        if tables["kernels"].num_rows
        else max(1, int(pc.count_distinct(r["rank"]).as_py() or 1))
    )
    dev = np.nan_to_num(calls["device_us"].to_numpy(zero_copy_only=False).astype(float))
    st = tables["steps"]
    st = st.filter(pc.and_(pc.is_valid(st["start_ns"]), pc.is_valid(st["end_ns"]))) if st.num_rows else st
    steps = (
        sorted({s for s in st["step"].to_pylist() if s is not None and _in_window(s, window)}) if st.num_rows else []
    )
    if not steps:
        return [float(dev.sum()) / n]
    start = calls["start_ns"].to_numpy(zero_copy_only=False)
    rank = np.asarray(calls["rank"].to_pylist(), dtype=object)
    out = []
    for s in steps:  # a call belongs to the step whose recorded range on its rank holds its start
        inside = np.zeros(calls.num_rows, bool)
        for row in st.filter(pc.equal(st["step"], s)).to_pylist():
            inside |= (rank == row["rank"]) & (start >= row["start_ns"]) & (start <= row["end_ns"])
        out.append(float(dev[inside].sum()) / n)
    return out


def run_samples(
    tables: dict[str, pa.Table], metric: str, *, by: str = "type", window: StepWindow = None
) -> list[float]:
    """The samples of ``metric`` in one run, one per step (or one for the whole run)."""
    if metric.startswith("module:"):
        return _module_samples(tables, metric[len("module:") :], window)
    if metric.startswith("op:"):
        return _op_samples(tables, metric[3:], by, window)
    if metric.startswith("mfu:"):
        return _mfu_samples(tables, metric[4:], by, window)
    if metric.startswith("api:"):
        return _api_samples(tables, metric[4:], window)
    if metric in MEMORY_METRICS:
        return _memory_samples(tables, metric, window)
    if metric in ALIASES or metric in STEP_COLUMNS:
        return _breakdown_samples(tables, metric, window)
    raise ValueError(
        f"unknown metric {metric!r} (expected one of {', '.join(DEFAULT_METRICS)}, a "
        "step_breakdown column, op:KEY, mfu:KEY, api:NAME, "
        "module:PATH "
        f"or {', '.join(MEMORY_METRICS)})"
    )


def samples(
    runs: Sequence[dict[str, pa.Table]], metric: str, *, by: str = "type", window: StepWindow = None
) -> np.ndarray:
    """``metric``'s samples pooled over repeated runs."""
    out: list[float] = []
    for tables in runs:
        out.extend(run_samples(tables, metric, by=by, window=window))
    return np.array(out, float)


def top_op_keys(runs: Sequence[dict[str, pa.Table]], n: int, by: str = "type") -> list[str]:
    """The ``n`` op groups with the most device time over ``runs``, largest first."""
    if n <= 0 or not runs:
        return []
    parts = [
        pa.table({"key": op_key(t["kernels"], by), "d": pc.fill_null(t["kernels"]["duration_us"], 0.0)}) for t in runs
    ]
    g = (
        pa.concat_tables(parts)
        .group_by("key")
        .aggregate([("d", "sum")])
        .sort_by([("d_sum", "descending"), ("key", "ascending")])
    )
    return g["key"].slice(0, n).to_pylist()
