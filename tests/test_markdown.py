"""The Markdown view of an analysis (`analyze` / `report --markdown`) and the file-renderer registry
(npudiag/report/renderers.py): the numbers are the raw file's, input text cannot break a table, GitHub's
job summary is appended to, and a renderer registered from outside is found by its extension."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from npudiag.report import renderers
from npudiag.report.markdown import render_markdown

from .conftest import ROOT
from .helpers import run_cli

SAMPLE = ROOT / "fixtures" / "sample_torch"


def _table_after(md: str, heading_start: str) -> list[list[str]]:
    """The body rows of the first table after the heading that starts with ``heading_start``."""
    lines = md.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("### " + heading_start))
    rows = []
    for line in lines[i + 4 :]:  # heading, blank, header, alignment
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def test_hot_operators_in_markdown_are_the_raw_csv_counts(tmp_path: Path) -> None:
    r = run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--markdown", tmp_path / "s.md", "-q")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert md.startswith("## npudiag analyze") and md.endswith("\n")
    # recomputed from the raw kernel_details.csv with the csv module: kernels and total time per op type
    (raw,) = SAMPLE.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    with raw.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    counts, total_us = Counter(), defaultdict(float)
    for row in rows:
        counts[row["Type"]] += 1
        total_us[row["Type"]] += float(row["Duration(us)"])
    table = _table_after(md, "Hot operators by type")
    assert table, md
    grand = sum(total_us.values())
    for key, _task, count, _total, _avg, _mn, _mx, share in table:
        name = key.replace("\\", "")
        assert int(count.replace(",", "")) == counts[name], (name, count)
        assert float(share.rstrip("%")) == pytest.approx(100.0 * total_us[name] / grand, abs=0.06), name
    # the same document as `report` renders from the out folder
    r = run_cli("report", tmp_path / "o", "--markdown", tmp_path / "r.md", "-q")
    assert r.returncode == 0, r.stderr
    again = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert _table_after(again, "Hot operators by type") == table
    assert again.startswith("## npudiag report")


def test_input_text_cannot_break_a_table_or_inject_html() -> None:
    hostile = "a|b <script>alert(1)</script> `x` *y*\n| injected | row |"
    hot = {"key": hostile, "task_types": "AI_CORE", "count": 3, "total_us": 30.0, "avg_us": 10.0, "min_us": 9.0,
           "max_us": 11.0, "share_pct": 100.0}  # fmt: skip
    summary = {
        "title": hostile,
        "profile": {
            "ranks": 1,
            "kernels": 3,
            "steps": 1,
            "span_us": 40.0,
            "device_busy_us": 30.0,
            "device_busy_pct": 75.0,
            "kernel_time_us": 30.0,
        },  # fmt: skip
        "hot_ops": {"by": "name", "top": [hot], "total_groups": 1},
        "copies": {"by_direction": [], "count": 0},
        "findings": [
            {"severity": "info", "rule_id": "hot_op", "rank": None, "time_lost_us": None, "title": hostile, "advice": hostile}
        ],  # fmt: skip
        "warnings": [hostile],
    }
    md = render_markdown(summary)
    assert "<script>" not in md and "&lt;script&gt;" in md
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 2, table  # the header and the one row: the newline and pipes made no row
    assert table[1].count(" | ") == 7  # eight cells, as the header has
    assert "\n| injected" not in md


def test_markdown_is_appended_to_github_job_summary(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("## an earlier step\n", encoding="utf-8")
    r = run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--markdown", summary, "-q",
                env={"GITHUB_STEP_SUMMARY": str(summary)})  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## an earlier step\n## npudiag analyze")


def test_a_renderer_registered_from_outside_is_found_by_its_extension(tmp_path: Path, monkeypatch) -> None:
    """docs/development.md's recipe for a renderer: a render function and one register call."""
    monkeypatch.setattr(renderers, "RENDERERS", dict(renderers.RENDERERS))
    lines = renderers.register(renderers.Renderer("lines", (".lines",), lambda v: f"{v.command} {v.summary['profile']['kernels']}\n"))
    assert renderers.for_path(Path("x.LINES")) is lines
    assert renderers.for_path(Path("x.md")).name == "markdown"
    with pytest.raises(ValueError, match=r"expected one of \.json, \.md, \.markdown, \.html, \.htm, \.lines"):
        renderers.for_path(Path("x.txt"))
    with pytest.raises(ValueError, match="registered twice"):
        renderers.register(lines)
    view = renderers.SummaryView({"profile": {"kernels": 7}}, "report", lambda name: None)
    renderers.write_view(lines, tmp_path / "v.lines", view)
    assert (tmp_path / "v.lines").read_text() == "report 7\n"


def test_json_renderer_is_the_json_the_cli_prints(tmp_path: Path) -> None:
    r = run_cli("analyze", SAMPLE, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    view = renderers.SummaryView(printed, "analyze", lambda name: None)
    assert json.loads(renderers.RENDERERS["json"].render(view)) == printed


def test_format_prints_each_registered_view_on_stdout(tmp_path: Path) -> None:
    """--format picks what goes to stdout: the Markdown printed is the --markdown file's text, the JSON
    is --json's, the HTML one page; --json with another --format is refused in one line."""
    out = tmp_path / "o"
    r = run_cli("analyze", SAMPLE, "--out", out, "--format", "json", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["profile"]["kernels"] > 0
    assert run_cli("report", out, "--format", "json").stdout == run_cli("report", out, "--json").stdout
    r = run_cli("report", out, "--format", "markdown", "--markdown", tmp_path / "s.md", "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (tmp_path / "s.md").read_text(encoding="utf-8") and r.stdout.startswith("## npudiag report")
    r = run_cli("report", out, "--format", "html")
    assert r.returncode == 0 and r.stdout.startswith("<!doctype html>") and r.stdout.rstrip().endswith("</html>")
    r = run_cli("report", out, "--json", "--format", "markdown")
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
