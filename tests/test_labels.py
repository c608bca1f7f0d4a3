"""Labels equal to the numbers: what each headline figure, share and count is *of*, recomputed from
the raw files with the json / csv modules."""

from __future__ import annotations

import csv
import json
from decimal import Decimal as D
from pathlib import Path

from npudiag.testing.generate import write_torch_profile

from .conftest import ROOT
from .helpers import run_cli

TORCH = ROOT / "fixtures" / "sample_torch"
TRACE = next(TORCH.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


def _raw_trace() -> tuple[list[dict], dict[int, str]]:
    events = json.loads(TRACE.read_text())
    events = events if isinstance(events, list) else events["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    return events, names


def _union(intervals: list[tuple]) -> D:
    total, end = D(0), D("-Infinity")
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def test_copies_are_counted_once_and_unknown_sizes_are_null(tmp_path: Path) -> None:
    """ "Memory copies (80)" for 40 copies: each was counted as a host call and as a device task;
    compare's copy_time_us was 960.8 ms for a 562 ms step; JSON bytes was 0 where no size is known."""
    events, names = _raw_trace()
    device = [e for e in events if e.get("ph") == "X" and names.get(e.get("pid")) == "Ascend Hardware" and e["name"].startswith("MEMCPY")]
    host = [e for e in events if e.get("ph") == "X" and names.get(e.get("pid")) == "CANN" and "Memcpy" in e["name"]]
    r = run_cli("analyze", TORCH, "--out", tmp_path / "a", "--json")
    assert r.returncode == 0, r.stderr
    cp = json.loads(r.stdout)["copies"]
    assert cp["count"] == len(device) == 40 and cp["host_calls"] == len(host) == 40
    assert abs(cp["time_us"] - sum(float(e["dur"]) for e in device)) < 1e-3
    assert cp["bytes"] is None  # torch_npu's trace records no copy size
    text = run_cli("analyze", TORCH, "--out", tmp_path / "a")
    assert "Memory copies (40 on the device, 40 host calls)" in text.stdout
    c = run_cli("compare", TORCH, TORCH, "--out", tmp_path / "c", "--json")
    totals = {row["metric"]: row for row in json.loads(c.stdout)["totals"]["rows"]}
    assert totals["copies"]["baseline"] == 40
    assert abs(totals["copy_time_us"]["baseline"] - sum(float(e["dur"]) for e in device)) < 1e-3


def test_the_headline_splits_device_busy_and_says_what_shares_are_of(tmp_path: Path) -> None:
    """ "device busy 594.52ms (98.0%)" hid 480 ms of copies; "MatMulV3 takes 31.9% of device time"
    was of kernel time."""
    events, names = _raw_trace()
    hw = [e for e in events if e.get("ph") == "X" and names.get(e.get("pid")) == "Ascend Hardware"]
    copies = [(D(str(e["ts"])), D(str(e["ts"])) + D(str(e["dur"]))) for e in hw if e["name"].startswith("MEMCPY")]
    with open(TRACE.parent / "kernel_details.csv", newline="") as fh:  # every kernel, communication included
        kernels = [(D(k["Start Time(us)"].strip()), D(k["Start Time(us)"].strip()) + D(k["Duration(us)"])) for k in csv.DictReader(fh)]
    r = run_cli("analyze", TORCH, "--out", tmp_path / "a", "--json")
    prof = json.loads(r.stdout)["profile"]
    assert abs(prof["device_busy_us"] - float(_union(kernels + copies))) < 0.01  # exact decimal arithmetic on the raw text
    parts = prof["computing_us"] + prof["communication_not_overlapped_us"] + prof["copy_not_overlapped_us"]
    assert abs(parts - prof["device_busy_us"]) < 1e-6  # the split adds up to device busy
    assert abs(prof["copy_not_overlapped_us"] - float(_union(copies))) < 0.01  # nothing runs beside these copies
    out = run_cli("analyze", TORCH, "--out", tmp_path / "a", env={"COLUMNS": "80"}).stdout
    first = out.index("= copies")
    assert first < out.index("+ compute") < out.index("+ comm not overlapped")  # largest first: a copy-bound run reads as one
    assert "share of kernel time" in out and "of kernel time" in out and "of device time" not in out


def test_many_ranks_give_wall_time_and_per_rank_means(tmp_path: Path) -> None:
    """4 ranks: "span 305.43ms · device busy 1.140s (96.5%)" put a sum over ranks beside one span."""
    for rank in range(4):
        write_torch_profile(tmp_path / "p" / f"r{rank}", kernels=400, steps=3, copies=2, seed=rank, rank=rank)
    r = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", "--json")
    data = json.loads(r.stdout)
    prof, ranks = data["profile"], data["per_rank"]
    assert prof["ranks_with_device_tasks"] == 4 and 0 < prof["device_busy_pct"] <= 100
    assert all(0 < x["busy_pct"] <= 100 for x in ranks)
    mean_busy = sum(x["busy_us"] for x in ranks) / 4
    out = run_cli("analyze", tmp_path / "p", "--out", tmp_path / "o", env={"COLUMNS": "200"}).stdout
    from npudiag.report.terminal import fmt_us

    assert f"wall time {fmt_us(prof['span_us'])}" in out and "per rank (mean of 4)" in out
    assert f"device busy {fmt_us(mean_busy)}" in out and f"device busy {fmt_us(prof['device_busy_us'])}" not in out


def test_compare_totals_name_no_unit_and_counts_change_by_a_count(tmp_path: Path) -> None:
    """`kernel_time_us 94.34ms` and a findings count that "changed +66.7%": totals are named without the
    unit their value shows, and a count's change is its difference."""
    import re

    msprof = ROOT / "fixtures" / "sample_msprof"
    r = run_cli("compare", msprof, TORCH, "--out", tmp_path / "c", env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    totals = r.stdout.split("Totals (per run)")[1].split("Operators")[0]
    assert "_us " not in totals and re.search(r"^kernel_time\s", totals, re.M)
    doc = json.loads(run_cli("compare", msprof, TORCH, "--json").stdout)
    rows = {t["metric"]: t for t in doc["totals"]["rows"]}
    base, cur = rows["kernels"]["baseline"], rows["kernels"]["current"]
    line = next(x for x in totals.splitlines() if x.startswith("kernels "))
    assert line.split()[-1] == f"{cur - base:+,.0f}" and "%" not in line
