"""The smaller edges of issue 38, each as a user met it: options that did nothing, messages that said
something else, commands that lacked what their siblings have."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .conftest import ROOT
from .helpers import run_cli

TORCH = ROOT / "fixtures" / "sample_torch"


def test_compare_takes_a_step_window(tmp_path: Path) -> None:
    """compare had no --steps / --time; the window's kernels recomputed from kernel_details.csv."""
    with open(next(TORCH.rglob("kernel_details.csv")), newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Step Id"] in ("2", "3")]
    r = run_cli("compare", TORCH, TORCH, "--steps", "2:3", "--out", tmp_path / "c", "--json")
    assert r.returncode == 0, r.stderr
    totals = {row["metric"]: row["baseline"] for row in json.loads(r.stdout)["totals"]["rows"]}
    assert totals["kernels"] == len(rows) and totals["steps"] == 2
    assert abs(totals["kernel_time_us"] - sum(float(x["Duration(us)"]) for x in rows)) < 0.01
    empty = run_cli("compare", TORCH, TORCH, "--steps", "50:60", "--out", tmp_path / "c2")
    assert empty.returncode == 2 and "it has steps 1 to 4" in empty.stderr
    # an analyze out folder is cut the same way as the raw profile
    run_cli("analyze", TORCH, "--out", tmp_path / "a", "-q")
    r2 = run_cli("compare", tmp_path / "a", TORCH, "--steps", "2:3", "--out", tmp_path / "c3", "--json")
    t2 = {row["metric"]: row for row in json.loads(r2.stdout)["totals"]["rows"]}
    assert t2["kernels"]["baseline"] == t2["kernels"]["current"] == len(rows)


def test_report_writes_html_and_chrome_trace_as_analyze_does(tmp_path: Path) -> None:
    a = run_cli("analyze", TORCH, "--out", tmp_path / "o", "--chrome-trace", tmp_path / "a.json", "--html", tmp_path / "a.html", "-q")
    assert a.returncode == 0, a.stderr
    r = run_cli("report", tmp_path / "o", "--chrome-trace", tmp_path / "r.json", "--html", tmp_path / "r.html", "-q")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r.json").read_bytes() == (tmp_path / "a.json").read_bytes()
    assert "<h2>Memory copies (40 on the device, 40 host calls)</h2>" in (tmp_path / "r.html").read_text()


def test_messages_that_said_something_else(tmp_path: Path) -> None:
    missing = run_cli("report", tmp_path / "nope")
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr and "no manifest.json" not in missing.stderr
    cl = run_cli("cluster", tmp_path / "nope", "--out", tmp_path / "o")
    assert cl.returncode == 2 and cl.stderr.count(str(tmp_path / "nope")) == 1, cl.stderr
    ms = run_cli("dump", "--format", "msprobe", "--layers", "conv1", "--acl-json", tmp_path / "cfg.json", cwd=tmp_path)
    assert ms.returncode == 2 and "--acl-json does not go with --format msprobe" in ms.stderr
    assert not (tmp_path / "cfg.json").exists() and not (tmp_path / "config.json").exists()
    acl = run_cli("dump", "--layers", "conv1", "--out", tmp_path / "x.json", cwd=tmp_path)
    assert acl.returncode == 2 and "--out does not go with --format acl" in acl.stderr


def test_logs_export_history_names_its_own_option() -> None:
    from npudiag.logs.msnpureport import export_args

    try:
        export_args("slog", True)
    except ValueError as exc:
        assert "--history" in str(exc) and "--force" not in str(exc)
    else:
        raise AssertionError("--history with --type must be refused")
