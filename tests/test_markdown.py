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
from npudiag.summary_model import Summary

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
    md = render_markdown(Summary.of(summary))
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
    lines = renderers.register(renderers.Renderer("lines", (".lines",), lambda v: f"{v.command} {v.model.profile.kernels}\n"))
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


MSPROF = ROOT / "fixtures" / "sample_msprof"


def _ms(cell: str) -> float:
    """A duration cell (12.3ms, 45.6µs, 1.2s) in ms."""
    for unit, scale in (("ms", 1.0), ("µs", 1e-3), ("s", 1e3)):
        if cell.endswith(unit):
            return float(cell[: -len(unit)].replace(",", "")) * scale
    raise AssertionError(cell)


def _csv_kernels(folder: Path, name: str, duration: str) -> list[float]:
    (path,) = folder.rglob(name)
    with open(path, newline="", encoding="utf-8") as fh:
        return [float(r[duration]) for r in csv.DictReader(fh)]


def test_compare_markdown_totals_and_ops_are_the_raw_csv_figures(tmp_path: Path) -> None:
    """`compare --markdown FILE` and `--format markdown` give one text; its totals and op rows are the raw
    op_summary / kernel_details CSVs' figures, recounted with the csv module."""
    args = ("compare", MSPROF, SAMPLE, "--out", tmp_path / "c", "--top", "50")
    r = run_cli(*args, "--markdown", tmp_path / "c.md", "--format", "markdown")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "c.md").read_text(encoding="utf-8")
    assert r.stdout == md and md.startswith("## npudiag compare")
    base = _csv_kernels(MSPROF, "op_summary_*.csv", "Task Duration(us)")
    cur = _csv_kernels(SAMPLE, "kernel_details.csv", "Duration(us)")
    totals = {row[0]: row[1:] for row in _table_after(md, "Totals")}
    assert totals["kernels"][:2] == [f"{len(base):,}", f"{len(cur):,}"]
    assert totals["kernels"][2] == f"+{len(cur) - len(base):,}"
    assert _ms(totals["kernel\\_time"][0]) == pytest.approx(sum(base) / 1000, abs=0.01)
    assert _ms(totals["kernel\\_time"][1]) == pytest.approx(sum(cur) / 1000, abs=0.01)
    by_type = {"base": defaultdict(float), "cur": defaultdict(float)}
    for side, path, col in (("base", MSPROF, "OP Type"), ("cur", SAMPLE, "Type")):
        (f,) = path.rglob("op_summary_*.csv" if side == "base" else "kernel_details.csv")
        with open(f, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                by_type[side][row[col]] += float(row["Task Duration(us)" if side == "base" else "Duration(us)"])
    ops = _table_after(md, "Operators by type")
    assert len(ops) == len(set(by_type["base"]) | set(by_type["cur"]))
    for row in ops:
        op = row[0].replace("\\_", "_")
        assert _ms(row[2]) == pytest.approx(by_type["base"][op] / 1000, abs=0.01), op
        assert _ms(row[3]) == pytest.approx(by_type["cur"][op] / 1000, abs=0.01), op


def test_gate_and_logs_print_their_markdown_with_format(tmp_path: Path) -> None:
    """`--format markdown` prints what `--markdown FILE` writes (gate, logs parse); `--json` with another
    format is refused in one line. The log triage's counts are the raw plog's, recounted with re."""
    import re

    from .conftest import CORPUS_ROOT

    r = run_cli("gate", SAMPLE, SAMPLE, "--steps", "2:", "--markdown", tmp_path / "g.md", "--format", "markdown")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (tmp_path / "g.md").read_text(encoding="utf-8") and "npudiag gate passed" in r.stdout
    bad = run_cli("gate", SAMPLE, SAMPLE, "--json", "--format", "markdown")
    assert bad.returncode == 2 and "--json and --format markdown" in bad.stderr
    plog = CORPUS_ROOT / "logs" / "fixture_mindcluster_faultdiag_plog-59420_20250124110314898.log"
    if not plog.is_file():
        pytest.skip(f"corpus not present at {CORPUS_ROOT} (set NPUDIAG_CORPUS)")
    r = run_cli("logs", "parse", plog, "--out", tmp_path / "l", "--markdown", tmp_path / "l.md", "--format", "markdown")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "l.md").read_text(encoding="utf-8")
    assert r.stdout == md and md.startswith("## npudiag logs")
    lines = plog.read_text(encoding="utf-8", errors="replace").splitlines()
    records = sum(bool(re.match(r"\[(ERROR|WARNING|INFO|DEBUG|EVENT)\] \w+\(", x)) for x in lines)
    errors = sum(x.startswith("[ERROR] ") for x in lines)
    warnings = sum(x.startswith("[WARNING] ") for x in lines)
    assert f"1 file, {records:,} records: {errors:,} at ERROR or FATAL, {warnings:,} at WARNING" in md
    assert "### First error" in md or "Root-cause candidate" in md


