"""Our per-step breakdown, recomputed from kernel rows, equals torch_npu's own step_trace_time.csv,
read here with the csv module."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest

from npudiag.profiling.analysis.step_breakdown import step_breakdown
from npudiag.profiling.ingest import ingest

from .conftest import CORPUS

SAMPLES = [
    "msinsight-pytorch-text-2025/level0",
    "msinsight-pytorch-text-2025/level1",
    "msinsight-pytorch-text-2025/level2",
    "msinsight-st-cann83rc1-level2-4rank/rank_0_ascend_pt",
]
_COLUMNS = {
    "computing_us": "Computing",
    "communication_us": "Communication",
    "overlapped_us": "Overlapped",
    "communication_not_overlapped_us": "Communication(Not Overlapped)",
}


def _step_trace_rows(sample: str) -> dict[int, dict[str, float]]:
    path = next((CORPUS / sample).rglob("step_trace_time.csv"))
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return {int(r["Step"]): {k: float(v) for k, v in r.items() if k != "Step" and v not in ("", None)} for r in csv.DictReader(fh)}


def _profiler_steps(sample: str) -> dict[int, Decimal]:
    """ProfilerStep#N durations (µs) of the sample's trace_view.json, read with the json module."""
    found = list((CORPUS / sample).rglob("trace_view.json"))
    if not found:
        return {}
    events = json.loads(found[0].read_text(encoding="utf-8"))
    events = events if isinstance(events, list) else events["traceEvents"]
    return {int(e["name"].split("#")[1]): Decimal(str(e["dur"])) for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")}  # fmt: skip


@pytest.mark.parametrize("sample", SAMPLES)
def test_breakdown_matches_step_trace_time(sample: str, corpus: Path) -> None:
    ours = {r["step"]: r for r in step_breakdown(ingest([CORPUS / sample]).tables).to_pylist()}
    theirs = _step_trace_rows(sample)
    recorded = _profiler_steps(sample)
    assert sorted(ours) == sorted(theirs)
    for step, b in theirs.items():
        a = ours[step]
        # kernel rows carry durations rounded to 0.001 us; the file sums unrounded ones
        for key, col in _COLUMNS.items():
            assert a[key] == pytest.approx(b[col], abs=0.05), key
        # torch_npu's own Stage and Preparing, reported as it gives them
        assert a["stage_us"] == b["Stage"] and a["preparing_us"] == b["Preparing"]
        if step in recorded:  # the step time is the step's recorded range: ProfilerStep#N's dur, exactly
            assert a["step_time_source"] == "profiler_range" and a["step_time_us"] == pytest.approx(float(recorded[step]), abs=1e-6)
            assert a["before_first_task_us"] > 0 and a["after_last_task_us"] >= 0
        elif a["step_time_source"] == "step_trace":  # only Stage recorded: the step time is it
            assert a["step_time_us"] == pytest.approx(b["Stage"], abs=0.5)
        else:
            assert a["step_time_source"] == "task_span" and a["step_time_us"] > b["Stage"]
        # the phases add up to the step time
        total = sum(a[k] for k in ("before_first_task_us", "computing_us", "communication_not_overlapped_us", "copy_not_overlapped_us",
                                   "free_us", "after_last_task_us"))  # fmt: skip
        assert total == pytest.approx(a["step_time_us"], abs=1e-6)
        # torch_npu's Stage = Computing + Communication(Not Overlapped) + Free, its Free holding the
        # exposed copies; our span of the step's tasks covers Stage, and more where a task starts
        # before torch_npu's first linked kernel
        span = a["step_time_us"] - a["before_first_task_us"] - a["after_last_task_us"]
        assert span >= b["Stage"] - 0.5
        torch_free = a["free_us"] + a["copy_not_overlapped_us"] - (span - b["Stage"])
        assert torch_free == pytest.approx(b["Free"], abs=0.6)


@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_db_export_step_time_is_step_time_and_stage_preparing_are_torch_npus(level: str, corpus: Path) -> None:
    """STEP_TIME said step 50 ran 144,964.29 µs; npudiag reported the span of its tasks. Read with
    sqlite3: the step time is STEP_TIME's range, Stage and Preparing are analysis.db's StepTraceTime."""
    import sqlite3

    out = CORPUS / "msinsight-pytorch-db-rank1" / level / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    with sqlite3.connect(f"file:{next(out.glob('ascend_pytorch_profiler_*.db'))}?mode=ro", uri=True) as con:
        ranges = {sid: (e - s) / 1000 for sid, s, e in con.execute("SELECT id, startNs, endNs FROM STEP_TIME")}
    with sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True) as con:
        torch = {int(st): (stage, prep) for st, stage, prep in con.execute("SELECT step, stage, preparing FROM StepTraceTime")}
    ours = {r["step"]: r for r in step_breakdown(ingest([out.parent]).tables).to_pylist()}
    assert sorted(ours) == sorted(ranges) == sorted(torch)
    for step, a in ours.items():
        assert a["step_time_us"] == pytest.approx(ranges[step], abs=1e-6) and a["profiler_step_time_us"] == pytest.approx(ranges[step])
        assert (a["stage_us"], a["preparing_us"]) == torch[step]
        total = sum(a[k] for k in ("before_first_task_us", "computing_us", "communication_not_overlapped_us", "copy_not_overlapped_us",
                                   "free_us", "after_last_task_us"))  # fmt: skip
        assert total == pytest.approx(a["step_time_us"], abs=1e-6)


