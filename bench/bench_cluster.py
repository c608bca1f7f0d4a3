"""Many ranks: one process vs the local process pool (vs Dask), peak memory, and DuckDB over the dataset.

python bench/bench_cluster.py --ranks 256 --kernels 50000 [--root DIR] [--dask] [--skip-single]

Rank 137 (or the middle rank when fewer) has MatMulV3 made 25 % slower, so the slow-rank queries
have something to find. Memory is sampled every 0.2 s over the npudiag process and all of its
descendants (pool workers fork from a server process, so getrusage would not see them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil  # comes with the 'distributed' extra

from npudiag.testing.generate import Variation, write_torch_profile

DATA = Path(__file__).resolve().parent / "data" / "cluster"

SLOW_KERNELS_SQL = """
WITH per AS (
  SELECT rank, step, sum(duration_us) AS kernel_us
  FROM read_parquet('{out}/kernels/*/*.parquet', hive_partitioning = true, union_by_name = true)
  WHERE step IS NOT NULL GROUP BY rank, step),
med AS (SELECT step, median(kernel_us) AS median_us FROM per GROUP BY step)
SELECT rank, count(*) AS slow_steps, avg(kernel_us / median_us - 1) * 100 AS excess_pct
FROM per JOIN med USING (step) WHERE kernel_us > 1.05 * median_us
GROUP BY rank ORDER BY excess_pct DESC
"""
SLOW_STEPS_SQL = """
WITH s AS (
  SELECT rank, step, step_time_us
  FROM read_parquet('{out}/step_breakdown/*/*.parquet', hive_partitioning = true) WHERE step IS NOT NULL),
m AS (SELECT step, median(step_time_us) AS median_us FROM s GROUP BY step)
SELECT rank, count(*) AS slow_steps FROM s JOIN m USING (step)
WHERE step_time_us > 1.05 * median_us GROUP BY rank ORDER BY slow_steps DESC
"""


def _measure(args: list[str], env: dict[str, str]) -> tuple[float, dict[str, float]]:
    t = time.perf_counter()
    proc = psutil.Popen([sys.executable, "-m", "npudiag", *args], env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    peak = {"parent": 0, "largest_child": 0, "total": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                kids = proc.children(recursive=True)
                me = proc.memory_info().rss
                rss = []
                for k in kids:
                    with contextlib.suppress(psutil.Error):
                        rss.append(k.memory_info().rss)
                peak["parent"] = max(peak["parent"], me)
                peak["largest_child"] = max([peak["largest_child"], *rss])
                peak["total"] = max(peak["total"], me + sum(rss))
            except psutil.Error:
                pass
            done.wait(0.2)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    code = proc.wait()
    done.set()
    th.join()
    if code not in (0,):
        raise SystemExit(f"npudiag {' '.join(args)} exited {code}")
    return time.perf_counter() - t, {k: v / 2**20 for k, v in peak.items()}


def _generate(root: Path, ranks: int, kernels: int) -> None:
    slow = 137 if ranks > 137 else ranks // 2
    for rank in range(ranks):
        if (root / f"rank_{rank}_ascend_pt").is_dir():
            continue
        scale = {"MatMulV3": 1.25} if rank == slow else {}
        write_torch_profile(
            root, kernels=kernels, seed=4, steps=10, rank=rank, copies=10, variation=Variation(rank, 0.02, scale), repeat_steps=True
        )


def _duckdb(out: Path) -> None:
    try:
        import duckdb
    except ImportError:
        print("duckdb not installed (pip install duckdb) - query timing skipped")
        return
    con = duckdb.connect()
    for label, sql in (("kernels (every row)", SLOW_KERNELS_SQL), ("step_breakdown", SLOW_STEPS_SQL)):
        q = sql.format(out=out)
        con.execute(q).fetchall()  # first run: file metadata into the OS cache
        times = []
        for _ in range(3):
            t = time.perf_counter()
            rows = con.execute(q).fetchall()
            times.append(time.perf_counter() - t)
        print(f"duckdb slow-rank query over {label}: best {min(times):.3f} s of 3; top rows {rows[:3]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--kernels", type=int, default=50_000)
    ap.add_argument("--root", type=Path, default=None, help="where the generated ranks live [bench/data/cluster/RxK]")
    ap.add_argument("--dask", action="store_true", help="also time --dask (a local Dask cluster)")
    ap.add_argument("--skip-single", action="store_true", help="skip the one-process run")
    a = ap.parse_args()
    root = a.root or DATA / f"{a.ranks}x{a.kernels}"
    t = time.perf_counter()
    _generate(root, a.ranks, a.kernels)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(f"{a.ranks} ranks x {a.kernels:,} kernels: {size / 2**30:.1f} GiB of input (ready in {time.perf_counter() - t:.0f} s)")
    out = root.parent / f"{root.name}-out"
    runs = [] if a.skip_single else [("one process", {"NPUDIAG_WORKERS": "1"}, [])]
    runs.append((f"process pool ({os.cpu_count()} cores)", {}, []))
    if a.dask:
        runs.append(("dask LocalCluster", {}, ["--dask"]))
    for label, env, extra in runs:
        secs, mem = _measure(["analyze", str(root), "--out", str(out), "--quiet", "--json", *extra], env)
        print(
            f"analyze, {label}: {secs:.1f} s ({secs / a.ranks:.2f} s/rank); peak RSS parent {mem['parent']:.0f} MB, "
            f"largest worker {mem['largest_child']:.0f} MB, all processes {mem['total']:.0f} MB"
        )
    secs, mem = _measure(["cluster", str(out), "--out", str(out) + "-cluster", "--json"], {})
    print(f"cluster over the dataset: {secs:.1f} s, peak RSS {mem['total']:.0f} MB")
    _duckdb(out)


if __name__ == "__main__":
    main()
