"""Help texts: plain text at 80 columns, brackets in help strings shown as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import ROOT
from .hostile import run

COMMANDS = ["analyze", "report", "compare", "gate", "cluster", "profile", "doctor", "logs parse", "logs export", "logs level",
            "dump parse", "dump compare", "dump check"]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_plain_and_fits(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    o = run(*command.split(), "--help")
    assert o.code == 0, o.stderr
    lines = o.stdout.splitlines()
    assert lines[0].startswith(f"Usage: npudiag {command} ")
    assert "list[" not in lines[0] and "\x1b" not in o.stdout
    assert max(len(x) for x in lines) <= 80


def _text(*args: str) -> str:
    out = run(*args, "--help").stdout
    return re.sub(r"\s+", " ", re.sub(r"-\n\s+", "-", out))  # undo the help's line wrapping


def test_defaults_written_inside_help_strings_are_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert "[default: ./npudiag-out/<name>]" in _text("analyze")
    assert "[msprof default: on = l1]" in _text("profile")
    assert "[default: ./npudiag-logs/<timestamp>]" in _text("logs", "export")


def _one_line(o, text: str) -> None:
    assert o.code == 2, (o.code, o.stderr)
    lines = [x for x in o.stderr.splitlines() if x.strip()]
    assert any(text in x for x in lines) and "internal error" not in o.stderr and "Traceback" not in o.stderr


@pytest.mark.slow
def test_outputs_that_cannot_be_written_are_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    sample = ROOT / "fixtures" / "sample_torch"
    _one_line(run("analyze", sample, "--out", blocker / "out"), f"cannot write {blocker / 'out'}")
    _one_line(run("analyze", sample, "--out", tmp_path / "o1", "--html", blocker / "r.html"), f"cannot write {blocker / 'r.html'}")
    _one_line(run("analyze", sample, "--out", tmp_path / "o2", "--chrome-trace", blocker / "t.json"), f"cannot write {blocker / 't.json'}")
    log = tmp_path / "plog-1_20250101000000000.log"
    log.write_text("[ERROR] RUNTIME(1,p):2025-08-06-23:09:35.772.604 [a.cc:1]1 F:rtStreamSynchronize:ErrCode=507014\n")
    _one_line(run("logs", "parse", log, "--out", blocker / "lo"), f"cannot write {blocker / 'lo'}")


def test_analyze_of_a_missing_path_prints_only_the_error(tmp_path: Path) -> None:
    o = run("analyze", tmp_path / "nope", "--out", tmp_path / "o")
    assert o.code == 2 and o.stdout == "" and not (tmp_path / "o").exists()
    assert o.stderr.strip().splitlines() == [f"npudiag: {tmp_path / 'nope'}: no such file or folder"]
