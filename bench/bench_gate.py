"""False-alarm rate and power of ``npudiag gate`` at its default settings.

For each of N seeded pairs: one workload (its own op sequence), two runs that differ only by
3 % run-to-run noise (per step and per kernel). A pair that fails the gate is a false alarm.
The same pairs with Add made 15 % slower in the current run measure how often a real
regression is caught.

    python bench/bench_gate.py --pairs 200 --steps 10
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from npudiag.profiling.analysis.gate import GateConfig, judge
from npudiag.profiling.runs import load_side
from npudiag.testing.generate import Variation, write_torch_profile


def _tables(root: Path, name: str, workload: int, noise: int, steps: int, kernels: int, jitter: float, **scale: float):
    write_torch_profile(
        root / name, kernels=kernels, seed=workload, steps=steps, copies=4, variation=Variation(noise, jitter, scale), repeat_steps=True
    )
    tables = [r.tables for r in load_side(root / name)]
    shutil.rmtree(root / name)
    return tables


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--kernels", type=int, default=2000)
    ap.add_argument("--jitter", type=float, default=0.03)
    a = ap.parse_args()
    cfg = GateConfig()
    false_alarms, caught = 0, 0
    wrong_metrics: Counter[str] = Counter()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(a.pairs):
            base = _tables(root, "b", 1000 + i, 2 * i, a.steps, a.kernels, a.jitter)
            same = _tables(root, "c", 1000 + i, 2 * i + 1, a.steps, a.kernels, a.jitter)
            slow = _tables(root, "s", 1000 + i, 2 * i + 1, a.steps, a.kernels, a.jitter, Add=1.15)
            r = judge(base, same, cfg)
            if r.failed:
                false_alarms += 1
                wrong_metrics.update(v.metric for v in r.verdicts if v.failed)
            caught += any(v.failed and v.metric == "op:Add" for v in judge(base, slow, cfg).verdicts)
    dt = time.perf_counter() - t0
    print(f"pairs={a.pairs} steps={a.steps} kernels={a.kernels} jitter={a.jitter:.0%} ({dt:.0f} s)")
    print(f"false alarms: {false_alarms}/{a.pairs} = {100 * false_alarms / a.pairs:.1f}%  {dict(wrong_metrics)}")
    print(f"Add +15% caught: {caught}/{a.pairs} = {100 * caught / a.pairs:.1f}%")


if __name__ == "__main__":
    main()
