"""Memory tables, the per-rank memory figures and the three memory rules.

Every figure is recomputed from the raw files with the csv / sqlite3 modules, never with npudiag code.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest
from rich.console import Console

from npudiag.profiling.analysis.memory import memory_by_rank
from npudiag.profiling.derive import derive
from npudiag.profiling.ingest import ingest
from npudiag.report.terminal import render_terminal
from npudiag.summary_model import Summary
from npudiag.testing.generate import MemoryPlan, write_torch_profile
from tests.conftest import corpus_files
from tests.helpers import build_summary, run_cli

ALLOCATORS = ("PTA+GE", "PTA", "GE")
UNIT = {"B": 1, "KB": 1024, "MB": 1 << 20}


def _ns(text: str) -> int:
    return int(Decimal(text.strip()) * 1000)


def _unit(header: str) -> int:
    return UNIT[header.rsplit("(", 1)[1].rstrip(")")]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))


def _raw_peak_csv(record: Path, blocks: Path | None) -> dict:
    """Peak of the most inclusive allocator component, from memory_record.csv (and who holds what then)."""
    rows = _rows(record)
    alloc_col = next(c for c in rows[0] if c.startswith("Total Allocated("))
    res_col = next(c for c in rows[0] if c.startswith("Total Reserved("))
    comp = next(c for c in ALLOCATORS if any(r["Component"] == c for r in rows))
    mine = [r for r in rows if r["Component"] == comp and r[alloc_col].strip()]
    mine.sort(key=lambda r: _ns(r["Timestamp(us)"]))  # stable: file order among equal times
    best = max(round(float(r[alloc_col]) * _unit(alloc_col)) for r in mine)
    row = next(r for r in mine if round(float(r[alloc_col]) * _unit(alloc_col)) == best)
    out = {"allocator": comp, "peak": best, "reserved": round(float(row[res_col]) * _unit(res_col)), "ts_ns": _ns(row["Timestamp(us)"])}
    if blocks is not None:
        held: dict[str, int] = {}
        ops = _rows(blocks)
        size_col = next(c for c in ops[0] if c.startswith("Size("))
        for o in ops:
            a = _ns(o["Allocation Time(us)"]) if o["Allocation Time(us)"].strip() else None
            rel = o.get("Release Time(us)", "").strip()
            r = _ns(rel) if rel else None
            if (a is None or a <= out["ts_ns"]) and (r is None or r > out["ts_ns"]):
                name = o["Name"].strip() or "(allocated before the profile)"
                held[name] = held.get(name, 0) + abs(round(float(o[size_col]) * _unit(size_col)))
        out["held"] = held
        at = [o["Name"] for o in ops if o["Allocation Time(us)"].strip() and _ns(o["Allocation Time(us)"]) == out["ts_ns"]]
        out["op"] = at[0] if at else None
    return out


def _raw_peak_db(path: Path) -> dict:
    con = sqlite3.connect(path)
    names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    rows = con.execute("SELECT component, timestamp, totalAllocated, totalReserved FROM MEMORY_RECORD ORDER BY timestamp, rowid").fetchall()
    comps = {names[r[0]] for r in rows}
    comp = next(c for c in ALLOCATORS if c in comps)
    mine = [r for r in rows if names[r[0]] == comp and r[2] is not None]
    best = max(r[2] for r in mine)
    row = next(r for r in mine if r[2] == best)
    held: dict[str, int] = {}
    for name, size, a, rel in con.execute("SELECT name, size, allocationTime, releaseTime FROM OP_MEMORY"):
        if (a is None or a <= row[1]) and (rel is None or rel > row[1]):
            key = names.get(name) or "(allocated before the profile)"
            held[key] = held.get(key, 0) + abs(size)
    con.close()
    return {"allocator": comp, "peak": best, "reserved": row[3], "ts_ns": row[1], "held": held}


def _figures(path: Path) -> dict:
    mem = memory_by_rank(ingest([path]).tables)
    assert len(mem) == 1
    return mem[0]


def _check(m: dict, raw: dict) -> None:
    assert m["allocator"] == raw["allocator"]
    assert m["peak_allocated_bytes"] == raw["peak"]
    assert m["reserved_at_peak_bytes"] == raw["reserved"]
    assert m["fragmentation_bytes"] == raw["reserved"] - raw["peak"]
    if "held" in raw:
        top = max(raw["held"].items(), key=lambda kv: (kv[1], [-ord(c) for c in kv[0]]))
        assert (m["held_at_peak"][0]["op_name"], m["held_at_peak"][0]["bytes"]) == top
        assert m["unattributed_at_peak_bytes"] == max(raw["peak"] - sum(raw["held"].values()), 0)
    if raw.get("op") is not None:
        assert m["peak_op"] == raw["op"]


CSV_UNITS = [p.parent for p in corpus_files("**/memory_record*.csv")]
DB_FILES = [p for p in corpus_files("**/ascend_pytorch_profiler*.db")]


@pytest.mark.parametrize("folder", CSV_UNITS, ids=lambda p: str(p.parent.parent.name))
def test_corpus_text_memory_peaks_equal_the_raw_files(folder: Path) -> None:
    blocks = next(iter(sorted(folder.glob("operator_memory*.csv"))), None)
    _check(_figures(folder.parent), _raw_peak_csv(next(iter(sorted(folder.glob("memory_record*.csv")))), blocks))


@pytest.mark.parametrize("db", DB_FILES, ids=lambda p: p.parent.parent.parent.name)
def test_corpus_db_memory_peaks_equal_the_raw_database(db: Path) -> None:
    _check(_figures(db), _raw_peak_db(db))


def test_corpus_memory_rows_are_every_row_of_the_files(corpus: Path) -> None:
    folders = [p.parent for p in corpus.glob("**/memory_record.csv")]
    assert folders, "the corpus holds torch_npu memory files"
    for folder in folders:
        tables = ingest([folder.parent]).tables
        expected = sum(len(_rows(p)) for p in (folder / "memory_record.csv", folder / "npu_module_mem.csv") if p.is_file())
        assert tables["memory_timeline"].num_rows == expected
        assert tables["op_memory"].num_rows == len(_rows(folder / "operator_memory.csv"))


def _msprof_files(tmp_path: Path) -> Path:
    """msprof's own memory files, as documented (KB units, Device_id first, no release time column)."""
    prof = tmp_path / "mindstudio_profiler_output"
    prof.mkdir()
    with open(prof / "memory_record_20260605155140.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["Device_id", "Component", "Timestamp(us)", "Total Allocated(KB)", "Total Reserved(KB)", "Device"])
        w.writerows([["0", "GE", "1764246877073569.640\t", "1024.0", "4096.0", "NPU:0"],
                     ["0", "GE", "1764246877073600.000\t", "3072.5", "4096.0", "NPU:0"],
                     ["0", "GE", "1764246877073700.000\t", "2048.0", "4096.0", "NPU:0"]])  # fmt: skip
    with open(prof / "operator_memory_20260605155140.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["Device_id", "Name", "Size(KB)", "Allocation Time(us)", "Duration(us)", "Allocation Total Allocated(KB)",
                    "Allocation Total Reserved(KB)", "Release Total Allocated(KB)", "Release Total Reserved(KB)", "Device"])  # fmt: skip
        w.writerows([["0", "MatMul1", "2048.5", "1764246877073600.000\t", "100.250\t", "3072.5", "4096.0", "1024.0", "4096.0", "NPU:0"],
                     ["0", "", "-1024.0", "", "", "", "", "2048.0", "4096.0", "NPU:0"],
                     ["0", "Add2", "512.0", "1764246877073650.000\t", "", "2560.5", "4096.0", "", "", "NPU:0"]])  # fmt: skip
    with open(prof / "npu_mem_20260605155140.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["Device_id", "event", "ddr(KB)", "hbm(KB)", "memory(KB)", "timestamp(us)"])
        w.writerows([["0", "APP", "0", "2160232", "2160232", "1764246877073569.640\t"],
                     ["0", "Device", "0", "3000000", "3000000", "1764246877073569.640\t"]])  # fmt: skip
    return prof


def test_msprof_memory_files_in_kb_with_a_release_only_row(tmp_path: Path) -> None:
    prof = _msprof_files(tmp_path)
    tables = ingest([prof]).tables
    om = tables["op_memory"].to_pylist()
    assert [r["size_bytes"] for r in om] == [2048.5 * 1024, -1024 * 1024, 512 * 1024]
    assert om[0]["release_ns"] == 1764246877073600000 + 100250 and om[0]["alloc_allocated_bytes"] == 3072.5 * 1024
    assert om[1]["op_name"] is None and om[1]["alloc_ns"] is None and om[2]["release_ns"] is None
    tl = tables["memory_timeline"].to_pylist()
    npu = [r for r in tl if r["kind"] == "npu"]
    assert {r["component"]: r["reserved_bytes"] for r in npu} == {"APP": 2160232 * 1024, "DEVICE": 3000000 * 1024}
    m = memory_by_rank(tables)[0]
    assert m["allocator"] == "GE" and m["peak_allocated_bytes"] == 3072.5 * 1024 and m["peak_op"] == "MatMul1"
    # at the peak: MatMul1 (held until +100.25 us) and the block released later that was allocated before the profile
    assert {h["op_name"]: h["bytes"] for h in m["held_at_peak"]} == {"MatMul1": 2048.5 * 1024, "(allocated before the profile)": 1 << 20}
    assert m["process_peak_reserved_bytes"] == 2160232 * 1024


def _planted(tmp_path: Path, plan: MemoryPlan, steps: int = 5):
    gt = write_torch_profile(tmp_path, kernels=500, seed=3, steps=steps, copies=0, trace=False, memory=plan)
    tables, _ = derive(ingest([Path(gt.profile_dir)]).tables)
    return gt, tables


def _of(tables, rule: str) -> list[dict]:
    return [f for f in tables["findings"].to_pylist() if f["rule_id"] == rule]


def test_a_clean_memory_profile_raises_no_memory_finding(tmp_path: Path) -> None:
    gt, tables = _planted(tmp_path, MemoryPlan())
    for rule in ("memory_fragmentation", "memory_peak_op", "alloc_churn"):
        assert _of(tables, rule) == []
    m = memory_by_rank(tables)[0]
    assert m["peak_allocated_bytes"] == gt.memory["peak_allocated_bytes"]
    assert m["reserved_at_peak_bytes"] == gt.memory["reserved_at_peak_bytes"]


def test_planted_peak_op(tmp_path: Path) -> None:
    gt, tables = _planted(tmp_path, MemoryPlan(peak_op="aten::huge_activation", peak_op_bytes=6 << 30))
    m = memory_by_rank(tables)[0]
    assert m["peak_op"] == "aten::huge_activation" == gt.memory["peak_op"]
    assert m["peak_step"] == gt.steps[-1]
    truth = gt.memory["held_at_peak_bytes"]
    assert m["held_at_peak"][0]["op_name"] == max(truth, key=lambda k: truth[k])
    assert all(h["bytes"] == truth[h["op_name"]] for h in m["held_at_peak"])
    assert m["unattributed_at_peak_bytes"] == gt.memory["peak_allocated_bytes"] - sum(truth.values()) == 2 << 30  # the weights
    (f,) = _of(tables, "memory_peak_op")
    ev = json.loads(f["evidence"])
    assert ev["op"] == "aten::huge_activation" and ev["bytes"] == 6 << 30 and f["count"] == 1
    assert abs(ev["share_pct"] - 100 * (6 << 30) / gt.memory["peak_allocated_bytes"]) < 1e-9
    assert _of(tables, "memory_fragmentation") == [] and _of(tables, "alloc_churn") == []


def test_planted_fragmentation(tmp_path: Path) -> None:
    gt, tables = _planted(tmp_path, MemoryPlan(slack_bytes=3 << 30))
    (f,) = _of(tables, "memory_fragmentation")
    ev = json.loads(f["evidence"])
    truth = gt.memory["reserved_at_peak_bytes"] - gt.memory["peak_allocated_bytes"]
    assert ev["fragmentation_bytes"] == truth >= 1 << 30
    assert f["time_lost_us"] is None and f["severity"] == "warning"
    assert _of(tables, "memory_peak_op") == [] and _of(tables, "alloc_churn") == []


def test_planted_alloc_churn(tmp_path: Path) -> None:
    gt, tables = _planted(tmp_path, MemoryPlan(churn=True))
    (f,) = _of(tables, "alloc_churn")
    growths = gt.memory["reserved_growths_per_step"]
    later = [str(s) for s in gt.steps[1:]]
    assert f["count"] == sum(growths[s] for s in later)
    assert json.loads(f["evidence"])["growths_per_step"] == {s: growths[s] for s in later}
    assert _of(tables, "memory_fragmentation") == [] and _of(tables, "memory_peak_op") == []


def test_rule_options_move_the_thresholds(tmp_path: Path) -> None:
    gt, _ = _planted(tmp_path, MemoryPlan(slack_bytes=3 << 30))
    tables, _ = derive(ingest([Path(gt.profile_dir)]).tables, {"memory_fragmentation": {"min_bytes": float(8 << 30)}})
    assert _of(tables, "memory_fragmentation") == []


def test_the_step_window_cuts_the_memory_tables(tmp_path: Path) -> None:
    gt = write_torch_profile(tmp_path / "p", kernels=500, seed=3, steps=5, copies=0, trace=False,
                             memory=MemoryPlan(peak_op="aten::huge_activation", peak_op_bytes=6 << 30))  # fmt: skip
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--steps", "2:3", "--json")
    assert r.returncode == 0, r.stderr
    (m,) = json.loads(r.stdout)["memory"]["ranks"]
    assert m["peak_op"] != "aten::huge_activation" and m["peak_allocated_bytes"] < gt.memory["peak_allocated_bytes"]
    assert m["peak_step"] in (2, 3)


def test_analyze_and_report_agree_on_memory_for_many_ranks(tmp_path: Path) -> None:
    for rank in (0, 1):
        write_torch_profile(tmp_path / "c", kernels=300, seed=rank, steps=3, rank=rank, copies=0, trace=False,
                            memory=MemoryPlan(base_bytes=(2 + rank) << 30))  # fmt: skip
    r = run_cli("analyze", tmp_path / "c", "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    mem = json.loads(r.stdout)["memory"]
    assert [m["rank"] for m in mem["ranks"]] == [0, 1]
    assert mem["ranks"][1]["peak_allocated_bytes"] - mem["ranks"][0]["peak_allocated_bytes"] == 1 << 30
    rep = run_cli("report", tmp_path / "o", "--json")
    assert json.loads(rep.stdout)["memory"] == mem


def test_a_bad_memory_file_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    gt = write_torch_profile(tmp_path / "p", kernels=300, seed=3, steps=3, copies=0, trace=False, memory=MemoryPlan())
    rec = Path(gt.profile_dir) / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv"
    lines = rec.read_text().splitlines()
    fields = lines[7].split(",")
    fields[2] = "lots"  # Total Allocated(MB) of the 8th line
    lines[7] = ",".join(fields)
    rec.write_text("\n".join(lines) + "\n")
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o")
    assert r.returncode == 2
    err = [ln for ln in r.stderr.splitlines() if "memory_record.csv" in ln]
    assert len(err) == 1 and "memory_record.csv:8:" in err[0] and "'lots'" in err[0] and "Traceback" not in r.stderr
    assert "Hot operators" in r.stdout  # the kernels were still read


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_the_memory_table_keeps_its_key_columns(tmp_path: Path, width: int) -> None:
    gt, tables = _planted(tmp_path, MemoryPlan(peak_op="aten::a_very_long_operator_name_with_a_distinctive_end", peak_op_bytes=4 << 30))
    console = Console(width=width, record=True, color_system=None)
    render_terminal(Summary.of(build_summary(tables)), console)
    text = console.export_text()
    block = text[text.index("Device memory at the allocation peak") :].splitlines()
    header = next(ln for ln in block if ln.lstrip().startswith("rank"))
    assert "peak allocated" in header
    row = block[block.index(header) + 2]
    assert "GiB" in row and row.split()[0] == "0"
    assert all(len(ln) <= width for ln in text.splitlines())
    held = text[text.index("Held at the memory peak") :]
    # the op name whole at every width: on one line, or wrapped in its column (never cut)
    name = "aten::a_very_long_operator_name_with_a_distinctive_end"
    first_col = "".join(ln.split("  ")[0].strip() for ln in held.splitlines()[3:])
    assert name in held or name in first_col, held


def test_the_html_report_has_the_memory_section(tmp_path: Path) -> None:
    from npudiag.report.html import render_html

    gt, tables = _planted(tmp_path, MemoryPlan(peak_op="aten::<b>huge</b>", peak_op_bytes=4 << 30))
    page = render_html(Summary.of(build_summary(tables)), tables["copies"])
    section = page[page.index("<h2>Device memory at the allocation peak</h2>") :]
    assert "aten::&lt;b&gt;huge&lt;/b&gt;" in section and "<b>huge" not in section
    assert "4.0 GiB" in section and "(in no operator_memory block)" in section


def test_gate_on_peak_memory_in_bytes(tmp_path: Path) -> None:
    sides = {}
    for name, base in (("base", 2 << 30), ("cur", 3 << 30)):
        gt = write_torch_profile(tmp_path / name, kernels=600, seed=5, steps=6, copies=0, trace=False,
                                 memory=MemoryPlan(base_bytes=base))  # fmt: skip
        sides[name] = gt.profile_dir
    r = run_cli("gate", sides["base"], sides["cur"], "--metric", "memory:peak_allocated", "--metric", "memory:unused", "--json")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)
    assert res["regressions"] == ["memory:peak_allocated"]
    (m,) = [m for m in res["metrics"] if m["metric"] == "memory:peak_allocated"]
    assert m["unit"] == "bytes" and "base_median_us" not in m
    assert m["cur_median_bytes"] - m["base_median_bytes"] == 1 << 30 and m["base_n"] == m["cur_n"] == 6
    # every step's peak: the weights plus that step's blocks (the same in both runs)
    (u,) = [m for m in res["metrics"] if m["metric"] == "memory:unused"]
    assert u["status"] != "regression" and u["min_delta_bytes"] == 1 << 20
    back = run_cli("gate", sides["cur"], sides["base"], "--metric", "memory:peak_allocated")
    assert back.returncode == 0 and "GiB" in back.stdout
    bad = run_cli("gate", sides["base"], sides["cur"], "--metric", "memory:peak")
    assert bad.returncode == 2 and "memory:peak_allocated" in bad.stderr
