"""One run, one reading: a collection exported twice (torch_npu's trace renamed and copied beside the
same run's kernel_details.csv) is one rank with its tasks counted once; ranks on distinct devices stay
ranks. Recounted from kernel_details.csv and task_time.csv with the csv module."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

import npudiag
from npudiag.profiling.ingest import ingest

SAMPLE = "neopan-tilelang-baseline-PROF_000001_20260605155111872_JDEKRCNERPBNJEGA"
LEVEL0 = "msinsight-pytorch-text-2025/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"


def _compute_tasks(folder: Path) -> int:
    (path,) = folder.glob("task_time_*.csv")
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return sum(1 for r in csv.DictReader(fh) if r["kernel_type"].strip() in ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"))


def _double(corpus: Path, tmp_path: Path) -> Path:
    src = corpus / LEVEL0
    root = tmp_path / "job"
    (root / "profiler_output").mkdir(parents=True)
    (root / "round_001").mkdir()
    shutil.copy(src / "trace_view.json", root / "profiler_output" / "trace.json")  # renamed: read by its content
    shutil.copy(src / "kernel_details.csv", root / "round_001" / "kernel_details.csv")
    return root


@pytest.mark.parametrize("ranks_apart", [False, True])
def test_a_collection_exported_twice_is_one_rank(corpus: Path, tmp_path: Path, ranks_apart: bool) -> None:
    root = _double(corpus, tmp_path)
    with open(root / "round_001" / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
        tasks = sum(1 for _ in csv.DictReader(fh))
    assert tasks == 191
    if ranks_apart:  # the rank-by-rank path (a worker per rank) drops the repeat too
        result = npudiag.analyze([root], tmp_path / "out")
        kernels = result.summary["profile"]["kernels"]
        warnings = result.warnings
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        units = manifest["units"]
        assert [u for u in units if u.get("same_collection_as")], units
        assert result.summary["profile"]["ranks"] == 1
    else:  # in memory
        profile = ingest([root], hash_inputs=False)
        kernels, warnings = profile.tables["kernels"].num_rows, profile.warnings
        (unit,) = profile.units  # both read, one counted, the other named beside it
        assert len(unit["same_collection_as"]) == 1 and len(set(profile.tables["kernels"]["rank"].to_pylist())) == 1
    assert kernels == tasks
    assert any("two exports of one collection" in w and "read once" in w for w in warnings), warnings


def test_ranks_on_two_devices_are_never_one_collection(corpus: Path, tmp_path: Path) -> None:
    """The same tasks at the same ns on device 0 and device 1: two ranks (no real pair does this, so
    the test makes the strongest case the rule must still refuse)."""
    src = corpus / SAMPLE
    root = tmp_path / "job"
    for dev in (0, 1):
        dst = root / f"dev{dev}"
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("msprof_*.json", "api_statistic*", "op_statistic*"))
        (path,) = dst.glob("task_time_*.csv")
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
        for r in rows[1:]:
            r[0] = str(dev)
        with open(path, "w", newline="") as fh:
            csv.writer(fh).writerows(rows)
    profile = ingest([next((root / f"dev{dev}").glob("task_time_*.csv")) for dev in (0, 1)], hash_inputs=False)
    assert not any("one collection" in w for w in profile.warnings)
    assert profile.tables["kernels"].num_rows == 2 * _compute_tasks(src)
