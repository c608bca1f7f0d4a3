"""The public API (``import npudiag``): what README's "Library use" promises, checked against the raw files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import npudiag
from npudiag.results import Result
from npudiag.testing.dump_writer import Tensor, dump_file_name, model_dump_dir, write_dump_file
from npudiag.testing.generate import write_torch_profile

from .conftest import ROOT

SAMPLE = ROOT / "fixtures" / "sample_torch"


def _raw_kernels(folder: Path) -> tuple[int, float]:
    """Count and summed Duration(us) of every kernel_details.csv under folder, with the csv module."""
    n, total = 0, 0.0
    for f in sorted(folder.rglob("kernel_details.csv")):
        with f.open(newline="") as fh:
            for row in csv.DictReader(fh):
                n += 1
                total += float(row["Duration(us)"])
    return n, total


def test_public_names_and_light_import() -> None:
    assert set(npudiag.__all__) >= {"analyze", "load_output", "compare", "gate", "cluster", "parse_dump", "compare_dumps",
                                    "parse_logs", "InputError", "__version__"}  # fmt: skip
    for name in npudiag.__all__:
        assert getattr(npudiag, name) is not None
    code = "import sys, npudiag; print(sorted(m for m in ('pandas', 'pyarrow', 'numpy') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    with pytest.raises(AttributeError):
        npudiag.no_such_function  # noqa: B018


def test_error_hierarchy_carries_exit_codes() -> None:
    for cls in (npudiag.InputError, npudiag.OutputError, npudiag.OptionError, npudiag.ToolError):
        assert issubclass(cls, npudiag.NpudiagError)
    assert npudiag.InputError("f.csv", "bad", line=3).exit_code == 2
    assert npudiag.InputError("f.csv", "bad", line=3).one_line() == "f.csv:3: bad"
    assert isinstance(npudiag.OptionError("x", "steps"), ValueError)


def test_analyze_in_memory_matches_the_raw_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # nothing written anywhere without out=
    r = npudiag.analyze([SAMPLE])
    n, total = _raw_kernels(SAMPLE)
    assert r.summary["profile"]["kernels"] == n == r.tables["kernels"].num_rows
    assert r.summary["profile"]["kernel_time_us"] == pytest.approx(total, rel=1e-9)
    assert r.out is None and list(tmp_path.iterdir()) == [] and r.read_any and r.errors == []
    json.dumps(r.to_dict())  # JSON-safe
    assert isinstance(r, Result)


def test_analyze_to_folder_and_load_it_back(tmp_path: Path) -> None:
    r = npudiag.analyze(str(SAMPLE), tmp_path / "out", steps="2:")
    assert (tmp_path / "out" / "manifest.json").is_file() and r.out == tmp_path / "out"
    back = npudiag.load_output(tmp_path / "out")
    assert back.summary["profile"] == r.summary["profile"]
    assert back.tables["kernels"].num_rows == r.tables["kernels"].num_rows
    assert set(r.tables["kernels"]["step"].to_pylist()) == {2, 3, 4}
    assert npudiag.profiling.pipeline.Analysis.load(tmp_path / "out").summary["steps"] == r.summary["steps"]


def test_a_table_written_as_it_was_made_is_still_a_table_of_the_result(tmp_path: Path) -> None:
    # with out=, idle_gaps is written during the rules and not kept in memory: the result reads it back
    r = npudiag.analyze([SAMPLE], tmp_path / "out")
    memory = npudiag.analyze([SAMPLE])
    assert "idle_gaps" in r.tables and "idle_gaps" in set(r.tables) and len(r.tables) == len(memory.tables)
    assert r.tables["idle_gaps"].equals(memory.tables["idle_gaps"]) and r.tables["idle_gaps"].num_rows > 0
    assert r.tables["kernels"].equals(memory.tables["kernels"])
    written = pq.read_table(tmp_path / "out" / "idle_gaps.parquet")  # the file itself, read by pyarrow
    assert r.tables["idle_gaps"].to_pylist() == written.to_pylist()
    with pytest.raises(KeyError):
        r.tables["no_such_table"]


def test_many_ranks_are_partitioned_and_tables_load_lazily(tmp_path: Path) -> None:
    root = tmp_path / "job"
    for rank in range(2):
        write_torch_profile(root, kernels=300, seed=rank, steps=3, rank=rank, copies=2)
    r = npudiag.analyze([root], tmp_path / "out")
    n, total = _raw_kernels(root)
    assert r.summary["profile"]["ranks"] == 2 and r.summary["profile"]["kernels"] == n
    assert r.summary["profile"]["kernel_time_us"] == pytest.approx(total, rel=1e-9)
    assert r._tables is None and r.tables["kernels"].num_rows == n  # loaded from out on first use
    c = npudiag.cluster(tmp_path / "out", tmp_path / "cluster")
    assert c.summary["ranks"] == 2 and (tmp_path / "cluster" / "cluster_step_trace_time.csv").is_file()
    assert c.tables["cluster_steps"].num_rows == 2 * 3
    assert isinstance(r, Result) and isinstance(c, Result)


def test_bad_options_and_input_raise_library_errors(tmp_path: Path) -> None:
    with pytest.raises(npudiag.OptionError) as exc:
        npudiag.analyze([SAMPLE], steps="3:2")
    assert exc.value.option == "steps"
    with pytest.raises(npudiag.OptionError):
        npudiag.gate_config(alpha=2.0)
    with pytest.raises(npudiag.OptionError) as exc:
        npudiag.gate_config(metrics=["nonsense"])
    assert exc.value.option == "metric"
    r = npudiag.analyze([tmp_path / "missing"])
    assert r.summary is None and r.errors and not r.read_any and r.tables == {}
    with pytest.raises(npudiag.InputError):
        npudiag.gate(tmp_path / "missing", SAMPLE)


def test_compare_and_gate(tmp_path: Path) -> None:
    c = npudiag.compare(SAMPLE, SAMPLE, tmp_path / "cmp")
    assert c.tables["diff"].num_rows == c.summary["ops"]["total"] > 0 and (tmp_path / "cmp" / "diff.parquet").is_file()
    g = npudiag.gate(SAMPLE, SAMPLE, npudiag.gate_config(steps="2:"), update_baseline=tmp_path / "base")
    assert not g.failed and g.baseline_updated and (tmp_path / "base" / "manifest.json").is_file()
    d = g.to_dict()
    assert d["passed"] and d["regressions"] == [] and all(not m["failed"] for m in d["metrics"])
    assert g.tables["verdicts"].num_rows == len(d["metrics"]) > 0 and g.errors == []
    assert all(isinstance(x, Result) for x in (c, g, npudiag.load_output(tmp_path / "base")))


def test_dumps_parse_and_compare(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for side, noise in (("mine", 0.5), ("golden", 0.0)):
        d = model_dump_dir(tmp_path / side)
        x = rng.normal(size=(8, 16)).astype(np.float32)
        y = x * 2 + noise * np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
        write_dump_file(d / dump_file_name("Mul", "mul1", 3, 1, 1764246877073569), "mul1", [Tensor(x)], [Tensor(y)])
    p = npudiag.parse_dump(tmp_path / "mine", tmp_path / "parsed")
    assert p.summary["files"] == 1 and p.tables["tensors"].num_rows == 2 and (tmp_path / "parsed" / "tensors.parquet").is_file()
    cmp = npudiag.compare_dumps(tmp_path / "mine", tmp_path / "golden")
    assert cmp.failed and cmp.summary["first_failing_output"]["op_name"] == "mul1"
    assert isinstance(p, Result) and isinstance(cmp, Result)
    with pytest.raises(npudiag.InputError):
        npudiag.parse_dump(tmp_path / "missing")


def test_parse_logs(tmp_path: Path) -> None:
    plog = tmp_path / "debug" / "plog"
    plog.mkdir(parents=True)
    (plog / "plog-200_20250806230000000.log").write_text(
        "[ERROR] RUNTIME(200,python):2025-08-06-23:09:35.772.604 [stars_engine.cc:1551]6219 ProcLogicCqReport:Task run failed, "
        "device_id=1, stream_id=2, task_id=8885\n"
    )
    r = npudiag.parse_logs([tmp_path], tmp_path / "out")
    assert r.summary["root_cause"]["kb_id"] == "runtime-task-run-failed" and r.summary["errors"] == 1
    assert r.tables["problems"].num_rows == 1 and (tmp_path / "out" / "log_events.parquet").is_file()
    none = npudiag.parse_logs(tmp_path / "nothing-here")
    assert none.summary is None and none.errors
    assert isinstance(r, Result) and isinstance(none, Result)
