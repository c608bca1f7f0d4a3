"""The bundled samples are exactly what the generator writes, and analyze recovers their ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npudiag.profiling.ingest import ingest
from npudiag.testing.generate import write_msprof_profile, write_torch_profile

from .conftest import ROOT

FIXTURES = ROOT / "fixtures"


def _data_files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in folder.rglob("*")
        if p.suffix in (".csv", ".json") and p.name != "ground_truth.json"
    }


@pytest.mark.parametrize(
    "name, make",
    [
        ("sample_torch", lambda out: write_torch_profile(out, kernels=1200, copies=40, seed=0)),
        ("sample_msprof", lambda out: write_msprof_profile(out, kernels=800, copies=40, seed=1, db=True)),
    ],
)
def test_bundled_fixture_is_reproducible(name, make, tmp_path: Path) -> None:
    make(tmp_path)
    assert _data_files(tmp_path) == _data_files(FIXTURES / name)


@pytest.mark.parametrize("name", ["sample_torch", "sample_msprof"])
def test_analyze_recovers_ground_truth(name: str) -> None:
    truth = json.loads((FIXTURES / name / "ground_truth.json").read_text())
    profile = ingest([FIXTURES / name])
    assert profile.errors == []
    kernels = profile.table("kernels")
    assert kernels.num_rows == truth["kernels"]
    from npudiag.profiling.analysis.hot_ops import hot_ops

    ours = {r["key"]: r for r in hot_ops(kernels, "type").to_pylist()}
    for op, t in truth["by_type"].items():
        assert ours[op]["count"] == t["count"]
        assert ours[op]["total_us"] == pytest.approx(t["total_us"], rel=1e-9)
    device = profile.table("copies").filter(__import__("pyarrow").compute.equal(profile.table("copies")["side"], "device"))
    assert device.num_rows == truth["copies"]["count"]
    assert set(device["mode"].to_pylist()) == {"sync"}
