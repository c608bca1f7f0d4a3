"""No track of the exported Chrome trace holds two complete events that partly overlap (Perfetto
nests slices by time and mis-nests those): on the corpus Level0 export, where torch_npu's own trace
has 138 such events on its hardware stream tracks, 10 on the Python thread."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from .conftest import CORPUS
from .helpers import run_cli

_EPS = Decimal("0.000001")
LEVEL0 = CORPUS / "msinsight-pytorch-text-2025" / "level0"
TRACE = LEVEL0 / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


def _partial_overlaps(events: list[dict], key=lambda e: (e["pid"], e["tid"])) -> int:
    tracks: dict = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            ts, dur = Decimal(str(e["ts"])), Decimal(str(e.get("dur") or 0))  # exact: the raw file's ts are absolute us as text
            tracks[key(e)].append((ts, ts + dur))
    bad = 0
    for spans in tracks.values():
        spans.sort(key=lambda x: (x[0], -x[1]))
        open_ends: list[float] = []
        for s, e in spans:
            while open_ends and open_ends[-1] <= s + _EPS:
                open_ends.pop()
            if open_ends and e > open_ends[-1] + _EPS:
                bad += 1
            open_ends.append(e)
    return bad


def _inside(ts: float, spans: list[tuple[float, float]]) -> bool:
    return any(a - 1e-6 <= ts <= b + 1e-6 for a, b in spans)


def test_no_track_holds_partial_overlaps_and_nothing_is_lost(tmp_path: Path) -> None:
    if not TRACE.is_file():
        pytest.skip(f"corpus not present at {CORPUS} (set NPUDIAG_CORPUS)")
    raw = json.loads(TRACE.read_text())
    assert _partial_overlaps(raw) == 148  # the profiler's own file, as written (138 on stream tracks, 10 on the Python thread)
    out = tmp_path / "t.json"
    r = run_cli("analyze", LEVEL0, "--out", tmp_path / "o", "--chrome-trace", out, "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert _partial_overlaps(events) == 0

    # every complete event of the original is still there (name, duration), only some on overflow tracks
    def bag(evs: list[dict]) -> Counter:
        return Counter((e["name"], round(float(e.get("dur") or 0.0), 3)) for e in evs if e.get("ph") == "X")

    ours = [e for e in events if e.get("pid") != 1]  # npudiag's own tracks (pid 1) are added
    assert bag(ours) == bag(raw)
    overflow = [e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name" and e["tid"] >= 1 << 40]
    assert any(n.startswith("Stream ") and "(overlap 1)" in n for n in overflow)

    # a flow end still sits on a slice of its own track as often as in the original
    def on_slice(evs: list[dict]) -> int:
        spans: dict = defaultdict(list)
        for e in evs:
            if e.get("ph") == "X":
                spans[(e["pid"], e["tid"])].append((float(e["ts"]), float(e["ts"]) + float(e.get("dur") or 0.0)))
        return sum(
            1 for e in evs if e.get("ph") == "f" and any(a - 1e-6 <= float(e["ts"]) <= b + 1e-6 for a, b in spans[(e["pid"], e["tid"])])
        )

    assert on_slice(ours) == on_slice(raw) > 200


def test_events_that_end_together_end_together_in_doubles(tmp_path: Path) -> None:
    """A viewer adds ts + dur in doubles (chrome://tracing, speedscope): in the export every complete
    event's sum is the double nearest its exact end, so events that end at the same nanosecond end
    at the same double; the nanoseconds of every ts and dur are unchanged (Decimal recount from the
    raw file), and a dur finer than a nanosecond is kept as written."""
    if not TRACE.is_file():
        pytest.skip(f"corpus not present at {CORPUS} (set NPUDIAG_CORPUS)")
    raw = json.loads(TRACE.read_text())
    out = tmp_path / "t.json"
    r = run_cli("analyze", LEVEL0, "--out", tmp_path / "o", "--chrome-trace", out, "-q")
    assert r.returncode == 0, r.stderr
    events = json.loads(out.read_text())
    complete = [e for e in events if e.get("ph") == "X" and e.get("dur")]

    def exact_end(e: dict) -> float:
        return (round(e["ts"] * 1000) + round(e["dur"] * 1000)) / 1000

    whole_ns = [e for e in complete if abs(e["dur"] * 1000 - round(e["dur"] * 1000)) <= 1e-6]
    assert len(whole_ns) > 2900  # 2,987 on this export; the rest have sub-ns durations (25.7205 us)
    assert [e for e in whole_ns if e["ts"] + e["dur"] != exact_end(e)] == []
    # the raw durations in ns, and those finer than a ns as written, are all still there
    raw_ns = Counter(round(Decimal(str(e["dur"])) * 1000, 6) for e in raw if e.get("ph") == "X" and e.get("dur"))
    ours_ns = Counter(round(Decimal(str(e["dur"])) * 1000, 6) for e in complete if e.get("pid") != 1)
    assert ours_ns == raw_ns
    # events that end at one nanosecond in the raw file end at one double here (the Python thread's outer frames)
    ends = defaultdict(set)
    for e in complete:
        ends[(e["pid"], round((Decimal(str(e["ts"])) + Decimal(str(e["dur"]))) * 1000))].add(e["ts"] + e["dur"])
    assert sum(len(v) > 1 for v in ends.values()) == 0
