"""npudiag cluster: per-rank step phases match the ranks' own step_trace files; slow ranks and their cause."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import npudiag
from npudiag.schemas import CLUSTER_STAGES, CLUSTER_STEPS, SLOW_RANKS
from npudiag.testing.generate import Variation, write_torch_profile

from .conftest import CORPUS
from .helpers import run_cli

FOUR = CORPUS / "msinsight-st-cann83rc1-level2-4rank"
# every cluster run analyses its ranks in a pool of child processes
pytestmark = pytest.mark.slow


def test_four_real_ranks_match_their_step_trace_files(tmp_path: Path) -> None:
    if not FOUR.is_dir():
        pytest.skip(f"4-rank corpus not present at {FOUR} (only in the project workspace)")
    r = run_cli("cluster", FOUR, "--out", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    ours = list(csv.reader((tmp_path / "cluster_step_trace_time.csv").open()))
    ref_header = (CORPUS / "mstt-cluster-analysis-output" / "cluster_step_trace_time.csv").open().readline().strip().split(",")
    # the 2023 file's columns, then what msprof-analyze 26 adds where the ranks give it
    assert ours[0] == ref_header + ["Preparing", "DP Index", "PP Index", "TP Index"]
    by_rank = {int(row[2]): row for row in ours[1:] if row[1] == "rank"}
    for rank in range(4):
        src = list(csv.DictReader((FOUR / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open()))[0]
        row = dict(zip(ours[0], by_rank[rank]))
        assert row["Step"] == src["Step"] and row["Type"] == "rank"
        for col in ("Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage", "Bubble",
                    "Communication(Not Overlapped and Exclude Receive)"):  # fmt: skip
            assert float(row[col]) == float(src[col]), (rank, col)
    assert pq.read_schema(tmp_path / "cluster_steps.parquet").equals(CLUSTER_STEPS)
    assert json.loads(r.stdout)["slow_ranks"] == []  # all four stages are within 0.1 % of each other


def test_slow_rank_and_its_cause(tmp_path: Path) -> None:
    root = tmp_path / "ranks"
    for rank in range(8):
        scale = {"MatMulV3": 1.3} if rank == 5 else {}
        write_torch_profile(
            root, kernels=1500, seed=4, steps=5, rank=rank, copies=2, variation=Variation(rank, 0.01, scale), repeat_steps=True
        )
    (root / "ground_truth.json").unlink()
    r = run_cli("cluster", root, "--out", tmp_path / "out", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ranks"] == 8 and data["steps"] == 5
    slow = data["slow_ranks"]
    assert {s["rank"] for s in slow} == {5} and len(slow) == 5
    assert all(s["cause"] == "computing" and s["excess_pct"] > 5 for s in slow)
    assert json.loads(slow[0]["slower_ops"])[0]["op"] == "MatMulV3"
    assert pq.read_schema(tmp_path / "out" / "cluster_slow_ranks.parquet").equals(SLOW_RANKS)
    shown = run_cli("cluster", root, "--out", tmp_path / "out2")
    assert "Slow ranks" in shown.stdout and "MatMulV3" in shown.stdout


def test_equal_ranks_have_no_slow_rank(tmp_path: Path) -> None:
    root = tmp_path / "ranks"
    for rank in range(6):
        write_torch_profile(root, kernels=1200, seed=4, steps=4, rank=rank, copies=2, variation=Variation(rank, 0.01), repeat_steps=True)
    r = run_cli("cluster", root, "--out", tmp_path / "out", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["slow_ranks"] == []


def test_communication_links_and_wait_skew_from_the_real_files(tmp_path: Path) -> None:
    if not FOUR.is_dir():
        pytest.skip(f"4-rank corpus not present at {FOUR} (only in the project workspace)")
    from npudiag.profiling.formats.communication import read_communication_tables, read_matrix
    from npudiag.schemas import COMM_LINKS, COMM_OPS

    out = FOUR / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    links = read_matrix(out / "communication_matrix.json", 0)
    assert links.schema.equals(COMM_LINKS) and links.num_rows > 0
    first = next(r for r in links.to_pylist() if r["op_group"] == "batchsendrecv-total@3985310405473756128" and r["transport"] == "HCCS")
    assert (first["src_rank"], first["dst_rank"]) == (0, 1)
    assert not [r for r in links.to_pylist() if "-top1@" in r["op_group"] or "-middle@" in r["op_group"]]
    for r in links.to_pylist():  # the file's bandwidth is its size over its time (GB = 1e9 bytes)
        if r["time_us"] and r["size_bytes"]:
            assert r["bandwidth_gbps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e3), rel=0.01, abs=0.01)
    ops = read_communication_tables(out / "communication.json", 0)[0]["comm_ops"]
    assert ops.schema.equals(COMM_OPS) and "p2p" in ops["kind"].to_pylist()
    r = run_cli("cluster", FOUR, "--out", tmp_path, "--json")
    data = json.loads(r.stdout)
    assert {x["transport"] for x in data["links"]} == {"LOCAL", "HCCS"}
    # the links' totals are the matrix's "-total@" rows, recomputed here with the json module
    raw_mb = raw_ms = 0.0
    for rank_dir in sorted(FOUR.glob("rank_*_ascend_pt")):
        matrix = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
        for kinds in matrix.values():
            for ops_ in kinds.values():
                for group, pairs in ops_.items():
                    if "-total@" in group:
                        for info in pairs.values():
                            if info["Transport Type"] == "HCCS":
                                raw_mb += info["Transit Size(MB)"]
                                raw_ms += info["Transit Time(ms)"]
    hccs = next(x for x in data["links"] if x["transport"] == "HCCS")
    assert hccs["bytes"] == pytest.approx(raw_mb * 1e6, rel=1e-6) and hccs["time_us"] == pytest.approx(raw_ms * 1e3, rel=1e-6)
    skew = data["wait_skew"][0]
    assert skew["skew_us"] == skew["max_wait_us"] - skew["min_wait_us"] > 0 and skew["late_rank"] in range(4)


def test_bad_communication_json_is_one_line(tmp_path: Path) -> None:
    from npudiag.errors import InputError
    from npudiag.profiling.formats.communication import read_matrix

    p = tmp_path / "communication_matrix.json"
    p.write_text('{"step1": {"p2p": {"g": {"0-1": {"Transit Size(MB)": "big"}}}}}')
    with pytest.raises(InputError, match="expected a number"):
        read_matrix(p, 0)
    p.write_text('{"step1": ')
    with pytest.raises(InputError, match="not valid JSON"):
        read_matrix(p, 0)


def test_many_ranks_write_hive_partitioned_datasets(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.dataset as ds

    from npudiag.store import load_outputs

    root = tmp_path / "ranks"
    for rank in range(4):
        write_torch_profile(root, kernels=600, seed=4, steps=3, rank=rank, copies=2, variation=Variation(rank, 0.01), repeat_steps=True)
    out = tmp_path / "out"
    r = run_cli("analyze", root, "--out", out, "--quiet", "--json")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (out / "kernels").iterdir()) == ["rank=0", "rank=1", "rank=2", "rank=3"]
    assert (out / "kernels" / "rank=2" / "part-0.parquet").is_file() and (out / "hot_ops.parquet").is_file()
    part = ds.partitioning(pa.schema([("rank", pa.int32())]), flavor="hive")
    d = ds.dataset(out / "kernels", format="parquet", partitioning=part)
    pruned = d.to_table(filter=ds.field("rank") == 2)
    assert pruned.num_rows == 600 and set(pruned["rank"].to_pylist()) == {2}
    tables, manifest = load_outputs(out)
    assert tables["kernels"].num_rows == 2400 and tables["kernels"].column_names[:3] == ["source", "rank", "device_id"]
    assert "hive" in manifest["layout"]
    shown = run_cli("report", out, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["profile"]["ranks"] == 4
    again, first = json.loads(shown.stdout), json.loads(r.stdout)
    for key in ("profile", "per_rank", "task_types", "hot_ops", "copies", "steps", "step_breakdown", "findings", "rules_skipped"):
        assert again[key] == first[key], key  # report, rank by rank, rebuilds analyze's summary exactly
    single = run_cli("analyze", root, "--out", tmp_path / "serial", "--quiet", "--json", env={"NPUDIAG_WORKERS": "1"})
    assert json.loads(single.stdout)["profile"] == json.loads(r.stdout)["profile"]  # the process pool changes nothing


def test_cluster_table_agrees_with_msprof_analyze_on_the_same_ranks(tmp_path: Path) -> None:
    """msprof-analyze 26.2.0 was run on the same 4 real ranks (tests/fixtures/msprof_analyze/SOURCES.md):
    same header (Preparing, DP/PP/TP Index from profiler_metadata.json), same rank rows, same stage rows."""
    if not FOUR.is_dir():
        pytest.skip(f"4-rank corpus not present at {FOUR} (only in the project workspace)")
    with (Path(__file__).parent / "fixtures" / "msprof_analyze" / "4rank_cluster_step_trace_time.csv").open() as fh:
        theirs = list(csv.reader(fh))
    r = run_cli("cluster", FOUR, "--out", tmp_path / "c", "--json")
    assert r.returncode == 0, r.stderr
    with (tmp_path / "c" / "cluster_step_trace_time.csv").open() as fh:
        ours = list(csv.reader(fh))
    assert ours[0] == theirs[0]

    def keyed(rows: list[list[str]]) -> dict[tuple[str, str, str], list[str]]:
        return {(row[0], row[1], row[2]): row[3:] for row in rows[1:]}

    mine, peer = keyed(ours), keyed(theirs)
    assert mine.keys() == peer.keys() and len(peer) == 6  # 4 rank rows, 2 stage rows
    for key, values in peer.items():
        for col, (a, b) in enumerate(zip(mine[key], values)):
            assert (float(a) == float(b)) if b != "NA" else a == "NA", (key, theirs[0][col + 3], a, b)
    steps = pq.read_table(tmp_path / "c" / "cluster_steps.parquet").sort_by("rank")
    assert steps["pp_index"].to_pylist() == [0, 0, 1, 1] and steps["dp_index"].to_pylist() == [0, 1, 0, 1]


def test_parallel_indices_follow_megatron_order() -> None:
    from npudiag.profiling.analysis.cluster import parallel_indices

    idx = parallel_indices({"world_size": 8, "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2, "data_parallel_size": 2})
    assert idx == {0: (0, 0, 0), 1: (0, 0, 1), 2: (1, 0, 0), 3: (1, 0, 1), 4: (0, 1, 0), 5: (0, 1, 1), 6: (1, 1, 0), 7: (1, 1, 1)}
    assert parallel_indices({"world_size": 6, "tensor_model_parallel_size": 4}) is None  # world != TP x PP x DP
    assert parallel_indices({"world_size": "4"}) is None and parallel_indices(None) is None


def test_a_rank_with_a_bad_file_is_named_and_the_others_land(tmp_path: Path) -> None:
    root = tmp_path / "ranks"
    for rank in range(4):
        write_torch_profile(root, kernels=500, seed=4, steps=3, rank=rank, copies=2, variation=Variation(rank, 0.01), repeat_steps=True)
    bad = next(p for p in sorted(root.glob("*_ascend_pt")) if (p / "profiler_info_2.json").is_file())
    bad_csv = bad / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    bad_csv.write_bytes(b"\x00\x01\xff\xfe garbage \x00" * 50)
    (bad / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text('{"traceEvents": [')  # no fallback source either
    out = tmp_path / "out"
    r = run_cli("analyze", root, "--out", out, "--quiet", "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert [ln for ln in r.stderr.splitlines() if str(bad_csv) in ln]
    assert sorted(p.name for p in (out / "kernels").iterdir()) == ["rank=0", "rank=1", "rank=3"]
    summary = json.loads(r.stdout)
    assert [p["rank"] for p in summary["per_rank"]] == [0, 1, 3] and summary["profile"]["kernels"] == 1500


def test_a_steps_window_applies_on_every_rank(tmp_path: Path) -> None:
    root = tmp_path / "ranks"
    for rank in range(3):
        write_torch_profile(root, kernels=400, seed=4, steps=3, rank=rank, copies=0, variation=Variation(rank, 0.01), repeat_steps=True)
    r = run_cli("analyze", root, "--out", tmp_path / "o", "--quiet", "--json", "--steps", "1:2")
    assert r.returncode == 0, r.stderr
    assert {row["step"] for row in json.loads(r.stdout)["step_breakdown"] if row["step"] is not None} == {1, 2}


def test_rank_by_rank_summary_equals_the_whole_profile_summary(tmp_path: Path) -> None:
    """SummaryParts.combine over per-rank parts gives what build_summary gives over all ranks at once."""
    import pyarrow.compute as pc

    from npudiag.profiling.analysis.hot_ops import hot_ops_table, merge_hot_ops
    from npudiag.profiling.analysis.summary import SummaryParts, summary_from_parts
    from npudiag.profiling.derive import derive
    from npudiag.profiling.ingest import ingest

    from .helpers import build_summary

    root = tmp_path / "ranks"
    for rank in range(3):
        write_torch_profile(root, kernels=700, seed=rank, steps=3, rank=rank, copies=4, variation=Variation(rank, 0.05), repeat_steps=True)
    whole, _ = derive(ingest([root], hash_inputs=False).tables)
    parts = []
    for rank in range(3):
        one = {n: t.filter(pc.equal(t["rank"], rank)) if "rank" in t.column_names else t for n, t in whole.items()}
        one["hot_ops"] = hot_ops_table(one["kernels"])
        one["findings"] = whole["findings"].filter(pc.equal(whole["findings"]["rank"], rank))
        parts.append(SummaryParts.of(one))
    merged = SummaryParts.combine(parts)
    merged.findings = whole["findings"]  # rank-less (profile-wide) findings are the parent's
    got, want = summary_from_parts(merged), build_summary(whole)
    for key in ("profile", "per_rank", "task_types", "hot_ops", "copies", "steps", "step_breakdown", "findings"):
        _close(got[key], want[key], key)
    assert merge_hot_ops([hot_ops_table(whole["kernels"])]).equals(hot_ops_table(whole["kernels"]))


def _close(a, b, where: str) -> None:
    """Equal, floats to 1e-9 relative (sums over ranks add in another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-6), where
    else:
        assert a == b, where


