"""Benchmark: many small inputs analysed one after another in one process (the library), the per-sample cost.

    python bench/bench_small.py [--rounds 3]

Every profile folder of the corpus ($NPUDIAG_CORPUS/msprof/*) is analysed with ``npudiag.analyze``
in one process, after one warm-up call (imports). Each round runs that in a fresh process twice,
interleaved: with ``NPUDIAG_WORKERS=2`` (a local pool for every many-rank folder: what analyze did for
any input before small inputs stayed in-process) and with the default choice. Prints the per-sample
mean of each and their ratio, the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
import npudiag

def main():
    samples = sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_dir())
    with tempfile.TemporaryDirectory() as tmp:
        npudiag.analyze([str(samples[0])], str(Path(tmp) / "warm"))
        times = {}
        for i, s in enumerate(samples):
            t = time.perf_counter()
            npudiag.analyze([str(s)], str(Path(tmp) / f"o{i}"))
            times[s.name] = time.perf_counter() - t
    print(json.dumps(times))

if __name__ == "__main__":
    main()
"""


def run(corpus: Path, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(corpus)], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    corpus = Path(os.environ.get("NPUDIAG_CORPUS") or ROOT.parent / "shared" / "corpus") / "msprof"
    base = {k: v for k, v in os.environ.items() if k != "NPUDIAG_WORKERS"}
    pooled, default, ratios = [], [], []
    for _ in range(args.rounds):
        a = run(corpus, {**base, "NPUDIAG_WORKERS": "2"})
        b = run(corpus, base)
        pooled.append(statistics.mean(a.values()))
        default.append(statistics.mean(b.values()))
        ratios.append(default[-1] / pooled[-1])
    n = len(a)
    print(f"{n} corpus samples, {args.rounds} rounds (fresh process each, interleaved)")
    print(f"per sample, pool for every many-rank folder: {statistics.median(pooled):.3f} s")
    print(f"per sample, small inputs in this process:    {statistics.median(default):.3f} s")
    print(f"ratio (median of rounds): {statistics.median(ratios):.2f}  ({', '.join(f'{r:.2f}' for r in ratios)})")
    for name in sorted(b, key=b.get, reverse=True)[:5]:
        print(f"  {b[name]:.3f} s (pool {a[name]:.3f} s)  {name}")


if __name__ == "__main__":
    main()
