"""Renderers of a gate result (the dict of :meth:`npudiag.profiling.pipeline.GateResult.to_dict`): terminal,
Markdown, JUnit XML.

All three draw from the same dict that ``--json`` prints, so a CI log, a PR comment and the
Jenkins test report can never disagree.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import Any

from rich.console import Console
from rich.text import Text

from npudiag.report.escape import md_text
from npudiag.report.terminal import fmt_bytes, fmt_pct, fmt_us
from npudiag.report.text import Col, plain, table
from npudiag.units import shown_name

_STYLE = {"regression": "bold red", "improvement": "green", "not_significant": "yellow", "pass": ""}
_LABEL = {"regression": "REGRESSION", "improvement": "improved", "not_significant": "noise", "pass": "ok"}


def change_text(m: dict[str, Any]) -> str:
    if m["ratio"] is None:
        return "new"
    return f"{(m['ratio'] - 1.0) * 100:+.1f}%"


def p_text(m: dict[str, Any]) -> str:
    return "-" if m["p_value"] is None else f"{m['p_value']:.2g}"


def headline(result: dict[str, Any]) -> str:
    n = len(result["metrics"])
    if result["passed"]:
        return f"passed: {n} metrics, no regression"
    bad = result["regressions"]
    return f"FAILED: {len(bad)} of {n} metrics regressed ({', '.join(bad)})"


def failed_lines(result: dict[str, Any]) -> list[str]:
    """What a quiet gate still says: the gate's warnings are not here (the CLI shows them), each
    failed metric with its reason, and the verdict when it failed."""
    lines = [f"{shown_name(m['metric'])}: {m['reason']}" for m in result["metrics"] if m["failed"]]
    return [*lines, headline(result)] if lines else []


def _unit(m: dict[str, Any]) -> str:
    return m.get("unit", "us")


def _median(m: dict[str, Any], side: str) -> float:
    return m[f"{side}_median_{_unit(m)}"]


def median_text(m: dict[str, Any], side: str) -> str:
    """A verdict's baseline or current median in its unit (time, bytes for memory metrics, % of peak for MFU)."""
    if _unit(m) == "pct":
        return fmt_pct(_median(m, side))
    return fmt_bytes(_median(m, side)) if _unit(m) == "bytes" else fmt_us(_median(m, side))


def limit_text(m: dict[str, Any]) -> str:
    """The limit of a verdict: +5% for a cost, -5% for MFU (a fall is the regression)."""
    return f"{'-' if m.get('higher_is_better') else '+'}{m['max_regression'] * 100:g}%"


def render_gate_terminal(result: dict[str, Any], console: Console, title: str = "") -> None:
    head = Text("npudiag gate", style="bold")
    if title:
        head.append("  ")
        head.append_text(plain(title, style="dim"))
    console.print(head)
    limits = {limit_text(m) for m in result["metrics"]}
    caption = f"limit {limits.pop()} per metric; n = samples baseline/current" if len(limits) == 1 else None
    cols = [
        Col("metric", "name", 0, min_width=16),
        Col("baseline", priority=1),
        Col("current", priority=0),
        Col("change", priority=0),
    ]
    cols += [] if caption else [Col("limit", priority=3)]
    cols += [Col("n", priority=4), Col("p", priority=2), Col("verdict", "fixed", 0)]
    rows = []
    for m in result["metrics"]:
        limit = [] if caption else [limit_text(m)]
        rows.append(
            [
                shown_name(m["metric"]),
                median_text(m, "base"),
                median_text(m, "cur"),
                change_text(m),
                *limit,
                f"{m['base_n']}/{m['cur_n']}",
                p_text(m),
                Text(_LABEL[m["status"]], style=_STYLE[m["status"]]),
            ]
        )
    console.print(table(console, None, cols, rows, caption=caption))
    for w in result["warnings"]:
        console.print(plain(f"warning: {w}", style="yellow"))
    for m in result["metrics"]:
        if m["failed"]:
            console.print(plain(f"{shown_name(m['metric'])}: {m['reason']}", style="red"))
    console.print(Text(headline(result), style="bold green" if result["passed"] else "bold red"))


def gate_markdown(result: dict[str, Any], baseline: str, current: str) -> str:
    """A GitHub job summary / PR comment: verdict first, then the table, then the method."""
    icon = "✅" if result["passed"] else "❌"
    lines = [
        f"## {icon} npudiag gate {md_text(headline(result))}",
        "",
        f"Baseline {md_text(baseline)} vs current {md_text(current)}.",
        "",
    ]
    lines += [
        "| Metric | Baseline | Current | Change | Limit | Samples | p | Verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in result["metrics"]:
        verdict = _LABEL[m["status"]]
        if m["failed"]:
            verdict = f"**{verdict}**"
        lines.append(
            f"| {md_text(shown_name(m['metric']))} | {median_text(m, 'base')} | "
            f"{median_text(m, 'cur')} | {change_text(m)} | "
            f"{limit_text(m)} | {m['base_n']}/{m['cur_n']} | {p_text(m)} | {verdict} |"
        )
    if result["warnings"]:
        lines.append("")
        lines += [f"> **Warning:** {md_text(w)}" for w in result["warnings"]]
    meth = result["method"]
    lines += [
        "",
        "Medians of per-step samples; a metric regresses when its median grows (MFU: "
        "falls) by more than its limit and, with enough "
        f"samples, a two-sided Mann-Whitney U test gives p < {meth['alpha']:g}.",
        "",
    ]
    return "\n".join(lines)


_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(value: Any) -> str:
    """Text XML 1.0 can hold: the characters it forbids (control characters, lone surrogates) are
    written as \\xNN; ElementTree escapes < > & and quotes."""
    return _XML_FORBIDDEN.sub(lambda m: f"\\x{ord(m.group(0)):02x}", str(value))


def gate_junit(result: dict[str, Any], baseline: str, current: str) -> str:
    """JUnit XML: one testcase per gated metric; a regression is a <failure> carrying the numbers."""
    metrics = result["metrics"]
    failures = sum(1 for m in metrics if m["failed"])
    suites = ET.Element("testsuites", name="npudiag gate", tests=str(len(metrics)), failures=str(failures), errors="0")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="npudiag.gate",
        tests=str(len(metrics)),
        failures=str(failures),
        errors="0",
        skipped="0",
        timestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
        hostname=socket.gethostname(),
    )
    props = ET.SubElement(suite, "properties")
    for k, v in (("baseline", baseline), ("current", current), ("alpha", str(result["method"]["alpha"]))):
        ET.SubElement(props, "property", name=k, value=xml_text(v))
    for m in metrics:
        case = ET.SubElement(suite, "testcase", classname="npudiag.gate", name=xml_text(m["metric"]), time="0")
        numbers = (
            f"baseline median {_median(m, 'base'):.3f} {_unit(m)} (n={m['base_n']}), "
            f"current median {_median(m, 'cur'):.3f} {_unit(m)} "
            f"(n={m['cur_n']}), change {change_text(m)}, limit {limit_text(m)}, method {m['method']}, p={p_text(m)}"
        )
        if m["failed"]:
            fail = ET.SubElement(
                case,
                "failure",
                type="regression",
                message=xml_text(f"{m['metric']} regressed {change_text(m)}: {m['reason']}"),
            )
            fail.text = xml_text(numbers)
        else:
            ET.SubElement(case, "system-out").text = xml_text(f"{m['status']}: {numbers}")
    if result["warnings"]:
        ET.SubElement(suite, "system-err").text = xml_text("\n".join(result["warnings"]))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
