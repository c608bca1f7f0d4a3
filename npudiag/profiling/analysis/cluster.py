"""Cross-rank analysis: the per-step phases of every rank, which ranks are slow, and why.

Per step and rank the phases are step_trace_time.csv's (computing, communication not overlapped,
overlapped, communication, free, stage, bubble), read from the rank's own step_trace file where it
exists, else computed from its kernels with the same definitions (step_breakdown; ``free_us``
here is step_trace_time.csv's Free, which holds the exposed copies: the breakdown's free plus
copy not overlapped).

A rank is slow in a step when its stage time exceeds the median over ranks by more than
``threshold`` (5 %, as msprof-analyze's max−min rule) AND by more than ``z`` robust standard
deviations (1.4826 × MAD), so one noisy rank among identical ones is not flagged and a whole
cluster of equal ranks never is. The cause is the phase that grew most against the median of the
other ranks; where kernels exist, the ops slower than on the median rank are listed too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling import tasks
from npudiag.profiling.analysis.compare import diff_ops
from npudiag.profiling.analysis.context import rank_rows
from npudiag.profiling.analysis.idle_causes import device_tasks, main_cause
from npudiag.profiling.analysis.step_breakdown import TOLERANCE_US
from npudiag.schemas import CLUSTER_COMM_WAITS, CLUSTER_STAGES, CLUSTER_STEPS, SLOW_RANKS

PHASES = ["computing_us", "communication_not_overlapped_us", "free_us", "bubble_us"]
PHASE_NAMES = {
    "computing_us": "computing",
    "communication_not_overlapped_us": "communication",
    "free_us": "free",
    "bubble_us": "bubble",
}


def parallel_indices(
    args: dict[str, Any] | None, ranks: Iterable[int] | None = None
) -> dict[int, tuple[int, int, int]] | None:
    """Rank -> (DP, PP, TP index) from profiler_metadata.json ``distributed_args``, with Megatron's
    rank order (TP fastest, then DP, PP slowest), as msprof-analyze's cluster_step_trace_time.csv
    reports them; None when the arguments are missing or inconsistent (world != TP x PP x DP).
    Only for ``ranks`` (the ranks read; every rank of the world when None): the sizes are what a
    file claims, the work is bounded by what was read."""
    if not isinstance(args, dict):
        return None
    keys = (
        "world_size",
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "data_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
    )
    vals = {k: args.get(k, 1) for k in keys}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vals.values()):
        return None
    world = vals["world_size"]
    tp, pp, dp, cp, ep = (max(1, vals[k]) for k in keys[1:])
    # CP > 1: msprof-analyze 26 places no rank either (its partition fails), so neither do we
    if world < 1 or world != tp * pp * dp or dp % ep or cp != 1:
        return None
    per_stage = world // pp
    out = {}
    for rank in range(world) if ranks is None else sorted(r for r in set(ranks) if 0 <= r < world):
        stage, offset = divmod(rank, per_stage)
        dp_index, k = divmod(offset, tp)
        position = stage * tp + k  # place in the rank's model-parallel group
        out[rank] = (dp_index, position // tp, position % tp)
    return out


def with_parallel(table: pa.Table, indices: dict[int, tuple[int, int, int]] | None) -> pa.Table:
    """``table`` (CLUSTER_STEPS) with the DP/PP/TP index columns filled from ``indices``."""
    if not indices or table.num_rows == 0:
        return table
    ranks = table["rank"].to_pylist()
    for i, name in enumerate(("dp_index", "pp_index", "tp_index")):
        col = pa.array([indices[r][i] if r in indices else None for r in ranks], pa.int32())
        table = table.set_column(table.schema.get_field_index(name), name, col)
    return table


def rank_steps(tables: dict[str, pa.Table]) -> pa.Table:
    """One row per (step, rank): the rank's step_trace rows where it has them, else its kernels' breakdown
    (made column by column: a rank's step_trace phases as they are, Stage its step time; a kernel
    breakdown's Free with its exposed copies, as step_trace_time.csv's Free holds them, and no bubble)."""
    steps = tables["steps"]
    parts = [_trace_phases(steps)] if steps.num_rows else []
    sb = tables.get("step_breakdown")
    if sb is not None and sb.num_rows:
        with_trace = pc.unique(steps["rank"]) if steps.num_rows else pa.array([], pa.int32())
        parts.append(_kernel_phases(sb.filter(pc.invert(pc.fill_null(pc.is_in(sb["rank"], with_trace), False)))))
    parts = [p for p in parts if p.num_rows]
    t = pa.concat_tables(parts) if parts else CLUSTER_STEPS.empty_table()
    return t.sort_by([("step", "ascending"), ("rank", "ascending")]) if t.num_rows else t


def _phases(n: int, columns: dict[str, Any], source: str) -> pa.Table:
    cols = {**columns, "source": pa.repeat(pa.scalar(source), n)}
    return pa.table({f.name: (cols[f.name] if f.name in cols else pa.nulls(n, f.type)) for f in CLUSTER_STEPS}).cast(
        CLUSTER_STEPS
    )


def _trace_phases(steps: pa.Table) -> pa.Table:
    """CLUSTER_STEPS rows of the steps table's rows (a rank's step_trace_time.csv / STEP_TIME)."""
    same = (
        "step",
        "rank",
        "device_id",
        "computing_us",
        "communication_not_overlapped_us",
        "overlapped_us",
        "communication_us",
        "free_us",
        "bubble_us",
        "communication_not_overlapped_exclude_receive_us",
        "preparing_us",
    )
    return _phases(steps.num_rows, {**{c: steps[c] for c in same}, "stage_us": steps["step_time_us"]}, "step_trace")


def _kernel_phases(sb: pa.Table) -> pa.Table:
    """CLUSTER_STEPS rows of step_breakdown rows: step_trace_time.csv's Free holds the exposed copies, no bubble."""
    n = sb.num_rows
    free = pc.add(pc.fill_null(sb["free_us"], 0.0), pc.fill_null(sb["copy_not_overlapped_us"], 0.0))
    same = (
        "step",
        "rank",
        "computing_us",
        "communication_not_overlapped_us",
        "overlapped_us",
        "communication_us",
        "stage_us",
    )
    return _phases(
        n,
        {
            **{c: sb[c] for c in same},
            "free_us": free,
            "bubble_us": pa.repeat(pa.scalar(0.0), n),
            "communication_not_overlapped_exclude_receive_us": sb["communication_not_overlapped_us"],
        },
        "kernels",
    )


