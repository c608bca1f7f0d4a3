"""Every figure derived from timestamps is exact in ns: the profile's span and each rank's, recounted
from a corpus .db's integer ns (sqlite3) and from a text export's decimal µs (csv, Decimal)."""

from __future__ import annotations

import csv
import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from npudiag.profiling.derive import derive
from npudiag.profiling.ingest import ingest
from tests.helpers import build_summary

DB = "msinsight-pytorch-db-rank1/level1/rank1_ascend_pt"
TEXT = "msinsight-pytorch-text-2025/level0/rank0_ascend_pt"


def _summary(folder: Path) -> dict:
    derived, skipped = derive(ingest([folder], hash_inputs=False).tables)
    return build_summary(derived, rules_skipped=skipped)


def test_spans_of_a_db_are_its_integer_ns(corpus: Path) -> None:
    folder = corpus / DB
    (db,) = folder.glob("ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")
    con = sqlite3.connect(db)
    # the device tasks analyze counts: compute kernels (COMPUTE_TASK_INFO), collectives, MEMCPY copies
    rows = con.execute("""
        SELECT t.startNs, t.endNs FROM TASK t WHERE t.globalTaskId IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)
        UNION ALL SELECT startNs, endNs FROM COMMUNICATION_OP
        UNION ALL SELECT t.startNs, t.endNs FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType
                  WHERE s.value LIKE 'MEMCPY%' AND t.globalTaskId NOT IN (SELECT globalTaskId FROM COMPUTE_TASK_INFO)
    """).fetchall()  # fmt: skip
    con.close()
    first, last = min(r[0] for r in rows), max(r[1] for r in rows)
    s = _summary(folder)
    (rank,) = s["per_rank"]
    assert (rank["start_ns"], rank["end_ns"]) == (first, last)
    exact = Decimal(last - first) / 1000
    assert Decimal(repr(s["profile"]["span_us"])) == exact == Decimal(repr(rank["span_us"]))


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in intervals)


def test_every_time_figure_of_a_db_is_its_integer_ns(corpus: Path) -> None:
    """Busy, computing, communication and copies not overlapped, kernel time: unions and sums of the
    .db's integer ns, recounted with sqlite3 and exact integers; npudiag's µs within a nanosecond's
    thousandth (float addition of exact relative µs)."""
    folder = corpus / DB
    (db,) = folder.glob("ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")
    con = sqlite3.connect(db)
    cti = "SELECT globalTaskId FROM COMPUTE_TASK_INFO"
    compute = con.execute(f"SELECT startNs, endNs FROM TASK WHERE globalTaskId IN ({cti})").fetchall()
    comm = con.execute("SELECT startNs, endNs FROM COMMUNICATION_OP").fetchall()
    copies = con.execute(f"SELECT t.startNs, t.endNs FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType "
                         f"WHERE s.value LIKE 'MEMCPY%' AND t.globalTaskId NOT IN ({cti})").fetchall()  # fmt: skip
    con.close()
    busy = _length(_union(compute + comm + copies))
    computing = _length(_union(compute))
    compute_or_comm = _length(_union(compute + comm))
    expected = {
        "busy_us": busy,
        "computing_us": computing,
        "communication_not_overlapped_us": compute_or_comm - computing,
        "copy_not_overlapped_us": busy - compute_or_comm,
        "kernel_time_us": sum(e - s for s, e in compute + comm),
    }
    (rank,) = _summary(folder)["per_rank"]
    for key, ns in expected.items():
        assert abs(Decimal(repr(rank[key])) - Decimal(ns) / 1000) < Decimal("0.000001"), (key, rank[key], ns)


def test_the_profile_span_is_the_rank_span_to_the_ns(corpus: Path) -> None:
    """The text export's µs carry three decimals at 1.7e15 µs: a float sum of absolute µs is off by up to
    0.25 µs; the profile's span is computed from exact ns like each rank's."""
    folder = corpus / TEXT
    out = folder / "ASCEND_PROFILER_OUTPUT"
    with open(out / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
        kernels = [(Decimal(r["Start Time(us)"]), Decimal(r["Duration(us)"])) for r in csv.DictReader(fh)]
    # the copies: device MEMCPY tasks of the trace's Ascend Hardware process (named MEMCPY_ASYNC, of task
    # type PCIE_DMA_SQE / SDMA_SQE on this chip)
    events = json.loads((out / "trace_view.json").read_text())
    hw = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"].get("name") == "Ascend Hardware"}
    copies = [(Decimal(str(e["ts"])), Decimal(str(e["dur"]))) for e in events
              if e.get("ph") == "X" and e.get("pid") in hw and str(e.get("name")).startswith("MEMCPY")]  # fmt: skip
    tasks = kernels + copies
    first = min(s for s, _ in tasks)
    last = max(s + d for s, d in tasks)
    s = _summary(folder)
    (rank,) = s["per_rank"]
    assert Decimal(rank["end_ns"] - rank["start_ns"]) / 1000 == last - first
    assert s["profile"]["span_us"] == pytest.approx(float(last - first), abs=5e-4)
    assert s["profile"]["span_us"] == rank["span_us"]
