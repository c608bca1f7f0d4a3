"""A .db export drawn as a Chrome trace: every id a JavaScript viewer can hold (below 2^53; the .db's
globalTid is above it, so viewers merged two threads into one track), framework ops from
PYTORCH_API, flows from the launching CANN call to each task by connection id, and no track whose
events partly overlap. Recounted from the raw .db with sqlite3."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

from .helpers import run_cli

DB = "msinsight-pytorch-db-rank1/level1/rank1_ascend_pt"


def test_a_db_chrome_trace_keeps_threads_apart_and_draws_flows(corpus: Path, tmp_path: Path) -> None:
    r = run_cli("analyze", corpus / DB, "--out", tmp_path / "o", "-q", "--chrome-trace", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert not [e for e in events if any(isinstance(e.get(k), int) and abs(e[k]) >= 2**53 for k in ("pid", "tid", "id"))]
    tracks = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e.get("dur", 0.0)))
    for key, spans in tracks.items():  # on a track, events nest or follow each other
        spans.sort(key=lambda x: (x[0], -x[1]))
        open_ends: list[float] = []
        for s, e in spans:
            while open_ends and open_ends[-1] <= s:
                open_ends.pop()
            assert not open_ends or e <= open_ends[-1] + 1e-6, key
            open_ends.append(e)
    con = sqlite3.connect(next((corpus / DB / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")))
    threads = {t for (t,) in con.execute("SELECT DISTINCT globalTid FROM CANN_API")}
    op_type = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'op'").fetchone()[0]
    ops = con.execute("SELECT count(*) FROM PYTORCH_API WHERE type = ?", (op_type,)).fetchone()[0]
    con.close()
    host = {e["tid"] for e in events if e.get("ph") == "X" and str(e.get("pid", "")).startswith("2")}
    assert len(host) == len(threads) == 4 and min(threads) >= 2**53  # four threads, four tracks (as doubles, ...564 and ...565 were one)
    assert {t & 0xFFFFFFFF for t in threads} == host
    framework = [e for e in events if e.get("ph") == "X" and e["pid"] == 3001]
    assert len(framework) == ops
    starts = {e["id"] for e in events if e.get("ph") == "s"}
    ends = {e["id"] for e in events if e.get("ph") == "f"}
    assert starts == ends and len(starts) > 150