def phase_sources(tables: dict[str, pa.Table], steps: pa.Table) -> dict[str, Any]:
    """Where the cluster's phases come from, and where ``analyze`` says otherwise: ``step_trace``
    and ``kernels`` (the ranks of each source), and ``differs``, one row per (rank, step) that has
    both the profiler's step_trace and kernels, with the kernel breakdown's free (its free plus
    copy not overlapped, as step_trace_time.csv's Free holds the exposed copies) and stage (the
    step's first to last device task) beside the profiler's."""
    by = {
        src: sorted(set(steps.filter(pc.equal(steps["source"], src))["rank"].drop_null().to_pylist()))
        for src in ("step_trace", "kernels")
    }
    sb = tables.get("step_breakdown")
    differs = []
    if sb is not None and sb.num_rows and by["step_trace"]:
        ours = {(r["rank"], r["step"]): r for r in sb.to_pylist()}
        for r in steps.filter(pc.equal(steps["source"], "step_trace")).to_pylist():
            k = ours.get((r["rank"], r["step"]))
            if k is None:
                continue
            free = (k["free_us"] or 0.0) + (k["copy_not_overlapped_us"] or 0.0)
            span = k["step_time_us"] - k["before_first_task_us"] - k["after_last_task_us"]
            if not (_same(free, r["free_us"]) and _same(span, r["stage_us"])):
                differs.append(
                    {
                        "rank": r["rank"],
                        "step": r["step"],
                        "free_us": r["free_us"],
                        "kernels_free_us": free,
                        "stage_us": r["stage_us"],
                        "kernels_stage_us": span,
                    }
                )
    return {**by, "differs": differs}


def _same(a: float | None, b: float | None) -> bool:
    """Equal within the rounding of torch_npu's float64 µs (the step breakdown's tolerance), or both unknown."""
    return (a is None) == (b is None) and (a is None or abs(a - b) <= TOLERANCE_US)


KernelsOf = Callable[[list[int]], pa.Table]
HostsOf = Callable[[list[int]], tuple[pa.Table, pa.Table]]  # ranks -> (their api_calls, their host_ops)


def _slower_ops(
    kernels_of: KernelsOf, slow_rank: int, median_rank: int, step: int | None, top: int = 5
) -> list[dict[str, Any]]:
    """Ops slower on ``slow_rank`` than on ``median_rank`` in ``step`` (that step's kernels only)."""
    k = kernels_of([slow_rank, median_rank])
    if k.num_rows and step is not None and k["step"].null_count < k.num_rows:
        k = k.filter(pc.fill_null(pc.equal(k["step"], step), False))
    if k.num_rows == 0:
        return []
    mine = k.filter(pc.fill_null(pc.equal(k["rank"], slow_rank), False))
    ref = k.filter(pc.fill_null(pc.equal(k["rank"], median_rank), False))
    if mine.num_rows == 0 or ref.num_rows == 0:
        return []
    d = diff_ops([{"kernels": ref}], [{"kernels": mine}])
    out = []
    for r in d.to_pylist():
        if r["delta_total_us"] > 0:
            out.append(
                {
                    "op": r["key"],
                    "delta_us": r["delta_total_us"],
                    "ratio": r["ratio"],
                    "median_rank_us": r["base_total_us"],
                }
            )
        if len(out) == top:
            break
    return out


