"""Idle causes: every device gap of a step given to what delayed the launch of the task ending it.
Planted synchronisations found with the idle time recomputed from the raw trace (json module), a
clean twin without them, per step the causes add up to before + free + after, and the covering-call
searches against brute force. The launch path on real and generated traces: tests/test_idle_gaps.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from npudiag.profiling.analysis import idle_causes as ic
from npudiag.testing.generate import write_torch_profile

from .conftest import CORPUS
from .helpers import run_cli


def _ns(ts: str) -> int:
    """The trace's text timestamp (µs with 3 decimals) as exact ns."""
    whole, _, frac = ts.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def _device_gaps(trace: Path) -> list[tuple[int, int]]:
    """Gaps between the merged device tasks (the Ascend Hardware process's complete events), in exact ns."""
    events = json.loads(trace.read_text())
    hw = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"] == "Ascend Hardware"}
    x = [e for e in events if e.get("ph") == "X" and e.get("pid") in hw]
    spans = sorted((_ns(e["ts"]), _ns(e["ts"]) + round(float(e["dur"]) * 1000)) for e in x)
    merged: list[list[int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(a[1], b[0]) for a, b in zip(merged, merged[1:]) if b[0] > a[1]]


def test_planted_syncs_are_the_cause_of_the_idle_they_leave(tmp_path: Path) -> None:
    write_torch_profile(tmp_path / "p", kernels=600, steps=3, copies=0, syncs_per_step=2, sync_idle_us=900.0)
    r = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    (trace,) = (tmp_path / "p").glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(trace.read_text())
    gaps = _device_gaps(trace)
    # each planted aclrtSynchronizeStream returns inside a device gap, most of which it covers: that gap is its
    # idle; so is any other gap a sync call overlaps by half or more (one starts 30 µs before the kernel it waits for ends)
    syncs = [
        (_ns(e["ts"]), _ns(e["ts"]) + round(float(e["dur"]) * 1000)) for e in events if e.get("name") == "AscendCL@aclrtSynchronizeStream"
    ]
    assert len(syncs) == 6
    planted = [g for g in gaps if any(g[0] <= t <= g[1] for _, t in syncs)]
    held = [g for g in gaps if max(min(e, g[1]) - max(s, g[0]) for s, e in syncs) * 2 >= g[1] - g[0]]
    assert len(planted) == 6 and set(planted) <= set(held)
    got = pq.read_table(tmp_path / "o" / "idle_causes.parquet").to_pylist()
    sync = [row for row in got if row["cause"] == "acl@aclrtSynchronizeStream"]
    assert {row["kind"] for row in sync} == {"sync"} and sum(row["count"] for row in sync) == len(held)
    assert sum(row["idle_us"] for row in sync) == pytest.approx(sum(e - s for s, e in held) / 1000.0, abs=0.01)
    assert sum(e - s for s, e in planted) / 1000.0 >= 6 * 900.0 * 0.99  # each planted gap is the 900 µs the generator put after the sync
    # the summary names it first, and the report fits a narrow terminal
    r = run_cli("report", tmp_path / "o", env={"COLUMNS": "60"})
    block = r.stdout[r.stdout.index("Device idle in steps") :].splitlines()[:4]
    assert "acl@aclrtSynchronizeStream (sync)" in block[1] and all(len(line) <= 60 for line in block)
    assert "take synchronisations out of the step" in " ".join(r.stdout.split())


def test_clean_twin_has_no_sync_idle(tmp_path: Path) -> None:
    write_torch_profile(tmp_path / "p", kernels=600, steps=3, copies=0)
    r = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    rows = pq.read_table(tmp_path / "o" / "idle_causes.parquet").to_pylist()
    assert rows and not [row for row in rows if row["kind"] == "sync"]


def _free_by_step(out: Path) -> dict:
    """Per step the idle time the causes split: before the first task, free, after the last."""
    path = out / "step_breakdown.parquet" if (out / "step_breakdown.parquet").exists() else out / "step_breakdown"
    br = pq.read_table(path)
    return {(r["rank"], r["step"]): r["before_first_task_us"] + r["free_us"] + r["after_last_task_us"] for r in br.to_pylist()}


def _idle_by_step(out: Path) -> dict:
    path = out / "idle_causes.parquet" if (out / "idle_causes.parquet").exists() else out / "idle_causes"
    got: dict = {}
    for r in pq.read_table(path).to_pylist():
        got[(r["rank"], r["step"])] = got.get((r["rank"], r["step"]), 0.0) + r["idle_us"]
    return got


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_causes_add_up_to_each_steps_free_time(tmp_path: Path, seed: int) -> None:
    write_torch_profile(tmp_path / "p", kernels=500, steps=4, seed=seed, copies=3 * seed, syncs_per_step=seed, sync_idle_us=300.0)
    r = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    free, idle = _free_by_step(tmp_path / "o"), _idle_by_step(tmp_path / "o")
    for key, f in free.items():
        assert idle.get(key, 0.0) == pytest.approx(f, abs=1e-6 * max(1.0, f)), key


def test_corpus_causes_add_up_to_free_time(corpus: Path, tmp_path: Path) -> None:
    for name in ("msinsight-pytorch-text-2025/level0", "msinsight-pytorch-db-rank1/level2", "mstt-advisor-trace-view"):
        out = tmp_path / name.replace("/", "_")
        r = run_cli("analyze", CORPUS / name, "--out", out, "-q")
        assert r.returncode == 0, r.stderr
        free, idle = _free_by_step(out), _idle_by_step(out)
        assert free
        for key, f in free.items():
            assert idle.get(key, 0.0) == pytest.approx(f, abs=1e-6 * max(1.0, f)), (name, key)


def _brute(times, s, e):
    out = []
    for t in times:
        cover = [(e[j] - s[j], j) for j in range(len(s)) if s[j] <= t <= e[j]]
        out.append(min(cover)[1] if cover else -1)
    return np.array(out)


def _random_calls(rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Up to 40 calls (start, end ns) and up to 60 points in time around them."""
    n = int(rng.integers(0, 40))
    s = rng.integers(0, 1000, n).astype(np.int64)
    e = s + rng.integers(0, 300, n).astype(np.int64)
    return n, s, e, rng.integers(-10, 1300, int(rng.integers(0, 60))).astype(np.int64)


@pytest.mark.parametrize("budget", [3, 8_000_000])
def test_innermost_equals_brute_force(monkeypatch: pytest.MonkeyPatch, budget: int) -> None:
    monkeypatch.setattr(ic, "_PAIRS", budget)
    rng = np.random.default_rng(7)
    for _ in range(30):
        _, s, e, times = _random_calls(rng)
        assert ic.innermost(times, s, e).tolist() == _brute(times, s, e).tolist()


@pytest.mark.parametrize("budget", [3, 8_000_000])
def test_best_covering_equals_brute_force(monkeypatch: pytest.MonkeyPatch, budget: int) -> None:
    """The highest score of the covering calls, the first call of equals (scores that depend on the point)."""
    monkeypatch.setattr(ic, "_PAIRS", budget)
    rng = np.random.default_rng(11)
    for _ in range(30):
        n, s, e, times = _random_calls(rng)
        weight = rng.integers(0, 5, n)

        def score(p, c, times=times, weight=weight, s=s):
            return weight[c] - np.abs(times[p] - s[c]) // 100

        want = []
        for t in times:
            cover = [(-(weight[j] - abs(t - s[j]) // 100), j) for j in range(n) if s[j] <= t <= e[j]]
            want.append(min(cover)[1] if cover else -1)
        assert ic.best_covering(times, s, e, score).tolist() == want


def _fmt(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def test_framework_ops_name_the_cause(tmp_path: Path) -> None:
    """cpu_op events planted in a generated trace, as torch_npu writes them: an aten::item around each
    planted stream sync (it reads a device value: a sync, overlapping most of the gap), and an
    aten::index_put_ across the middle of another gap that launched nothing."""
    write_torch_profile(tmp_path / "p", kernels=600, steps=3, copies=0, syncs_per_step=1, sync_idle_us=700.0)
    (trace,) = (tmp_path / "p").glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(trace.read_text())
    gaps = _device_gaps(trace)
    syncs = [e for e in events if e.get("name") == "AscendCL@aclrtSynchronizeStream"]
    host = next(e for e in events if e.get("cat") == "cpu_op")  # ProfilerStep#1: the framework thread
    planted = []
    for e in syncs:
        s, end = _ns(e["ts"]) - 5000, _ns(e["ts"]) + round(float(e["dur"]) * 1000) + 2000
        planted.append({"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": host["pid"], "tid": host["tid"], "ts": _fmt(s),
                        "dur": (end - s) / 1000.0, "args": {"Sequence number": -1}})  # fmt: skip
    sync_ends = [_ns(e["ts"]) + round(float(e["dur"]) * 1000) for e in syncs]
    sync_gaps = [g for g in gaps if any(g[0] <= t <= g[1] for t in sync_ends)]
    others = sorted((g for g in gaps if g not in sync_gaps), key=lambda g: g[1] - g[0])
    big = others[len(others) // 2]  # a gap inside a step (the few between steps are among the largest)
    mid = big[0] + (big[1] - big[0]) // 2
    planted.append({"ph": "X", "cat": "cpu_op", "name": "aten::index_put_", "pid": host["pid"], "tid": host["tid"],
                    "ts": _fmt(mid - 3000), "dur": 6.0, "args": {}})  # fmt: skip
    trace.write_text(json.dumps(events + planted))
    r = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    rows = pq.read_table(tmp_path / "o" / "idle_causes.parquet").to_pylist()
    item = [x for x in rows if x["cause"] == "aten::item"]
    assert {x["kind"] for x in item} == {"sync"} and sum(x["count"] for x in item) == 3
    assert sum(x["idle_us"] for x in item) == pytest.approx(sum(g[1] - g[0] for g in sync_gaps) / 1000.0, abs=0.01)
    # an op across a gap's middle that issued nothing is no cause: without flows nothing says why (none)
    assert not [x for x in rows if x["cause"] == "aten::index_put_"]
    gaps_pq = pq.read_table(tmp_path / "o" / "idle_gaps.parquet").to_pylist()
    (row,) = [x for x in gaps_pq if x["start_ns"] == big[0]]
    assert row["kind"] == "none" and row["cause"] is None and row["idle_us"] == pytest.approx((big[1] - big[0]) / 1000.0, abs=0.01)
    ops = pq.read_table(tmp_path / "o" / "host_ops.parquet").to_pylist()
    assert sorted(x["name"] for x in ops if not x["name"].startswith("ProfilerStep#")) == ["aten::index_put_"] + ["aten::item"] * 3


def test_the_chrome_trace_names_each_idle_gaps_cause(tmp_path: Path) -> None:
    write_torch_profile(tmp_path / "p", kernels=400, steps=3, copies=0, syncs_per_step=1, sync_idle_us=1500.0)
    r = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", "-q", "--chrome-trace", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    idle = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("device idle")]
    (trace,) = (tmp_path / "p").glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json")
    raw = json.loads(trace.read_text())
    ends = [_ns(e["ts"]) + round(float(e["dur"]) * 1000) for e in raw if e.get("name") == "AscendCL@aclrtSynchronizeStream"]
    sync_gaps = sorted(g[1] - g[0] for g in _device_gaps(trace) if any(g[0] <= t <= g[1] for t in ends))
    synced = [e for e in idle if e["args"]["cause"] == "acl@aclrtSynchronizeStream"]
    assert len(synced) == 3 and all(e["name"] == "device idle: acl@aclrtSynchronizeStream (sync)" for e in synced)
    assert sorted(e["dur"] for e in synced) == pytest.approx([g / 1000.0 for g in sync_gaps], abs=0.01)


def test_a_dataloader_fetch_is_its_own_kind(tmp_path: Path) -> None:
    """A DataLoader fetch range (as torch records it) across a gap, with an op inside it: the gap
    goes to the DataLoader, kind dataloader; a sync inside it stays a sync."""
    write_torch_profile(tmp_path / "p", kernels=600, steps=3, copies=0)
    (trace,) = (tmp_path / "p").glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(trace.read_text())
    gaps = sorted(_device_gaps(trace), key=lambda g: g[1] - g[0])
    g = gaps[len(gaps) // 2]
    mid = g[0] + (g[1] - g[0]) // 2
    host = next(e for e in events if e.get("cat") == "cpu_op")
    name = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    where = {"ph": "X", "cat": "cpu_op", "pid": host["pid"], "tid": host["tid"]}
    planted = [
        {**where, "name": name, "ts": _fmt(mid - 4000), "dur": 8.0},
        {**where, "name": "aten::stack", "ts": _fmt(mid - 1000), "dur": 2.0},
    ]
    trace.write_text(json.dumps(events + planted))
    r = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    rows = pq.read_table(tmp_path / "o" / "idle_causes.parquet").to_pylist()
    (hit,) = [x for x in rows if x["kind"] == "dataloader"]
    assert hit["cause"] == name and hit["count"] == 1 and hit["idle_us"] == pytest.approx((g[1] - g[0]) / 1000.0, abs=0.01)
    assert not [x for x in rows if x["cause"] == "aten::stack"]
