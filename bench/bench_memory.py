"""Benchmark: peak RSS of ``npudiag analyze --out`` on large inputs (issue 55's goal 1), against an older
checkout in the same rounds.

    python bench/bench_memory.py [--trace-mb 2000] [--rows 4000000] [--rounds 2] [--code OLDER_CHECKOUT]

The inputs are the generated msprof-style trace_view.json of ``--trace-mb`` MB and kernel_details.csv of
``--rows`` rows that bench_analyze.py / bench_ratios.py make (kept in bench/data). Each round runs, in
fresh processes, this checkout's analyze of each input and, with ``--code``, the older checkout's
(``PYTHONPATH``), the two in alternating order from round to round (the first run of a pair meets a
colder page cache). Peak RSS is the child's ru_maxrss (os.wait4). Prints per input the median peak,
its ratio to the input's size, and the median of the per-round ratios this / older, with the wall times.
Measure here, not in-process: a sampling thread in the measured process reported 3.0 - 3.3 GB for a
run whose ru_maxrss is 2.3 GB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import make_csv, make_trace, run_child  # noqa: E402


def _run(args: list[str], code: str | None) -> tuple[float, int]:
    saved = dict(os.environ)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # cached bytecode, as an installed npudiag
    if code:
        os.environ["PYTHONPATH"] = code
    try:
        return run_child(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-mb", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--code", help="an older checkout: its analyze measured in the same rounds")
    a = ap.parse_args()
    inputs = [make_trace(a.trace_mb), make_csv(a.rows)]
    print("| input | size | npudiag peak RSS | x input | time | older peak RSS | this / older (rounds) | older time |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for path in inputs:
            cmd = [sys.executable, "-m", "npudiag", "analyze", str(path), "--out", f"{tmp}/o", "--quiet", "--force"]
            mine, theirs = [], []
            for r in range(a.rounds):
                order = [None] if not a.code else [None, a.code] if r % 2 == 0 else [a.code, None]
                for code in order:
                    (theirs if code else mine).append(_run(cmd, code))
            size = path.stat().st_size
            peak = statistics.median(p for _, p in mine)
            wall = statistics.median(t for t, _ in mine)
            row = [path.name, f"{size / 1e6:,.0f} MB", f"{peak / 1e6:,.0f} MB", f"{peak / size:.2f}x", f"{wall:.1f} s"]
            if theirs:
                ratios = [m[1] / t[1] for m, t in zip(mine, theirs)]
                old = statistics.median(p for _, p in theirs)
                each = ", ".join(f"{x:.2f}" for x in ratios)
                old_wall = statistics.median(t for t, _ in theirs)
                row += [f"{old / 1e6:,.0f} MB", f"{statistics.median(ratios):.2f} ({each})", f"{old_wall:.1f} s"]
            else:
                row += ["", "", ""]
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