@dataclass(frozen=True)
class StepGroups:
    """A table's rows grouped by step, every group at once: ``order`` sorts the rows by step (nulls
    last) then rank, ``bounds`` cut the sorted rows into the groups, ``steps`` name them. Per-step
    figures are array operations over the groups, never a filter per step (20,000 one-kernel steps
    once took 52 s in cluster: a filter of the whole table for each step)."""

    order: np.ndarray
    bounds: np.ndarray
    steps: list

    @classmethod
    def of(cls, table: pa.Table) -> StepGroups:
        if table.num_rows == 0:
            return cls(np.zeros(0, np.int64), np.zeros(1, np.int64), [])
        keys = (
            [("step", "ascending"), ("rank", "ascending")] if "rank" in table.column_names else [("step", "ascending")]
        )
        order = pc.sort_indices(table, sort_keys=keys).to_numpy()  # nulls last (Arrow's default)
        step = table["step"].take(pa.array(order))
        code = (
            pc.fill_null(step, np.iinfo(np.int64).max).to_numpy(zero_copy_only=False)
            if step.null_count
            else step.to_numpy()
        )
        heads = np.concatenate([[0], np.flatnonzero(code[1:] != code[:-1]) + 1])
        return cls(order, np.append(heads, len(order)), step.take(pa.array(heads)).to_pylist())

    @property
    def group(self) -> np.ndarray:
        """The group of each sorted row."""
        return np.repeat(np.arange(len(self.steps)), np.diff(self.bounds))

    def sorted(self, table: pa.Table, column: str) -> np.ndarray:
        """``column`` in the groups' order, nulls as NaN."""
        return (
            pc.fill_null(table[column].take(pa.array(self.order)), np.nan).to_numpy(zero_copy_only=False).astype(float)
        )

    def median(self, values: np.ndarray) -> np.ndarray:
        """Each group's median of ``values`` (sorted rows), NaN left out; NaN for a group of none."""
        n_groups = len(self.steps)
        g = self.group
        ok = ~np.isnan(values)
        o = np.lexsort((values, ~ok, g))  # per group: the values in order, NaN last
        v = values[o]
        count = np.bincount(g[ok], minlength=n_groups)[:n_groups]
        lo = self.bounds[:-1] + np.maximum(count - 1, 0) // 2
        hi = self.bounds[:-1] + count // 2
        with np.errstate(invalid="ignore"):
            med = (v[np.minimum(lo, len(v) - 1)] + v[np.minimum(hi, len(v) - 1)]) / 2.0 if len(v) else np.zeros(0)
        return np.where(count > 0, med, np.nan)


def slow_ranks(
    table: pa.Table, kernels_of: KernelsOf | None = None, threshold: float = 0.05, z: float = 3.0
) -> pa.Table:
    """Slow (step, rank) rows with their cause. ``kernels_of(ranks)`` returns those ranks' kernels,
    so only the slow rank and the median rank are ever read, not the whole cluster."""
    rows = []
    if table.num_rows == 0:
        return SLOW_RANKS.empty_table()
    groups = StepGroups.of(table)
    g = groups.group
    stage = groups.sorted(table, "stage_us")
    med = groups.median(stage)[g]
    mad = groups.median(np.abs(stage - med))[g]
    sigma = 1.4826 * mad
    counts = np.bincount(g, minlength=len(groups.steps))[g]
    enough = (counts >= 3) & ~np.isnan(med)
    with np.errstate(invalid="ignore"):
        excess = stage - med
        slow = enough & (excess > threshold * med) & ((sigma == 0) | (excess > z * sigma))
    ranks = table["rank"].take(pa.array(groups.order)).to_pylist() if slow.any() else []
    phases = {p: np.nan_to_num(groups.sorted(table, p), nan=0.0) for p in PHASES} if slow.any() else {}
    for i in np.flatnonzero(slow):  # the slow rows only: a few, whatever the number of steps
        j = g[i]
        a, b = groups.bounds[j], groups.bounds[j + 1]
        near = a + int(np.nanargmin(np.abs(stage[a:b] - med[i])))
        others = np.arange(a, b) != i
        growth = {p: float(v[i] - np.median(v[a:b][others])) for p, v in phases.items()}
        cause = max(growth, key=lambda p: growth[p])
        step = groups.steps[j]
        slower = (
            _slower_ops(kernels_of, ranks[i], ranks[near], step)
            if kernels_of is not None and cause == "computing_us"
            else []
        )
        rows.append(
            {
                "step": step,
                "rank": ranks[i],
                "stage_us": float(stage[i]),
                "median_stage_us": float(med[i]),
                "excess_us": float(excess[i]),
                "excess_pct": 100.0 * excess[i] / med[i] if med[i] else None,
                "robust_z": float(excess[i] / sigma[i]) if sigma[i] > 0 else None,
                "cause": PHASE_NAMES[cause],
                "cause_excess_us": growth[cause],
                "slower_ops": json.dumps(slower),
            }
        )
    return pa.Table.from_pylist(rows, schema=SLOW_RANKS) if rows else SLOW_RANKS.empty_table()


