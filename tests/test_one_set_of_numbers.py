"""One set of numbers: the invariants every view relies on, over generated profiles and every real
sample, and the same numbers from analyze, report, compare, gate and cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from npudiag import schemas
from npudiag.cli import app
from npudiag.profiling import tasks
from npudiag.profiling.derive import derive
from npudiag.profiling.ingest import ingest
from tests.helpers import build_summary

from .conftest import CORPUS, ROOT

EPOCH_NS = 1_764_246_877_073_569_000
PROFILES = int(os.environ.get("NPUDIAG_INVARIANT_PROFILES", "500"))


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


@st.composite
def profiles(draw) -> dict[str, pa.Table]:
    """Random op mixes on several streams and ranks, copies before, inside and after the steps,
    steps with and without the profiler's own step time, kernels with missing step ids."""
    kernels, copies, steps, api = [], [], [], []
    for rank in range(draw(st.integers(1, 3))):
        n_steps = draw(st.integers(0, 4))
        n = draw(st.integers(1, 40))
        starts = sorted(draw(st.lists(st.integers(0, 2_000_000), min_size=n, max_size=n)))
        step_of = np.zeros(n, int) if not n_steps else np.minimum(np.arange(n) * n_steps // n + 1, n_steps)
        for i, s in enumerate(starts):
            comm = draw(st.booleans()) and draw(st.booleans())
            d = draw(st.integers(0, 80_000))
            missing_step = draw(st.integers(0, 9)) == 0
            kernels.append(
                {
                    "source": "kernel_details", "rank": rank, "step": None if (not n_steps or missing_step) else int(step_of[i]),
                    "stream_id": draw(st.integers(1, 3)), "op_name": draw(st.sampled_from(["MatMul", "Add", "hcom_allReduce_", "Cast"])),
                    "op_type": None if draw(st.booleans()) else draw(st.sampled_from(["MatMul", "Add"])),
                    "task_type": "HCCL" if comm else draw(st.sampled_from(["AI_CORE", "AI_VECTOR_CORE", "AI_CPU", None])),
                    "task_class": tasks.COMMUNICATION if comm else tasks.COMPUTE,
                    "start_ns": EPOCH_NS + s, "start_us": (EPOCH_NS + s) / 1000.0, "duration_us": d / 1000.0,
                }
            )  # fmt: skip
        for _ in range(draw(st.integers(0, 6))):
            s = draw(st.integers(-200_000, 2_400_000))  # before, inside and after the kernels
            d = draw(st.integers(0, 300_000))
            side = draw(st.sampled_from(["device", "host"]))
            copies.append(
                {
                    "source": "trace", "rank": rank, "side": side, "name": "MEMCPY_ASYNC" if side == "device" else "aclrtMemcpy",
                    "direction": "H2D", "size_bytes": draw(st.sampled_from([None, 1024, 4 << 20])), "start_ns": EPOCH_NS + s,
                    "start_us": (EPOCH_NS + s) / 1000.0, "duration_us": d / 1000.0, "stream_id": 2, "mode": "sync",
                }
            )  # fmt: skip
            if side == "host":
                api.append({"source": "trace", "rank": rank, "level": "acl", "name": "aclrtMemcpy", "start_us": (EPOCH_NS + s) / 1000.0,
                            "start_ns": EPOCH_NS + s, "duration_us": d / 1000.0, "thread_id": 1})  # fmt: skip
        for step in range(1, n_steps + 1):
            profiler = draw(st.one_of(st.none(), st.floats(0.0, 3e6)))
            steps.append({"source": "step_trace", "rank": rank, "step": step, "step_time_us": profiler})
    return {
        "kernels": schemas.conform(_table(kernels, schemas.KERNELS), schemas.KERNELS),
        "copies": _table(copies, schemas.COPIES),
        "steps": _table(steps, schemas.STEPS),
        "api_calls": _table(api, schemas.API_CALLS),
        **{name: schemas.empty(name) for name in ("op_statistic", "api_statistic", "comm_links", "comm_ops", "comm_tasks")},
    }


def check_invariants(tables: dict[str, pa.Table], summary: dict) -> None:
    sb = tables["step_breakdown"].to_pylist()
    for r in sb:
        parts = [r["before_first_task_us"], r["computing_us"], r["communication_not_overlapped_us"], r["copy_not_overlapped_us"],
                 r["free_us"], r["after_last_task_us"]]  # fmt: skip
        assert min(parts) >= -1e-6, r
        assert sum(parts) == pytest.approx(r["step_time_us"], rel=1e-9, abs=1e-6), r
        assert r["device_busy_us"] <= r["step_time_us"] + 1e-6
        assert r["overlapped_us"] <= min(r["computing_us"], r["communication_us"]) + 1e-6
    k = tables["kernels"]
    for rank in summary["per_rank"]:
        assert rank["busy_us"] <= rank["span_us"] + 1e-6
        assert 0.0 <= rank["time_lost_us"] <= rank["span_us"] + 1e-6
        mine = [r for r in sb if r["rank"] == rank["rank"]]
        assert sum(r["kernels"] for r in mine) == rank["kernels"]  # every kernel in exactly one step
        assert sum(r["kernel_time_us"] for r in mine) == pytest.approx(rank["kernel_time_us"], rel=1e-9, abs=1e-6)
    # the exposed copies are one number: the header's figure and the finding's time lost, to the last bit
    # (762.21 µs and 762.22 µs on the corpus .db once: two formulas for one quantity)
    f = tables["findings"]
    for row in f.filter(pc.equal(f["rule_id"], "unoverlapped_copy")).to_pylist():
        (rank,) = [r for r in summary["per_rank"] if r["rank"] == row["rank"]]
        assert row["time_lost_us"] == rank["copy_not_overlapped_us"], (row, rank)
    prof = summary["profile"]
    assert prof["time_lost_us"] <= prof["rank_span_sum_us"] + 1e-6
    assert prof["kernels"] == k.num_rows
    hot = tables["hot_ops"]
    for by in ("type", "name"):
        shares = hot.filter(pc.equal(hot["group_by"], by))["share_pct"].to_pylist()
        if shares and any(s is not None for s in shares):
            assert sum(s for s in shares if s is not None) == pytest.approx(100.0, abs=0.01)


@pytest.mark.slow
@settings(max_examples=PROFILES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(profiles())
def test_invariants_on_generated_profiles(tables) -> None:
    derived, skipped = derive(tables)
    check_invariants(derived, build_summary(derived, rules_skipped=skipped))


SAMPLES = sorted(
    {p for p in CORPUS.glob("*") if p.is_dir()} | {ROOT / "fixtures" / "sample_torch", ROOT / "fixtures" / "sample_msprof"}
) if CORPUS.is_dir() else [ROOT / "fixtures" / "sample_torch", ROOT / "fixtures" / "sample_msprof"]  # fmt: skip


def _ids(p: Path) -> str:
    return p.name


@pytest.mark.parametrize("sample", SAMPLES, ids=_ids)
def test_invariants_on_real_samples(sample: Path) -> None:
    profile = ingest([sample])
    if profile.table("kernels").num_rows == 0:
        pytest.skip(f"{sample.name}: no device tasks (cluster outputs or step files only)")
    derived, skipped = derive(profile.tables)
    check_invariants(derived, build_summary(derived, rules_skipped=skipped))


RUNNER = CliRunner()


def _cli(*args) -> dict:
    r = RUNNER.invoke(app, [str(a) for a in args])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


SHARED = ["ranks", "kernels", "kernel_time_us", "span_us", "device_busy_us", "device_busy_pct", "time_lost_us", "steps"]


@pytest.mark.slow
@pytest.mark.parametrize("sample", SAMPLES, ids=_ids)
def test_every_command_gives_the_same_numbers(sample: Path, tmp_path: Path) -> None:
    if ingest([sample]).table("kernels").num_rows == 0:
        pytest.skip(f"{sample.name}: no device tasks")
    out = tmp_path / "out"
    a = _cli("analyze", sample, "--out", out, "--json", "--quiet")
    r = _cli("report", out, "--json")
    assert {k: r["profile"][k] for k in SHARED} == {k: a["profile"][k] for k in SHARED}
    assert r["step_breakdown"] == a["step_breakdown"] and r["per_rank"] == a["per_rank"]
    assert [f["finding_id"] for f in r["findings"]] == [f["finding_id"] for f in a["findings"]]
    c = _cli("compare", out, out, "--json", "--out", tmp_path / "cmp")
    cur = c["totals"]["current"]
    assert cur["kernels"] == a["profile"]["kernels"]
    assert cur["kernel_time_us"] == pytest.approx(a["profile"]["kernel_time_us"], rel=1e-9)
    assert cur["findings_time_lost_us"] == pytest.approx(a["profile"]["time_lost_us"], rel=1e-9, abs=1e-6)
    assert cur["copy_exposed_us"] == pytest.approx(sum(x["copy_not_overlapped_us"] for x in a["step_breakdown"]), rel=1e-9, abs=1e-6)
    assert cur["idle_us"] == pytest.approx(sum(x["free_us"] for x in a["step_breakdown"]), rel=1e-9, abs=1e-6)
    g = _cli("gate", out, out, "--json")
    step = next(v for v in g["metrics"] if v["metric"] == "step_time_us")
    by_step: dict = {}
    for x in a["step_breakdown"]:
        by_step[x["step"]] = max(by_step.get(x["step"], 0.0), x["step_time_us"])  # a step ends when its slowest rank does
    assert step["base_median_us"] == pytest.approx(float(np.median(list(by_step.values()))), rel=1e-9)
    if len(a["per_rank"]) > 1 or sample.name.startswith("msinsight-st"):
        cl = _cli("cluster", out, "--json", "--out", tmp_path / "cl")
        stages = {(row["rank"], s["step"]): row["stage_us"] for s in cl["per_step"] for row in s["rows"] if row["source"] == "kernels"}
        for x in a["step_breakdown"]:
            if (x["rank"], x["step"]) in stages:
                assert stages[(x["rank"], x["step"])] == pytest.approx(x["step_time_us"], rel=1e-9)


def test_same_input_twice_is_read_once(tmp_path: Path) -> None:
    sample = ROOT / "fixtures" / "sample_torch"
    once = _cli("analyze", sample, "--json", "--quiet", "--out", tmp_path / "a")
    twice = _cli("analyze", sample, sample, "--json", "--quiet", "--out", tmp_path / "b")
    assert twice["profile"]["ranks"] == 1 and twice["profile"]["kernels"] == once["profile"]["kernels"]
    assert twice["profile"]["span_us"] == once["profile"]["span_us"]
    assert any("given twice" in w for w in twice["warnings"])


def test_gate_refuses_mixed_granularity(tmp_path: Path) -> None:
    r = RUNNER.invoke(app, ["gate", str(ROOT / "fixtures" / "sample_torch"), str(ROOT / "fixtures" / "sample_msprof")])
    assert r.exit_code == 2
    assert "per-step samples" in r.output and "whole-run" in r.output


def test_four_rank_sample_counts_every_rank(tmp_path: Path) -> None:
    four = CORPUS / "msinsight-st-cann83rc1-level2-4rank"
    if not four.is_dir():
        pytest.skip(f"4-rank corpus sample not at {four}")
    a = _cli("analyze", four, "--json", "--quiet", "--out", tmp_path / "o")
    assert a["profile"]["ranks"] == 4 and a["profile"]["ranks_with_kernels"] == 1 and a["profile"]["steps"] == 1
    assert a["profile"]["ranks_without_kernels"]["1"] == ["comm_bandwidth", "comm_links", "comm_ops", "steps"]
    r = _cli("report", tmp_path / "o", "--json")
    assert r["profile"] == a["profile"]
