"""The command line as a user meets it: help, version, analyze, --json, report, manifest."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from npudiag import SCHEMA_VERSION, __version__
from npudiag.testing.generate import write_msprof_profile, write_torch_profile

from .helpers import run_cli


@pytest.fixture(scope="module")
def torch_profile(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("torch")
    return write_torch_profile(out, kernels=1500, seed=7, copies=12)


def test_version_and_help() -> None:
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"npudiag {__version__}"
    r = run_cli("--help")
    assert r.returncode == 0
    for command in ("analyze", "report"):
        assert command in r.stdout
    assert "--install-completion" in r.stdout


def test_analyze_writes_tables_and_manifest(torch_profile, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run_cli("analyze", torch_profile.profile_dir, "--out", out, "--top", "5")
    assert r.returncode == 0, r.stderr
    assert "Hot operators by type" in r.stdout and "MatMulV3" in r.stdout
    for name in ("kernels", "api_calls", "api_statistic", "op_statistic", "copies", "steps", "hot_ops"):
        assert (out / f"{name}.parquet").is_file(), name
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left
    kernels = pq.read_table(out / "kernels.parquet")
    assert kernels.num_rows == torch_profile.kernels
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["npudiag_version"] == __version__ and manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["row_counts"]["kernels"] == torch_profile.kernels
    kd = next(f for f in manifest["inputs"] if f["path"].endswith("kernel_details.csv"))
    assert kd["sha256"] == hashlib.sha256(Path(kd["path"]).read_bytes()).hexdigest()
    assert kd["size_bytes"] == Path(kd["path"]).stat().st_size and kd["used_for"] == ["kernels"]


def test_json_summary_matches_ground_truth(torch_profile, tmp_path: Path) -> None:
    r = run_cli("analyze", torch_profile.profile_dir, "--out", tmp_path / "o", "--json", "--top", "50")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)  # stdout holds the JSON document and nothing else
    top = {row["key"]: row for row in summary["hot_ops"]["top"]}
    for op, truth in torch_profile.by_type.items():
        assert top[op]["count"] == truth["count"]
        assert top[op]["total_us"] == pytest.approx(truth["total_us"], rel=1e-9)
    assert summary["profile"]["kernels"] == torch_profile.kernels
    assert summary["profile"]["steps"] == len(torch_profile.steps)
    host = [c for c in summary["copies"]["by_direction"] if c["side"] == "host"]
    assert host == [
        {
            "side": "host",
            "direction": "unknown",
            "mode": "sync",
            "count": 12,
            "bytes": None,
            "bytes_known": 0,
            "time_us": pytest.approx(12 * (12000.0 + 20.0)),
            "share_pct": 100.0,
        }
    ]
    assert sum(r["share_pct"] for r in summary["hot_ops"]["top"]) == pytest.approx(100.0)


def test_report_rerenders_same_summary(torch_profile, tmp_path: Path) -> None:
    out = tmp_path / "o"
    first = run_cli("analyze", torch_profile.profile_dir, "--out", out, "--json")
    again = run_cli("report", out, "--json")
    assert again.returncode == 0, again.stderr
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    for key in ("profile", "per_rank", "task_types", "hot_ops", "copies", "steps"):
        assert a[key] == b[key], key


def test_msprof_copies_carry_size_and_direction(tmp_path: Path) -> None:
    gt = write_msprof_profile(tmp_path / "p", kernels=300, copies=40, copy_bytes=4 << 20, copy_us=12000.0)
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["copies"]["by_direction"]
    device = next(c for c in rows if c["side"] == "device")
    assert device == {
        "side": "device",
        "direction": "H2D",
        "mode": "sync",
        "count": 40,
        "bytes": 40 * (4 << 20),
        "bytes_known": 40,
        "time_us": pytest.approx(40 * 12000.0),
        "share_pct": 100.0,
    }
    host = next(c for c in rows if c["side"] == "host")
    assert host["count"] == 40  # the nested Runtime@MemCopySync calls are the same copies, not 40 more


def test_by_name_and_parent_of_many(tmp_path: Path) -> None:
    for rank in range(3):
        write_torch_profile(tmp_path / "cluster", kernels=200, seed=rank, rank=rank, copies=0, trace=False)
    r = run_cli("analyze", tmp_path / "cluster", "--out", tmp_path / "o", "--json", "--by", "name")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert [p["rank"] for p in s["per_rank"]] == [0, 1, 2]
    assert s["hot_ops"]["by"] == "name"
    assert s["profile"]["kernels"] == 600


def test_db_only_profile(tmp_path: Path) -> None:
    gt = write_msprof_profile(tmp_path / "p", kernels=250, copies=3, db=True, text=False)
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["profile"]["kernels"] == gt.kernels  # compute + one row per communication op; copies are copies
    top = {row["key"]: row for row in s["hot_ops"]["top"]}
    for op, truth in gt.by_type.items():
        assert top[op]["count"] == truth["count"]


def test_text_preferred_over_db_and_said(tmp_path: Path) -> None:
    gt = write_msprof_profile(tmp_path / "p", kernels=100, copies=0, db=True, text=True)
    r = run_cli("analyze", gt.profile_dir, "--out", tmp_path / "o", "--json")
    s = json.loads(r.stdout)
    assert any("kernels were read from the op_summary CSV" in w for w in s["warnings"])
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["units"][0]["kernel_source"] == "op_summary"


@pytest.mark.parametrize(("chosen", "expected"), [(None, "system"), ("jemalloc", "jemalloc")])
def test_commands_use_the_c_librarys_allocator_unless_the_user_chose(chosen, expected) -> None:
    """docs/speed.md: with pyarrow's default allocator a 1.95 GB trace peaked at 3.2 - 5.6 GB, with
    the C library's at 2.2 - 2.5 GB. The choice must reach pyarrow in the command's own process."""
    if expected == "jemalloc" and "jemalloc" not in pa.supported_memory_backends():
        pytest.skip("this pyarrow build has no jemalloc")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    code = (
        "import sys\nfrom npudiag.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "import pyarrow as pa\nprint(pa.default_memory_pool().backend_name, file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.stderr.strip().splitlines()[-1] == expected


@pytest.mark.slow
def test_commands_run_without_pandas_and_leave_it_importable(tmp_path: Path) -> None:
    """pyarrow imports pandas the first time it converts anything, only to test for pandas objects;
    commands keep it out (docs/speed.md: 0.2 - 0.3 s and 25 - 40 MB). The tables are the same as in a
    process that had pandas loaded before, and pandas works again once the command returns."""
    root = Path(__file__).resolve().parents[1] / "fixtures" / "sample_torch"
    code = (
        "import sys\n"
        "if sys.argv[2] == 'pandas-first':\n    import pandas\n"
        "from npudiag.cli import main\n"
        "try:\n    main(['analyze', sys.argv[1], '--out', sys.argv[3], '--quiet'])\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "print('pandas' in sys.modules)\n"
        "import pyarrow.parquet as pq\n"
        "print(len(pq.read_table(sys.argv[3] + '/kernels.parquet').to_pandas()))\n"
    )
    runs = {}
    for mode in ("plain", "pandas-first"):
        out = tmp_path / mode
        r = subprocess.run([sys.executable, "-c", code, str(root), mode, str(out)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        loaded, rows = r.stdout.split()
        runs[mode] = (loaded, int(rows), out)
    assert runs["plain"][0] == "False" and runs["pandas-first"][0] == "True"
    kernels = pq.read_table(runs["plain"][2] / "kernels.parquet").num_rows
    with next(root.rglob("kernel_details.csv")).open(newline="", encoding="utf-8") as fh:
        csv_rows = sum(1 for _ in csv.DictReader(fh))  # the raw file, read independently
    assert kernels == csv_rows > 0 and runs["plain"][1] == runs["pandas-first"][1] == kernels
    files = sorted(p.name for p in runs["plain"][2].glob("*.parquet"))
    assert files == sorted(p.name for p in runs["pandas-first"][2].glob("*.parquet")) and len(files) > 5
    for name in files:
        assert (runs["plain"][2] / name).read_bytes() == (runs["pandas-first"][2] / name).read_bytes(), name
