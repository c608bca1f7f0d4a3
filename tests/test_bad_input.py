"""Bad input: one line naming the file (and line/offset), exit 2, no traceback, good files still read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from npudiag.testing.generate import write_torch_profile

from .helpers import run_cli


@pytest.fixture
def good(tmp_path: Path):
    return write_torch_profile(tmp_path / "good", kernels=300, seed=1, copies=4)


def _assert_clean_failure(r, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    for n in needles:
        assert n in r.stderr, r.stderr


def test_missing_path(tmp_path: Path) -> None:
    r = run_cli("analyze", tmp_path / "nope", "--out", tmp_path / "o")
    _assert_clean_failure(r, "nope: no such file or folder")


def test_folder_without_profiles(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    r = run_cli("analyze", tmp_path / "empty", "--out", tmp_path / "o")
    _assert_clean_failure(r, "no profiler output found")


CASES = {
    "empty": (b"", "empty file"),
    "binary": (b"\x00\x01\xff\xfe garbage \x00" * 50, "binary data"),
    "missing_columns": (b"Step Id,Name,Type\n1,a,b\n", "missing column"),
    "not_a_number": (
        b"Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n"
        b"a,A,AI_CORE,1.0\t,2.0,0,1\nb,B,AI_CORE,3.0\t,oops,0,1\n",
        "'Duration(us)' has 'oops' where a number was expected",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_kernel_csv_beside_a_good_profile(case: str, good, tmp_path: Path) -> None:
    content, message = CASES[case]
    bad = tmp_path / "bad" / "op_summary_20260605155140.csv"
    bad.parent.mkdir()
    bad.write_bytes(content)
    out = tmp_path / "o"
    r = run_cli("analyze", good.profile_dir, bad, "--out", out, "--json")
    _assert_clean_failure(r, str(bad), message)
    line = next(ln for ln in r.stderr.splitlines() if str(bad) in ln)
    assert line.startswith("npudiag: ")
    summary = json.loads(r.stdout)
    assert summary["profile"]["kernels"] == good.kernels  # the good profile still landed
    manifest = json.loads((out / "manifest.json").read_text())
    assert any(str(bad) in e for e in manifest["errors"])
    if case == "not_a_number":
        assert f"{bad}:3:" in line  # the line number of the bad cell


def test_header_only_and_truncated_last_line_warn(good, tmp_path: Path) -> None:
    kd = Path(good.profile_dir) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    text = kd.read_text()
    kd.write_text(text[: len(text) - 40])  # cut in the middle of the last row
    r = run_cli("analyze", good.profile_dir, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["profile"]["kernels"] == good.kernels - 1
    n_lines = text.count("\n")
    assert any(f"at line {n_lines}" in w and "wrong number of fields" in w for w in s["warnings"])
    kd.write_text(text.splitlines()[0] + "\n")
    r = run_cli("analyze", good.profile_dir, "--out", tmp_path / "o2", "--json")
    assert any("header only" in w for w in json.loads(r.stdout)["warnings"])


@pytest.mark.parametrize("cut", [1, 100, 5000, -3])
def test_trace_cut_off(cut: int, good, tmp_path: Path) -> None:
    trace = Path(good.profile_dir) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    data = trace.read_bytes()
    trace.write_bytes(data[:cut] if cut > 0 else data[:cut])
    r = run_cli("analyze", good.profile_dir, "--out", tmp_path / "o", "--json")
    _assert_clean_failure(r, str(trace), "offset")
    assert json.loads(r.stdout)["profile"]["kernels"] == good.kernels  # kernel_details still read


def test_trace_not_json(good, tmp_path: Path) -> None:
    trace = Path(good.profile_dir) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    trace.write_text("<html>not a trace</html>")
    r = run_cli("analyze", good.profile_dir, "--out", tmp_path / "o")
    _assert_clean_failure(r, str(trace), "expected a JSON array of trace events")


def test_corrupt_db(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_000001_20260605155111872_AAAAAAAAAAAAAAAA"
    prof.mkdir()
    (prof / "msprof_20260605155140.db").write_bytes(b"not sqlite at all" * 100)
    r = run_cli("analyze", prof, "--out", tmp_path / "o")
    _assert_clean_failure(r, "msprof_20260605155140.db", "SQLite")


def test_report_on_wrong_folder(tmp_path: Path) -> None:
    r = run_cli("report", tmp_path)
    _assert_clean_failure(r, "no manifest.json")


def test_inputs_are_not_modified(good, tmp_path: Path) -> None:
    src = Path(good.profile_dir)
    copy = tmp_path / "ro" / src.name
    shutil.copytree(src, copy)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    r = run_cli("analyze", copy, "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    after = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert before == after
