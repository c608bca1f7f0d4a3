"""msprobe's dump output (dump.json statistics): parsed into the tensors table, compared tensor by
tensor. Every number is recomputed from the raw JSON with the json module alone."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import npudiag
from npudiag.dump.ingest import parse_dump_tree
from npudiag.testing.msprobe_dumps import PLANTED, write_pair

from .conftest import CORPUS_ROOT
from .helpers import run_cli

SAMPLES = CORPUS_ROOT / "adump" / "samples"


def _msprobe_dumps() -> list[Path]:
    if not SAMPLES.is_dir():
        return []
    return sorted(p for p in SAMPLES.rglob("dump.json") if "msprobe" in str(p.relative_to(SAMPLES)))


def _tensors_by_hand(path: Path) -> list[tuple[str, dict]]:
    """(msprobe name, tensor) of every tensor, walking the JSON as msprobe's compare names them."""
    doc = json.loads(path.read_text())
    out = []

    def walk(x, name, index_lists=True):
        if isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{name}.{i}" if index_lists else name, index_lists)
        elif isinstance(x, dict):
            if isinstance(x.get("type"), str):
                if x["type"].endswith("Tensor"):
                    out.append((name, x))
                return
            for k, v in x.items():
                walk(v, f"{name}.{k}", index_lists)

    for call, entry in doc["data"].items():
        if not isinstance(entry, dict):
            continue
        if "parameters_grad" in call.split(".")[-2:]:
            walk(entry, call, index_lists=False)
            continue
        for key, io in (("input_args", "input"), ("input_kwargs", "input"), ("input", "input"), ("output", "output"),
                        ("parameters", "parameters")):  # fmt: skip
            if key in entry:
                walk(entry[key], f"{call}.{io}")
    return out


@pytest.mark.parametrize("path", _msprobe_dumps(), ids=lambda p: str(p.parent.relative_to(SAMPLES)))
def test_corpus_msprobe_dumps_match_the_raw_json(path: Path) -> None:
    run = parse_dump_tree(path)
    assert run.errors == [] and run.files == 1
    want = _tensors_by_hand(path)
    t = run.table
    assert t.num_rows == len(want) > 0
    assert t["tensor_name"].to_pylist() == [n for n, _ in want]
    assert set(t["source"].to_pylist()) == {"msprobe"}
    for col, key in (("max", "Max"), ("min", "Min"), ("mean", "Mean"), ("l2norm", "Norm")):
        mine = t[col].to_pylist()
        raw = [v.get(key) if isinstance(v.get(key), (int, float)) and not isinstance(v.get(key), bool) else None for _, v in want]
        assert mine == [None if r is None else float(r) for r in raw], col
    assert t["shape"].to_pylist() == [v.get("shape") for _, v in want]
    assert t["dtype"].to_pylist() == [v.get("dtype") for _, v in want]


def test_names_follow_msprobe(tmp_path: Path) -> None:
    path = SAMPLES / "msprobe_quick_start_gpu_dump_step0_proc2016" / "dump.json"
    if not path.is_file():
        pytest.skip(f"msprobe sample not present at {path} (set NPUDIAG_CORPUS)")
    rows = {r["tensor_name"]: r for r in parse_dump_tree(path).table.to_pylist()}
    conv = rows["Functional.conv2d.0.forward.input.1"]  # the weight, the second positional argument
    assert conv["io"] == "input" and conv["index"] == 1 and conv["shape"] == [64, 3, 7, 7] and conv["op_type"] == "Functional.conv2d"
    assert rows["Module.conv1.Conv2d.forward.0.parameters.weight"]["io"] == "parameters"
    grad = rows["Module.fc.Linear.parameters_grad.0.weight"]
    assert grad["io"] == "parameters_grad" and grad["op_type"] == "Module.fc.Linear" and grad["shape"] == [1000, 2048]


