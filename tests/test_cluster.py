"""npudiag cluster: per-rank step phases match the ranks' own step_trace files; slow ranks and their cause."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from npudiag.schemas import CLUSTER_STEPS, SLOW_RANKS
from npudiag.testing.generate import Variation, write_torch_profile

from .conftest import CORPUS
from .helpers import run_cli

FOUR = CORPUS / "msinsight-st-cann83rc1-level2-4rank"


def test_four_real_ranks_match_their_step_trace_files(tmp_path: Path) -> None:
    if not FOUR.is_dir():
        pytest.skip(f"4-rank corpus not present at {FOUR} (only in the project workspace)")
    r = run_cli("cluster", FOUR, "--out", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    ours = list(csv.reader((tmp_path / "cluster_step_trace_time.csv").open()))
    ref_header = (CORPUS / "mstt-cluster-analysis-output" / "cluster_step_trace_time.csv").open().readline().strip().split(",")
    assert ours[0] == ref_header  # msprof-analyze's cluster_step_trace_time.csv columns
    by_rank = {int(row[2]): row for row in ours[1:]}
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
    from npudiag.formats.communication import read_communication, read_matrix
    from npudiag.schemas import COMM_LINKS, COMM_OPS

    out = FOUR / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    links = read_matrix(out / "communication_matrix.json", 0)
    assert links.schema.equals(COMM_LINKS) and links.num_rows > 0
    first = next(r for r in links.to_pylist() if r["op_group"] == "batchsendrecv-top1@3985310405473756128" and r["transport"] == "HCCS")
    assert (first["src_rank"], first["dst_rank"], first["size_bytes"]) == (0, 1, 8388608)
    for r in links.to_pylist():  # the file's bandwidth is its size over its time (GB = 1e9 bytes)
        if r["time_us"] and r["size_bytes"]:
            assert r["bandwidth_gbps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e3), rel=0.01, abs=0.01)
    ops = read_communication(out / "communication.json", 0)
    assert ops.schema.equals(COMM_OPS) and "p2p" in ops["kind"].to_pylist()
    r = run_cli("cluster", FOUR, "--out", tmp_path, "--json")
    data = json.loads(r.stdout)
    assert {x["transport"] for x in data["links"]} == {"LOCAL", "HCCS"}
    skew = data["wait_skew"][0]
    assert skew["skew_us"] == skew["max_wait_us"] - skew["min_wait_us"] > 0 and skew["late_rank"] in range(4)


def test_bad_communication_json_is_one_line(tmp_path: Path) -> None:
    from npudiag.errors import InputError
    from npudiag.formats.communication import read_matrix

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
    """msprof-analyze 26.2.0 was run on the same 4 real ranks (tests/fixtures/msprof_analyze/SOURCES.md)."""
    if not FOUR.is_dir():
        pytest.skip(f"4-rank corpus not present at {FOUR} (only in the project workspace)")
    theirs = list(csv.DictReader((Path(__file__).parent / "fixtures" / "msprof_analyze" / "4rank_cluster_step_trace_time.csv").open()))
    r = run_cli("cluster", FOUR, "--out", tmp_path / "c", "--json")
    assert r.returncode == 0, r.stderr
    ours = {row["Index"]: row for row in csv.DictReader((tmp_path / "c" / "cluster_step_trace_time.csv").open())}
    rank_rows = [t for t in theirs if t["Type"] == "rank"]
    assert len(rank_rows) == len(ours) == 4
    for t in rank_rows:
        o = ours[t["Index"]]
        assert o["Step"] == t["Step"]
        for col in o:
            if col not in ("Step", "Type", "Index"):
                assert float(o[col]) == float(t[col]), (t["Index"], col)
