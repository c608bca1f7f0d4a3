"""Our per-step breakdown, recomputed from kernel rows, equals torch_npu's step_trace_time.csv."""

from __future__ import annotations

from pathlib import Path

import pytest

from npudiag.analysis.step_breakdown import step_breakdown
from npudiag.ingest import ingest

from .conftest import CORPUS

SAMPLES = [
    "msinsight-pytorch-text-2025/level0",
    "msinsight-pytorch-text-2025/level1",
    "msinsight-pytorch-text-2025/level2",
    "msinsight-st-cann83rc1-level2-4rank/rank_0_ascend_pt",
]


@pytest.mark.parametrize("sample", SAMPLES)
def test_breakdown_matches_step_trace_time(sample: str, corpus: Path) -> None:
    profile = ingest([CORPUS / sample])
    ours = step_breakdown(profile.tables).to_pylist()
    theirs = profile.table("steps").to_pylist()
    assert [r["step"] for r in ours] == [r["step"] for r in theirs]
    for a, b in zip(ours, theirs):
        assert a["step_time_source"] == "step_trace" and a["step_time_us"] == b["step_time_us"]
        # kernel rows carry durations rounded to 0.001 us; the file sums unrounded ones
        for key in ("computing_us", "communication_us", "overlapped_us", "communication_not_overlapped_us"):
            assert a[key] == pytest.approx(b[key], abs=0.05), key
        assert a["free_us"] == pytest.approx(b["free_us"], abs=0.5)
