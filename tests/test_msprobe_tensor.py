"""msprobe tensor mode: the saved tensors read without PyTorch, compared as msprobe compares them.

The reference numbers are msprobe 26.2.0's own CSV on the same pair (fixtures/msprobe_compare_tensor)
and what torch itself reads from each saved file (tests/data/saved_tensors)."""

from __future__ import annotations

import csv
import io
import json
import math
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from npudiag.dump.formats.saved_tensor import read_saved_tensor
from npudiag.dump.tensor_metrics import tensor_metrics
from npudiag.errors import InputError

from .helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
PAIR = ROOT / "fixtures" / "msprobe_compare_tensor"
SAVED = Path(__file__).resolve().parent / "data" / "saved_tensors"
COLUMNS = {"Cosine": "cosine", "EucDist": "euc_dist", "MaxAbsErr": "max_abs_err", "MaxRelativeErr": "max_relative_err",
           "One Thousandth Err Ratio": "one_thousandth_err_ratio", "Five Thousandths Err Ratio": "five_thousandths_err_ratio"}  # fmt: skip


@pytest.mark.parametrize("pt", sorted(SAVED.glob("*.pt")), ids=lambda p: p.stem)
def test_saved_tensors_read_as_torch_reads_them(pt: Path) -> None:
    got, ref = read_saved_tensor(pt), np.load(pt.with_suffix(".ref.npy"))
    assert got.dtype == ref.dtype and got.shape == ref.shape and np.array_equal(got, ref)


def _cell(text: str) -> float | None:
    return None if text in ("unsupported", "N/A") else math.nan if text == "Nan" else float(text)


def test_tensor_mode_compare_equals_msprobes_own(tmp_path: Path) -> None:
    (mine,) = (PAIR / "mine").rglob("dump.json")
    (golden,) = (PAIR / "golden").rglob("dump.json")
    r = run_cli("dump", "compare", mine.parent, golden.parent, "--out", tmp_path / "c", env={"COLUMNS": "100"})
    assert r.returncode == 1, r.stderr  # one output fails, as msprobe says
    assert "compared by statistics and data" in r.stdout and "Tensor.softmax.0.backward.output.0" in r.stdout
    theirs = {row["NPU Name"]: row for row in csv.DictReader((PAIR / "msprobe_compare_result.csv").open(encoding="utf-8"))}
    ours = pq.read_table(tmp_path / "c" / "stats_compare.parquet").to_pylist()
    assert len(ours) == 39
    cells = 0
    for row in ours:
        ref = theirs[row["tensor_name"]]
        for col, key in COLUMNS.items():
            want, got = _cell(ref[col]), row[key]
            if want is None or got is None:
                assert want is None and got is None, (row["tensor_name"], col)
            elif math.isnan(want):
                assert math.isnan(got), (row["tensor_name"], col)
            else:
                assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (row["tensor_name"], col)
            cells += 1
        assert row["result"] == ref["Result"], row["tensor_name"]
    assert cells == 234
    # msprobe lists two gradients that are None (no tensor); npudiag has no row for them
    assert set(theirs) - {row["tensor_name"] for row in ours} == {"Functional.linear.0.backward.output.1",
                                                                    "Tensor.__mul__.0.backward.output.1"}  # fmt: skip
    header = next(csv.reader((tmp_path / "c").glob("compare_result_*.csv").__next__().open(encoding="utf-8")))
    assert header[6:12] == list(COLUMNS)


def test_metrics_recounted_with_numpy_on_the_planted_weight() -> None:
    """The planted 1 % on fc2's weight: recomputed from the two saved weights with a few lines of numpy."""
    (m,) = (PAIR / "mine").rglob("Functional.linear.1.forward.input.1.pt")
    (g,) = (PAIR / "golden").rglob("Functional.linear.1.forward.input.1.pt")
    a, b = read_saved_tensor(m).astype(float), read_saved_tensor(g).astype(float)
    got, why = tensor_metrics(read_saved_tensor(m), read_saved_tensor(g))
    assert why is None and np.allclose(a, b * 1.01, rtol=1e-6)
    assert got["max_abs_err"] == pytest.approx(np.abs(a - b).max(), abs=1e-12)
    assert got["euc_dist"] == pytest.approx(np.linalg.norm(a - b))
    assert got["max_relative_err"] == pytest.approx(0.01, abs=1e-6) and got["one_thousandth_err_ratio"] == 0.0
    assert got["cosine"] == 1.0  # a scaled tensor points the same way


