"""A PyTorch (Kineto) trace of a GPU run as the baseline of a torch-level comparison: its framework
ops with their kernels' device time, recounted from the raw JSON with the json module."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from npudiag.errors import InputError
from npudiag.profiling.discover import kind_by_content
from npudiag.profiling.formats.kineto import read_kineto

from .conftest import CORPUS
from .helpers import run_cli

GPU = Path(__file__).resolve().parent / "data" / "kineto" / "benchmark_result_2869224_1695835535_trace.json"
NPU = CORPUS / "msinsight-pytorch-text-2025" / "level0"


def _recount(events: list[dict]) -> dict[str, tuple[int, int, float]]:
    """Per framework op name: calls, device tasks, device us. A kernel / memcpy / memset belongs to the
    innermost cpu_op of the launching thread around the runtime call with its correlation id, moved
    up to the nearest one named with '::' (aten::...) where the innermost is not."""
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    calls = defaultdict(int)
    for o in ops:
        calls[o["name"]] += 1
    launch = {e["args"]["correlation"]: e for e in events
              if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}  # fmt: skip
    kernels, device = defaultdict(int), defaultdict(float)
    for k in events:
        if k.get("ph") != "X" or k.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        call = launch.get(k["args"].get("correlation"))
        if call is None:
            continue
        around = [o for o in ops if (o["pid"], o["tid"]) == (call["pid"], call["tid"]) and o["ts"] <= call["ts"] <= o["ts"] + o["dur"]]
        around.sort(key=lambda o: (o["ts"], -o["dur"]))  # outermost first
        named = [o for o in around if "::" in o["name"]]
        owner = (named or around)[-1] if around else None
        if owner is not None:
            kernels[owner["name"]] += 1
            device[owner["name"]] += k["dur"]
    return {n: (calls[n], kernels[n], device[n]) for n in calls}


def test_gpu_framework_ops_equal_a_json_recount() -> None:
    expected = _recount(json.loads(GPU.read_text())["traceEvents"])
    r = read_kineto(GPU, 0)
    t = r.tables["torch_ops"]
    got = {n: (c, k, d) for n, c, k, d in zip(t["name"].to_pylist(), t["calls"].to_pylist(), t["kernels"].to_pylist(),
                                               t["device_us"].to_pylist())}  # fmt: skip
    assert set(got) == set(expected)
    for name, (c, k, d) in expected.items():
        assert got[name][:2] == (c, k), name
        assert abs(got[name][2] - d) < 1e-6, name
    assert expected["aten::cudnn_convolution"][:2] == (10, 31) and expected["aten::addmm"][:2] == (6, 14)  # 5 convs, 3 linears, 2 passes
    assert sum(v[1] for v in expected.values()) > 50 and r.tables["host_ops"].num_rows == 359
    assert r.tables["host_ops"]["source"].unique().to_pylist() == ["kineto"]


def test_kineto_is_recognised_by_its_content() -> None:
    assert kind_by_content(GPU) == "kineto"
    trace = NPU / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    if trace.is_file():
        assert kind_by_content(trace) == "trace"


def test_compare_a_gpu_baseline_with_an_npu_run_at_the_torch_level(tmp_path: Path) -> None:
    if not NPU.is_dir():
        pytest.skip(f"corpus not present at {CORPUS} (set NPUDIAG_CORPUS)")
    r = run_cli("compare", GPU, NPU, "--level", "torch", "--out", tmp_path / "c", "--json", env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = {x["key"]: x for x in doc["ops"]["rows"]}
    assert doc["ops"]["match_by"] == "torch" and {"aten::addmm", "aten::_convolution", "aten::relu_"} <= set(rows)
    base = doc["totals"]["baseline"]
    assert base["kernels"] is None and base["kernel_time_us"] is None and base["steps"] == 0  # a GPU side has no NPU totals
    assert doc["totals"]["current"]["kernels"] == 191
    expected = _recount(json.loads(GPU.read_text())["traceEvents"])  # the GPU side's device time is the recount's
    assert abs(rows["aten::addmm"]["base_total_us"] - expected["aten::addmm"][2]) < 1e-6
    assert rows["aten::addmm"]["base_count"] == expected["aten::addmm"][0]
    # cuDNN's convolution is the ATen _convolution the NPU's kernels go to, CUDA's clamp_min_ the relu_ it runs
    assert "aten::cudnn_convolution" not in rows and "aten::clamp_min_" not in rows
    for aten, backend in (("aten::_convolution", "aten::cudnn_convolution"), ("aten::relu_", "aten::clamp_min_")):
        assert rows[aten]["status"] == "both" and rows[aten]["base_count"] == expected[aten][0]
        assert abs(rows[aten]["base_total_us"] - expected[aten][2] - expected[backend][2]) < 1e-6 and expected[backend][2] > 0


def _with_steps(tmp_path: Path, n: int, cat: str) -> Path:
    """The GPU trace as torch.profiler writes it with a schedule: ProfilerStep#101.. ranges over the ops."""
    doc = json.loads(GPU.read_text())
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    t0, t1 = min(e["ts"] for e in ops), max(e["ts"] + e["dur"] for e in ops)
    span = (t1 - t0) // n
    for i in range(n):
        doc["traceEvents"].append({"ph": "X", "cat": cat, "name": f"ProfilerStep#{101 + i}", "pid": ops[0]["pid"], "tid": ops[0]["tid"],
                                   "ts": t0 + i * span, "dur": span - 1, "args": {}})  # fmt: skip
    folder = tmp_path / "gpu"
    folder.mkdir()
    (folder / "host.pt.trace.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("cat", ["user_annotation", "cpu_op"])
def test_a_gpu_run_of_more_steps_is_compared_per_step(tmp_path: Path, cat: str) -> None:
    """Five ProfilerStep ranges on the GPU side, one step on the NPU side: the steps are read, and the
    framework ops are compared per step (the GPU side's counts and times divided by 5)."""
    if not NPU.is_dir():
        pytest.skip(f"corpus not present at {CORPUS} (set NPUDIAG_CORPUS)")
    gpu = _with_steps(tmp_path, 5, cat)
    r = run_cli("compare", gpu, NPU, "--level", "torch", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["totals"]["baseline"]["steps"] == 5 and doc["totals"]["current"]["steps"] == 1
    assert any("per step" in w for w in doc["warnings"])
    rows = {x["key"]: x for x in doc["ops"]["rows"]}
    expected = _recount(json.loads(GPU.read_text())["traceEvents"])
    assert abs(rows["aten::addmm"]["base_total_us"] - expected["aten::addmm"][2] / 5) < 1e-6
    assert rows["aten::addmm"]["base_count"] == pytest.approx(expected["aten::addmm"][0] / 5)
    npu_ops = {x["name"]: x for x in run_cli_tables(NPU)}
    assert rows["aten::addmm"]["cur_total_us"] == pytest.approx(npu_ops["aten::addmm"]["device_us"])  # one step: unchanged


def run_cli_tables(path: Path) -> list[dict]:
    from npudiag.profiling.ingest import ingest

    return ingest([path]).tables["torch_ops"].to_pylist()


def test_a_step_window_is_refused_where_it_cannot_apply(tmp_path: Path) -> None:
    if not NPU.is_dir():
        pytest.skip(f"corpus not present at {CORPUS} (set NPUDIAG_CORPUS)")
    gpu = _with_steps(tmp_path, 5, "user_annotation")
    for level in ("torch", "module"):
        r = run_cli("compare", gpu, NPU, "--level", level, "--steps", "50:50")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--steps" in r.stderr, (level, r.stderr)
    assert "whole run" in run_cli("compare", NPU, NPU, "--level", "torch", "--steps", "50:50").stderr


def test_a_gpu_trace_needs_the_torch_level(tmp_path: Path) -> None:
    if not NPU.is_dir():
        pytest.skip(f"corpus not present at {CORPUS} (set NPUDIAG_CORPUS)")
    r = run_cli("compare", GPU, NPU)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "no NPU kernels" in r.stderr and "--level torch" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_check_says_what_a_gpu_trace_is() -> None:
    r = run_cli("check", GPU, env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    assert "framework_ops   present         359" in r.stdout and "a PyTorch (Kineto) trace of a GPU run" in r.stdout


def test_a_gzip_compressed_trace_reads_the_same(tmp_path: Path) -> None:
    """PyTorch's tensorboard_trace_handler(use_gzip=True) writes *.pt.trace.json.gz; HTA keeps this very
    trace gzip-compressed. Read as it decompresses: the same tables; a cut file is one line."""
    gz = tmp_path / "worker0.1695835535.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(GPU.read_bytes()))
    plain, packed = read_kineto(GPU, 0), read_kineto(gz, 0)
    for name in ("torch_ops", "host_ops", "ranges"):
        assert packed.tables[name].equals(plain.tables[name]), name
    renamed = tmp_path / "trace.json.gz"  # no Kineto name: recognised by its first key, inside the gzip
    renamed.write_bytes(gz.read_bytes())
    assert kind_by_content(renamed) == "kineto"
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(gz.read_bytes()[: len(gz.read_bytes()) // 2])
    with pytest.raises(InputError) as exc:
        read_kineto(cut, 0)
    assert "cut.pt.trace.json.gz" in exc.value.one_line() and "\n" not in exc.value.one_line()


def test_kineto_is_kineto_whatever_its_first_key(tmp_path: Path) -> None:
    """A harness may put its own key first (a real H100 trace starts with "metadata"); Kineto's keys or a
    GPU event category anywhere in the head make it Kineto, an Ascend trace in the object form does not."""
    doc = json.loads(GPU.read_text())
    moved = tmp_path / "trace.json"
    moved.write_text(json.dumps({"metadata": {"harness": "bench"}, **doc}))
    assert kind_by_content(moved) == "kineto"
    gpu = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "cuda_runtime")]
    bare = {"traceEvents": gpu + [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]}  # no Kineto key, GPU events
    (tmp_path / "events.json").write_text(json.dumps(bare))
    assert kind_by_content(tmp_path / "events.json") == "kineto"
    npu = json.loads((NPU / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text()) if NPU.is_dir() else []
    if npu:  # framework ops alone say nothing of the device: a Chrome trace, read as torch_npu's / msprof's
        (tmp_path / "npu.json").write_text(json.dumps({"traceEvents": npu}))
        assert kind_by_content(tmp_path / "npu.json") == "trace"


def test_a_2021_trace_reads_its_old_categories_as_todays(tmp_path: Path) -> None:
    """torch 1.8 / 1.9 Kineto named the categories Operator, Runtime, Kernel, Memcpy, Memset (Kineto's
    TensorBoard plugin reads both spellings as one); the same events under those names give the same ops."""
    doc = json.loads(GPU.read_text())
    old = {"cpu_op": "Operator", "cuda_runtime": "Runtime", "kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}
    events = [{**e, "cat": old.get(e.get("cat"), e.get("cat"))} for e in doc["traceEvents"]]
    assert sum(e.get("cat") == "Operator" for e in events) > 0
    path = tmp_path / "old.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    r = read_kineto(path, 0)
    assert not any("no cpu_op events" in w for w in r.warnings)
    expected = _recount(doc["traceEvents"])  # the recount of the same events under today's names
    t = r.tables["torch_ops"]
    got = dict(zip(t["name"].to_pylist(), zip(t["calls"].to_pylist(), t["kernels"].to_pylist(), strict=True), strict=True))
    assert got == {n: (c, k) for n, (c, k, _) in expected.items()}