CLUSTER_CSV_HEADER = [
    "Step", "Type", "Index", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage", "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
]  # fmt: skip
PARALLEL_HEADER = ["DP Index", "PP Index", "TP Index"]
_CSV_VALUES = [
    "computing_us",
    "communication_not_overlapped_us",
    "overlapped_us",
    "communication_us",
    "free_us",
    "stage_us",
    "bubble_us",
    "communication_not_overlapped_exclude_receive_us",
]


def _num(v: Any) -> str:
    return "" if v is None else repr(float(v))


def _nums(col: pa.ChunkedArray | pa.Array) -> list[str]:
    """A float column's cells as msprof-analyze writes them (Python's repr), "" for null."""
    values = pc.cast(col, pa.float64()).to_pylist()
    return list(map(repr, values)) if col.null_count == 0 else [_num(v) for v in values]


def cluster_csv(
    table: pa.Table, safe: Callable[[list[str]], list[str]] = lambda cells: cells
) -> tuple[list[str], list[list[str]]]:
    """msprof-analyze's cluster_step_trace_time.csv: header and rows, each column's cells passed through
    ``safe`` (the writer's CSV safety, output.csv_column).

    As msprof-analyze 26 writes it: the ranks' own step_trace columns (Preparing where their files
    have it), DP/PP/TP Index where profiler_metadata.json gives consistent distributed_args, then
    one ``stage`` row per step and pipeline stage (the ranks of one PP index) holding each column's
    maximum over those ranks, Index the ranks as a tuple ``(0, 1)``. Built column by column: a
    cluster of 20,000 steps has 40,000 rows of 25 cells."""
    preparing = table.num_rows and table["preparing_us"].null_count < table.num_rows
    parallel = table.num_rows and table["pp_index"].null_count < table.num_rows
    names = _CSV_VALUES + (["preparing_us"] if preparing else [])
    header = CLUSTER_CSV_HEADER + (["Preparing"] if preparing else []) + (PARALLEL_HEADER if parallel else [])
    n = table.num_rows
    columns = [
        safe(["" if v is None else str(v) for v in table["step"].to_pylist()]),
        ["rank"] * n,
        safe([str(v) for v in table["rank"].to_pylist()]),
        *(safe(_nums(table[c])) for c in names),
    ]
    if parallel:
        columns += [
            safe(["NA" if v is None else str(v) for v in table[c].to_pylist()])
            for c in ("dp_index", "pp_index", "tp_index")
        ]
    rows = [list(r) for r in zip(*columns)]
    return header, rows + (_stage_rows(table, names, safe) if parallel else [])


def _stage_rows(table: pa.Table, names: list[str], safe: Callable[[list[str]], list[str]]) -> list[list[str]]:
    """One ``stage`` row per step and pipeline stage: each column's maximum over the stage's ranks, Index the
    ranks as a tuple, the parallel indices NA."""
    staged = table.filter(pc.is_valid(table["pp_index"]))
    g = staged.group_by(["step", "pp_index"], use_threads=False).aggregate(
        [("rank", "list"), *((n, "max") for n in names)]
    )
    g = g.sort_by([("step", "ascending"), ("pp_index", "ascending")])  # nulls last (Arrow's default)
    ranks = [str(tuple(sorted(r))) for r in g["rank_list"].to_pylist()]
    steps_ = ["" if v is None else str(v) for v in g["step"].to_pylist()]
    cells = [
        safe(steps_),
        ["stage"] * g.num_rows,
        safe(ranks),
        *(safe(_nums(g[f"{n}_max"])) for n in names),
        *(["NA"] * g.num_rows,) * 3,
    ]
    return [list(r) for r in zip(*cells)]


