"""npudiag dump: config authoring and checking, the binary dump reader, formats, stats, compare."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from npudiag.dump import config as dc
from npudiag.dump.accuracy import compare_arrays
from npudiag.dump.compare import compare_summary, compare_trees
from npudiag.dump.formats.dump_file import (
    fractal_nz_to_nd,
    nc1hwc0_to_nchw,
    parse_dump_name,
    read_dump,
    tensor_array,
    to_original_shape,
)
from npudiag.dump.ingest import parse_dump_tree
from npudiag.dump.tensor_stats import tensor_stats
from npudiag.errors import InputError
from npudiag.schemas import COMPARE, TENSORS
from npudiag.testing.dump_writer import (
    Tensor,
    dump_file_name,
    model_dump_dir,
    nchw_to_nc1hwc0,
    nd_to_fractal_nz,
    write_dump_file,
)

from .conftest import CORPUS_ROOT
from .helpers import run_cli

SAMPLES = CORPUS_ROOT / "adump" / "samples"
RNG = np.random.default_rng(0)


def _arrays() -> list[tuple[str, np.ndarray]]:
    out = []
    for shape in [(7,), (2, 3, 4), (1, 1)]:
        for dt in ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
            out.append((dt, (RNG.normal(size=shape) * 50).astype(dt)))
        out.append(("bool", RNG.random(shape) > 0.5))
        out.append(("complex64", (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(np.complex64)))
        out.append(("complex128", RNG.normal(size=shape) + 1j * RNG.normal(size=shape)))
    return out


def test_round_trip_is_bit_exact_for_every_dtype_and_shape(tmp_path: Path) -> None:
    arrays = _arrays()
    bf = (RNG.normal(size=(3, 5)).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)  # exactly representable in bf16
    f = write_dump_file(tmp_path / "Op.x.1.2.1764246877073569", "x", [Tensor(a) for _, a in arrays], [Tensor(bf, dtype="bfloat16")])
    dump = read_dump(f)
    assert len(dump.tensors) == len(arrays) + 1
    for spec, (dt, a) in zip(dump.tensors, arrays):
        back = tensor_array(f, spec)
        assert back.dtype == a.dtype and back.shape == a.shape
        assert back.tobytes() == a.tobytes(), dt
    out = tensor_array(f, dump.tensors[-1])
    assert dump.tensors[-1].dtype_name == "DT_BF16" and out.tobytes() == bf.tobytes()


def test_layout_conversions_round_trip() -> None:
    nchw = RNG.normal(size=(2, 20, 3, 5)).astype(np.float32)
    five = nchw_to_nc1hwc0(nchw)
    assert five.shape == (2, 2, 3, 5, 16)
    assert np.array_equal(nc1hwc0_to_nchw(five, 20), nchw)
    assert five[1, 1, 2, 4, 3] == nchw[1, 16 + 3, 2, 4]  # element (n, c1, h, w, c0) is channel c1*C0 + c0
    nd = RNG.normal(size=(3, 33, 40)).astype(np.float32)
    nz = nd_to_fractal_nz(nd)
    assert nz.shape == (3, 3, 3, 16, 16)
    assert nz[0, 2, 1, 5, 7] == nd[0, 1 * 16 + 5, 2 * 16 + 7]  # (W1, H1, H0, W0) tiles
    assert np.array_equal(fractal_nz_to_nd(nz, 33, 40), nd)


def test_reader_converts_stored_formats_to_the_original_shape(tmp_path: Path) -> None:
    nchw = RNG.normal(size=(1, 3, 4, 4)).astype(np.float32)
    nd = RNG.normal(size=(20, 18)).astype(np.float32)
    f = write_dump_file(
        tmp_path / "Conv2D.c.1.1.1764246877073569", "c",
        [Tensor(nchw_to_nc1hwc0(nchw), format="NC1HWC0", original_shape=(1, 3, 4, 4))],
        [Tensor(nd_to_fractal_nz(nd), format="FRACTAL_NZ", original_shape=(20, 18))],
    )  # fmt: skip
    d = read_dump(f)
    a, fa = to_original_shape(tensor_array(f, d.tensors[0]), d.tensors[0])
    b, fb = to_original_shape(tensor_array(f, d.tensors[1]), d.tensors[1])
    assert (fa, fb) == ("NCHW", "ND") and np.array_equal(a, nchw) and np.array_equal(b, nd)


def test_stats_match_numpy_with_nan_and_inf() -> None:
    a = RNG.normal(size=10_000).astype(np.float32)
    a[[3, 7]] = np.nan
    a[10] = np.inf
    a[11] = -np.inf
    a[12:20] = 0
    s = tensor_stats(a)
    fin = a[np.isfinite(a)].astype(np.float64)
    assert (s["nan_count"], s["pos_inf_count"], s["neg_inf_count"], s["zero_count"]) == (2, 1, 1, 8)
    assert s["min"] == fin.min() and s["max"] == fin.max()
    assert s["mean"] == pytest.approx(fin.mean(), rel=1e-9) and s["std"] == pytest.approx(fin.std(), rel=1e-6)
    assert s["l2norm"] == pytest.approx(np.linalg.norm(fin), rel=1e-9)


def test_dump_names() -> None:
    n = parse_dump_name("Conv2D.resnet_conv1.3.1.1764246877073569")
    assert (n.op_type, n.op_name, n.task_id, n.stream_id, n.timestamp) == ("Conv2D", "resnet_conv1", 3, 1, 1764246877073569)
    f = parse_dump_name("MatMul.layer.0.mm.12.5.1764246877073569.FFTSPLUS.2.0.1")
    assert f.op_name == "layer.0.mm" and f.context_id == 2 and f.task_id == 12
    assert parse_dump_name("README.txt") is None


def _tree(root: Path, n_ops: int = 6, bad_from: int | None = None, scale: float = 1.0) -> list[np.ndarray]:
    """A chain of ops; from op ``bad_from`` on, outputs drift (error injected at a known layer and propagated)."""
    d = model_dump_dir(root)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 64)).astype(np.float32)
    outs = []
    for i in range(n_ops):
        w = np.random.default_rng(100 + i).normal(size=(64, 64)).astype(np.float32) / 8
        y = np.tanh(x @ w)
        if bad_from is not None and i >= bad_from:
            y = y + np.random.default_rng(7 + i).normal(size=y.shape).astype(np.float32) * 0.3 * scale
        write_dump_file(d / dump_file_name("MatMul", f"block/{i}", 10 + i, 1, 1764246877073569 + i), f"block/{i}", [Tensor(x)], [Tensor(y)])
        outs.append(y)
        x = y
    return outs


def test_parse_tree_writes_tensors_table(tmp_path: Path) -> None:
    _tree(tmp_path / "dump")
    r = run_cli("dump", "parse", tmp_path / "dump", "--out", tmp_path / "out", "--npy", tmp_path / "npy", "--json")
    assert r.returncode == 0, r.stderr
    t = pq.read_table(tmp_path / "out" / "tensors.parquet")
    assert t.schema.equals(TENSORS) and t.num_rows == 12
    row = next(x for x in t.to_pylist() if x["io"] == "output")
    assert (row["op_type"], row["op_name"], row["model_name"], row["model_id"], row["iteration"], row["device_id"]) == (
        "MatMul", "block_0", "resnet50", 1, 0, 0,
    )  # fmt: skip
    assert row["shape"] == [4, 64] and row["dtype"] == "DT_FLOAT" and row["size_bytes"] == 4 * 64 * 4
    assert len(list((tmp_path / "npy").glob("*.npy"))) == 12


def test_stats_csv_is_parsed_into_the_same_table(tmp_path: Path) -> None:
    d = model_dump_dir(tmp_path)
    d.mkdir(parents=True)
    (d / "Add.add_1.5.1.1764246877073569.csv").write_text(
        "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,"
        "Nan Count,Negative Inf Count,Positive Inf Count\n"
        "Output,0,640000,DT_FLOAT,NHWC,4x50x50x16,1.99999,1,1.50004,160000,0,0,0\n"
        "Input,0,640000,DT_FLOAT,NHWC,4x50x50x16,NA,NA,NA,160000,3,0,0\n"
    )
    run = parse_dump_tree(tmp_path)
    rows = run.table.to_pylist()
    assert run.errors == [] and len(rows) == 2
    assert (rows[0]["io"], rows[0]["max"], rows[0]["min"], rows[0]["shape"], rows[0]["element_count"]) == (
        "output",
        1.99999,
        1.0,
        [4, 50, 50, 16],
        160000,
    )
    assert rows[1]["max"] is None and rows[1]["nan_count"] == 3 and rows[1]["source"] == "stats_csv"


def _good(path: Path) -> Path:
    return write_dump_file(path, "x", [Tensor(np.arange(8, dtype=np.float32))], [])


MALFORMED = {
    "short": (lambda p: p.write_bytes(b"\x01\x02"), "too short", "offset 0"),
    "header_too_long": (lambda p: p.write_bytes((10**6).to_bytes(8, "little") + b"abc"), "larger than", "offset 0"),
    "bad_protobuf": (lambda p: p.write_bytes((4).to_bytes(8, "little") + b"\xff\xff\xff\xff"), "does not parse", "offset 8"),
    "extra_bytes": (lambda p: p.write_bytes(_good(p).read_bytes() + b"junk"), "add up", "offset"),
    "truncated_data": (lambda p: p.write_bytes(_good(p).read_bytes()[:-5]), "needs 32 bytes", "offset"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_files_are_one_line_errors_and_others_still_parse(tmp_path: Path, kind: str) -> None:
    make, what, where = MALFORMED[kind]
    d = model_dump_dir(tmp_path / "dump")
    d.mkdir(parents=True)
    make(d / f"Op.bad_{kind}.1.1.1764246877073569")
    _good(d / "Op.good.2.1.1764246877073570")
    with pytest.raises(InputError):
        read_dump(d / f"Op.bad_{kind}.1.1.1764246877073569")
    r = run_cli("dump", "parse", tmp_path / "dump", "--out", tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = next(x for x in r.stderr.splitlines() if f"bad_{kind}" in x)
    assert what in line and where in line
    t = pq.read_table(tmp_path / "out" / "tensors.parquet")
    assert t["op_name"].to_pylist() == ["good"]


def test_shape_that_does_not_match_size_is_rejected(tmp_path: Path) -> None:
    from npudiag.dump.formats.dump_proto import DumpData

    msg = DumpData(op_name="x")
    t = msg.input.add(data_type=1, format=2, size=12)
    t.shape.dim.extend([4])
    head = msg.SerializeToString()
    f = tmp_path / "Op.x.1.1.1764246877073569"
    f.write_bytes(len(head).to_bytes(8, "little") + head + b"\0" * 12)
    with pytest.raises(InputError, match="is 16 bytes, header says 12"):
        read_dump(f)


# -- compare ----------------------------------------------------------------------------------


def test_metrics_match_reference_formulas() -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(size=5000)
    x = y + rng.normal(size=5000) * 0.01
    x[100] += 5.0  # one planted large error
    m = compare_arrays(x.astype(np.float32), y.astype(np.float32))
    xs, ys = x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64)
    d = xs - ys
    assert m["cosine_similarity"] == pytest.approx(np.dot(xs, ys) / np.linalg.norm(xs) / np.linalg.norm(ys), rel=1e-12)
    assert m["max_absolute_error"] == pytest.approx(np.abs(d).max()) and m["mean_absolute_error"] == pytest.approx(np.abs(d).mean())
    assert m["root_mean_square_error"] == pytest.approx(math.sqrt(np.mean(d * d)))
    rel = np.abs(xs / ys - 1)
    assert m["max_relative_error"] == pytest.approx(rel.max()) and m["accumulated_relative_error"] == pytest.approx(rel.sum())
    assert m["relative_euclidean_distance"] == pytest.approx(math.sqrt(np.dot(d, d) / np.dot(ys, ys)))

    def norm(v):
        w = np.maximum((v - v.min()) / (v.max() - v.min()), np.finfo(np.float32).eps)
        return w / w.sum()

    p, q = norm(ys), norm(xs)
    assert m["kl_divergence"] == pytest.approx(np.sum(p * np.log(p / q)), rel=1e-9)
    assert m["one_thousandth_ratio"] == pytest.approx(np.mean(np.abs(d) / np.abs(ys) < 0.001))
    assert m["my_std"] == pytest.approx(xs.std())
    assert compare_arrays(np.zeros(4), np.zeros(4))["cosine_similarity"] == 1.0
    assert math.isnan(compare_arrays(np.zeros(4), np.ones(4))["cosine_similarity"])
    assert compare_arrays(np.array([3.0]), np.array([7.0]))["cosine_similarity"] == 1.0  # scalar
    nan = compare_arrays(np.array([1.0, np.nan, 2.0]), np.array([1.0, 1.0, 2.0]))
    assert nan["passed"] is False and "only in my dump" in nan["fail_reason"] and nan["my_nan_count"] == 1


def test_first_failing_op_is_the_layer_where_error_was_injected(tmp_path: Path) -> None:
    _tree(tmp_path / "golden")
    _tree(tmp_path / "mine", bad_from=3)
    run = compare_trees(tmp_path / "mine", tmp_path / "golden")
    s = compare_summary(run)
    assert run.table.schema.equals(COMPARE)
    assert s["first_failing_output"]["op_name"] == "block_3" and s["first_failing_output"]["order"] == 3
    assert s["outputs_failed"] == 3  # blocks 3, 4, 5
    ok = [r for r in run.table.to_pylist() if r["io"] == "output" and r["op_name"] in ("block_0", "block_1", "block_2")]
    assert all(r["passed"] and r["cosine_similarity"] > 0.9999 for r in ok)
    r = run_cli("dump", "compare", tmp_path / "mine", tmp_path / "golden", "--out", tmp_path / "cmp", "--json")
    assert r.returncode == 1, r.stderr  # tensors fail: exit 1, as a CI script expects
    assert json.loads(r.stdout)["first_failing_output"]["op_name"] == "block_3"
    quiet = run_cli("dump", "compare", tmp_path / "mine", tmp_path / "golden", "--out", tmp_path / "cmp", "--quiet")
    assert quiet.returncode == 1 and quiet.stdout == ""
    assert "first failing op: block_3" in quiet.stderr
    assert run_cli("dump", "compare", tmp_path / "mine", tmp_path / "golden", "--out", tmp_path / "cmp", "--no-fail").returncode == 0
    # the Markdown view (a CI job summary): what --markdown writes is what --format markdown prints, the
    # first failing op named, one row per tensor of the JSON's worst list with its cosine and verdict
    md = run_cli("dump", "compare", tmp_path / "mine", tmp_path / "golden", "--out", tmp_path / "cmp", "--format", "markdown",
                 "--markdown", tmp_path / "d.md")  # fmt: skip
    assert md.returncode == 1 and md.stdout == (tmp_path / "d.md").read_text(encoding="utf-8")
    assert md.stdout.startswith("## ❌ npudiag dump compare") and "block\\_3 output" in md.stdout
    rows = [line.strip("|").split("|") for line in md.stdout.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    worst = json.loads(r.stdout)["worst"]
    assert [(c[1].strip().replace("\\_", "_"), float(c[3]), c[-1].strip()) for c in rows] == [
        (w["op_name"], pytest.approx(w["cosine_similarity"], abs=1e-6), "yes" if w["passed"] else "NO") for w in worst
    ]
    csv_file = next((tmp_path / "cmp").glob("result_*.csv"))
    header = csv_file.read_text().splitlines()[0]
    assert header.startswith("Index,OpSequence,OpType,NPUDump,DataType,GroundTruth,DataType,TensorIndex,Shape,CosineSimilarity")


def test_golden_npy_folder_and_mapping(tmp_path: Path) -> None:
    outs = _tree(tmp_path / "mine")
    g = tmp_path / "npy"
    g.mkdir()
    for i, y in enumerate(outs):
        name = "renamed_2" if i == 2 else f"block_{i}"
        np.save(g / f"{name}.output.0.npy", y if i != 4 else y * 1.5)
    (tmp_path / "map.csv").write_text("block_2,renamed_2\n")
    run = compare_trees(tmp_path / "mine", g, tmp_path / "map.csv")
    rows = {r["op_name"]: r for r in run.table.to_pylist() if r["io"] == "output"}
    assert set(rows) == {f"block_{i}" for i in range(6)} and rows["block_2"]["golden_name"] == "renamed_2.output.0.npy"
    assert compare_summary(run)["first_failing_output"]["op_name"] == "block_4"
    assert len(run.unmatched) == 6  # inputs have no golden here


# -- configs ----------------------------------------------------------------------------------


def test_author_merges_and_keeps_profiler(tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"profiler": {"switch": "on", "output": "p"}}))
    r = run_cli("dump", "--layers", "conv1,fc", "--model", "ResNet-101", "--mode", "all", "--steps", "0,5-9", "--data", "stats",
                "--level", "op", "--path", tmp_path / "d", "--acl-json", acl)  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = json.loads(acl.read_text())
    assert data["profiler"] == {"switch": "on", "output": "p"}
    assert data["dump"] == {
        "dump_path": str(tmp_path / "d"), "dump_mode": "all", "dump_list": [{"model_name": "ResNet-101", "layer": ["conv1", "fc"]}],
        "dump_op_switch": "off", "dump_data": "stats", "dump_level": "op", "dump_step": "0|5-9",
    }  # fmt: skip
    assert "aclmdlSetDump" in r.stderr and "ResNet-101/<model_id>/<iteration>" in r.stderr
    assert run_cli("dump", "check", acl).returncode == 0
    over = run_cli("dump", "--overflow", "--path", "o", "--acl-json", tmp_path / "o.json")
    assert over.returncode == 0 and json.loads((tmp_path / "o.json").read_text())["dump"] == {"dump_path": "o", "dump_debug": "on"}
    # model_name may be omitted (CANN: the named ops are dumped in every model)
    every = run_cli("dump", "--layers", "conv1", "--acl-json", tmp_path / "x.json")
    assert every.returncode == 0 and json.loads((tmp_path / "x.json").read_text())["dump"]["dump_list"] == [{"layer": ["conv1"]}]
    assert run_cli("dump", "check", tmp_path / "x.json").returncode == 0
    single = run_cli("dump", "--single-op", "--layers", "conv1", "--acl-json", tmp_path / "y.json")
    assert single.returncode == 2 and "drop --single-op" in single.stderr and not (tmp_path / "y.json").exists()
    # the official Ascend C example: kernel data only
    kernel = tmp_path / "k.json"
    kernel.write_text(json.dumps({"dump": {"dump_kernel_data": "all", "dump_path": "../output"}}))
    assert run_cli("dump", "check", kernel).returncode == 0
    steps = run_cli("dump", "--model", "m", "--steps", "9-3", "--acl-json", tmp_path / "x.json")
    assert steps.returncode == 2 and "ends before it starts" in steps.stderr
    # an msprobe config whose task is not text is one line, not an internal error
    odd = tmp_path / "task.json"
    odd.write_text(json.dumps({"task": ["statistics"], "level": "L1"}))
    r = run_cli("dump", "check", odd)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "is not a task name" in r.stderr


def test_msprobe_format(tmp_path: Path) -> None:
    r = run_cli(
        "dump", "--format", "msprobe", "--layers", "conv2d,linear", "--steps", "0,4-6", "--path", "./dp", "--out", tmp_path / "config.json"
    )
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg == {"task": "tensor", "dump_path": "./dp", "rank": [], "step": [0, "4-6"], "level": "mix",
                   "tensor": {"scope": [], "list": ["conv2d", "linear"], "data_mode": ["output"]}}  # fmt: skip
    checked = run_cli("dump", "check", tmp_path / "config.json")  # what npudiag wrote, npudiag accepts
    assert checked.returncode == 0 and "msprobe config OK" in checked.stdout
    if SAMPLES.is_dir():  # same keys and value forms as msprobe's shipped default
        default = json.loads((SAMPLES / "mstt_msprobe_default_config.json").read_text())
        assert {"task", "dump_path", "rank", "step", "level"} <= set(default) and set(cfg["tensor"]) <= set(default["tensor"])


def test_check_reports_each_problem(tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    (tmp_path / "a_file").write_text("")
    acl.write_text(json.dumps({"dump": {
        "dump_path": str(tmp_path / "a_file" / "dump"), "dump_mode": "everything", "dump_step": "1,3", "dump_stats": ["Max"],
        "dump_list": [{"layer": ["conv1"], "modelname": "x"}, {"model_name": [], "layer": ["fc"]}], "dump_speed": "fast",
    }}))  # fmt: skip
    r = run_cli("dump", "check", acl)
    assert r.returncode == 2
    text = r.stderr
    expected_problems = (
        "dump.dump_speed: unknown key", "dump.dump_mode: 'everything' is not one of", "separated by '|'", "needs dump_data \"stats\"",
        "dump_list[0].modelname: unknown key", "dump_list[1].model_name: must be a non-empty string", "not writable",
    )  # fmt: skip
    for expected in expected_problems:
        assert expected in text, expected
    assert all(line.startswith(f"npudiag: {acl}: ") for line in text.strip().splitlines())


def test_corpus_samples_pass_the_check() -> None:
    if not SAMPLES.is_dir():
        pytest.skip(f"adump samples not present at {SAMPLES} (only in the project workspace)")
    for f in sorted(SAMPLES.glob("hicann_*acl.json")):
        assert dc.check_dump_config(f)[1] == [], f


def test_msprobe_layers_select_modules_and_apis_by_msprobes_rule(tmp_path: Path) -> None:
    """msprobe dumps a call when a list entry is part of its name, at the levels that record that kind
    of call: a module name (conv1) selects at mix (or L0), never at L1 (APIs only)."""
    r = run_cli("dump", "--format", "msprobe", "--layers", "conv1", "--out", tmp_path / "c.json")
    cfg = json.loads((tmp_path / "c.json").read_text())
    assert r.returncode == 0 and cfg["level"] == "mix" and cfg["tensor"]["list"] == ["conv1"]
    sample = SAMPLES / "msprobe_quick_start_gpu_dump_step0_proc2016" / "dump.json"
    if sample.is_file():
        calls = list(json.loads(sample.read_text())["data"])
        modules = [c for c in calls if c.startswith("Module.") and "conv1" in c]
        apis = [c for c in calls if not c.startswith("Module.") and "conv1" in c]
        assert "Module.conv1.Conv2d.forward.0" in modules and apis == []  # at L1 "conv1" would select nothing
    overflow = run_cli("dump", "--format", "msprobe", "--overflow", "--out", tmp_path / "o.json")
    o = json.loads((tmp_path / "o.json").read_text())
    assert overflow.returncode == 0 and o["task"] == "nan_check" and "nan_check" in o
    assert run_cli("dump", "check", tmp_path / "o.json").returncode == 0
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"task": "run_ut", "dump_path": "./d", "rank": [], "step": [], "level": "L1"}))
    checked = run_cli("dump", "check", old)
    assert checked.returncode != 0 and "acc_check" in checked.stdout + checked.stderr


def test_msprobe_task_names_follow_the_msprobe_release(tmp_path: Path) -> None:
    # TASK_LIST of msprobe/core/common/const.py in the mindstudio-probe wheels: overflow_check up to 26.0.x,
    # nan_check from 26.1.0; run_ut / free_benchmark / grad_probe up to 8.3.x; exception_dump from 8.2.0
    cfg = tmp_path / "c.json"
    for task, release, ok in (("overflow_check", "8.3.0", True), ("overflow_check", "26.0.0", True), ("overflow_check", "26.1.0", False),
                              ("nan_check", "26.0.0", False), ("nan_check", "26.2.0", True), ("run_ut", "8.3.3", True),
                              ("run_ut", "26.0.0", False), ("exception_dump", "8.1.2", False), ("exception_dump", "8.2.0", True),
                              ("structure", "1.2.0", False), ("structure", "1.3.0", True), ("acc_check", "8.3.0", False)):  # fmt: skip
        level = "L2" if task == "exception_dump" else "L1"
        cfg.write_text(json.dumps({"task": task, "dump_path": "./d", "rank": [], "step": [], "level": level}))
        r = run_cli("dump", "check", cfg, "--msprobe-version", release)
        assert (r.returncode == 0) == ok, (task, release, r.stdout + r.stderr)
        if not ok:
            assert f"not a task of msprobe {release}" in r.stdout + r.stderr
    cfg.write_text(json.dumps({"task": "overflow_check", "dump_path": "./d"}))
    newest = run_cli("dump", "check", cfg)  # nothing installed here: checked against the newest msprobe
    assert newest.returncode != 0 and "use nan_check (since 26.1.0)" in newest.stdout + newest.stderr
    out = tmp_path / "old.json"
    r = run_cli("dump", "--format", "msprobe", "--overflow", "--msprobe-version", "8.3.0", "--out", out)
    assert r.returncode == 0 and json.loads(out.read_text())["task"] == "overflow_check"
    bad = run_cli("dump", "--format", "msprobe", "--overflow", "--msprobe-version", "latest", "--out", out)
    assert bad.returncode == 2 and "not a release number" in bad.stderr
    cfg.write_text(json.dumps({"task": "exception_dump", "dump_path": "./d", "level": "L1"}))
    exc = run_cli("dump", "check", cfg, "--msprobe-version", "26.2.0")  # ExceptionDumpToolFactory: a tool at L2 only
    assert exc.returncode != 0 and "only at level L2" in exc.stdout + exc.stderr
    cfg.write_text(json.dumps({"task": "exception_dump", "dump_path": "./d", "level": "L2"}))
    assert run_cli("dump", "check", cfg, "--msprobe-version", "26.2.0").returncode == 0
    mixed = run_cli("dump", "--layers", "conv1", "--msprobe-version", "8.3.0", "--acl-json", tmp_path / "a.json")
    assert mixed.returncode == 2 and "--msprobe-version does not go with --format acl" in mixed.stderr


def test_exception_dump_is_authored_alone_and_checked_as_cann_runs_it(tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    r = run_cli("dump", "--exception", "norm", "--path", "./exc", "--acl-json", acl)
    assert r.returncode == 0, r.stderr
    assert json.loads(acl.read_text())["dump"] == {"dump_path": "./exc", "dump_scene": "aic_err_norm_dump"}
    assert "msaicerr" in r.stderr and "NPU_COLLECT_PATH" in r.stderr
    assert run_cli("dump", "check", acl).returncode == 0
    both = run_cli("dump", "--exception", "brief", "--layers", "conv1", "--acl-json", tmp_path / "b.json")
    assert both.returncode == 2 and "cannot be combined" in both.stderr
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps({"dump": {"dump_path": "./d", "dump_scene": "lite_exception", "dump_list": [{"model_name": "m"}]}}))
    bad = run_cli("dump", "check", mixed)
    assert bad.returncode == 2 and "cannot be combined with a model dump" in bad.stderr
    watcher = tmp_path / "w.json"
    watcher.write_text(json.dumps({"dump": {"dump_path": "./d", "dump_scene": "watcher", "dump_mode": "output",
                                            "dump_list": [{"model_name": "m", "layer": ["A"], "watcher_nodes": ["C"]}]}}))  # fmt: skip
    assert "watcher mode takes no model_name" in run_cli("dump", "check", watcher).stderr
    env = run_cli("dump", "check", acl, env={"ASCEND_DUMP_SCENE": "aic_err_brief_dump"})
    assert env.returncode == 0 and "ASCEND_DUMP_SCENE" in env.stderr and "decides over" in env.stderr


@pytest.mark.parametrize(
    ("section", "code", "words"),
    [
        # CANN adump's DumpConfigConverter tests: these are refused with the error code named
        ({"dump_path": "./", "dump_level": "kernel", "dump_list": [{"opname_range": [{"begin": "op1", "end": "op2"}]}]}, "EP0005",
         'needs dump_level "op"'),
        ({"dump_path": "./", "dump_level": "op", "dump_list": [{"opname_range": [{"begin": "op1", "end": "op2"}]}]}, "EP0001",
         "needs the entry's model_name"),
        ({"dump_path": "./", "dump_level": "op", "dump_list": [{"model_name": "m", "opname_range": [{"begin": "", "end": "op2"}]}]},
         "EP0003", "begin and end must name ops"),
        ({"dump_path": "./", "dump_level": "kernel", "dump_list": [{"model_name": "m", "optype_blacklist": [{"name": "t"}]}]}, "EP0005",
         'needs dump_level "op"'),
        ({"dump_path": "./", "dump_list": [{"model_name": "m", "layer": []}]}, "EP0001", "layer: empty"),
        # aclmdlSetDump's reference: dump_path is required for a model or single-op dump
        ({"dump_list": [{"model_name": "ResNet-50"}], "dump_mode": "output"}, "EP0001", "needs dump_path"),
    ],
)  # fmt: skip
def test_dump_check_refuses_what_cann_refuses(tmp_path: Path, section: dict, code: str, words: str) -> None:
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"dump": section}))
    r = run_cli("dump", "check", acl)
    assert r.returncode == 2, r.stdout + r.stderr  # a config CANN refuses is bad input
    text = " ".join((r.stdout + r.stderr).split())
    assert words in text and code in text


def test_dump_check_passes_an_op_level_range_with_its_model(tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    entry = {"model_name": "m", "opname_range": [{"begin": "op1", "end": "op2"}]}
    acl.write_text(json.dumps({"dump": {"dump_path": str(tmp_path), "dump_level": "op", "dump_list": [entry]}}))
    assert run_cli("dump", "check", acl).returncode == 0


def test_any_json_as_a_dump_config_gives_lines_not_a_crash() -> None:
    """Random JSON shaped like an acl.json dump section or an msprobe config.json (wrong types, nesting,
    lists where text is expected) is checked into one-line problems; no value makes the check raise (an
    msprobe task or level given as a list was an internal error)."""
    import random

    from npudiag.dump import config

    rng = random.Random(5)
    keys = [*config.DUMP_KEYS, "task", "level", "rank", "step", "statistics", "tensor", "scope", "list", "data_mode",
            "layer", "model_name", "opname_range", "optype_blacklist", "watcher_nodes", "begin", "end", "name"]  # fmt: skip
    atoms = [None, True, 3, -1, 1.5, "", "on", "off", "L1", "op", "watcher", "tensor", "stats", "0|1", "statistics"]

    def value(depth: int = 0):
        r = rng.random()
        if depth > 2 or r < 0.4:
            return rng.choice(atoms)
        if r < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(5000):
        d = {rng.choice(keys): value() for _ in range(rng.randint(0, 6))}
        problems = config._config_problems(Path("c.json"), {"dump": d} if rng.random() < 0.5 else d)
        assert all(isinstance(p, str) and "\n" not in p and p.startswith("c.json: ") for p in problems), problems