def _per_step_reference(tables) -> dict:
    """The breakdown as the glossary defines it, one step at a time: each step's tasks (the StepSlots
    partition) through quantities.timeline and quantities.phases (what breakdown_and_gaps computes
    for every step at once)."""
    import numpy as np
    import pyarrow.compute as pc

    from npudiag.profiling.analysis.context import rank_rows
    from npudiag.profiling.analysis.quantities import phases, timeline
    from npudiag.profiling.analysis.step_breakdown import row_ns, step_slots
    from npudiag.profiling.analysis.timeline import base_ns

    k_all, c_all = tables["kernels"], tables["copies"]
    c_all = c_all.filter(pc.fill_null(pc.equal(c_all["side"], "device"), False)) if c_all.num_rows else c_all
    out = {}
    ranks = set(k_all["rank"].to_pylist()) | set(c_all["rank"].to_pylist())
    for rank in ranks:
        k, c = rank_rows(k_all, rank), rank_rows(c_all, rank)
        base = base_ns(k, c)
        slots = step_slots(k, rank_rows(tables["steps"], rank))
        if not slots.ids:
            continue
        cpos = slots.at(row_ns(c)) if c.num_rows else np.zeros(0, np.int64)
        for j, step in enumerate(slots.ids):
            ks, cs = k.filter(slots.kpos == j), c.filter(cpos == j) if c.num_rows else c
            out[(rank, step)] = phases(timeline(ks, cs, base))
    return out


@pytest.mark.slow
def test_every_step_at_once_equals_one_step_at_a_time() -> None:
    """The breakdown's array passes over every step of a rank give each step the phases its own
    timeline gives (the per-step loop they replaced: 20,000 steps took 19.6 s)."""
    from hypothesis import HealthCheck, given, settings

    from npudiag.profiling.analysis.step_breakdown import breakdown_and_gaps

    from .test_one_set_of_numbers import profiles

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(profiles())
    def check(tables) -> None:
        table, gaps = breakdown_and_gaps(tables)
        ref = _per_step_reference(tables)
        for r in table.to_pylist():
            if r["step"] is None:
                continue
            p = ref[(r["rank"], r["step"])]
            for key in ("computing_us", "communication_us", "overlapped_us", "communication_not_overlapped_us", "copy_not_overlapped_us",
                        "device_busy_us", "free_us"):  # fmt: skip
                assert r[key] == pytest.approx(p[key], rel=1e-9, abs=1e-6), (key, r, p)
            # the free time of the step's own span is its gaps between tasks; with those before the first
            # and after the last task, the gaps add up to before + free + after
            mine = [g for g in gaps if g.rank == r["rank"]]
            between = sum(float(x.length_us[(x.step == r["step"]) & (x.where == 1)].sum()) for x in mine)
            assert between == pytest.approx(r["free_us"], rel=1e-9, abs=1e-6)
            idle = sum(float(x.length_us[x.step == r["step"]].sum()) for x in mine)
            want = r["before_first_task_us"] + r["free_us"] + r["after_last_task_us"]
            assert idle == pytest.approx(want, rel=1e-9, abs=1e-6)

    check()
