"""Benchmark: many small inputs analysed one after another in one process (the library), the per-sample cost.

    python bench/bench_small.py [--rounds 3] [--before CHECKOUT]

Every profile folder of the corpus ($NPUDIAG_CORPUS/msprof/*) is analysed with ``npudiag.analyze``
in one process, after one warm-up call (imports). Each round runs that in a fresh process twice,
interleaved: with ``NPUDIAG_WORKERS=2`` (a local pool for every many-rank folder: what analyze did for
any input before small inputs stayed in-process) and with the default choice. Prints the per-sample
mean of each and their ratio, the median over rounds. ``--before CHECKOUT`` (a ``git worktree add``
of an earlier commit) adds a third run per round: that checkout's library with its default choice,
and the ratio of this one to it. The children import from cached bytecode, as an installed npudiag
does (see bench_ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


def run(corpus: Path, env: dict[str, str], code: Path = ROOT) -> dict[str, float]:
    """The child's per-sample times, importing npudiag from ``code`` (its folder is the child's first path)."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(corpus)], capture_output=True, text=True, env=env, cwd=code, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=Path, help="a checkout of an earlier commit: its library timed in the same rounds")
    args = ap.parse_args()
    corpus = Path(os.environ.get("NPUDIAG_CORPUS") or ROOT.parent / "shared" / "corpus") / "msprof"
    base = {k: v for k, v in os.environ.items() if k not in ("NPUDIAG_WORKERS", "PYTHONDONTWRITEBYTECODE")}
    pooled, default, ratios, earlier, to_earlier = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        base["PYTHONPYCACHEPREFIX"] = f"{tmp}/pycache"
        for _ in range(args.rounds):
            a = run(corpus, {**base, "NPUDIAG_WORKERS": "2"})
            b = run(corpus, base)
            pooled.append(statistics.mean(a.values()))
            default.append(statistics.mean(b.values()))
            ratios.append(default[-1] / pooled[-1])
            if args.before is not None:
                c = run(corpus, base, args.before.resolve())
                earlier.append(statistics.mean(c.values()))
                to_earlier.append(default[-1] / earlier[-1])
    n = len(a)
    print(f"{n} corpus samples, {args.rounds} rounds (fresh process each, interleaved)")
    print(f"per sample, pool for every many-rank folder: {statistics.median(pooled):.3f} s")
    print(f"per sample, small inputs in this process:    {statistics.median(default):.3f} s")
    print(f"ratio (median of rounds): {statistics.median(ratios):.2f}  ({', '.join(f'{r:.2f}' for r in ratios)})")
    if earlier:
        print(f"per sample, {args.before} (its default):  {statistics.median(earlier):.3f} s")
        print(f"this / that (median of rounds): {statistics.median(to_earlier):.2f}  ({', '.join(f'{r:.2f}' for r in to_earlier)})")
    for name in sorted(b, key=b.get, reverse=True)[:5]:
        print(f"  {b[name]:.3f} s (pool {a[name]:.3f} s)  {name}")


if __name__ == "__main__":
    main()
