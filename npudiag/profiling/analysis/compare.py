"""Profile diff: operator by operator, and the totals that decide whether a change helped.

Repeated runs on a side are averaged (totals and counts divided by the number of runs), so a
side of five runs compares with a side of one on the same scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.hot_ops import op_key
from npudiag.profiling.analysis.metrics import samples
from npudiag.profiling.analysis.op_perf import group_mfu
from npudiag.profiling.analysis.quantities import copy_totals
from npudiag.profiling.analysis.summary import per_rank

LEVELS = ("kernel", "torch", "module")
HOST_LEVELS = ("torch", "module")  # the levels whose rows carry host time
# backend ops of a GPU run (a Kineto trace) and the ATen op an Ascend run's kernels go to for the same
# work: torch dispatches conv2d to cuDNN's op under aten::_convolution and relu_ to clamp_min_ on CUDA,
# where torch_npu's kernels belong to aten::_convolution and aten::relu_ themselves. A GPU side's op of
# these names is counted as the ATen op (its calls are the ATen op's; a clamp_min_ of the user's own is
# counted under relu_ too).
BACKEND_OPS = {
    "aten::cudnn_convolution": "aten::_convolution",
    "aten::cudnn_convolution_transpose": "aten::_convolution",
    "aten::cudnn_batch_norm": "aten::native_batch_norm",
    "aten::cudnn_batch_norm_backward": "aten::native_batch_norm_backward",
    "aten::miopen_convolution": "aten::_convolution",
    "aten::miopen_batch_norm": "aten::native_batch_norm",
    "aten::clamp_min_": "aten::relu_",
}


def _aggregate(runs: Sequence[dict[str, pa.Table]], by: str, shapes: bool, level: str = "kernel") -> pa.Table:
    """Per key and per run: count, device time (and host self time at the torch level, host time at
    the module level), and whether the key is outermost (its total is not inside another key's)."""
    parts = []
    for t in runs:
        if level == "module":  # torch modules by path: their kernels' device time includes the nested modules'
            r = t.get("ranges", schemas.empty("ranges"))
            r = r.filter(pc.equal(r["kind"], "module"))
            parts.append(
                pa.table(
                    {
                        "key": r["path"],
                        "n": pa.repeat(pa.scalar(1.0), r.num_rows),
                        "d": pc.fill_null(r["device_us"], 0.0),
                        "h": pc.fill_null(r["duration_us"], 0.0),
                    }
                )
            )
        elif level == "torch":
            o = gpu_as_aten(t.get("torch_ops", schemas.empty("torch_ops")), t)
            parts.append(
                pa.table(
                    {
                        "key": o["name"],
                        "n": o["calls"].cast(pa.float64()),
                        "d": pc.fill_null(o["device_us"], 0.0),
                        "h": pc.fill_null(o["host_self_us"], 0.0),
                    }
                )
            )
        else:
            k = t["kernels"]
            d = pc.fill_null(k["duration_us"], 0.0)
            parts.append(
                pa.table(
                    {
                        "key": op_key(k, by, shapes),
                        "n": pa.repeat(pa.scalar(1.0), k.num_rows),
                        "d": d,
                        "h": pa.nulls(k.num_rows, pa.float64()),
                    }
                )
            )
    g = pa.concat_tables(parts).group_by("key").aggregate([("n", "sum"), ("d", "sum"), ("h", "sum")])
    n = float(len(runs))
    host = pc.divide(g["h_sum"], n) if level in HOST_LEVELS else pa.nulls(g.num_rows, pa.float64())
    return pa.table(
        {"key": g["key"], "count": pc.divide(g["n_sum"], n), "total": pc.divide(g["d_sum"], n), "host": host}
    )


def gpu_as_aten(ops: pa.Table, tables: dict[str, pa.Table]) -> pa.Table:
    """A GPU run's torch_ops (its host ops came from a Kineto trace) with BACKEND_OPS renamed to their
    ATen op; the renamed rows keep their calls only where the ATen op has no row of its own."""
    host = tables.get("host_ops")
    if (
        ops.num_rows == 0
        or host is None
        or host.num_rows == 0
        or not pc.any(pc.equal(host["source"], "kineto")).as_py()
    ):
        return ops
    backend = pc.is_in(ops["name"], pa.array(list(BACKEND_OPS)))
    if not pc.any(backend).as_py():
        return ops
    target = pc.fill_null(
        pc.take(pa.array(list(BACKEND_OPS.values())), pc.index_in(ops["name"], pa.array(list(BACKEND_OPS)))), ""
    )
    present = pc.is_in(target, ops["name"])
    calls = pc.if_else(pc.and_(backend, present), pa.scalar(0, pa.int64()), ops["calls"])
    return ops.set_column(
        ops.schema.get_field_index("name"), "name", pc.if_else(backend, target, ops["name"])
    ).set_column(ops.schema.get_field_index("calls"), "calls", calls)


def steps_per_run(runs: Sequence[dict[str, pa.Table]]) -> float | None:
    """A side's recorded steps per run (its steps table), None where a run records none."""
    counts = [
        t["steps"]["step"].drop_null().unique().__len__() if "steps" in t and t["steps"].num_rows else 0 for t in runs
    ]
    return float(sum(counts) / len(counts)) if counts and all(counts) else None


def outermost(diff: pa.Table) -> pa.Array:
    """Which rows' totals add up without counting time twice: every row, but at the module level only
    the outermost modules (a path without "/"), whose device time holds their children's."""
    if diff.num_rows and diff["match_by"][0].as_py() == "module":
        return pc.invert(pc.match_substring(diff["key"], "/"))
    return pa.repeat(pa.scalar(True), diff.num_rows)


def diff_ops(
    base: Sequence[dict[str, pa.Table]],
    cur: Sequence[dict[str, pa.Table]],
    *,
    by: str = "type",
    shapes: bool = False,
    level: str = "kernel",
    per_step: tuple[float, float] | None = None,
) -> pa.Table:
    """One row per op group on either side, sorted by the absolute change of total time. ``level``
    "torch" matches framework ops (torch_ops: aten::mm ...) with the device time of their kernels
    and their host self time, instead of kernels by type or name. ``per_step``: each side's steps per
    run, its counts and times divided by them (sides that recorded different numbers of steps)."""
    b = _aggregate(base, by, shapes, level)
    c = _aggregate(cur, by, shapes, level)
    if per_step is not None:
        b, c = (_divided(t, n) for t, n in zip((b, c), per_step))
    j = b.join(c, "key", join_type="full outer", left_suffix="_b", right_suffix="_c")
    bc, cc = pc.fill_null(j["count_b"], 0.0), pc.fill_null(j["count_c"], 0.0)
    bt, ct = pc.fill_null(j["total_b"], 0.0), pc.fill_null(j["total_c"], 0.0)
    status = pc.if_else(pc.is_null(j["count_b"]), "added", pc.if_else(pc.is_null(j["count_c"]), "removed", "both"))
    top = pc.invert(pc.match_substring(j["key"], "/")) if level == "module" else pa.repeat(pa.scalar(True), j.num_rows)
    b_sum = (
        pc.sum(pc.filter(bt, top)).as_py() or 0.0
    )  # shares of the whole: at the module level, of the outermost modules
    c_sum = pc.sum(pc.filter(ct, top)).as_py() or 0.0
    delta = pc.subtract(ct, bt)

    def avg(total: pa.Array, count: pa.Array) -> pa.Array:
        return pc.if_else(
            pc.greater(count, 0.0), pc.divide(total, pc.max_element_wise(count, 1e-300)), pa.scalar(None, pa.float64())
        )

    def share(total: pa.Array, whole: float) -> pa.Array:
        return pc.multiply(pc.divide(total, whole), 100.0) if whole > 0 else pa.nulls(len(total), pa.float64())

    ba, ca = avg(bt, bc), avg(ct, cc)
    out = pa.table(
        {
            "match_by": pa.array(
                [level if level in HOST_LEVELS else by + ("+shapes" if shapes else "")] * j.num_rows, pa.string()
            ),
            "key": j["key"],
            "status": status,
            "base_count": bc,
            "cur_count": cc,
            "base_total_us": bt,
            "cur_total_us": ct,
            "delta_total_us": delta,
            "ratio": pc.if_else(
                pc.greater(bt, 0.0), pc.divide(ct, pc.max_element_wise(bt, 1e-300)), pa.scalar(None, pa.float64())
            ),
            "base_avg_us": ba,
            "cur_avg_us": ca,
            "delta_avg_us": pc.subtract(ca, ba),
            "base_share_pct": share(bt, b_sum),
            "cur_share_pct": share(ct, c_sum),
            "base_host_self_us": j["host_b"],
            "cur_host_self_us": j["host_c"],
        }
    )
    if level == "kernel" and not shapes:  # MFU per op group, where its kernels' FLOPs and the peak are known
        for side, runs in (("base", base), ("cur", cur)):
            out = out.append_column(f"{side}_mfu_pct", _mfu_column(runs, by, out["key"]))
    out = out.append_column("_abs", pc.abs(delta))
    out = out.sort_by([("_abs", "descending"), ("key", "ascending")]).drop_columns(["_abs"])
    return schemas.conform(out, schemas.DIFF)


def _mfu_column(runs: Sequence[dict[str, pa.Table]], by: str, keys: pa.ChunkedArray) -> pa.Array:
    """Each key's MFU over a side's runs (op_perf.group_mfu; null where no kernel of it has a known MFU)."""
    perf = [t["op_perf"] for t in runs if "op_perf" in t and t["op_perf"].num_rows]
    if not perf:
        return pa.nulls(len(keys), pa.float64())
    p = pa.concat_tables(perf)
    g = group_mfu(p, op_key(p, by))  # the same group key as the kernels' (hot_ops.op_key)
    return pc.take(g["mfu_pct"], pc.index_in(keys, g["key"]))


def _divided(t: pa.Table, n: float) -> pa.Table:
    """An aggregate's counts and times per step (``n`` steps per run)."""
    return pa.table({"key": t["key"], **{c: pc.divide(t[c], n) for c in ("count", "total", "host")}})


def matched(diff: pa.Table) -> dict[str, float | None]:
    """The share of each side's device time in ops found on both sides (None for a side with none)."""
    top = outermost(diff)
    both = pc.and_(pc.equal(diff["status"], "both"), top)
    out: dict[str, float | None] = {}
    for side, col in (("baseline", "base_total_us"), ("current", "cur_total_us")):
        total = pc.sum(pc.filter(diff[col], top)).as_py() or 0.0
        out[side] = (pc.sum(pc.filter(diff[col], both)).as_py() or 0.0) / total if total > 0 else None
    return out


def _side_totals(runs: Sequence[dict[str, pa.Table]]) -> dict[str, Any]:
    n = len(runs)

    def mean(values: list[float]) -> float:
        return float(sum(values) / n) if n else 0.0

    step = samples(runs, "step_time_us")
    severities: dict[str, int] = {}
    for t in runs:
        for sev in t["findings"]["severity"].to_pylist():
            severities[sev] = severities.get(sev, 0) + 1
    copies = [copy_totals(t["copies"]) for t in runs]  # each copy once: device tasks, host calls apart
    out = {
        "runs": n,
        "kernels": mean([t["kernels"].num_rows for t in runs]),
        "kernel_time_us": mean(
            [float(pc.sum(pc.fill_null(t["kernels"]["duration_us"], 0.0)).as_py() or 0.0) for t in runs]
        ),
        "steps": int(len(step)),
        "step_time_median_us": float(np.median(step)) if len(step) else None,
        "step_time_mean_us": float(step.mean()) if len(step) else None,
        "copies": mean([c["count"] for c in copies]),
        "copy_time_us": mean([c["time_us"] for c in copies]),
        "copy_exposed_us": mean(
            [float(pc.sum(t["step_breakdown"]["copy_not_overlapped_us"]).as_py() or 0.0) for t in runs]
        ),
        "idle_us": mean([float(pc.sum(t["step_breakdown"]["free_us"]).as_py() or 0.0) for t in runs]),
        "findings": mean([t["findings"].num_rows for t in runs]),
        "findings_by_severity": {k: v / n for k, v in sorted(severities.items())},
        # the glossary's time lost: the findings' ranges counted once per rank (not their sum)
        "findings_time_lost_us": mean([sum(r["time_lost_us"] for r in per_rank(t)) for t in runs]),
    }
    if n and all(t["kernels"].num_rows == 0 for t in runs):  # framework ops only (a PyTorch GPU trace): no NPU totals
        out.update(dict.fromkeys(_DEVICE_TOTALS))
        host = np.array(
            [v for t in runs if "steps" in t for v in t["steps"]["step_time_us"].to_pylist() if v is not None], float
        )
        if len(host):  # its steps are torch.profiler's ProfilerStep ranges: the host's step time
            out.update(
                steps=len(host), step_time_median_us=float(np.median(host)), step_time_mean_us=float(host.mean())
            )
    return out


# the totals of NPU device work: unknown (not zero) for a side that records framework ops only
_DEVICE_TOTALS = (
    "kernels",
    "kernel_time_us",
    "copies",
    "copy_time_us",
    "copy_exposed_us",
    "idle_us",
    "findings",
    "findings_time_lost_us",
)


TOTAL_ROWS = [
    "kernels",
    "kernel_time_us",
    "steps",
    "step_time_median_us",
    "step_time_mean_us",
    "copies",
    "copy_time_us",
    "copy_exposed_us",
    "idle_us",
    "findings",
    "findings_time_lost_us",
]


def compare_totals(base: Sequence[dict[str, pa.Table]], cur: Sequence[dict[str, pa.Table]]) -> dict[str, Any]:
    """Both sides' totals, and per total the change (current - baseline) and ratio."""
    b, c = _side_totals(base), _side_totals(cur)
    rows = []
    for name in TOTAL_ROWS:
        bv, cv = b[name], c[name]
        delta = None if bv is None or cv is None else cv - bv
        ratio = cv / bv if bv and cv is not None else None
        rows.append({"metric": name, "baseline": bv, "current": cv, "delta": delta, "ratio": ratio})
    return {"baseline": b, "current": c, "rows": rows}
