"""Operator efficiency (op_perf.parquet, the op_efficiency rule): FLOPs from the export's own shapes,
TFLOPS, MFU against the peak, the bound from the pipe ratios; every number recounted from the raw
kernel_details.csv with the csv module."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from npudiag.profiling.analysis.op_perf import op_perf, peak_option, shape_flops
from npudiag.testing.generate import write_msprof_profile

from .helpers import run_cli

RANK0 = "msinsight-st-cann83rc1-level2-4rank/rank_0_ascend_pt"
DB = "msinsight-pytorch-db-rank1/level1/rank1_ascend_pt"
PEAK = 20 * 1800e6 * 8192 / 1e12  # 20 AI Cores at 1800 MHz, 16x16x16 FP16 / BF16 per core per cycle: 294.912


def _mnk(a: list[int], out: list[int]) -> int:
    """2·M·N·K written out: output [M, N]; K the dim of A that is not M."""
    m, n = out[-2], out[-1]
    k = a[1] if a[0] == m else a[0]
    return 2 * m * n * k


def test_matmul_flops_tflops_mfu_and_bound_equal_a_recount(corpus: Path, tmp_path: Path) -> None:
    r = run_cli("analyze", corpus / RANK0, "-o", tmp_path / "o", "--peak-tflops", f"bf16={PEAK}", "--quiet")
    assert r.returncode == 0, r.stderr
    perf = pq.read_table(tmp_path / "o" / "op_perf.parquet").to_pylist()
    with open(corpus / RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
        rows = [x for x in csv.DictReader(fh) if x["Type"] in ("MatMulV2", "MatMulV3")]
    assert len([x for x in rows if x["Type"] == "MatMulV3"]) == 280
    got = {(p["start_ns"], p["op_type"]): p for p in perf if p["op_type"] in ("MatMulV2", "MatMulV3")}
    assert len(got) == len(rows)
    mfu, mac = [], []
    for x in rows:
        a, _ = ([int(d) for d in s.split(",")] for s in x["Input Shapes"].strip('"').split(";"))
        out = [int(d) for d in x["Output Shapes"].strip('"').split(",")]
        start_ns = int(x["Start Time(us)"].replace(".", "")) if "." in x["Start Time(us)"] else int(x["Start Time(us)"]) * 1000
        p = got[(start_ns, x["Type"])]
        flops = _mnk(a, out)
        dur = float(x["Duration(us)"])
        assert p["flops"] == flops and p["flops_source"] == "shape" and p["dtype_class"] == "fp16"
        assert p["achieved_tflops"] == pytest.approx(flops / (dur * 1e6), rel=1e-12)
        assert p["mfu_pct"] == pytest.approx(100 * flops / (dur * 1e6) / PEAK, rel=1e-9)
        m2, mte2 = float(x["aic_mac_ratio"]), float(x["aic_mte2_ratio"])
        want = "cube+mte2" if m2 >= 0.8 and mte2 >= 0.95 else "cube" if m2 >= 0.8 else "mte2" if mte2 >= 0.95 else None
        assert p["bound"] == (want or ("latency" if dur < 20 else "none")), (x["Name"], m2, mte2, dur)
        mfu.append(p["mfu_pct"])
        mac.append(m2)
    r_mfu_mac = float(np.corrcoef(mfu, mac)[0, 1])
    assert r_mfu_mac > 0.9, r_mfu_mac  # 0.968 on this run: MFU from shapes tracks the cube's own busy ratio
    summary = json.loads(run_cli("report", tmp_path / "o", "--json").stdout)
    (v3,) = [e for e in summary["op_efficiency"] if e["op_type"] == "MatMulV3"]
    v3_rows = [x for x in rows if x["Type"] == "MatMulV3"]
    total_us = sum(float(x["Duration(us)"]) for x in v3_rows)
    assert v3["kernels"] == 280 and v3["total_us"] == pytest.approx(total_us)
    flops = sum(_mnk([int(d) for d in x["Input Shapes"].strip('"').split(";")[0].split(",")],
                     [int(d) for d in x["Output Shapes"].strip('"').split(",")]) for x in v3_rows)  # fmt: skip
    assert v3["tflops"] == pytest.approx(flops / (total_us * 1e6)) and v3["mfu_pct"] == pytest.approx(100 * flops / (total_us * 1e6) / PEAK)


def test_op_types_without_a_formula_say_why(corpus: Path, tmp_path: Path) -> None:
    r = run_cli("analyze", corpus / RANK0, "-o", tmp_path / "o", "--quiet")
    assert r.returncode == 0, r.stderr
    perf = pq.read_table(tmp_path / "o" / "op_perf.parquet").to_pylist()
    fa = [p for p in perf if p["op_type"] == "FlashAttentionScore"]
    # these calls carry a compressed 2048 x 2048 causal mask: how much of Q·Kᵀ runs depends on the sparse mode
    assert fa and all(p["flops"] is None and "atten_mask [2048, 2048]" in p["flops_note"] for p in fa)
    add = [p for p in perf if p["op_type"] == "Add"]
    assert add and all(p["flops"] is None and p["flops_note"] == "no formula for this op type" for p in add)
    assert all(p["mfu_pct"] is None for p in perf)  # no peak given and no device info in this export
    assert "MFU needs the peak: --peak-tflops" in run_cli("report", tmp_path / "o").stdout


def test_a_db_export_gives_the_same_columns(corpus: Path, tmp_path: Path) -> None:
    r = run_cli("analyze", corpus / DB, "-o", tmp_path / "o", "--quiet")
    assert r.returncode == 0, r.stderr
    perf = pq.read_table(tmp_path / "o" / "op_perf.parquet")
    assert perf.num_rows == 187 and perf.schema.names == pq.read_schema(tmp_path / "o" / "op_perf.parquet").names
    rows = perf.to_pylist()
    assert sum(p["aic_mac_ratio"] is not None or p["aiv_vec_ratio"] is not None for p in rows) > 150  # TASK_PMU_INFO's ratios
    assert {p["bound"] for p in rows} >= {"latency", "vector+memory", "mte2"}


def test_the_peak_comes_from_the_device_info(tmp_path: Path) -> None:
    """msprof's info.json: ai_core_num x aic_frequency x 8192 (FP16) per cycle."""
    gt = write_msprof_profile(tmp_path / "p", kernels=200, copies=0, device_info=(20, 40))
    info = sorted(Path(gt.profile_dir).glob("device_*/info.json.*"))[0]
    doc = json.loads(info.read_text())
    dev = doc["DeviceInfo"][0]
    mhz = float(dev["aic_frequency"])
    r = run_cli("analyze", gt.profile_dir, "-o", tmp_path / "o", "--quiet")
    assert r.returncode == 0, r.stderr
    perf = pq.read_table(tmp_path / "o" / "op_perf.parquet").to_pylist()
    fp16 = [p for p in perf if p["dtype_class"] == "fp16"]
    want = int(dev["ai_core_num"]) * mhz * 1e6 * 8192 / 1e12
    assert fp16 and all(p["peak_tflops"] == pytest.approx(want) for p in fp16)
    known = [p for p in fp16 if p["flops"] is not None]
    assert known and all(p["mfu_pct"] == pytest.approx(100 * p["achieved_tflops"] / p["peak_tflops"]) for p in known)