def _write_msprobe(folder: Path, calls: dict) -> Path:
    """A dump.json as msprobe writes it (Python's json writer, NaN and Infinity as its tokens)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None, "data": calls}
    (folder / "dump.json").write_text(json.dumps(doc, indent=1))
    (folder / "construct.json").write_text(json.dumps({k: None for k in calls}, indent=1))
    (folder / "stack.json").write_text(json.dumps({k: ["File train.py, line 1, in <module>"] for k in calls}, indent=1))
    return folder / "dump.json"


def _t(mx: float, mn: float, mean: float, norm: float, shape=(4, 4)) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float16", "shape": list(shape), "Max": mx, "Min": mn, "Mean": mean, "Norm": norm,
            "requires_grad": False}  # fmt: skip


def _calls(bad: float | None = None) -> dict:
    out = bad if bad is not None else 3.0
    return {
        "Torch.matmul.0.forward": {
            "input_args": [_t(1.0, -1.0, 0.0, 2.0), _t(2.0, -2.0, 0.1, 4.0)],
            "input_kwargs": {},
            "output": [_t(3.0, -3.0, 0.2, 6.0)],
        },  # fmt: skip
        "Torch.softmax.0.forward": {
            "input_args": [_t(3.0, -3.0, 0.2, 6.0), {"type": "int", "value": -1}],
            "input_kwargs": {},
            "output": [_t(out, 0.0, 0.25, 1.5)],
        },  # fmt: skip
        "Torch.add.0.forward": {
            "input_args": [_t(out, 0.0, 0.25, 1.5), _t(1.0, 1.0, 1.0, 4.0)],
            "input_kwargs": {"alpha": {"type": "int", "value": 1}},
            "output": [_t(2.0, 1.0, 1.25, 5.0)],
        },  # fmt: skip
    }


def test_nan_and_inf_as_python_writes_them_are_read_and_shown(tmp_path: Path) -> None:
    path = _write_msprobe(tmp_path / "dump" / "step0" / "rank0", _calls(bad=math.inf))
    assert "Infinity" in path.read_text()
    t = parse_dump_tree(tmp_path / "dump").table
    assert t.num_rows == 8 and set(t["iteration"].to_pylist()) == {0}
    maxes = dict(zip(t["tensor_name"].to_pylist(), t["max"].to_pylist()))
    assert maxes["Torch.softmax.0.forward.output.0"] == math.inf
    r = run_cli("dump", "parse", tmp_path / "dump", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stdout.split())
    assert "statistics only" in said and "2 tensors hold NaN/Inf" in said and "Torch.softmax.0.forward output 0" in said
    assert pq.read_table(tmp_path / "out" / "tensors.parquet").num_rows == 8


def test_a_dump_json_that_is_not_msprobes_is_one_line_and_others_still_parse(tmp_path: Path) -> None:
    _write_msprobe(tmp_path / "d" / "rank0", _calls())
    (tmp_path / "d" / "rank1").mkdir()
    (tmp_path / "d" / "rank1" / "dump.json").write_text('{"something": "else"}')
    (tmp_path / "d" / "rank2").mkdir()
    (tmp_path / "d" / "rank2" / "dump.json").write_bytes(b'{"task": "statistics", "data": {"a": \xff}}')
    (tmp_path / "d" / "rank3").mkdir()
    (tmp_path / "d" / "rank3" / "dump.json").write_text('{"task": "statistics", "data": ' + "[" * 5000 + "]" * 5000 + "}")
    r = npudiag.parse_dump(tmp_path / "d")
    assert r.tables["tensors"].num_rows == 8
    assert len(r.errors) == 3 and all("\n" not in e for e in r.errors)
    assert any("rank1" in e and "msprobe" in e for e in r.errors)
    assert any("rank2" in e and "UTF-8" in e for e in r.errors)
    assert any("rank3" in e for e in r.errors)


def _by_hand(mine: Path, golden: Path) -> dict[str, dict[str, tuple]]:
    """Per tensor name and statistic: (diff, relative error %) from the two raw JSON files."""
    a, b = dict(_tensors_by_hand(mine)), dict(_tensors_by_hand(golden))
    out = {}
    for name, t in a.items():
        g = b[name]
        out[name] = {}
        for key, col in (("Max", "max"), ("Min", "min"), ("Mean", "mean"), ("Norm", "l2norm")):
            d = t[key] - g[key]
            out[name][col] = (d, abs(d / g[key]) * 100 if g[key] else None)
    return out


def test_two_msprobe_dumps_compare_by_statistics(tmp_path: Path) -> None:
    golden = _write_msprobe(tmp_path / "golden" / "step0" / "rank0", _calls())
    calls = _calls(bad=math.inf)  # softmax's output overflows in mine, and what reads it
    calls["Torch.matmul.0.forward"]["output"] = [_t(3.0, -3.0, 0.21, 6.1)]  # moved a little: passes
    mine = _write_msprobe(tmp_path / "mine" / "step0" / "rank0", calls)
    r = npudiag.compare_dumps(tmp_path / "mine", tmp_path / "golden", tmp_path / "out")
    t = r.tables["compare"]
    assert t.num_rows == 8 + 2 and r.errors == [] and r.failed  # the tensors and the two scalar arguments
    want = _by_hand(mine, golden)
    for row in (x for x in t.to_pylist() if x["tensor_name"] in want):
        for s in ("max", "min", "mean", "l2norm"):
            d, rel = want[row["tensor_name"]][s]
            got = row[f"{s}_diff"]
            assert (math.isnan(d) and math.isnan(got)) or got == pytest.approx(d), (row["tensor_name"], s)
            if rel is not None and math.isfinite(rel):
                assert row[f"{s}_relative_error_pct"] == pytest.approx(rel), (row["tensor_name"], s)
    first = r.summary["first_failing_output"]
    assert first["tensor_name"] == "Torch.softmax.0.forward.output.0" and "NaN/Inf" in first["fail_reason"]
    assert {x["tensor_name"] for x in t.to_pylist() if x["passed"] is False} == {
        "Torch.softmax.0.forward.output.0", "Torch.add.0.forward.input.0"}  # fmt: skip
    csv_file = next((tmp_path / "out").glob("compare_result_*.csv"))
    header = csv_file.read_text().splitlines()[0].split(",")
    assert header[:6] == ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape"]
    assert header[6:14] == ["Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr",
                            "NormRelativeErr"]  # fmt: skip
    assert pq.read_table(tmp_path / "out" / "stats_compare.parquet").num_rows == 10
    cli = run_cli("dump", "compare", tmp_path / "mine", tmp_path / "golden", "--out", tmp_path / "out2")
    said = " ".join(cli.stdout.split())
    assert cli.returncode == 1 and "compared by statistics" in said and "Torch.softmax.0.forward.output.0" in said
    assert run_cli("dump", "compare", tmp_path / "mine", tmp_path / "golden", "--out", tmp_path / "out3", "--no-fail").returncode == 0


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "msprobe_compare"


def _number(text: str) -> float | None:
    """A cell of msprobe's CSV as a number: None for N/A and empty, floats for 0, 1.5, inf, nan."""
    t = text.strip()
    if t in ("N/A", ""):
        return None
    return float(t.rstrip("%"))