def per_step(table: pa.Table) -> list[dict[str, Any]]:
    """Per step (in step order, no step last): its rows (by rank) and each phase's median over them."""
    groups = StepGroups.of(table)
    rows = table.take(pa.array(groups.order)).to_pylist()
    columns = [c for c in table.column_names if c.endswith("_us")]
    medians = {c: groups.median(groups.sorted(table, c)) for c in columns}
    out = []
    for j, step in enumerate(groups.steps):
        median = {c: None if np.isnan(m[j]) else float(m[j]) for c, m in medians.items()}
        out.append({"step": step, "rows": rows[groups.bounds[j] : groups.bounds[j + 1]], "median": median})
    return out


def slow_links(links: pa.Table, factor: float = 0.5, min_bytes: int = 1_000_000) -> list[dict[str, Any]]:
    """Links whose bandwidth is below ``factor`` x the median of links of the same transport (ignoring
    LOCAL copies and transfers under ``min_bytes``, whose bandwidth is latency, not link speed)."""
    out: list[dict[str, Any]] = []
    if links.num_rows == 0:
        return out
    rows = [
        r
        for r in links.to_pylist()
        if r["transport"] not in (None, "LOCAL") and (r["size_bytes"] or 0) >= min_bytes and r["bandwidth_gbps"]
    ]
    by_transport: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_transport.setdefault(r["transport"], []).append(r)
    for rs in by_transport.values():
        med = float(np.median([r["bandwidth_gbps"] for r in rs]))
        for r in rs:
            if r["bandwidth_gbps"] < factor * med:
                out.append({**r, "median_bandwidth_gbps": med, "ratio": r["bandwidth_gbps"] / med})
    out.sort(key=lambda r: r["ratio"])
    return out


def link_summary(links: pa.Table) -> list[dict[str, Any]]:
    """Per transport: links, bytes, time and the bandwidth they reached (size / time)."""
    links = links.filter(pc.fill_null(pc.greater(links["size_bytes"], 0), False))
    if links.num_rows == 0:
        return []
    g = links.group_by("transport").aggregate(
        [("size_bytes", "sum"), ("time_us", "sum"), ("size_bytes", "count"), ("bandwidth_gbps", "min")]
    )
    out = []
    for r in g.to_pylist():
        t = r["time_us_sum"] or 0.0
        out.append(
            {
                "transport": r["transport"],
                "links": r["size_bytes_count"],
                "bytes": r["size_bytes_sum"],
                "time_us": t,
                "bandwidth_gbps": (r["size_bytes_sum"] / (t * 1e3)) if t else None,
                "min_link_bandwidth_gbps": r["bandwidth_gbps_min"],
            }
        )
    return sorted(out, key=lambda r: -(r["bytes"] or 0))


# the rank that entered a collective last waited this long or more itself: it waited on a peer the data does not hold
PEER_WAIT_US = 1000.0


def wait_skew(ops: pa.Table, top: int = 10) -> list[dict[str, Any]]:
    """Per collective (step, op) seen on several ranks: the spread of wait time and the late rank, the
    one that entered it last (the same definition as :func:`comm_waits`); ``peer_not_profiled`` where
    that rank waited PEER_WAIT_US or more too (every profiled rank waited: on a rank not in the data)."""
    if ops.num_rows == 0:
        return []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in ops.to_pylist():
        if r["wait_us"] is not None and r["rank"] is not None:
            groups.setdefault((r["step"], r["op_name"]), []).append(r)
    out = []
    for (step, op), rs in groups.items():
        if len(rs) < 2:
            continue
        waits = [r["wait_us"] for r in rs]
        entered = [r for r in rs if r["start_us"] is not None]
        late = max(entered, key=lambda r: (r["start_us"], r["rank"])) if entered else None
        out.append(
            {
                "step": step,
                "op_name": op,
                "ranks": len(rs),
                "max_wait_us": max(waits),
                "min_wait_us": min(waits),
                "skew_us": max(waits) - min(waits),
                "late_rank": late["rank"] if late else None,
                "late_wait_us": late["wait_us"] if late else None,
                "peer_not_profiled": bool(late and late["wait_us"] >= PEER_WAIT_US),
            }
        )
    out.sort(key=lambda r: -r["skew_us"])
    return out[:top]


def _busy_in(kernels: pa.Table, lo: float, hi: float) -> float:
    """Device busy time (the union of kernel intervals) of ``kernels`` clipped to [lo, hi], in us."""
    if kernels.num_rows == 0 or hi <= lo:
        return 0.0
    start = kernels["start_us"].to_numpy(zero_copy_only=False)
    end = start + np.nan_to_num(kernels["duration_us"].to_numpy(zero_copy_only=False))
    keep = (end > lo) & (start < hi)
    s, e = np.clip(start[keep], lo, hi), np.clip(end[keep], lo, hi)
    if not len(s):
        return 0.0
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    gaps = np.maximum(s[1:] - e[:-1], 0.0)
    return float(e[-1] - s[0] - gaps.sum())