def test_merging_many_ranks_is_repeatable() -> None:
    """The merged hot ops of many ranks are the same to the last bit on every run (threaded
    group-by summed in arbitrary order before), so every backend writes the same hot_ops.parquet."""
    import io

    import numpy as np
    import pyarrow as pa

    from npudiag.profiling.analysis.hot_ops import hot_ops_table, merge_hot_ops

    rng = np.random.default_rng(7)
    parts = []
    for rank in range(200):
        n = 3000
        ops = rng.choice([f"Op{i}" for i in range(40)], n)
        k = pa.table(
            {
                "op_name": pa.array(ops), "op_type": pa.array(ops), "task_type": pa.array(["AI_CORE"] * n),
                "rank": pa.array([rank] * n, pa.int32()), "duration_us": pa.array(rng.random(n) * 100.0),
            }
        )  # fmt: skip
        parts.append(hot_ops_table(k))

    def encoded() -> bytes:
        buf = io.BytesIO()
        pq.write_table(merge_hot_ops(parts), buf)
        return buf.getvalue()

    first = encoded()
    assert all(encoded() == first for _ in range(5))


# -- pipeline stages ----------------------------------------------------------------------------------


def _stage_computing(root: Path, stages: dict[int, int]) -> dict[int, dict[int, float]]:
    """{step: {stage: mean Computing of its ranks}}, straight from each rank's step_trace_time.csv."""
    acc: dict[int, dict[int, list[float]]] = {}
    for f in sorted(root.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")):
        rank = int(json.loads((f.parent.parent / "profiler_metadata.json").read_text())["distributed_args"]["rank"])
        for row in csv.DictReader(f.open()):
            acc.setdefault(int(row["Step"]), {}).setdefault(stages[rank], []).append(float(row["Computing"]))
    return {s: {k: sum(v) / len(v) for k, v in by.items()} for s, by in acc.items()}


def test_stage_imbalance_of_the_real_four_ranks_and_msprof_analyze_parity(tmp_path: Path) -> None:
    """TP=1 PP=2 DP=2: ranks 0,1 are stage 0 and ranks 2,3 stage 1. No rank is slow end to end (every
    stage is 810 ms), but stage 1 computes 170 ms more: msprof-analyze's slow rank analysis says
    "Computing ... the max difference of Computing time has reached 170.228ms"."""
    if not FOUR.is_dir():
        pytest.skip(f"4-rank corpus not present at {FOUR} (only in the project workspace)")
    r = run_cli("cluster", FOUR, "--out", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    comp = _stage_computing(FOUR, {0: 0, 1: 0, 2: 1, 3: 1})[13]
    imb = s["stage_imbalance"]
    assert imb["imbalanced"] and imb["slowest_stage"] == 1 and imb["fastest_stage"] == 0
    assert imb["gap_us"] == pytest.approx(comp[1] - comp[0], abs=1e-6)
    assert imb["time_lost_us"] == pytest.approx(comp[1] - (comp[0] + comp[1]) / 2, abs=1e-6)
    stage_us = [float(next(csv.DictReader(f.open()))["Stage"]) for f in FOUR.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")]
    assert imb["share"] == pytest.approx((comp[1] - comp[0]) / (sum(stage_us) / 4), rel=1e-9)
    assert [st["ranks"] for st in imb["stages"]] == [[0, 1], [2, 3]]
    # msprof-analyze's own check, over every (step, rank): max - min of each phase / mean of their sum
    rows = [next(csv.DictReader(f.open())) for f in sorted(FOUR.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))]
    mean_total = sum(float(x["Computing"]) + float(x["Communication(Not Overlapped)"]) + float(x["Free"]) for x in rows) / 4
    gaps = {g["phase"]: g for g in s["phase_gaps"]}
    computing = [float(x["Computing"]) for x in rows]
    assert round(gaps["Computing"]["gap_us"] / 1000, 3) == 170.228 == round((max(computing) - min(computing)) / 1000, 3)
    assert gaps["Computing"]["share"] == pytest.approx((max(computing) - min(computing)) / mean_total)
    assert gaps["Computing"]["flagged"] and gaps["Communication"]["flagged"] and not gaps["Free"]["flagged"]
    t = pq.read_table(tmp_path / "cluster_stages.parquet")
    assert t.num_rows == 2 and t.schema.equals(CLUSTER_STAGES)
    text = run_cli("cluster", FOUR, "--out", tmp_path / "t", env={"COLUMNS": "80"}).stdout
    assert "Stage imbalance: stage 1 computes 169.69ms more per step than stage 0" in text


@pytest.mark.parametrize("planted", [1.6, None])
def test_planted_stage_imbalance_is_found_and_a_balanced_pipeline_is_not(tmp_path: Path, planted: float | None) -> None:
    """4 ranks, PP=2: the stage-1 ranks run MatMulV3 `planted` times slower; the gap and the time lost
    equal what the ranks' own step_trace_time.csv files give, and the gap is what was planted."""
    dist = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 2, "data_parallel_size": 2, "world_size": 4}
    for rank in range(4):
        scale = {"MatMulV3": planted} if planted and rank >= 2 else {}
        write_torch_profile(tmp_path / "job", kernels=800, seed=4, steps=4, rank=rank, copies=0, repeat_steps=True,
                            variation=Variation(0, 0.0, scale), distributed_args=dist)  # fmt: skip
    (tmp_path / "job" / "ground_truth.json").unlink()
    r = run_cli("cluster", tmp_path / "job", "--out", tmp_path / "out", "--json")
    assert r.returncode == 0, r.stderr
    imb = json.loads(r.stdout)["stage_imbalance"]
    comp = _stage_computing(tmp_path / "job", {0: 0, 1: 0, 2: 1, 3: 1})
    gaps = [by[1] - by[0] for by in comp.values()]
    assert imb["gap_us"] == pytest.approx(sum(gaps) / len(gaps), rel=1e-9)
    if planted is None:
        assert not imb["imbalanced"] and imb["gap_us"] == 0 and imb["time_lost_us"] == 0
        return
    # what was planted: (planted - 1) x the MatMulV3 time of a stage-0 rank, per step (kernel_details.csv)
    kd = next((tmp_path / "job").glob("*_2647914_*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    per_step: dict[int, float] = {}
    for row in csv.DictReader(kd.open()):
        if row["Type"] == "MatMulV3":
            per_step[int(row["Step Id"])] = per_step.get(int(row["Step Id"]), 0.0) + float(row["Duration(us)"])
    expected = (planted - 1) * sum(per_step.values()) / len(per_step)
    assert imb["imbalanced"] and imb["slowest_stage"] == 1
    assert imb["gap_us"] == pytest.approx(expected, rel=0.05)
    assert imb["time_lost_us"] == pytest.approx(sum(g / 2 for g in gaps), rel=1e-9)
    assert imb["time_lost_us"] == pytest.approx(expected / 2 * len(per_step), rel=0.05)


def test_comm_waits_name_the_late_rank_and_what_it_did() -> None:
    """Three ranks enter one all-reduce at 100, 150 and 400 us; rank 2, the last, ran kernels
    120-200 and 250-300 meanwhile: 130 us busy, 170 us idle of the 300 us the others waited."""
    import pyarrow as pa

    from npudiag import schemas
    from npudiag.profiling.analysis.cluster import comm_waits, late_ranks

    ops = pa.table({"rank": pa.array([0, 1, 2], pa.int32()), "step": ["step1"] * 3, "kind": ["collective"] * 3,
                    "op_name": ["hcom_allReduce__1"] * 3, "start_us": [100.0, 150.0, 400.0]})  # fmt: skip
    ops = schemas.conform(ops, schemas.TABLES["comm_ops"])
    kernels = pa.table({"rank": pa.array([2, 2, 1], pa.int32()), "start_us": [120.0, 250.0, 100.0], "duration_us": [80.0, 50.0, 400.0]})
    w = comm_waits(ops, lambda ranks: kernels.filter(pa.compute.is_in(kernels["rank"], pa.array(ranks, pa.int32()))))
    rows = {r["rank"]: r for r in w.to_pylist()}
    assert [rows[r]["wait_us"] for r in (0, 1, 2)] == [300.0, 250.0, 0.0]
    assert {r["late_rank"] for r in rows.values()} == {2} and rows[0]["late_by_us"] == 300.0
    assert rows[0]["late_busy_us"] == 130.0 and rows[0]["late_comm_us"] == 0.0 and rows[0]["late_idle_us"] == 170.0
    (top,) = late_ranks(w)
    assert top["late_rank"] == 2 and top["ranks_waiting"] == 2 and top["late_by_us"] == 300.0
    # its host meanwhile: idle 100-120 (nothing), 200-250 in aten::nonzero (a sync holding the whole gap),
    # 300-400 in aten::add (which launched nothing: no cause)
    host_ops = schemas.conform(pa.table({"rank": pa.array([2, 2], pa.int32()), "name": ["aten::nonzero", "aten::add"],
                                         "start_us": [195.0, 290.0], "duration_us": [60.0, 115.0]}), schemas.HOST_OPS)  # fmt: skip
    api = schemas.empty("api_calls")
    w = comm_waits(ops, lambda ranks: kernels.filter(pa.compute.is_in(kernels["rank"], pa.array(ranks, pa.int32()))),
                   lambda ranks: (api, host_ops))  # fmt: skip
    late = next(r for r in w.to_pylist() if r["rank"] == 0)
    assert (late["late_host_cause"], late["late_host_kind"]) == ("aten::nonzero", "sync")
    (top,) = late_ranks(w)
    assert top["late_host_cause"] == "aten::nonzero"


def test_a_late_rank_without_kernel_data_gets_no_device_numbers_and_collectives_are_not_compute() -> None:
    """Ranks 0 and 1 enter at 100 and 400 us. Rank 1 late: a compute kernel 120-200 and its previous
    all-reduce 150-350 (communication): 80 us computed, 150 us communicated, 70 us idle. With no kernel
    rows for rank 1: no device numbers, and the report says there is no kernel data."""
    import pyarrow as pa
    from rich.console import Console

    from npudiag import schemas
    from npudiag.profiling.analysis.cluster import comm_waits, late_ranks
    from npudiag.report.cluster_report import render_comm_terminal

    ops = pa.table({"rank": pa.array([0, 1], pa.int32()), "step": ["step1"] * 2, "kind": ["collective"] * 2,
                    "op_name": ["hcom_allReduce__2"] * 2, "start_us": [100.0, 400.0]})  # fmt: skip
    ops = schemas.conform(ops, schemas.TABLES["comm_ops"])
    kernels = pa.table({"rank": pa.array([1, 1], pa.int32()), "start_us": [120.0, 150.0], "duration_us": [80.0, 200.0],
                        "task_class": ["compute", "communication"]})  # fmt: skip
    (late,) = [r for r in comm_waits(ops, lambda ranks: kernels).to_pylist() if r["rank"] == 0]
    assert (late["late_busy_us"], late["late_comm_us"], late["late_idle_us"]) == (80.0, 150.0, 70.0)
    w = comm_waits(ops, lambda ranks: kernels.slice(0, 0))
    (late,) = [r for r in w.to_pylist() if r["rank"] == 0]
    assert late["late_busy_us"] is None and late["late_comm_us"] is None and late["late_idle_us"] is None
    console = Console(width=100, record=True)
    summary = {"links": [], "slow_links": [], "late_ranks": late_ranks(w), "wait_skew": []}
    render_comm_terminal(summary, console)
    text = " ".join(console.export_text().split())
    assert "no kernel data for rank 1" in text and "ran no kernel" not in text and "idle" not in text


def _entries(run: Path) -> dict:
    """(step, op) -> {rank: start us}, from each rank's communication.json with the json module."""
    starts: dict = {}
    for f in run.rglob("communication.json"):
        rank = int(re.search(r"rank_(\d+)_", str(f)).group(1))
        for step, kinds in json.loads(f.read_text()).items():
            for ops in kinds.values():
                for op, info in ops.items():
                    t = info.get("Communication Time Info", {}).get("Start Timestamp(us)")
                    if op != "Total Op Info" and t is not None:
                        starts.setdefault((step, op), {})[rank] = float(t)
    return starts


def test_late_ranks_match_the_raw_communication_json(corpus: Path, tmp_path: Path) -> None:
    """On the corpus 4-rank run: per collective seen on two ranks or more, the rank that entered last
    and by how much, recomputed from each rank's communication.json with the json module."""
    run = corpus / "msinsight-st-cann83rc1-level2-4rank"
    starts = _entries(run)
    want = {k: (max(v, key=lambda r: (v[r], r)), max(v.values()) - min(v.values())) for k, v in starts.items() if len(v) >= 2}
    c = npudiag.cluster(run, tmp_path / "c")
    got = {(r["step"], r["op_name"]): (r["late_rank"], r["late_by_us"]) for r in c.tables["cluster_comm_waits"].to_pylist()}
    assert set(got) == set(want) and len(want) > 10
    for k, (rank, by) in want.items():
        assert got[k][0] == rank and got[k][1] == pytest.approx(by), k
    assert c.summary["late_ranks"][0]["late_by_us"] == pytest.approx(max(by for _, by in want.values()))


def test_late_ranks_are_a_track_of_the_chrome_trace(corpus: Path, tmp_path: Path) -> None:
    """analyze --chrome-trace of the corpus 4-rank run: one "late rank" mark per collective some rank
    waited 1 ms or more for, on the rank that came last, as long as the wait: recomputed from each
    rank's communication.json with the json module."""
    run = corpus / "msinsight-st-cann83rc1-level2-4rank"
    starts = _entries(run)
    want = sorted((max(v, key=lambda r: (v[r], r)), max(v.values()) - min(v.values()), op) for (_, op), v in starts.items()
                  if len(v) >= 2 and max(v.values()) - min(v.values()) >= 1000.0)  # fmt: skip
    trace = tmp_path / "t.json"
    r = run_cli("analyze", run, "--out", tmp_path / "o", "--chrome-trace", trace, "-q")
    assert r.returncode == 0, r.stderr
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    track = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("late rank ")]
    got = sorted((e["args"]["rank"], e["dur"], e["args"]["cause"].split(" in ")[0]) for e in track)
    assert len(got) == len(want) == 17
    for (gr, gd, gop), (wr, wd, wop) in zip(got, want):
        assert (gr, gop) == (wr, wop) and gd == pytest.approx(wd)
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert "late rank" in names


def test_a_cluster_out_folder_is_viewed_again(tmp_path: Path) -> None:
    """`report OUT` of a cluster out folder printed "ranks 0 · No device kernels found" with exit 0, and
    `cluster OUT` exited 2: both now read its rank tables; `cluster OUT --out OUT` shows the view
    without writing over the tables it reads."""
    for rank in range(2):
        write_torch_profile(tmp_path / "c" / f"r{rank}", kernels=200, steps=2, copies=0, seed=rank, rank=rank)
    out = tmp_path / "o"
    first = run_cli("cluster", tmp_path / "c", "--out", out, "--json")
    assert first.returncode == 0, first.stderr
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    again = run_cli("cluster", out, "--out", out, "--json")
    assert again.returncode == 0, again.stderr
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before
    mine, theirs = json.loads(first.stdout), json.loads(again.stdout)
    assert mine["rank_matrix"] == theirs["rank_matrix"] and mine["ranks"] == theirs["ranks"] == 2
    elsewhere = run_cli("cluster", out, "--out", tmp_path / "o2", "--json")
    assert elsewhere.returncode == 0 and json.loads(elsewhere.stdout)["rank_matrix"] == mine["rank_matrix"], elsewhere.stderr
    rep = run_cli("report", out, "--json")
    assert rep.returncode == 0, rep.stderr
    kernels = sum(1 for r in range(2) for _ in csv.DictReader(next((tmp_path / "c" / f"r{r}").rglob("kernel_details.csv")).open()))
    assert json.loads(rep.stdout)["profile"]["kernels"] == kernels
    plog = tmp_path / "plog" / "plog-1_20250101000000000.log"
    plog.parent.mkdir()
    plog.write_text("[ERROR] RUNTIME(1,p):2025-01-01-00:00:00.000.000 [a.cc:1]1 x: failed\n")
    assert run_cli("logs", "parse", plog.parent, "--out", tmp_path / "lg", "-q").returncode == 0
    r = run_cli("report", tmp_path / "lg")  # an out folder of another kind is named as such
    assert r.returncode == 2 and "'logs parse' out folder" in r.stderr, r.stderr


def test_cluster_says_where_its_phases_come_from_and_where_analyze_differs(tmp_path: Path) -> None:
    """Free of the same rank and step read 29.36 ms in analyze and 25.91 ms in cluster (torch_npu's
    step_trace_time.csv, unsaid); the view now names the source in the glossary's words and gives
    analyze's figures beside the profiler's."""
    level1 = CORPUS / "msinsight-pytorch-text-2025" / "level1"
    if not level1.is_dir():
        pytest.skip(f"corpus not present at {level1}")
    r = run_cli("cluster", level1, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    src = json.loads(r.stdout)["phase_sources"]
    (trace_csv,) = level1.rglob("step_trace_time.csv")
    row = next(csv.DictReader(trace_csv.open()))
    assert src["step_trace"] == [0] and src["kernels"] == []
    (d,) = src["differs"]
    assert d["free_us"] == float(row["Free"]) and d["stage_us"] == float(row["Stage"])
    a = run_cli("analyze", level1, "--out", tmp_path / "a", "--json")
    (step,) = json.loads(a.stdout)["steps"]
    assert d["kernels_free_us"] == pytest.approx(step["free_us"] + step["copy_not_overlapped_us"])
    text = run_cli("cluster", level1, "--out", tmp_path / "o", "--force", env={"COLUMNS": "200"}).stdout
    assert "Phases from the profiler's step_trace_time.csv for rank 0" in text and "analyze counts free" in text
    assert "task span" in text and " stage " not in text.split("Phases")[0]


def test_one_late_rank_in_the_summary_and_the_table_and_an_unprofiled_peer_is_said() -> None:
    """A 2-rank .db shape: rank 1 enters 3.498 ms after rank 0, and both then wait ~85 ms (for a rank
    not profiled), so rank 0's recorded wait is the smaller one. The late rank is the one that entered
    last (rank 1) in the table and in the summary, and the table says every profiled rank waited."""
    import pyarrow as pa
    from rich.console import Console

    from npudiag import schemas
    from npudiag.profiling.analysis.cluster import comm_waits, late_ranks, wait_skew
    from npudiag.report.cluster_report import render_comm_terminal

    ops = pa.table({"rank": pa.array([0, 1], pa.int32()), "step": ["step1"] * 2, "kind": ["collective"] * 2,
                    "op_name": ["hcom_allReduce__9"] * 2, "start_us": [1000.0, 4498.0], "wait_us": [85100.0, 88600.0]})  # fmt: skip
    ops = schemas.conform(ops, schemas.TABLES["comm_ops"])
    (skew,) = wait_skew(ops)
    (top,) = late_ranks(comm_waits(ops))
    assert skew["late_rank"] == top["late_rank"] == 1 and skew["peer_not_profiled"] and skew["late_wait_us"] == 88600.0
    console = Console(width=100, record=True)
    render_comm_terminal({"links": [], "slow_links": [], "late_ranks": [], "wait_skew": [skew]}, console)
    assert "every profiled rank waited, on a rank not in the data" in " ".join(console.export_text().split())


def test_cluster_markdown_is_the_raw_step_trace_figures(tmp_path: Path) -> None:
    """`cluster --format markdown` prints what `--markdown FILE` writes: each rank's computing and task span
    (Stage) are its own step_trace_time.csv's, read with the csv module."""
    if not FOUR.is_dir():
        pytest.skip(f"4-rank corpus not present at {FOUR} (only in the project workspace)")
    r = run_cli("cluster", FOUR, "--out", tmp_path / "o", "--format", "markdown", "--markdown", tmp_path / "c.md")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "c.md").read_text(encoding="utf-8")
    assert r.stdout == md and md.startswith("## npudiag cluster — 4 ranks")
    lines = md.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("### Ranks"))
    rows = {int(c[0]): c for c in ([x.strip() for x in line.strip("|").split("|")] for line in lines[at + 4 : at + 8])}
    assert sorted(rows) == [0, 1, 2, 3]

    def ms(cell: str) -> float:
        value = cell.split()[0]
        scale = {"ms": 1.0, "µs": 1e-3}[next(u for u in ("ms", "µs") if value.endswith(u))]
        return float(value[:-2].replace(",", "")) * scale

    for rank in range(4):
        steps = list(csv.DictReader((FOUR / f"rank_{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open()))
        for col, idx in (("Computing", 1), ("Stage", 5)):
            mean_us = sum(float(s[col]) for s in steps) / len(steps)
            assert ms(rows[rank][idx]) == pytest.approx(mean_us / 1000, abs=0.01), (rank, col)
    assert "No slow rank" in md
