"""Conformance on every real sample: our aggregates equal a plain recomputation from the raw files."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pyarrow.compute as pc
import pytest

from npudiag.profiling.analysis.hot_ops import hot_ops
from npudiag.profiling.formats.kernel_csv import read_kernels
from npudiag.profiling.formats.op_statistic import read_op_statistic
from npudiag.profiling.formats.trace_json import read_trace
from npudiag.profiling.ingest import ingest

from .conftest import CORPUS, corpus_files

KERNEL_CSVS = [
    p for p in corpus_files("**/*.csv") if p.name.startswith(("kernel_details", "op_summary", "task_time")) or p.name == "test.csv"
]


def _plain_totals(path: Path) -> dict[str, tuple[int, float]]:
    """Sum of durations per op type, computed with nothing but the csv module."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.reader(fh))
    header = [h.strip() for h in rows[0]]
    col = {h: i for i, h in enumerate(header)}
    dur = next(col[c] for c in ("Duration(us)", "Task Duration(us)", "task_time(us)") if c in col)
    typ = next((col[c] for c in ("Type", "OP Type") if c in col), None)
    name = next(col[c] for c in ("Name", "Op Name", "kernel_name") if c in col)
    task = next((col[c] for c in ("Accelerator Core", "Task Type", "kernel_type") if c in col), None)
    out: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for r in rows[1:]:
        if len(r) != len(header):
            continue  # the reader skips these with a warning; tested separately
        key = r[typ].strip() if typ is not None else "N/A"
        if key in ("N/A", ""):
            key = r[name].strip()
        if key in ("N/A", "") and task is not None:
            key = r[task].strip()
        out[key][0] += 1
        out[key][1] += float(r[dur].strip())
    return {k: (c, s) for k, (c, s) in out.items()}


@pytest.mark.parametrize("path", KERNEL_CSVS, ids=lambda p: str(p.relative_to(CORPUS)))
def test_totals_per_op_type_equal_plain_recomputation(path: Path) -> None:
    kernels, _ = read_kernels(path)
    ours = {r["key"]: (r["count"], r["total_us"]) for r in hot_ops(kernels, "type").to_pylist()}
    plain = _plain_totals(path)
    assert set(ours) == set(plain)
    for key, (count, total) in plain.items():
        assert ours[key][0] == count, key
        assert ours[key][1] == pytest.approx(total, rel=1e-6, abs=1e-9), key


OP_STAT_UNITS = [p.parent for p in corpus_files("**/op_statistic*.csv")]


@pytest.mark.parametrize("folder", OP_STAT_UNITS, ids=lambda p: str(p.relative_to(CORPUS)))
def test_op_statistic_count_and_total_match(folder: Path) -> None:
    kernel_files = [p for p in folder.iterdir() if p.name.startswith(("kernel_details", "op_summary"))]
    if not kernel_files:
        pytest.skip(f"{folder.name}: this sample has op_statistic but no per-kernel CSV to compare with")
    kernels, _ = read_kernels(kernel_files[0])
    stat, _ = read_op_statistic(next(folder.glob("op_statistic*.csv")))
    # op_statistic leaves communication out; group by (op type, core type) as it does
    k = kernels.filter(pc.invert(pc.is_in(kernels["task_type"], value_set=__import__("pyarrow").array(["HCCL", "COMMUNICATION"]))))
    g = k.group_by(["op_type", "task_type"]).aggregate([("duration_us", "count"), ("duration_us", "sum")])
    ours = {(r["op_type"], r["task_type"]): (r["duration_us_count"], r["duration_us_sum"]) for r in g.to_pylist()}
    theirs = {(r["op_type"], r["core_type"]): (r["count"], r["total_us"]) for r in stat.to_pylist()}
    assert set(ours) == set(theirs)
    for key, (count, total) in theirs.items():
        assert ours[key][0] == count, key
        # op_statistic sums unrounded durations; kernel rows are rounded to 0.001 us each
        assert abs(ours[key][1] - total) <= 0.0005 * count + 1e-6 * total, key


TRACES = corpus_files("**/trace_view.json") + corpus_files("**/msprof_*.json")


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_trace_reader_matches_json_load(path: Path) -> None:
    """Every X event lands in exactly one part: device tasks, step markers, comm ops, plane tasks, host calls."""
    events = json.loads(path.read_text(encoding="utf-8"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    xs = [e for e in events if e.get("ph") == "X"]

    def thread(e: dict) -> str:
        return threads.get((e["pid"], e["tid"]), "")

    hw = [e for e in xs if procs.get(e["pid"]) == "Ascend Hardware" and not thread(e).startswith("Step Trace")]
    markers = [e for e in xs if procs.get(e["pid"]) == "Ascend Hardware" and thread(e).startswith("Step Trace")]
    hccl = [e for e in xs if procs.get(e["pid"]) in ("HCCL", "Communication")]
    planes = [e for e in hccl if thread(e).startswith("Plane")]
    ops = [e for e in hccl if not thread(e).startswith("Plane")]
    cann = [e for e in xs if procs.get(e["pid"]) == "CANN"]
    t = read_trace(path)
    assert t.tasks.num_rows == len(hw)
    assert pc.sum(t.tasks["duration_us"]).as_py() == pytest.approx(sum(e["dur"] for e in hw), rel=1e-9)
    assert t.tasks["start_us"].to_pylist() == [float(e["ts"]) for e in hw]
    assert t.comm_ops.num_rows == len(ops) and t.comm_tasks.num_rows == len(planes)
    assert t.api_calls.num_rows == len(cann)
    iterations = {int(e["name"].split()[-1]) for e in markers if e["name"].startswith("Iteration ") and "Refresh" not in e["name"]}
    if iterations:
        assert set(t.steps["step"].to_pylist()) == iterations


def test_whole_corpus_ingests_without_errors(corpus: Path) -> None:
    profile = ingest([corpus])
    assert profile.errors == []
    assert profile.table("kernels").num_rows > 3000
    # the one real row with a missing field (MindStudio Insight's own test data) is reported
    assert any("op_summary_1.csv" in w and "line 17" in w for w in profile.warnings)


def test_step_trace_time_read_exactly(corpus: Path) -> None:
    from npudiag.profiling.formats.step_trace import read_steps

    path = corpus / "msinsight-st-cann83rc1-level2-4rank/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
    steps, _ = read_steps(path, 0)
    row = steps.to_pylist()[0]
    assert row["step"] == 13
    assert row["device_id"] == 0
    assert row["computing_us"] == 231290.09999999995
    assert row["step_time_us"] == 810022.25
    assert row["preparing_us"] == 206.25


def test_api_statistic_and_host_rank(corpus: Path) -> None:
    from npudiag.profiling.formats.api_statistic import read_api_statistic

    path = corpus / "msinsight-st-cann83rc1-level2-4rank/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/api_statistic.csv"
    t, _ = read_api_statistic(path, 0)
    first = t.to_pylist()[0]
    assert first["level"] == "acl" and first["api_name"] == "ApplyAdamWV2_Tiling"
    assert first["time_us"] == 666.3 and first["count"] == 114


def test_ranks_come_from_profiler_info(corpus: Path) -> None:
    profile = ingest([corpus / "msinsight-st-cann83rc1-level2-4rank"])
    assert sorted(u["rank"] for u in profile.units) == [0, 1, 2, 3]
    steps = profile.table("steps").to_pylist()
    assert {(s["rank"], s["device_id"]) for s in steps} == {(0, 0), (1, 1), (2, 4), (3, 5)}