def test_fixture_pair_is_what_the_generator_writes(tmp_path: Path) -> None:
    write_pair(tmp_path)
    for side in ("mine", "golden"):
        for name in ("dump.json", "construct.json", "stack.json"):
            rel = Path(side) / "step0" / "rank0" / name
            assert (tmp_path / rel).read_bytes() == (FIXTURE / rel).read_bytes(), rel


def test_verdicts_and_numbers_match_msprobe_compare_on_the_same_pair() -> None:
    """msprobe 26.2.0's own compare_result CSV of the fixture pair, row by row against npudiag's."""
    with open(FIXTURE / "msprobe_compare_result.csv", newline="") as fh:
        theirs = list(csv.DictReader(fh))
    r = npudiag.compare_dumps(FIXTURE / "mine", FIXTURE / "golden")
    ours = {row["tensor_name"]: row for row in r.tables["compare"].to_pylist()}
    assert set(ours) == {t["NPU Name"] for t in theirs}
    for t in theirs:
        row = ours[t["NPU Name"]]
        assert row["result"] == t["Result"], (t["NPU Name"], row["fail_reason"], t["Err_message"])
        for s, col, rel in (("max", "Max diff", "MaxRelativeErr"), ("min", "Min diff", "MinRelativeErr"),
                            ("mean", "Mean diff", "MeanRelativeErr"), ("l2norm", "L2norm diff", "NormRelativeErr")):  # fmt: skip
            want = _number(t[col])
            got = row[f"{s}_diff"]
            if want is None or math.isnan(want):
                assert got is None or math.isnan(got) or math.isinf(got), (t["NPU Name"], col)
            else:
                assert got == pytest.approx(want), (t["NPU Name"], col)
            want_rel = _number(t[rel])
            if want_rel is not None and math.isfinite(want_rel) and t[rel].endswith("%"):
                assert row[f"{s}_relative_error_pct"] == pytest.approx(want_rel), (t["NPU Name"], rel)
    planted = {c.split(" ")[0] for c in PLANTED}
    assert {row["op_name"] for row in ours.values()} == planted
    first = r.summary["first_failing_output"]
    assert first["op_name"] == "Torch.matmul.0.forward" and "L2 norm" in first["fail_reason"]
    assert r.summary["tensors_failed"] == sum(t["Result"] == "error" for t in theirs)
    assert r.summary["tensors_warned"] == sum(t["Result"] == "warning" for t in theirs)


