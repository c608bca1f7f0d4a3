"""Benchmark: every bottleneck rule and the step breakdown on 1,000,000 kernels + 200,000 copies.

    python bench/bench_rules.py [--kernels 1000000] [--copies 200000]

Tables are built directly in the canonical schemas (no file reading), so this times the analysis
alone: interval arithmetic must stay n log n.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pyarrow as pa

from npudiag import schemas
from npudiag.profiling.analysis.step_breakdown import step_breakdown
from npudiag.profiling.rules import run_rules


def build(n_kernels: int, n_copies: int, seed: int = 0) -> dict[str, pa.Table]:
    rng = np.random.default_rng(seed)
    t0 = 1_764_246_877_073_569_640  # ns
    dur = rng.uniform(5, 200, n_kernels)
    gap = rng.uniform(1, 6, n_kernels)
    gap[rng.choice(n_kernels, 50, replace=False)] = 3000.0
    start_ns = t0 + np.cumsum(np.concatenate([[0.0], (dur + gap)[:-1]]) * 1000).astype(np.int64)
    types = np.array(["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "AI_CPU", "HCCL"])[rng.choice(5, n_kernels, p=[0.3, 0.5, 0.1, 0.05, 0.05])]
    kernels = schemas.conform(
        pa.table(
            {
                "rank": pa.array(np.zeros(n_kernels, np.int32)),
                "step": pa.array(np.arange(n_kernels) * 20 // n_kernels),
                "stream_id": pa.array(rng.choice([2, 3], n_kernels)),
                "op_name": pa.array(np.char.add("op_", rng.integers(0, 300, n_kernels).astype(str))),
                "op_type": pa.array(np.char.add("T", rng.integers(0, 60, n_kernels).astype(str))),
                "task_type": pa.array(types),
                "start_us": pa.array(start_ns / 1000.0),
                "start_ns": pa.array(start_ns),
                "duration_us": pa.array(dur),
            }
        ),
        schemas.KERNELS,
    )
    span = int(start_ns[-1] - start_ns[0])
    c_start = np.sort(t0 + rng.integers(0, span, n_copies)).astype(np.int64)
    c_dur = rng.uniform(1, 50, n_copies)
    copies = schemas.conform(
        pa.table(
            {
                "rank": pa.array(np.zeros(n_copies, np.int32)),
                "side": pa.array(np.where(rng.random(n_copies) < 0.5, "device", "host")),
                "name": pa.array(np.full(n_copies, "MEMCPY_ASYNC")),
                "direction": pa.array(np.full(n_copies, "H2D")),
                "size_bytes": pa.array(rng.choice([1024, 4 << 20], n_copies)),
                "start_us": pa.array(c_start / 1000.0),
                "start_ns": pa.array(c_start),
                "duration_us": pa.array(c_dur),
                "stream_id": pa.array(np.full(n_copies, 2)),
                "mode": pa.array(np.where(rng.random(n_copies) < 0.3, "sync", "async")),
            }
        ),
        schemas.COPIES,
    )
    tables = {name: schema.empty_table() for name, schema in schemas.TABLES.items()}
    tables.update(kernels=kernels, copies=copies)
    return tables


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--copies", type=int, default=200_000)
    a = ap.parse_args()
    tables = build(a.kernels, a.copies)
    t = time.perf_counter()
    findings, skipped = run_rules(tables)
    rules_s = time.perf_counter() - t
    t = time.perf_counter()
    steps = step_breakdown(tables)
    steps_s = time.perf_counter() - t
    print(
        json.dumps(
            {
                "kernels": a.kernels,
                "copies": a.copies,
                "run_rules_s": round(rules_s, 2),
                "step_breakdown_s": round(steps_s, 2),
                "findings": len(findings),
                "skipped": skipped,
                "steps": steps.num_rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
