"""host_ops: framework ops as time ranges, recounted from the raw files (json for the trace's cpu_op
events, sqlite3 for the .db's PYTORCH_API rows of type op)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq

from .helpers import run_cli


def _ns(ts: str) -> int:
    whole, _, frac = ts.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def test_trace_cpu_ops_are_host_ops(corpus: Path, tmp_path: Path) -> None:
    folder = corpus / "msinsight-pytorch-text-2025" / "level0" / "rank0_ascend_pt"
    r = run_cli("analyze", folder, "--out", tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    raw = json.loads((folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    want = sorted((e["name"], _ns(e["ts"]), round(float(e["dur"]) * 1000), int(e["tid"]))
                  for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op")  # fmt: skip
    got = sorted((x["name"], x["start_ns"], round(x["duration_us"] * 1000), x["thread_id"])
                 for x in pq.read_table(tmp_path / "o" / "host_ops.parquet").to_pylist())  # fmt: skip
    assert len(want) == 860 and got == want


def test_db_op_calls_are_host_ops(corpus: Path, tmp_path: Path) -> None:
    folder = corpus / "msinsight-pytorch-db-rank1" / "level2" / "rank1_ascend_pt"
    r = run_cli("analyze", folder, "--out", tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(f"file:{folder / 'ASCEND_PROFILER_OUTPUT' / 'ascend_pytorch_profiler_1.db'}?mode=ro", uri=True)
    (op,) = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'op'").fetchone()
    rows = con.execute(
        "SELECT s.value, CAST(p.startNs AS INTEGER), CAST(p.endNs AS INTEGER), p.globalTid & 4294967295 "
        "FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name WHERE p.type = ?",
        (op,),
    ).fetchall()
    con.close()
    want = sorted((name, start, end - start, tid) for name, start, end, tid in rows if end >= start)
    got = sorted((x["name"], x["start_ns"], round(x["duration_us"] * 1000), x["thread_id"])
                 for x in pq.read_table(tmp_path / "o" / "host_ops.parquet").to_pylist())  # fmt: skip
    assert len(want) > 100 and got == want
