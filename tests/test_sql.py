"""npudiag sql: an out folder's tables as views, read-only; the numbers recomputed from the raw CSV."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest

import npudiag
from npudiag.sql import query
from npudiag.testing.generate import write_torch_profile

from .conftest import ROOT
from .helpers import run_cli

SAMPLE = ROOT / "fixtures" / "sample_torch"


def _raw(folder: Path) -> dict[str, tuple[int, float]]:
    """Per op type: count and summed Duration(us) of every kernel_details.csv under folder, with csv."""
    out: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for f in folder.rglob("kernel_details.csv"):
        with f.open(newline="") as fh:
            for row in csv.DictReader(fh):
                out[row["Type"]][0] += 1
                out[row["Type"]][1] += float(row["Duration(us)"])
    return {k: (n, us) for k, (n, us) in out.items()}


def test_a_query_over_one_rank_matches_the_raw_csv(tmp_path: Path) -> None:
    npudiag.analyze([SAMPLE], tmp_path / "out")
    r = run_cli(
        "sql", tmp_path / "out", "SELECT op_type, count(*) AS n, sum(duration_us) AS us FROM kernels GROUP BY 1", "--format", "json"
    )
    assert r.returncode == 0, r.stderr
    got = {row["op_type"]: (row["n"], row["us"]) for row in json.loads(r.stdout)}
    raw = _raw(SAMPLE)
    assert set(got) == set(raw)
    for op, (n, us) in raw.items():
        assert got[op][0] == n and got[op][1] == pytest.approx(us, rel=1e-9), op
    total_raw = sum(n for n, _ in raw.values())
    table = run_cli("sql", tmp_path / "out", "SELECT count(*) AS n FROM kernels")
    assert table.returncode == 0 and str(total_raw) in table.stdout and "1 row(s)" in table.stdout


def test_many_ranks_are_one_view_with_their_rank(tmp_path: Path) -> None:
    root = tmp_path / "job"
    for rank in range(2):
        write_torch_profile(root, kernels=300, seed=rank, steps=3, rank=rank, copies=2)
    npudiag.analyze([root], tmp_path / "out")
    rows = query(tmp_path / "out", "SELECT rank, count(*) AS n FROM kernels GROUP BY 1 ORDER BY 1").tables["result"].to_pylist()
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(folders) == 2
    assert [r["n"] for r in rows] == [sum(n for n, _ in _raw(f).values()) for f in folders] and [r["rank"] for r in rows] == [0, 1]
    # a table no rank has rows of (these generated ranks record no modules) is there, empty, with its columns
    empty = query(tmp_path / "out", "SELECT path, sum(device_us) AS us FROM ranges GROUP BY 1").tables["result"]
    assert empty.num_rows == 0 and empty.column_names == ["path", "us"]
    assert not (tmp_path / "out" / "ranges").exists()


@pytest.mark.parametrize(
    "sql",
    [
        "COPY kernels TO 'copied.csv'",
        "CREATE TABLE t AS SELECT 1",
        "SELECT 1; COPY kernels TO 'copied.csv'",
        "ATTACH 'other.db' AS o",
        "INSTALL httpfs",
        "SET threads = 1",
    ],
)
def test_nothing_is_written_and_refusals_are_one_line(tmp_path: Path, sql: str) -> None:
    npudiag.analyze([SAMPLE], tmp_path / "out")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    r = run_cli("sql", tmp_path / "out", sql, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "read-only" in r.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_bad_queries_and_folders_are_one_line(tmp_path: Path) -> None:
    npudiag.analyze([SAMPLE], tmp_path / "out")
    bad = run_cli("sql", tmp_path / "out", "SELECT * FROM no_such_table")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no_such_table" in bad.stderr
    (tmp_path / "empty").mkdir()
    none = run_cli("sql", tmp_path / "empty", "SELECT 1")
    assert none.returncode == 2 and "no tables" in none.stderr
    odd = tmp_path / "out" / "x'); DROP TABLE kernels; --.parquet"
    odd.write_bytes((tmp_path / "out" / "steps.parquet").read_bytes())
    assert "kernels" in query(tmp_path / "out", "SELECT 1").summary["views"]  # a file name is never SQL


@pytest.mark.parametrize("columns", ["60", "80", "200"])
def test_no_column_vanishes_and_no_value_is_cut_at_any_width(tmp_path: Path, columns: str) -> None:
    npudiag.analyze([SAMPLE], tmp_path / "out")
    q = "SELECT op_name, op_type, task_type, step, start_us, duration_us FROM kernels ORDER BY duration_us DESC LIMIT 3"
    r = run_cli("sql", tmp_path / "out", q, env={"COLUMNS": columns})
    assert r.returncode == 0, r.stderr
    rows = query(tmp_path / "out", q).tables["result"].to_pylist()
    text = " ".join(r.stdout.split())
    for row in rows:
        for name, value in row.items():
            assert name in r.stdout and str(round(value, 6) if isinstance(value, float) else value) in text, (columns, name)
