"""Throughput of ``npudiag dump parse`` on float32 dump files: MB/s of tensor bytes and peak RSS.

python bench/bench_dump.py --mb 2000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

from npudiag.testing.dump_writer import Tensor, dump_file_name, model_dump_dir, write_dump_file

DATA = Path(__file__).resolve().parent / "data" / "dump"


def generate(total_mb: int, file_mb: int = 32) -> Path:
    root = DATA / f"{total_mb}mb"
    if root.is_dir():
        return root
    d = model_dump_dir(root)
    rng = np.random.default_rng(0)
    n = file_mb * (1 << 20) // 4 // 2
    for i in range(max(1, total_mb // file_mb)):
        x = rng.standard_normal(n, dtype=np.float32)
        write_dump_file(d / dump_file_name("MatMul", f"layer{i}", i, 1, 1764246877073569 + i), f"layer{i}", [Tensor(x)], [Tensor(x * 2)])
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1000)
    a = ap.parse_args()
    root = generate(a.mb)
    code = (
        "import resource, time, sys; from pathlib import Path; from npudiag.dump.ingest import parse_dump_tree\n"
        f"t=time.perf_counter(); r=parse_dump_tree(Path('{root}')); s=time.perf_counter()-t\n"
        "print(r.tensor_bytes, s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, len(r.errors))"
    )
    subprocess.run(["sync"], check=False)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    nbytes, secs, rss, errs = int(out[0]), float(out[1]), out[2], out[3]
    print(f"{nbytes / 1e6:.0f} MB of float32 tensors in {secs:.2f} s: {nbytes / 1e6 / secs:,.0f} MB/s, peak RSS {rss} MB, {errs} errors")


if __name__ == "__main__":
    main()