def test_an_msprobe_dump_needs_an_msprobe_golden(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(npudiag.InputError, match="msprobe dump"):  # GOLDEN holds no msprobe dump: nothing to compare with
        npudiag.compare_dumps(FIXTURE / "mine", tmp_path / "empty")


def test_tensor_mode_rows_name_the_file_msprobe_saved(tmp_path: Path) -> None:
    calls = _calls()
    for i, t in enumerate(calls["Torch.matmul.0.forward"]["input_args"]):
        t["data_name"] = f"Torch.matmul.0.forward.input.{i}.pt"
    calls["Torch.matmul.0.forward"]["input_args"][1]["data_name"] = "../../escape.pt"  # a name is never a path
    path = _write_msprobe(tmp_path / "d" / "step0" / "rank0", calls)
    rows = {r["tensor_name"]: r for r in parse_dump_tree(tmp_path / "d").table.to_pylist()}
    assert rows["Torch.matmul.0.forward.input.0"]["file"] == str(path.parent / "dump_tensor_data" / "Torch.matmul.0.forward.input.0.pt")
    assert rows["Torch.matmul.0.forward.input.1"]["file"] == str(path)
    assert rows["Torch.softmax.0.forward.output.0"]["file"] == str(path)


def test_parse_prints_markdown_with_the_counts_and_rows_of_the_json(tmp_path: Path) -> None:
    """dump parse --format markdown: the tensor count recomputed from the raw dump.json; the first rows are the
    tensors --json lists first, each row's shape, min, max and mean those the raw dump.json states for that
    tensor; the --markdown file the same text."""
    path = SAMPLES / "msprobe_quick_start_gpu_dump_step0_proc2016" / "dump.json"
    if not path.is_file():
        pytest.skip(f"msprobe sample not present at {path} (set NPUDIAG_CORPUS)")
    r = run_cli("dump", "parse", path.parent, "--out", tmp_path / "o", "--top", "3", "--format", "markdown",
                "--markdown", tmp_path / "p.md")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout == (tmp_path / "p.md").read_text(encoding="utf-8")
    lines = r.stdout.splitlines()
    assert lines[0] == f"## npudiag dump parse — 1 file, {len(_tensors_by_hand(path)):,} tensors, statistics only"
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")][1:]
    js = json.loads(run_cli("dump", "parse", path.parent, "--out", tmp_path / "o2", "--top", "3", "--json").stdout)
    raw = dict(_tensors_by_hand(path))  # by msprobe's tensor name, straight from the JSON
    firsts = [raw[t["tensor_name"]] for t in js["tensors_table"]]
    assert [[row[3], row[4], row[5], row[6]] for row in rows] == [
        ["x".join(map(str, x["shape"])), format(x["Min"], ".4g"), format(x["Max"], ".4g"), format(x["Mean"], ".4g")] for x in firsts
    ]
    assert [row[0] for row in rows] == [t["op_name"].replace("_", "\\_") for t in js["tensors_table"]]
    assert lines[-1] == f"{len(_tensors_by_hand(path)) - 3:,} more tensors in tensors.parquet."