def _occurrences(ops: pa.Table) -> dict[tuple, list[dict[str, Any]]]:
    """The collectives seen on two ranks or more, keyed (step, op name, n-th occurrence on each rank)."""
    rows = [
        r
        for r in ops.select(["step", "op_name", "rank", "start_us"]).to_pylist()
        if r["rank"] is not None and r["start_us"] is not None
    ]
    rows.sort(key=lambda r: (str(r["step"]), str(r["op_name"]), r["rank"], r["start_us"]))
    seen: dict[tuple, int] = {}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        key = (r["step"], r["op_name"], r["rank"])
        n = seen.get(key, 0)
        seen[key] = n + 1
        groups.setdefault((r["step"], r["op_name"], n), []).append(r)
    return {k: g for k, g in groups.items() if len(g) >= 2}


def _late_rank_time(
    kernels: pa.Table | None,
    api: pa.Table | None,
    host_ops: pa.Table | None,
    late: dict[str, Any],
    first: float,
) -> tuple[Any, Any, Any, Any, Any]:
    """What the late rank's device did between the first rank's entry and its own: busy computing,
    communicating where no compute ran, idle, and the host call that idle time mostly went to (its kind);
    all None for a rank without kernel data."""
    mine = kernels.filter(pc.fill_null(pc.equal(kernels["rank"], late["rank"]), False)) if kernels is not None else None
    if mine is None or not mine.num_rows:  # a rank without kernel data: nothing said of its device
        return None, None, None, None, None
    # computing, and communication where no compute runs: the collectives themselves are not compute
    compute = mine.filter(~tasks.communication_mask(mine)) if "task_class" in mine.column_names else mine
    busy = _busy_in(compute, first, late["start_us"])
    either = _busy_in(mine, first, late["start_us"])
    idle = late["start_us"] - first - either
    cause = kind = None
    if api is not None and idle > 0:
        device = device_tasks(mine, schemas.empty("copies"))
        cause, kind = main_cause(
            device, rank_rows(api, late["rank"]), rank_rows(host_ops, late["rank"]), first, late["start_us"]
        )
    return busy, either - busy, idle, cause, kind


def comm_waits(ops: pa.Table, kernels_of: KernelsOf | None = None, hosts_of: HostsOf | None = None) -> pa.Table:
    """Per collective seen on two ranks or more (step, op name, its n-th occurrence on each rank):
    when each rank entered it, the rank that entered last, how long each rank waited for it, and what
    the late rank's device did meanwhile (busy with kernels, or idle while its host worked) and the
    host call that idle time mostly went to (the idle causes' attribution). ``kernels_of(ranks)`` and
    ``hosts_of(ranks)`` (their CANN calls and framework ops) give those ranks' rows (only the late
    ones are read). Entry times are
    each rank's own clock: ranks on different hosts are as comparable as their clocks are."""
    if ops.num_rows == 0:
        return CLUSTER_COMM_WAITS.empty_table()
    groups = _occurrences(ops)
    late_ranks = sorted({max(g, key=lambda r: r["start_us"])["rank"] for g in groups.values()})
    kernels = kernels_of(late_ranks) if kernels_of is not None and late_ranks else None
    api, host_ops = hosts_of(late_ranks) if hosts_of is not None and late_ranks else (None, None)
    out = []
    for (step, op, n), g in groups.items():
        late = max(g, key=lambda r: (r["start_us"], r["rank"]))
        first = min(r["start_us"] for r in g)
        busy, comm, idle, cause, kind = _late_rank_time(kernels, api, host_ops, late, first)
        for r in g:
            out.append(
                {
                    "step": step,
                    "op_name": op,
                    "occurrence": n,
                    "rank": r["rank"],
                    "start_us": r["start_us"],
                    "wait_us": late["start_us"] - r["start_us"],
                    "late_rank": late["rank"],
                    "late_by_us": late["start_us"] - first,
                    "late_busy_us": busy,
                    "late_comm_us": comm,
                    "late_idle_us": idle,
                    "late_host_cause": cause,
                    "late_host_kind": kind,
                }
            )
    return pa.Table.from_pylist(out, schema=CLUSTER_COMM_WAITS) if out else CLUSTER_COMM_WAITS.empty_table()


