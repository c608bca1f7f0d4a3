"""Per-rank work on a Dask distributed cluster (loopback LocalCluster, 2 worker processes) writes
the same dataset and gives the same cluster results as the local process pool."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from npudiag.testing.generate import Variation, write_torch_profile

from .helpers import run_cli

# Dask clusters started and stopped
pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed", reason="the 'distributed' extra is not installed: pip install '.[distributed]'")


@pytest.fixture(scope="module")
def scheduler():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ranks") / "job"
    for rank in range(6):
        scale = {"MatMulV3": 1.3} if rank == 4 else {}
        write_torch_profile(
            root, kernels=900, seed=4, steps=4, rank=rank, copies=3, variation=Variation(rank, 0.01, scale), repeat_steps=True
        )
    return root


def _parquet_files(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*.parquet"))}


def assert_same_tables(a: Path, b: Path) -> None:
    fa, fb = _parquet_files(a), _parquet_files(b)
    assert fa.keys() == fb.keys() and fa
    for rel in fa:
        ta, tb = pq.read_table(fa[rel]), pq.read_table(fb[rel])
        assert ta.schema.equals(tb.schema), rel
        assert ta.equals(tb), rel


def _manifest(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    m.pop("backend")
    return m


def test_analyze_on_dask_writes_the_local_dataset(tmp_path: Path, ranks: Path, scheduler: str) -> None:
    local = run_cli("analyze", ranks, "--out", tmp_path / "local", "--quiet", "--json", env={"NPUDIAG_WORKERS": "2"})
    assert local.returncode == 0, local.stderr
    remote = run_cli("analyze", ranks, "--out", tmp_path / "dask", "--quiet", "--json", "--scheduler", scheduler)
    assert remote.returncode == 0, remote.stderr
    assert json.loads((tmp_path / "dask" / "manifest.json").read_text())["backend"] == "dask"
    assert sorted(p.name for p in (tmp_path / "dask" / "kernels").iterdir()) == [f"rank={r}" for r in range(6)]
    assert_same_tables(tmp_path / "local", tmp_path / "dask")
    assert _manifest(tmp_path / "local") == _manifest(tmp_path / "dask")
    sl, sd = json.loads(local.stdout), json.loads(remote.stdout)
    sl.pop("out"), sd.pop("out")
    assert sl == sd and sl["profile"]["ranks"] == 6 and sl["profile"]["kernels"] == 6 * 900


def test_cluster_on_dask_gives_the_local_results(tmp_path: Path, ranks: Path, scheduler: str) -> None:
    local = run_cli("cluster", ranks, "--out", tmp_path / "local", "--json")
    assert local.returncode == 0, local.stderr
    remote = run_cli("cluster", ranks, "--out", tmp_path / "dask", "--json", "--scheduler", scheduler)
    assert remote.returncode == 0, remote.stderr
    assert_same_tables(tmp_path / "local", tmp_path / "dask")  # cluster_*.parquet and tables/ alike
    csv_l = (tmp_path / "local" / "cluster_step_trace_time.csv").read_text()
    assert csv_l == (tmp_path / "dask" / "cluster_step_trace_time.csv").read_text()
    jl, jd = json.loads(local.stdout), json.loads(remote.stdout)
    for j in (jl, jd):
        j.pop("out"), j.pop("tables")
    assert jl == jd
    assert {s["rank"] for s in jl["slow_ranks"]} == {4} and "MatMulV3" in jl["slow_ranks"][0]["slower_ops"]


def test_dask_flag_starts_its_own_local_cluster(tmp_path: Path, ranks: Path) -> None:
    r = run_cli("analyze", ranks, "--out", tmp_path / "own", "--quiet", "--json", "--dask", env={"NPUDIAG_WORKERS": "2"})
    assert r.returncode == 0, r.stderr
    single = run_cli("analyze", ranks, "--out", tmp_path / "one", "--quiet", "--json", env={"NPUDIAG_WORKERS": "1"})
    assert single.returncode == 0, single.stderr
    assert_same_tables(tmp_path / "own", tmp_path / "one")


def test_unreachable_scheduler_is_one_line(tmp_path: Path, ranks: Path) -> None:
    r = run_cli("analyze", ranks, "--out", tmp_path / "x", "--quiet", "--scheduler", "tcp://127.0.0.1:9")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "127.0.0.1:9" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob(".x.tmp-*"))
