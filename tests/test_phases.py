"""NPUDIAG_PHASES=1: the time of each phase of a run on stderr (npudiag.phases), for speed work."""

from __future__ import annotations

import re
from pathlib import Path

from npudiag import phases

from .conftest import ROOT
from .helpers import run_cli

LINE = re.compile(r"^ +(\d+\.\d{3}) +(\d+\.\d{3}) +(\d+\.\d{3})  (.+)  \[(.+)\]$")


def _phases(stderr: str) -> dict[str, tuple[float, float, float]]:
    out = {}
    for line in stderr.splitlines():
        m = LINE.match(line)
        if m:
            out[m.group(4)] = (float(m.group(1)), float(m.group(2)), float(m.group(3)))
    return out


def test_phases_are_printed_only_when_asked(tmp_path: Path) -> None:
    sample = ROOT / "fixtures" / "sample_torch"
    quiet = run_cli("analyze", sample, "--out", tmp_path / "a", "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "phases" not in quiet.stderr
    timed = run_cli("analyze", sample, "--out", tmp_path / "b", "--quiet", env={"NPUDIAG_PHASES": "1"})
    assert timed.returncode == 0, timed.stderr
    seen = _phases(timed.stderr)
    assert {"read", "derive", "derive: rules", "hash an input (own thread)"} <= set(seen), timed.stderr
    # a phase inside another starts no earlier and lasts no longer (wall clock)
    read, rules, derived = seen["read"], seen["derive: rules"], seen["derive"]
    assert derived[0] >= read[0] + read[1] - 0.0015
    assert rules[0] >= derived[0] - 0.0015 and rules[1] <= derived[1] + 0.0015
    inner = [name for name in seen if name.startswith(("csv:", "trace:"))]
    assert inner, timed.stderr
    for name in inner:
        assert read[0] - 0.0015 <= seen[name][0] and seen[name][1] <= read[1] + 0.0015
    assert phases.taken() == []  # the command took them


def test_phase_is_free_when_off(monkeypatch) -> None:
    monkeypatch.delenv("NPUDIAG_PHASES", raising=False)
    with phases.phase("x"):
        pass
    assert phases.taken() == []
    monkeypatch.setenv("NPUDIAG_PHASES", "1")
    with phases.phase("y"):
        pass
    (only,) = phases.taken()
    assert only.name == "y" and only.wall_s >= 0 and only.cpu_s >= 0
