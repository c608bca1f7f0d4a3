"""Help texts: plain text at 80 columns, brackets in help strings shown as written."""

from __future__ import annotations

import re

import pytest

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
