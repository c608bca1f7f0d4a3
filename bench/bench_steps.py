"""Benchmark: is time linear in rows whatever the number of steps? (issue 55, goal 3)

    python bench/bench_steps.py [--kernels 20000] [--rounds 3]

Writes two torch_npu-style profiles of the same number of kernels (``write_torch_profile``): one with a
step per kernel, one with every kernel in one step; and two-rank folders of each for ``cluster``. Each
round runs ``npudiag analyze`` and ``npudiag cluster`` on both in fresh processes, interleaved; prints
the medians and the median ratio many-steps / one-step (the goal: within 2x).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "steps"


def _profiles(kernels: int) -> dict[str, Path]:
    from npudiag.testing.generate import write_torch_profile

    out = {}
    for name, steps in (("many", kernels), ("one", 1)):
        folder = DATA / f"{name}-{kernels}"
        if not folder.is_dir():
            for rank in range(2):
                write_torch_profile(folder / f"r{rank}", kernels=kernels, steps=steps, copies=0, seed=rank, rank=rank)
        out[name] = folder
    return out


def _run(args: list[str]) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "npudiag", *args], capture_output=True, text=True, cwd=DATA)
    if r.returncode != 0:
        sys.exit(f"npudiag {' '.join(args)} failed: {r.stderr[-2000:]}")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    p = _profiles(a.kernels)
    commands = {
        "analyze": lambda f: ["analyze", str(f / "r0"), "--out", str(DATA / "o-analyze"), "--force", "-q"],
        "cluster": lambda f: ["cluster", str(f), "--out", str(DATA / "o-cluster"), "--force", "-q"],
    }
    for cmd, args in commands.items():
        times: dict[str, list[float]] = {"many": [], "one": []}
        for _ in range(a.rounds):
            for name in ("many", "one"):
                times[name].append(_run(args(p[name])))
        ratios = [m / o for m, o in zip(times["many"], times["one"])]
        print(
            f"{cmd}: {a.kernels:,} kernels in {a.kernels:,} steps {statistics.median(times['many']):.2f} s, in one step "
            f"{statistics.median(times['one']):.2f} s: {statistics.median(ratios):.2f}x (goal <= 2x)"
        )


if __name__ == "__main__":
    main()
