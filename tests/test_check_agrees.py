"""``check`` and ``analyze`` count the same rows: check reads each profile with analyze's readers, so
on every corpus sample the rows check reports per kind of data are the rows of analyze's tables for
that profile (kernels, host calls, framework ops, steps, memory samples, frequency samples)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from npudiag.profiling import health
from npudiag.profiling.ingest import ingest

from .conftest import CORPUS

SAMPLES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []
# kind of data -> analyze's tables counted for it (the first that holds rows)
TABLES = {"kernels": ("kernels",), "host_api": ("api_calls",), "framework_ops": ("host_ops", "torch_ops"), "steps": ("steps",),
          "memory": ("memory_timeline", "op_memory"), "frequency": ("aicore_freq",)}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("sample", SAMPLES)
def test_check_counts_are_analyze_counts(corpus: Path, sample: str) -> None:
    folder = corpus / sample
    result = health.check([folder])
    if not result.profiles:
        pytest.skip(f"{sample}: no profile (not profiler output)")
    profile = ingest([folder], hash_inputs=False)
    ranks = [u["rank"] for u in profile.units]
    compared = 0
    for p in result.profiles:
        unit = next((u for u in profile.units if u["path"] == str(p.path)), None)
        if unit is None or ranks.count(unit["rank"]) > 1:
            continue  # a repeated run analyze does not read, or two profiles of one rank
        rows = {d.data: d.rows for d in p.data if d.status == "present"}
        for data, names in TABLES.items():
            counts = []
            for name in names:
                t = profile.tables[name]
                counts.append(pc.sum(pc.equal(t["rank"], unit["rank"])).as_py() or 0 if unit["rank"] is not None else t.num_rows)
            want = next((n for n in counts if n), 0)
            assert rows.get(data, 0) == want, (sample, str(p.path), data, rows.get(data), counts)
            compared += want > 0
    assert compared, f"{sample}: nothing compared"