def late_ranks(waits: pa.Table, top: int = 5) -> list[dict[str, Any]]:
    """The collectives a late rank held up longest, largest first: the rank, by how much, how many
    ranks waited for it, and what its device did meanwhile."""
    waiting: dict[tuple, int] = {}
    late = []
    for r in waits.to_pylist():
        key = (r["step"], r["op_name"], r["occurrence"])
        waiting[key] = waiting.get(key, 0) + (r["wait_us"] > 0)
        if r["rank"] == r["late_rank"]:
            late.append(r)
    late.sort(key=lambda r: -r["late_by_us"])
    keys = (
        "step",
        "op_name",
        "late_rank",
        "late_by_us",
        "late_busy_us",
        "late_comm_us",
        "late_idle_us",
        "late_host_cause",
        "late_host_kind",
    )
    return [
        {**{k: r[k] for k in keys}, "ranks_waiting": waiting[(r["step"], r["op_name"], r["occurrence"])]}
        for r in late[:top]
    ]


MATRIX_PHASES = ["computing_us", "communication_not_overlapped_us", "free_us", "bubble_us", "stage_us"]


def rank_matrix(table: pa.Table) -> list[dict[str, Any]]:
    """One row per rank over the whole window: each phase's mean over the rank's steps, the
    difference of its mean stage from the median rank's, and its worst step (longest stage)."""
    if table.num_rows == 0:
        return []
    rows = table.select(["rank", "step", *MATRIX_PHASES]).to_pylist()
    by_rank: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_rank.setdefault(r["rank"], []).append(r)
    out = []
    for rank, rs in by_rank.items():
        means = {}
        for p in MATRIX_PHASES:
            vals = [r[p] for r in rs if r[p] is not None]
            means[p] = float(np.mean(vals)) if vals else None
        with_stage = [r for r in rs if r["stage_us"] is not None]
        worst = max(with_stage, key=lambda r: r["stage_us"]) if with_stage else None
        out.append(
            {
                "rank": rank,
                "steps": len(rs),
                **means,
                "worst_step": worst["step"] if worst else None,
                "worst_stage_us": worst["stage_us"] if worst else None,
            }
        )
    stages = [r["stage_us"] for r in out if r["stage_us"] is not None]
    median = float(np.median(stages)) if stages else None
    for r in out:
        r["stage_vs_median_pct"] = (
            100.0 * (r["stage_us"] - median) / median if median and r["stage_us"] is not None else None
        )
    out.sort(key=lambda r: (-(r["stage_us"] or 0.0), r["rank"] if r["rank"] is not None else -1))
    return out


# -- pipeline stages ---------------------------------------------------------------------------------

STAGE_PHASES = ("computing_us", "communication_not_overlapped_us", "free_us", "bubble_us", "stage_us")
# msprof-analyze's slow rank check: each phase of step_trace_time.csv over every (step, rank)
GAP_PHASES = {"computing_us": "Computing", "communication_not_overlapped_us": "Communication", "free_us": "Free"}


def stages(table: pa.Table) -> pa.Table:
    """CLUSTER_STAGES: per (step, pipeline stage) each phase's mean over the stage's ranks; empty
    where the ranks carry no pipeline index (no consistent profiler_metadata.json distributed_args)."""
    if table.num_rows == 0 or pc.all(pc.is_null(table["pp_index"])).as_py():
        return CLUSTER_STAGES.empty_table()
    t = table.filter(pc.is_valid(table["pp_index"])).sort_by([("step", "ascending"), ("rank", "ascending")])
    t = t.set_column(t.schema.get_field_index("step"), "step", pc.fill_null(t["step"], -1))
    aggs = [("rank", "list")] + [(c, "mean") for c in STAGE_PHASES]
    g = t.group_by(["step", "pp_index"], use_threads=False).aggregate(aggs)
    out = pa.table(
        {
            "step": pc.if_else(pc.equal(g["step"], -1), pa.scalar(None, pa.int64()), g["step"]),
            "pp_index": g["pp_index"],
            "ranks": g["rank_list"],  # in rank order: ``table`` is sorted by step, rank and grouped unthreaded
            **{c: g[f"{c}_mean"] for c in STAGE_PHASES},
        }
    )
    out = out.cast(CLUSTER_STAGES)
    return out.sort_by([("step", "ascending"), ("pp_index", "ascending")])


