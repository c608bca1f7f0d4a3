"""Benchmark: ``npudiag analyze`` against pyarrow's own CSV read, and trace streaming memory.

    python bench/bench_analyze.py [--rows 1000000] [--trace-mb 500] [--repeat 3]

Writes its inputs under bench/data/ (git-ignored) with the project's generator, so the files are
in the real formats. Each timing is the best of ``--repeat`` runs of a fresh process, measured in
the same run on the same machine. Peak RSS is the child's ru_maxrss (os.wait4); CPU seconds are
its user + system time over all threads, printed beside the CPU seconds the 1.5x goal leaves on
this machine's cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from npudiag.testing.generate import KERNEL_DETAILS_HEADER, _kernel_rows, _plan, _trace_events, _write_trace

DATA = Path(__file__).resolve().parent / "data"


def _in_child(function: str, arg: int) -> None:
    """Run one of this module's generators in a child process. Linux carries a process's peak RSS
    over into the children it starts: a 3 GB parent made every child report >= 3 GB of ru_maxrss, so a
    large input generated in the bench's own process would set the floor of every peak it measures."""
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); import bench_analyze as b; b.{function}({arg})"
    subprocess.run([sys.executable, "-c", code], check=True)


def _csv_path(rows: int) -> Path:
    return DATA / f"kernels_{rows}" / "kernel_details.csv"


def _trace_path(target_mb: int) -> Path:
    return DATA / f"trace_{target_mb}mb" / "trace_view.json"


def make_csv(rows: int) -> Path:
    if not _csv_path(rows).exists():
        _in_child("_write_csv", rows)
    return _csv_path(rows)


def _write_csv(rows: int) -> None:
    path = _csv_path(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    kinds, start, dur, gaps, step = _plan(rows, 42, 10)
    with open(_partial(path), "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(KERNEL_DETAILS_HEADER)
        w.writerows(_kernel_rows(kinds, start, dur, gaps, step, True, 42))
    _partial(path).replace(path)


def make_trace(target_mb: int) -> Path:
    if not _trace_path(target_mb).exists():
        _in_child("_write_trace_file", target_mb)
    return _trace_path(target_mb)


def _write_trace_file(target_mb: int) -> None:
    path = _trace_path(target_mb)
    path.parent.mkdir(parents=True, exist_ok=True)
    kernels = max(1000, int(target_mb * 1e6 / 560))  # two events (~280 B each) per kernel
    kinds, start, dur, _, _ = _plan(kernels, 7, 1)
    events = _trace_events(start, dur, kinds, copies=2000, copy_bytes=1 << 20, copy_us=50.0, msprof_args=True)
    _write_trace(_partial(path), events)
    _partial(path).replace(path)


def _partial(path: Path) -> Path:
    """Where an input is written before it takes its name: a generation stopped half-way leaves no
    file that a later run would take for a whole input."""
    return path.with_name(path.name + ".partial")


CPU: dict[tuple[str, ...], float] = {}  # least CPU seconds (user + system, all threads) seen per command


def run_child(args: list[str]) -> tuple[float, int]:
    """Wall time and peak RSS (bytes) of one child process; its CPU seconds go to ``CPU``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    cpu = rusage.ru_utime + rusage.ru_stime
    CPU[tuple(args)] = min(cpu, CPU.get(tuple(args), cpu))
    return wall, rusage.ru_maxrss * 1024


def best(args: list[str], repeat: int) -> tuple[float, int]:
    runs = [run_child(args) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--trace-mb", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, help="a checkout of an earlier commit (git worktree add): its CSV analyze timed too")
    a = ap.parse_args()

    t0 = time.perf_counter()
    csv_path = make_csv(a.rows)
    trace_path = make_trace(a.trace_mb)
    print(f"inputs ready in {time.perf_counter() - t0:.1f}s")
    csv_mb = csv_path.stat().st_size / 1e6
    trace_mb = trace_path.stat().st_size / 1e6

    py = sys.executable
    pyarrow_read = [py, "-c", f"import pyarrow.csv as c; c.read_csv({str(csv_path)!r})"]
    # npudiag runs Arrow on the C library's allocator; pyarrow's own read is timed with both, and the
    # ratio is taken to the faster of the two
    pyarrow_read_sys = ["env", "ARROW_DEFAULT_MEMORY_POOL=system", *pyarrow_read]
    baseline = [py, "-c", "import pyarrow.csv"]
    with tempfile.TemporaryDirectory() as tmp:
        analyze_csv = [py, "-m", "npudiag", "analyze", str(csv_path), "--out", f"{tmp}/csv", "--quiet", "--json"]
        analyze_trace = [py, "-m", "npudiag", "analyze", str(trace_path), "--out", f"{tmp}/trace", "--quiet", "--json"]
        start_t, _ = best(baseline, a.repeat)
        read_t, read_rss = best(pyarrow_read, a.repeat)
        sys_t, sys_rss = best(pyarrow_read_sys, a.repeat)
        an_t, an_rss = best(analyze_csv, a.repeat)
        before = None
        if a.before is not None:
            before = best(["env", "-C", str(a.before), *analyze_csv[:-4], "--out", f"{tmp}/before", "--quiet", "--json"], a.repeat)
        tr_t, tr_rss = best(analyze_trace, 1)
    results = {
        "csv_rows": a.rows,
        "csv_mb": round(csv_mb, 1),
        "pyarrow_read_csv_s": round(read_t, 3),
        "pyarrow_read_csv_peak_rss_mb": round(read_rss / 1e6),
        "pyarrow_read_csv_system_allocator_s": round(sys_t, 3),
        "pyarrow_read_csv_system_allocator_peak_rss_mb": round(sys_rss / 1e6),
        "npudiag_analyze_csv_s": round(an_t, 3),
        "npudiag_analyze_csv_peak_rss_mb": round(an_rss / 1e6),
        "ratio_analyze_to_pyarrow": round(an_t / min(read_t, sys_t), 2),
        "ratio_rss_to_pyarrow": round(an_rss / min(read_rss, sys_rss), 2),
        # CPU seconds of all threads: divided by the cores, the least wall time that work can take here
        "pyarrow_read_csv_cpu_s": round(min(CPU[tuple(pyarrow_read)], CPU[tuple(pyarrow_read_sys)]), 2),
        "npudiag_analyze_csv_cpu_s": round(CPU[tuple(analyze_csv)], 2),
        "analyze_cpu_budget_at_goal_s": round(1.5 * min(read_t, sys_t) * (os.cpu_count() or 1), 2),
        **(
            {
                "before_analyze_csv_s": round(before[0], 3),
                "before_analyze_csv_peak_rss_mb": round(before[1] / 1e6),
                "before_ratio_to_pyarrow": round(before[0] / min(read_t, sys_t), 2),
            }
            if before
            else {}
        ),
        "python_start_import_pyarrow_s": round(start_t, 3),
        "trace_mb": round(trace_mb, 1),
        "npudiag_analyze_trace_s": round(tr_t, 2),
        "npudiag_analyze_trace_peak_rss_mb": round(tr_rss / 1e6),
        "trace_rss_to_file_size": round(tr_rss / (trace_mb * 1e6), 2),
        "cores": os.cpu_count(),
        "numpy": np.__version__,
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
