"""Benchmark: Parquet compression and dictionary encoding of npudiag's own output tables.

    python bench/bench_parquet.py [--rows 1000000] [--trace-mb 500] [--repeat 3]

``npudiag analyze`` writes the generated 1 M-row kernel_details.csv and the generated trace
(bench_analyze's generators) to two output folders. Then every table of each folder is written again
with each codec (snappy, npudiag's choice; lz4; zstd; none) and dictionaries on every column, on text
columns only, or on none, and read back. The files live in Arrow's own memory buffers: pyarrow
26.0.1 aborts at exit after a threaded Parquet read from a Python ``io.BytesIO``. Each setting runs
in a fresh process. Prints, per folder and setting: write and read time (best of --repeat, all
tables), total size, and each as a ratio to snappy with dictionaries.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import make_csv, make_trace  # noqa: E402

CHILD = """
import json, os, sys, time
import pyarrow as pa, pyarrow.parquet as pq
folder, codec, dictionary, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tables = [pq.read_table(os.path.join(folder, f)) for f in sorted(os.listdir(folder)) if f.endswith(".parquet")]
best_w = best_r = float("inf")
for _ in range(repeat):
    w = r = 0.0
    size = 0
    for t in tables:
        if dictionary == "text":  # text columns only (string, or dictionary already)
            use = [f.name for f in t.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
                   or pa.types.is_dictionary(f.type)]
        else:
            use = dictionary == "all"
        sink = pa.BufferOutputStream()
        t0 = time.perf_counter()
        pq.write_table(t, sink, compression=codec, use_dictionary=use)
        w += time.perf_counter() - t0
        data = sink.getvalue()
        size += data.size
        t0 = time.perf_counter()
        pq.read_table(pa.BufferReader(data))
        r += time.perf_counter() - t0
    best_w, best_r = min(best_w, w), min(best_r, r)
print(json.dumps({"write_s": best_w, "read_s": best_r, "bytes": size, "rows": sum(t.num_rows for t in tables)}))
"""


def measure(folder: Path, repeat: int) -> list[dict]:
    rows = []
    for codec in ("snappy", "lz4", "zstd", "none"):
        for dictionary in ("all", "text", "none"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(folder), codec, dictionary, str(repeat)],
                                 check=True, capture_output=True, text=True).stdout  # fmt: skip
            rows.append({"codec": codec, "dictionary": dictionary, **json.loads(out)})
    ref = rows[0]
    for r in rows:
        r["size_mb"] = round(r.pop("bytes") / 1e6, 1)
        r["write_to_snappy"] = round(r["write_s"] / ref["write_s"], 2)
        r["read_to_snappy"] = round(r["read_s"] / ref["read_s"], 2)
        r["size_to_snappy"] = round(r["size_mb"] / ref["size_mb"], 2)
        r["write_s"], r["read_s"] = round(r["write_s"], 3), round(r["read_s"], 3)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--trace-mb", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    inputs = {"kernel_csv": make_csv(a.rows), "trace": make_trace(a.trace_mb)}
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in inputs.items():
            out = Path(tmp) / label
            subprocess.run([sys.executable, "-m", "npudiag", "analyze", str(path), "--out", str(out), "--quiet", "--json"],
                           check=True, stdout=subprocess.DEVNULL)  # fmt: skip
            for row in measure(out, a.repeat):
                print(json.dumps({"input": label, **row}), flush=True)


if __name__ == "__main__":
    main()
