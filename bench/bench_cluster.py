"""Multi-rank ingestion: local process pool vs one process, peak memory, and the cluster command.

python bench/bench_cluster.py --ranks 16 --kernels 50000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from npudiag.testing.generate import Variation, write_torch_profile

DATA = Path(__file__).resolve().parent / "data" / "cluster"


def _run(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    code = (
        "import resource, sys; from npudiag.cli import main; sys.argv=['npudiag', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "sys.stderr.write(f'RSS {me.ru_maxrss // 1024} {kids.ru_maxrss // 1024}\\n')"
    )
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, **env}, capture_output=True, text=True)
    rss = [x for x in r.stderr.splitlines() if x.startswith("RSS")][-1].split()
    return time.perf_counter() - t, f"parent {rss[1]} MB, largest worker {rss[2]} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--kernels", type=int, default=50_000)
    a = ap.parse_args()
    root = DATA / f"{a.ranks}x{a.kernels}"
    if not root.is_dir():
        for rank in range(a.ranks):
            write_torch_profile(
                root, kernels=a.kernels, seed=4, steps=10, rank=rank, copies=10, variation=Variation(rank, 0.02), repeat_steps=True
            )
    out = DATA / "out"
    for label, env in (("one process", {"NPUDIAG_WORKERS": "1"}), (f"process pool ({os.cpu_count()} cores)", {})):
        secs, rss = _run(["analyze", str(root), "--out", str(out), "--quiet", "--json"], env)
        print(f"analyze {a.ranks} ranks x {a.kernels:,} kernels, {label}: {secs:.1f} s, peak RSS {rss}")
    secs, rss = _run(["cluster", str(root), "--out", str(out) + "-cluster", "--json"], {})
    print(f"cluster: {secs:.1f} s, peak RSS {rss}")


if __name__ == "__main__":
    main()
