"""Op types where the profile records none: derived from the op name, recomputed here from the raw
files with the re / csv / json modules (torch_npu Level0 writes N/A; MindSpore's CANN 7 timelines
hold full scope names)."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from npudiag.profiling.ingest import ingest
from npudiag.profiling.op_names import COMMON_TYPES, types_from_names

from .conftest import CORPUS


def _type_of(name: str) -> str:
    """The documented shapes, one regular expression each (the op name itself where none fits)."""
    shapes = (r"^(?:.*/)?([A-Za-z][\w]*?)-op\d+(?:_\d+)*$", r"^.*/([A-Za-z]\w*)$", r"^aclnn[A-Za-z0-9]+_[A-Za-z0-9]+_([A-Za-z]\w*)$",
              r"^trans_([A-Za-z][A-Za-z0-9]*)_\d+$", r"^(hcom_[A-Za-z]+_)", r"^[A-Za-z][A-Za-z0-9]*\d_([A-Za-z][A-Za-z0-9]*)$")  # fmt: skip
    for pattern in shapes:
        m = re.match(pattern, name)
        if m:
            return m.group(1)
    m = re.match(r"^([A-Za-z][A-Za-z0-9]*?[A-Za-z])\d+$", name)
    return m.group(1) if m and m.group(1) in COMMON_TYPES else name


def _hot(folder: Path) -> dict[str, tuple[int, float]]:
    from npudiag.profiling.analysis.hot_ops import hot_ops_table

    t = hot_ops_table(ingest([folder]).table("kernels"))
    rows = [r for r in t.to_pylist() if r["group_by"] == "type"]
    return {r["key"]: (r["count"], r["total_us"]) for r in rows}


def test_level0_kernels_group_by_the_type_in_their_names(corpus: Path) -> None:
    """Hot operators of a torch_npu Level0 export fell back to full names; hcom_allReduce split in four."""
    folder = CORPUS / "msinsight-pytorch-text-2025" / "level0"
    with open(next(folder.rglob("kernel_details.csv")), newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["Type"] for r in rows} == {"N/A"}
    want: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for r in rows:
        w = want[_type_of(r["Name"])]
        w[0] += 1
        w[1] += float(r["Duration(us)"])
    got = _hot(folder)
    assert sorted(got) == sorted(want)
    for key, (n, total) in want.items():
        assert got[key][0] == n and got[key][1] == pytest.approx(total, abs=1e-3), key
    assert sum(k.startswith("hcom_") for k in got) == 1 and "MatMulV2" in got and "TransData" in got


def test_mindspore_scope_names_group_by_their_op(corpus: Path) -> None:
    """A MindSpore CANN 7 profile: "top 20 of 140", "Default/optimize…lyMomentum-op292"."""
    folder = CORPUS / "mindinsight-prof-device0-2023"
    want: dict[str, int] = defaultdict(int)
    for f in sorted(folder.rglob("task_time_*.json")):
        for e in json.loads(f.read_text()):
            if e.get("ph") == "X" and "-op" in e["name"]:  # the ops (EVENT_RECORD and the like are no kernels)
                want[_type_of(e["name"])] += 1
    got = _hot(folder)
    assert len(got) < 40 and all("/" not in k and "-op" not in k for k in got)
    for key, n in want.items():  # every task_time row is a kernel of its derived type
        assert got.get(key, (0,))[0] >= n, key


def test_odd_names_keep_no_type() -> None:
    names = pa.array(["MatMulV2", "Foo12", "MyKernel", "hcom_allGather__1_1", "x/y/AllGather-op3_0", "Conv2D4", None])
    assert types_from_names(names).to_pylist() == [None, None, None, "hcom_allGather_", "AllGather", "Conv2D", None]


def test_types_already_recorded_are_never_changed(corpus: Path) -> None:
    for sample in ("msinsight-pytorch-text-2025/level1", "mstt-advisor-kernel-details-cann8"):
        folder = CORPUS / sample
        with open(next(folder.rglob("kernel_details.csv")), newline="") as fh:
            recorded = {r["Type"] for r in csv.DictReader(fh)}
        assert set(ingest([folder]).table("kernels")["op_type"].to_pylist()) <= recorded | {None}
