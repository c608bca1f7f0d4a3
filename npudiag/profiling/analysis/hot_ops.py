"""Hot operators: device time aggregated by op type or op name.

The key for ``by="type"`` is the op type, or the op name where the profile has no type (torch_npu
Level0 writes ``N/A`` for Type), or the task type where there is no name either (task_time rows
such as PROFILING_ENABLE have ``kernel_name`` N/A). Shares are of the summed duration of every kernel row, the same
denominator op_statistic's ``Ratio(%)`` uses.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas


def op_key(kernels: pa.Table, by: str = "type", shapes: bool = False) -> pa.ChunkedArray:
    """Each kernel's group key. With ``shapes`` the input shapes join the key, so the same op on
    other shapes (a different kernel binary and tiling) is a group of its own."""
    if by not in ("type", "name"):
        raise ValueError(f"by must be 'type' or 'name', not {by!r}")
    # a column with no nulls (or only nulls) is taken as it is: coalescing strings is not free
    typ = kernels["op_type"]
    if by == "type" and typ.null_count == 0:
        key = typ
    else:
        names = kernels["op_name"]
        if names.null_count:
            names = pc.coalesce(names, kernels["task_type"], "(unnamed)")
        key = names if by == "name" or typ.null_count == len(typ) else pc.coalesce(typ, names)
    if shapes:
        key = pc.binary_join_element_wise(key, pc.coalesce(kernels["input_shapes"], ""), " @ ")
    return key


def hot_ops(kernels: pa.Table, by: str = "type") -> pa.Table:
    if by not in ("type", "name"):
        raise ValueError(f"by must be 'type' or 'name', not {by!r}")
    if kernels.num_rows == 0:
        return schemas.empty("hot_ops")
    t = pa.table(
        {
            "key": op_key(kernels, by),
            "task_type": pc.coalesce(kernels["task_type"], "unknown"),
            "rank": kernels["rank"],
            "duration_us": pc.coalesce(kernels["duration_us"], 0.0),
        }
    )
    g = t.group_by("key", use_threads=False).aggregate(
        [
            ("duration_us", "count"),
            ("duration_us", "sum"),
            ("duration_us", "min"),
            ("duration_us", "max"),
            ("task_type", "distinct"),
            ("rank", "count_distinct"),
        ]
    )
    task_types = [";".join(sorted(v)) for v in g["task_type_distinct"].to_pylist()]
    grand = pc.sum(t["duration_us"]).as_py() or 0.0  # every row's duration, as op_statistic's Ratio(%)
    return _hot_table(
        by,
        g["key"],
        task_types,
        g["rank_count_distinct"],
        g["duration_us_count"],
        g["duration_us_sum"],
        g["duration_us_min"],
        g["duration_us_max"],
        grand,
    )


def _hot_table(by: str, key, task_types: list[str], ranks, count, total, low, high, grand: float) -> pa.Table:
    """The HOT_OPS rows from per-key aggregates, shares taken of ``grand``, largest first."""
    share = pc.multiply(pc.divide(total, grand), 100.0) if grand > 0 else pa.nulls(len(key), pa.float64())
    out = pa.table(
        {
            "group_by": pa.repeat(pa.scalar(by, pa.string()), len(key)),
            "key": key,
            "task_types": pa.array(task_types, pa.string()),
            "ranks": ranks.cast(pa.int32()),
            "count": count,
            "total_us": total,
            "avg_us": pc.divide(total, count.cast(pa.float64())),
            "min_us": low,
            "max_us": high,
            "share_pct": share,
        }
    )
    return schemas.conform(out, schemas.HOT_OPS).sort_by([("total_us", "descending"), ("key", "ascending")])


def hot_ops_table(kernels: pa.Table) -> pa.Table:
    """What ``hot_ops.parquet`` holds: the aggregate by op type and by op name, one after the other."""
    return pa.concat_tables([hot_ops(kernels, "type"), hot_ops(kernels, "name")])


def merge_hot_ops(parts: list[pa.Table]) -> pa.Table:
    """``hot_ops_table`` of the union of several ranks' kernels, from each rank's own table.

    Counts, totals, minima and maxima add up exactly; ``ranks`` adds up because every part holds
    distinct ranks; task types are the union; shares are re-taken of the new grand total."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schemas.empty("hot_ops")
    if len(parts) == 1:
        return parts[0]
    t = pa.concat_tables(parts, promote_options="permissive")
    out = []
    for by in ("type", "name"):
        sub = t.filter(pc.equal(t["group_by"], by))
        if sub.num_rows == 0:
            continue
        g = sub.group_by("key", use_threads=False).aggregate(
            [("count", "sum"), ("total_us", "sum"), ("min_us", "min"), ("max_us", "max"), ("ranks", "sum")]
        )
        split = pc.split_pattern(pc.fill_null(sub["task_types"], ""), ";")
        flat = pa.table(
            {"key": pc.take(sub["key"], pc.list_parent_indices(split)), "tt": pc.list_flatten(split)}
        ).filter(pc.not_equal(pc.list_flatten(split), ""))
        tts = flat.group_by("key", use_threads=False).aggregate([("tt", "distinct")])
        tt_of = dict(zip(tts["key"].to_pylist(), (";".join(sorted(v)) for v in tts["tt_distinct"].to_pylist())))
        task_types = [tt_of.get(k, "") for k in g["key"].to_pylist()]
        grand = pc.sum(g["total_us_sum"]).as_py() or 0.0
        out.append(
            _hot_table(
                by,
                g["key"],
                task_types,
                g["ranks_sum"],
                g["count_sum"],
                g["total_us_sum"],
                g["min_us_min"],
                g["max_us_max"],
                grand,
            )
        )
    return pa.concat_tables(out) if out else schemas.empty("hot_ops")
