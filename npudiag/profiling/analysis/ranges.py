"""Time per range: torch modules and mstx ranges (``ranges`` table) summed by path, and the module tree
of the ones with the most device time.

A range's device time is that of the kernels launched inside it (the ``ranges`` table counts nested
ranges in); one path's calls (every call of a module, every rank) add up.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

KINDS = ("module", "mstx")


def range_totals(ranges: pa.Table) -> pa.Table:
    """Per (kind, path): calls, host time, device time, kernels, its depth and first start."""
    if ranges.num_rows == 0:
        return pa.table(
            {
                c: pa.array([], t)
                for c, t in (
                    ("kind", pa.string()),
                    ("path", pa.string()),
                    ("name", pa.string()),
                    ("depth", pa.int32()),
                    ("calls", pa.int64()),
                    ("host_us", pa.float64()),
                    ("device_us", pa.float64()),
                    ("kernels", pa.int64()),
                    ("first_ns", pa.int64()),
                )
            }
        )
    g = ranges.group_by(["kind", "path"], use_threads=False).aggregate(
        [
            ("name", "first"),
            ("depth", "min"),
            ("start_ns", "count"),
            ("duration_us", "sum"),
            ("device_us", "sum"),
            ("kernels", "sum"),
            ("start_ns", "min"),
        ]
    )
    return pa.table(
        {
            "kind": g["kind"],
            "path": g["path"],
            "name": g["name_first"],
            "depth": g["depth_min"],
            "calls": g["start_ns_count"],
            "host_us": g["duration_us_sum"],
            "device_us": g["device_us_sum"],
            "kernels": g["kernels_sum"],
            "first_ns": g["start_ns_min"],
        }
    )


def range_tree(ranges: pa.Table, kind: str, top: int = 12) -> list[dict[str, Any]]:
    """The ``top`` paths of ``kind`` by device time with the paths that enclose them, in the order they
    first ran (a parent before its children): the rows a tree view shows."""
    totals = range_totals(ranges)
    totals = totals.filter(pc.equal(totals["kind"], kind))
    if totals.num_rows == 0:
        return []
    best = totals.sort_by([("device_us", "descending"), ("path", "ascending")]).slice(0, top)["path"].to_pylist()
    wanted = set()
    for path in best:  # each chosen path and its ancestors (a path's prefixes at "/")
        parts = path.split("/")
        wanted.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    shown = totals.filter(pc.is_in(totals["path"], pa.array(sorted(wanted), pa.string())))
    shown = shown.sort_by([("first_ns", "ascending"), ("depth", "ascending"), ("path", "ascending")])
    return shown.drop_columns(["kind", "first_ns"]).to_pylist()


def range_summary(ranges: pa.Table, top: int = 12) -> dict[str, Any]:
    """Per kind present: how many ranges were recorded and the tree rows (``range_tree``)."""
    out: dict[str, Any] = {}
    if ranges.num_rows == 0:
        return out
    for kind in KINDS:
        mine = ranges.filter(pc.equal(ranges["kind"], kind))
        if mine.num_rows:
            out[kind] = {"ranges": mine.num_rows, "tree": range_tree(mine, kind, top)}
    return out
