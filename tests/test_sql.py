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


@pytest.mark.parametrize(
    "sql",
    [
        "EXPLAIN ANALYZE COPY (SELECT 'x') TO '{victim}'",
        "EXPLAIN COPY (SELECT 'x') TO '{victim}'",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM glob('/root/*')",
        "SELECT * FROM read_csv('http://127.0.0.1:9/a.csv')",
        "SELECT * FROM read_parquet('{outside}')",
    ],
)
def test_sql_reads_the_out_folder_and_nothing_else(tmp_path: Path, sql: str) -> None:
    """`EXPLAIN ANALYZE COPY ... TO '/any/file'` ran (EXPLAIN was allowed) and overwrote the file;
    read_text, glob and read_parquet read outside the out folder; read_csv of a URL tried to download
    an extension into ~/.duckdb. External access is off, the config locked, EXPLAIN only of a SELECT."""
    npudiag.analyze([SAMPLE], tmp_path / "out")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    outside = tmp_path / "elsewhere.parquet"
    outside.write_bytes((tmp_path / "out" / "steps.parquet").read_bytes())
    home = tmp_path / "home"
    home.mkdir()
    r = run_cli("sql", tmp_path / "out", sql.format(victim=victim, outside=outside), cwd=tmp_path, env={"HOME": str(home)})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert victim.read_text() == "keep me" and not list(home.iterdir())
    ok = run_cli("sql", tmp_path / "out", "EXPLAIN ANALYZE SELECT count(*) FROM kernels")  # EXPLAIN of a SELECT runs
    assert ok.returncode == 0, ok.stderr


def test_a_bad_parquet_file_costs_its_own_view_only(tmp_path: Path) -> None:
    """A truncated or foreign *.parquet made every query exit 3: the other tables still answer, the
    file is named in a warning, and a query of its view is one line."""
    npudiag.analyze([SAMPLE], tmp_path / "out")
    copies = tmp_path / "out" / "copies.parquet"
    copies.write_bytes(copies.read_bytes()[:100])
    (tmp_path / "out" / "foreign.parquet").write_text("not parquet")
    rows = sum(1 for _ in csv.DictReader(next(SAMPLE.rglob("kernel_details.csv")).open()))
    r = run_cli("sql", tmp_path / "out", "SELECT count(*) AS n FROM kernels", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == [{"n": rows}], r.stderr
    assert "copies.parquet: not readable Parquet" in r.stderr and "foreign.parquet" in r.stderr
    bad = run_cli("sql", tmp_path / "out", "SELECT count(*) FROM copies")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "copies.parquet" in bad.stderr


def test_text_from_inputs_reaches_a_terminal_escaped() -> None:
    """`sql --format csv` on a terminal printed ESC and U+202E raw; piped, the data stays as it is."""
    import pyarrow as pa

    from npudiag.report.sql_report import render_csv, render_json

    t = pa.table({"name": ["a\x1b[2Jb\u202ec\x85"]})
    assert "\x1b" not in render_csv(t, terminal=True) and "\u202e" not in render_csv(t, terminal=True)
    assert "\x1b" in render_csv(t)  # a file or a pipe gets the value itself
    shown = render_json(t, terminal=True)
    assert "\u202e" not in shown and "\x85" not in shown and json.loads(shown) == json.loads(render_json(t))