def test_the_rules_of_the_data_metrics() -> None:
    x = np.array([[1.0, 2.0], [0.0, 4.0]], np.float32)
    same, _ = tensor_metrics(x, x.copy())
    assert same == {"cosine": 1.0, "euc_dist": 0.0, "max_abs_err": 0.0, "max_relative_err": 0.0, "one_thousandth_err_ratio": 1.0,
                    "five_thousandths_err_ratio": 1.0}  # fmt: skip
    assert tensor_metrics(x, x[:1])[1] == "shapes differ" and tensor_metrics(x[:0], x[:0])[1] == "empty tensor"
    nan = x.copy()
    nan[0, 0] = np.nan
    assert tensor_metrics(nan, x)[1] == "NaN / Inf at different places"
    both, why = tensor_metrics(nan, nan.copy())  # NaN at the same place: set to 0 on both
    assert why is None and both["max_abs_err"] == 0.0
    scalar, why = tensor_metrics(np.array([3.0]), np.array([2.0]))  # squeezed to 0-d: the two largest errors only
    assert why == "scalar" and scalar["max_abs_err"] == 1.0 and scalar["max_relative_err"] == 0.5 and scalar["cosine"] is None
    zeros, _ = tensor_metrics(np.zeros(3), np.ones(3))
    assert math.isnan(zeros["cosine"])


def _pt(name: str, pickled: bytes, storage: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{name}/data.pkl", pickled)
        zf.writestr(f"{name}/byteorder", "little")
        if storage:
            zf.writestr(f"{name}/data/0", storage)
    return buf.getvalue()


class _Evil:
    def __reduce__(self):  # what a malicious .pt would make pickle call
        return (print, ("pwned",))


def test_hostile_saved_tensors_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = (SAVED / "f32.pt").read_bytes()
    cases = {
        "code.pt": _pt("code", pickle.dumps(_Evil(), protocol=2)),
        "truncated.pt": good[: len(good) // 2],
        "not_zip.pt": b"\x80\x02}q\x00.",
        "short_storage.pt": _pt("short", zipfile.ZipFile(SAVED / "f32.pt").read("f32/data.pkl"), b"\x00" * 8),
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(InputError) as exc:
            read_saved_tensor(p)
        line = exc.value.one_line()
        assert name in line and "\n" not in line
    assert "pwned" not in capsys.readouterr().out
    assert "print; expected a tensor saved by torch.save" in _message(tmp_path / "code.pt")  # refused, never called


def _message(p: Path) -> str:
    try:
        read_saved_tensor(p)
    except InputError as exc:
        return exc.one_line()
    return ""


def test_a_missing_saved_tensor_is_a_line_and_the_rest_still_compares(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    shutil.copytree(PAIR / "mine", mine)
    (victim,) = mine.rglob("Functional.linear.1.forward.input.1.pt")
    victim.write_bytes(b"garbage")
    (golden,) = (PAIR / "golden").rglob("dump.json")
    r = run_cli("dump", "compare", mine, golden.parent, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 2 and any("Functional.linear.1.forward.input.1.pt" in e for e in doc["errors"])  # input errors: exit 2
    assert doc["tensors_compared"] == 39


def test_mutated_saved_tensors_give_an_array_or_one_line(tmp_path: Path) -> None:
    """Byte flips and cuts anywhere in real saved tensors: an array or an InputError, nothing else."""
    rng = np.random.default_rng(7)
    sources = [(SAVED / f"{k}.pt").read_bytes() for k in ("f32", "bf16", "slice", "bool")]
    p = tmp_path / "m.pt"
    for i in range(400):
        data = bytearray(sources[i % len(sources)])
        if i % 5 == 0:
            data = data[: int(rng.integers(0, len(data)))]
        else:
            for at in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
                data[at] = int(rng.integers(0, 256))
        p.write_bytes(bytes(data))
        try:
            read_saved_tensor(p)
        except InputError as exc:
            assert "\n" not in exc.one_line()