def stage_imbalance(stage_rows: pa.Table, threshold: float = 0.05) -> dict[str, Any] | None:
    """Pipeline stages whose computing differs: per step, the gap between the slowest and the fastest
    stage's computing (each the mean over the stage's ranks), and its share of the mean step time;
    ``imbalanced`` when that share is above ``threshold`` (msprof-analyze's 5 %). Time lost, an
    estimate: per step, what the slowest stage computes beyond the stages' mean (what spreading the
    layers evenly would take off the critical stage), summed over steps. None with fewer than two stages."""
    if stage_rows.num_rows == 0:
        return None
    per_step = _stage_gaps(stage_rows)
    if not per_step:
        return None
    pp = sorted(set(stage_rows["pp_index"].to_pylist()))
    by_stage = []
    for idx in pp:
        sub = stage_rows.filter(pc.equal(stage_rows["pp_index"], idx))
        row = {"pp_index": idx, "ranks": sub["ranks"][0].as_py()}
        for c in STAGE_PHASES:
            vals = [v for v in sub[c].to_pylist() if v is not None]
            row[c] = float(np.mean(vals)) if vals else None
        by_stage.append(row)
    gap = float(np.mean([r["gap_us"] for r in per_step]))
    steps_us = [r["step_us"] for r in per_step if r["step_us"]]
    step_us = float(np.mean(steps_us)) if steps_us else None
    share = gap / step_us if step_us else None
    slowest = max(by_stage, key=lambda r: r["computing_us"] or 0.0)
    fastest = min(by_stage, key=lambda r: r["computing_us"] if r["computing_us"] is not None else float("inf"))
    return {
        "stages": by_stage,
        "per_step": per_step,
        "gap_us": gap,
        "step_us": step_us,
        "share": share,
        "threshold": threshold,
        "imbalanced": share is not None and share > threshold,
        "time_lost_us": float(sum(r["lost_us"] for r in per_step)),
        "slowest_stage": slowest["pp_index"],
        "fastest_stage": fastest["pp_index"],
        "advice": (
            f"Pipeline stage {slowest['pp_index']} computes {gap / 1e3:.2f} ms more per "
            f"step than stage {fastest['pp_index']}: "
            "every other stage waits for it. Move layers from the slow stage to the fast one (Megatron: "
            "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers, "
            "or a custom layer split), remembering that "
            "the first stage also holds the embedding and the last the output layer and loss."
        ),
    }


def _stage_gaps(stage_rows: pa.Table) -> list[dict[str, Any]]:
    """Per step with two stages or more that record computing: the slowest and the fastest stage by
    computing (the first of equals), the gap, what the slowest computes beyond the stages' mean, the
    mean step time of the step's stages."""
    groups = StepGroups.of(stage_rows)
    g, n = groups.group, len(groups.steps)
    comp = groups.sorted(stage_rows, "computing_us")
    stage = groups.sorted(stage_rows, "stage_us")
    pp = stage_rows["pp_index"].take(pa.array(groups.order)).to_pylist()
    ok = ~np.isnan(comp)
    heads = groups.bounds[:-1]
    fastest = np.lexsort((comp, ~ok, g))[heads]  # per group, NaN last: the first row of the smallest
    slowest = np.lexsort((-np.nan_to_num(comp, nan=-np.inf), ~ok, g))[heads]  # the first row of the largest
    count = np.bincount(g[ok], minlength=n)[:n]
    mean = np.bincount(g[ok], weights=comp[ok], minlength=n)[:n] / np.maximum(count, 1)
    has_stage = ~np.isnan(stage)
    stage_n = np.bincount(g[has_stage], minlength=n)[:n]
    stage_mean = np.bincount(g[has_stage], weights=stage[has_stage], minlength=n)[:n] / np.maximum(stage_n, 1)
    out = []
    for j in np.flatnonzero(count >= 2):  # the steps of a pipeline: one dict each, as the summary lists them
        hi, lo = slowest[j], fastest[j]
        out.append(
            {
                "step": groups.steps[j],
                "slowest": pp[hi],
                "fastest": pp[lo],
                "gap_us": float(comp[hi] - comp[lo]),
                "lost_us": float(comp[hi] - mean[j]),
                "step_us": float(stage_mean[j]) if stage_n[j] else None,
            }
        )
    return out


def phase_gaps(table: pa.Table, threshold: float = 0.05) -> list[dict[str, Any]]:
    """msprof-analyze's slow rank check, for parity: for Computing, Communication (not overlapped) and
    Free, the gap between the largest and the smallest value over every (step, rank), as a share of
    the mean of computing + communication + free; ``flagged`` above ``threshold``."""
    if table.num_rows == 0:
        return []
    cols = {c: np.array([0.0 if v is None else v for v in table[c].to_pylist()], float) for c in GAP_PHASES}
    total = float(np.mean(sum(cols.values())))
    ranks = table["rank"].to_pylist()
    steps = table["step"].to_pylist()
    out = []
    for c, name in GAP_PHASES.items():
        v = cols[c]
        hi, lo = int(np.argmax(v)), int(np.argmin(v))
        gap = float(v[hi] - v[lo])
        share = gap / total if total else 0.0
        out.append(
            {
                "phase": name,
                "gap_us": gap,
                "share": share,
                "flagged": share > threshold,
                "max": {"rank": ranks[hi], "step": steps[hi], "us": float(v[hi])},
                "min": {"rank": ranks[lo], "step": steps[lo], "us": float(v[lo])},
            }
        )
    return out