@pytest.mark.parametrize(
    ("text", "want"),
    [("295", {"peak_tflops": 295.0}), ("bf16=295,int8=590", {"peak_tflops_fp16": 295.0, "peak_tflops_int8": 590.0})],
)
def test_peak_option(text: str, want: dict) -> None:
    assert peak_option(text) == want


@pytest.mark.parametrize("text", ["x", "fp8=3", "0", "inf", "bf16="])
def test_a_bad_peak_is_one_line(tmp_path: Path, text: str) -> None:
    r = run_cli("analyze", tmp_path, "--peak-tflops", text)
    assert r.returncode == 2 and "--peak-tflops" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("op", "shapes", "out", "fmt", "flops"),
    [
        ("MatMulV3", "4096,1024;4096,1024", "4096,4096", "ND;ND", 2 * 4096 * 4096 * 1024),
        ("MatMulV2", "1024,4096;1024,2048", "4096,2048", "ND;ND", 2 * 4096 * 2048 * 1024),  # A stored transposed
        ("BatchMatMulV2", "8,128,64;8,64,256", "8,128,256", "ND;ND", 2 * 8 * 128 * 256 * 64),
        ("MatMulV2", "4,8,16,16;8,4,16,16", "8,8,16,16", "FRACTAL_NZ;FRACTAL_NZ", 2 * 128 * 128 * 64),
        ("Conv2D", "8,64,56,56;128,64,3,3", "8,128,56,56", "NCHW;NCHW", 2 * 8 * 128 * 56 * 56 * 64 * 3 * 3),
    ],
)
def test_formulas(op: str, shapes: str, out: str, fmt: str, flops: int) -> None:
    got, note = shape_flops(op, shapes, out, fmt)
    assert got == flops and not note
    assert math.isfinite(got)