def test_log_text_cannot_break_the_logs_markdown(tmp_path: Path) -> None:
    """A log message with a cell separator, HTML and a line of Markdown stays text in its cell."""
    log = tmp_path / "plog-1_20250101000000000.log"
    evil = "x | y <img src=x onerror=alert(1)> ## [a](javascript:1) EE1002"
    log.write_text(
        f"[ERROR] RUNTIME(1,python3):2025-01-01-00:00:00.000.001 [api.cc:1]2 f:{evil}\n"
        f"[ERROR] GE(1,python3):2025-01-01-00:00:01.000.001 [g.cc:2]2 g:{evil}\n",
        encoding="utf-8",
    )
    r = run_cli("logs", "parse", log, "--out", tmp_path / "o", "--format", "markdown")
    assert r.returncode == 0, r.stderr
    assert "<img" not in r.stdout and "](javascript" not in r.stdout
    timeline = _table_after(r.stdout, "Timeline of errors")
    assert len(timeline) == 2 and all(len(row) == 5 for row in timeline)


def test_save_writes_each_view_its_extension_names(tmp_path: Path) -> None:
    """--save FILE (repeatable) picks the renderer by the file's extension: the files are what --format
    prints; an extension no renderer writes is refused before anything is read or written."""
    out = tmp_path / "o"
    saved = [tmp_path / "s.json", tmp_path / "s.md", tmp_path / "s.html"]
    r = run_cli("analyze", SAMPLE, "--out", out, "-q", *(a for p in saved for a in ("--save", p)))
    assert r.returncode == 0, r.stderr
    for i, (path, fmt) in enumerate(zip(saved, ("json", "markdown", "html"))):
        printed = run_cli("analyze", SAMPLE, "--out", tmp_path / f"p{i}", "--format", fmt).stdout
        if fmt == "json":  # the same but for the folder written
            assert {**json.loads(path.read_text()), "out": None} == {**json.loads(printed), "out": None}
        else:
            assert path.read_text(encoding="utf-8") == printed, fmt
    again = tmp_path / "r.markdown"
    assert run_cli("report", out, "--save", again, "-q").returncode == 0
    assert again.read_text(encoding="utf-8") == run_cli("report", out, "--format", "markdown").stdout
    bad = run_cli("analyze", SAMPLE, "--out", tmp_path / "o2", "--save", tmp_path / "s.txt")
    assert bad.returncode == 2 and "no renderer writes .txt; expected one of .json, .md" in bad.stderr
    assert not (tmp_path / "o2").exists() and not (tmp_path / "s.txt").exists()


def test_a_view_renders_each_format_once(tmp_path: Path) -> None:
    """A summary view keeps the text a renderer made: --markdown FILE with --format markdown renders once,
    and the file and stdout are the same text."""
    calls = []

    def render(view: renderers.SummaryView) -> str:
        calls.append(view.command)
        return f"{view.model.profile.kernels} kernels\n"

    counting = renderers.Renderer("counting", (".cnt",), render)
    view = renderers.SummaryView({"profile": {"kernels": 3}}, "analyze", lambda name: None)
    renderers.write_view(counting, tmp_path / "a.cnt", view)
    renderers.write_view(counting, tmp_path / "b.cnt", view)
    assert view.text(counting) == (tmp_path / "a.cnt").read_text() == (tmp_path / "b.cnt").read_text() == "3 kernels\n"
    assert calls == ["analyze"]
