"""Benchmark: reading trace JSON, as ratios to the standard library in the same run.

    python bench/bench_trace.py [--mb 100 500 2000] [--repeat 1]

For each size, a generated msprof-style trace_view.json (bench_analyze's generator: a hardware task
and a host API call per kernel, ~280 B an event, ts as text) is read by, each in a fresh process:
- ``json.load`` (the reference: the whole document as Python objects);
- ``msgspec.json.decode`` into typed structs, and pyarrow's JSON reader of the same events as JSON
  lines (the two C decoders npudiag's trace reader is built on, alone);
- ``npudiag analyze FILE --quiet --json`` (read, tables, rules, Parquet: everything).
Wall time (best of --repeat), peak RSS and CPU seconds (all threads) of each; the ratios the issue
sets: analyze / json.load time (goal <= 0.35) and analyze peak RSS / file size (goal <= 1.5), and the
CPU seconds the time goal leaves on this machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import CPU, best, make_trace  # noqa: E402

MSGSPEC = """
import sys, msgspec
from typing import Any
class Args(msgspec.Struct, gc=False):
    pass
class Event(msgspec.Struct, gc=False):
    ph: Any = None; cat: Any = None; name: Any = None; pid: Any = None; tid: Any = None
    ts: Any = None; dur: Any = None; args: dict | None = None
msgspec.json.decode(open(sys.argv[1], 'rb').read(), type=list[Event])
"""
ARROW = """
import sys, re, pyarrow as pa, pyarrow.json as pj
body = open(sys.argv[1], 'rb').read().strip()[1:-1].replace(b'}, {', b'}\\n{')
pj.read_json(pa.BufferReader(body))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--decoders", action="store_true", help="also time msgspec and pyarrow.json alone")
    ap.add_argument("--before", type=Path, help="a checkout of an earlier commit (git worktree add): its analyze timed too")
    a = ap.parse_args()
    py = sys.executable
    rows = []
    for mb in a.mb:
        path = make_trace(mb)
        size = path.stat().st_size
        with tempfile.TemporaryDirectory() as tmp:
            runs = {
                "json_load": [py, "-c", f"import json; json.load(open({str(path)!r}))"],
                "npudiag_analyze": [py, "-m", "npudiag", "analyze", str(path), "--out", f"{tmp}/out", "--quiet", "--json"],
            }
            if a.before is not None:
                # `python -m npudiag` from the checkout's folder imports that checkout's package
                runs["before_analyze"] = ["env", "-C", str(a.before), py, "-m", "npudiag", "analyze", str(path), "--out",
                                          f"{tmp}/before", "--quiet", "--json"]  # fmt: skip
            if a.decoders:
                runs["msgspec_typed"] = [py, "-c", MSGSPEC, str(path)]
                runs["pyarrow_json_lines"] = [py, "-c", ARROW, str(path)]
            row = {"trace_mb": round(size / 1e6, 1)}
            for name, args in runs.items():
                t, rss = best(args, a.repeat)
                row[f"{name}_s"] = round(t, 2)
                row[f"{name}_peak_rss_mb"] = round(rss / 1e6)
                row[f"{name}_cpu_s"] = round(CPU[tuple(args)], 2)
        row["analyze_to_json_load"] = round(row["npudiag_analyze_s"] / row["json_load_s"], 2)
        row["analyze_rss_to_file"] = round(row["npudiag_analyze_peak_rss_mb"] * 1e6 / size, 2)
        # CPU seconds the goal leaves analyze on this machine's cores (0.35x json.load's wall time)
        row["analyze_cpu_budget_at_goal_s"] = round(0.35 * row["json_load_s"] * (os.cpu_count() or 1), 2)
        row["analyze_mb_per_s"] = round(size / 1e6 / row["npudiag_analyze_s"], 1)
        if a.before is not None:
            row["before_to_json_load"] = round(row["before_analyze_s"] / row["json_load_s"], 2)
            row["before_rss_to_file"] = round(row["before_analyze_peak_rss_mb"] * 1e6 / size, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps({"cores": os.cpu_count(), "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