def test_op_efficiency_names_the_time_spent_below_the_mfu_threshold(corpus: Path, tmp_path: Path) -> None:
    r = run_cli("analyze", corpus / RANK0, "-o", tmp_path / "o", "--json", "--peak-tflops", str(PEAK),
                "--rule-opt", "op_efficiency.low_mfu=0.7", "--rule-opt", "op_efficiency.min_share=0.01")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    found = [f for f in doc["findings"] if f["rule_id"] == "op_efficiency"]
    with open(corpus / RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    total = sum(float(x["Duration(us)"]) for x in rows)
    low: dict[str, float] = {}
    for x in rows:
        if x["Type"] not in ("MatMulV2", "MatMulV3"):
            continue
        a = [int(d) for d in x["Input Shapes"].strip('"').split(";")[0].split(",")]
        out = [int(d) for d in x["Output Shapes"].strip('"').split(",")]
        dur = float(x["Duration(us)"])
        if _mnk(a, out) / (dur * 1e6) / PEAK < 0.7:
            low[x["Type"]] = low.get(x["Type"], 0.0) + dur
    want = {t: us for t, us in low.items() if us >= 0.01 * total}
    assert want and {f["evidence"]["op_type"]: f["evidence"]["low_mfu_us"] for f in found} == {t: round(us, 3) for t, us in want.items()}
    assert all(f["time_lost_us"] is None and "MFU" in f["title"] for f in found)


def test_the_html_report_draws_the_roofline(corpus: Path, tmp_path: Path) -> None:
    """One point per op type with FLOPs and bytes, at its summary TFLOPS, under the peak line."""
    import re

    page = tmp_path / "r.html"
    r = run_cli("analyze", corpus / RANK0, "-o", tmp_path / "o", "--peak-tflops", str(PEAK), "--html", page, "--json")
    assert r.returncode == 0, r.stderr
    rows = [e for e in json.loads(r.stdout)["op_efficiency"] if e["tflops"] and e["flops_per_byte"]]
    html = page.read_text()
    svg = html[html.index('aria-label="roofline"') :].split("</svg>")[0]
    titles = re.findall(r"<title>([^<]+)</title>", svg)
    assert sorted(t.split(":")[0] for t in titles) == sorted(e["op_type"] for e in rows) == ["MatMulV2", "MatMulV3"]
    for e in rows:
        assert any(t.startswith(f"{e['op_type']}: {e['tflops']:.1f} TFLOPS") for t in titles)
    assert f"peak {PEAK:.1f} TFLOPS" in svg


def _v3_mfu_from_csv(corpus: Path) -> float:
    """MatMulV3's MFU recounted with the csv module: 100 x its FLOPs / (its time x the peak)."""
    with open(corpus / RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
        v3 = [x for x in csv.DictReader(fh) if x["Type"] == "MatMulV3"]
    flops = sum(_mnk([int(d) for d in x["Input Shapes"].strip('"').split(";")[0].split(",")],
                     [int(d) for d in x["Output Shapes"].strip('"').split(",")]) for x in v3)  # fmt: skip
    return 100 * flops / (sum(float(x["Duration(us)"]) for x in v3) * 1e6) / PEAK


def test_compare_and_gate_carry_each_op_groups_mfu(corpus: Path, tmp_path: Path) -> None:
    want = _v3_mfu_from_csv(corpus)
    r = run_cli("compare", corpus / RANK0, corpus / RANK0, "-o", tmp_path / "c", "--peak-tflops", f"bf16={PEAK}", "--json")
    assert r.returncode == 0, r.stderr
    diff = {d["key"]: d for d in pq.read_table(tmp_path / "c" / "diff.parquet").to_pylist()}
    assert diff["MatMulV3"]["base_mfu_pct"] == pytest.approx(want) and diff["MatMulV3"]["cur_mfu_pct"] == pytest.approx(want)
    assert diff["FlashAttentionScore"]["base_mfu_pct"] is None  # no formula: no number
    g = run_cli("gate", corpus / RANK0, corpus / RANK0, "--metric", "mfu:MatMulV3", "--peak-tflops", f"bf16={PEAK}", "--json")
    assert g.returncode == 0, g.stderr
    (m,) = [m for m in json.loads(g.stdout)["metrics"] if m["metric"] == "mfu:MatMulV3"]
    assert m["unit"] == "pct" and m["higher_is_better"] and m["base_median_pct"] == pytest.approx(want) and m["status"] == "pass"
    # an analyze out folder written without a peak takes the peak given now, as the profile does
    assert run_cli("analyze", corpus / RANK0, "-o", tmp_path / "o", "--quiet").returncode == 0
    g = run_cli("gate", tmp_path / "o", corpus / RANK0, "--metric", "mfu:MatMulV3", "--peak-tflops", f"bf16={PEAK}", "--json")
    assert g.returncode == 0, g.stderr
    (m,) = [m for m in json.loads(g.stdout)["metrics"] if m["metric"] == "mfu:MatMulV3"]
    assert m["base_median_pct"] == pytest.approx(want) and m["cur_median_pct"] == pytest.approx(want)
    # without a peak (this profile records no AI Core count or clock) there is no MFU, and the gate says why
    none = run_cli("gate", corpus / RANK0, corpus / RANK0, "--metric", "mfu:MatMulV3")
    assert none.returncode == 2 and "no samples of mfu:MatMulV3" in none.stderr and "flops_note" in none.stderr


def test_the_gate_fails_an_mfu_fall_and_passes_a_rise() -> None:
    from npudiag.profiling.analysis.gate import MetricRule, decide

    rule = MetricRule(0.05, None)
    base = np.full(10, 60.0) + np.arange(10) * 0.01
    fall = decide("mfu:MatMulV3", base, base - 10.0, rule, 1.0, 0.002, "pct", True)
    rise = decide("mfu:MatMulV3", base, base + 10.0, rule, 1.0, 0.002, "pct", True)
    small = decide("mfu:MatMulV3", base, base - 0.5, rule, 1.0, 0.002, "pct", True)  # below the 1-point floor
    assert fall.status == "regression" and "< -5%" in fall.reason
    assert rise.status == "improvement" and small.status == "pass"
    # the same numbers as a cost (time): the rise is the regression
    assert decide("op:MatMulV3", base, base + 10.0, rule, 1.0, 0.002, "us").status == "regression"


def test_flash_attention_flops_from_its_shapes_without_a_mask() -> None:
    # the corpus call's shapes (SBH: q [4096, 1, 2048], k / v [4096, 1, 1024]; softmax_max [1, 16, 4096, 8]) with the
    # mask left out: B 1, N 16, Sq = Skv 4096, D = 2048 / 16 = 128, key / value heads 1024 / 128 = 8 of Dv 128
    dts = "DT_BF16;DT_BF16;DT_BF16;DT_BF16;UINT8;DT_BF16;BOOL;INT64"
    fwd = shape_flops("FlashAttentionScore", "4096,1,2048;4096,1,1024;4096,1,1024;;;;;", "1,16,4096,8;1,16,4096,8;;4096,1,2048", "", dts)
    assert fwd == (2 * 1 * 16 * 4096 * 4096 * (128 + 128), "")
    grad = shape_flops("FlashAttentionScoreGrad", "4096,1,2048;4096,1,1024;4096,1,1024;4096,1,2048;1,16,4096,8;1,16,4096,8;;4096,1,2048",
                       "4096,1,2048;4096,1,1024;4096,1,1024", "", "BF16;BF16;BF16;BF16;FLOAT;FLOAT;BF16;BF16")  # fmt: skip
    assert grad == (2 * 16 * 4096 * 4096 * (3 * 128 + 2 * 128), "")  # 2.5 x the forward at D = Dv
    # BNSD with GQA (k / v 8 heads), BSND, and the cases that stay null with a reason
    bnsd = shape_flops("FlashAttentionScore", "2,16,1024,128;2,8,2048,128;2,8,2048,64", "2,16,1024,8;2,16,1024,8;;2,16,1024,64", "", "")
    assert bnsd == (2 * 2 * 16 * 1024 * 2048 * (128 + 64), "")
    bsnd = shape_flops("FlashAttentionScore", "2,1024,16,128;2,2048,8,128;2,2048,8,128", "2,16,1024,8", "", "")
    assert bsnd == (2 * 2 * 16 * 1024 * 2048 * 256, "")
    same = shape_flops("FlashAttentionScore", "2,16,16,128;2,16,16,128;2,16,16,128", "2,16,16,8", "", "")
    assert same[0] is None and "ambiguous" in same[1]
    tnd = shape_flops("FlashAttentionScore", "8192,16,128;8192,16,128;8192,16,128", "8192,16,8", "", "")
    assert tnd[0] is None and "TND" in tnd[1]


def test_kernels_in_pieces_and_null_shapes_as_empty_text_give_the_same_rows(corpus: Path, tmp_path: Path) -> None:
    """op_perf reads its text columns as dictionary codes straight from the kernels' chunks, a null as "": a
    real export's kernels cut into pieces of 37 rows give the rows of the same kernels in one piece with every
    missing shape, format and dtype written as empty text."""
    r = run_cli("analyze", corpus / RANK0, "-o", tmp_path / "o", "--quiet")
    assert r.returncode == 0, r.stderr
    kernels = pq.read_table(tmp_path / "o" / "kernels.parquet")
    pieces = pa.Table.from_batches(kernels.to_batches(max_chunksize=37))
    whole = kernels.combine_chunks()
    missing = 0
    for name in ("input_shapes", "output_shapes", "input_formats", "input_dtypes", "output_dtypes"):
        missing += whole[name].null_count
        whole = whole.set_column(whole.schema.get_field_index(name), name, pc.fill_null(whole[name], ""))
    assert pieces["op_type"].num_chunks > 50 and missing > 100
    want = op_perf({"kernels": whole})
    assert want.num_rows > 1000 and op_perf({"kernels": pieces}).equals(want)
