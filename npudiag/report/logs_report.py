"""Rich rendering of a log triage summary: what failed first, the codes, the known failures, the timeline."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from npudiag.report.escape import md_text
from npudiag.report.markdown import md_document, md_table, section
from npudiag.report.text import Col, clean, count, pack_lines, plain, table


def _ts(t: datetime | None, no_year: datetime | None = None) -> str:
    """A record's time; one whose log gives no year as ISO 8601 writes a date without one: --MM-DD."""
    if t is not None:
        return t.strftime("%Y-%m-%d %H:%M:%S.%f")
    return "-" if no_year is None else no_year.strftime("--%m-%d %H:%M:%S.%f")


def _when(r: dict[str, Any], key: str = "timestamp") -> str:
    return _ts(r.get(key), r.get(f"{key}_no_year"))


def _where(r: dict[str, Any]) -> str:
    parts = [where(r["file"], r["line"])]
    if r.get("device_id") is not None:
        parts.append(f"device {r['device_id']}")
    if r.get("rank") is not None:
        parts.append(f"rank {r['rank']}")
    return ", ".join(parts)


def _cut(text: str, n: int) -> str:
    """At most ``n`` characters, with an ellipsis when something was cut."""
    return text if len(text) <= n else text[: n - 1] + "…"


def break_path(text: str, width: int) -> str:
    """``text`` with a line break after a ``/`` wherever a word (a path) is longer than ``width``, so
    the terminal wraps a path between its parts, never inside a file or folder name."""
    out = []
    for word in text.split(" "):
        if len(word) <= width or "/" not in word:
            out.append(word)
            continue
        parts = word.split("/")
        out.append("\n".join(pack_lines([("", parts[0])] + [("", "/" + p) for p in parts[1:]], width)))
    return " ".join(out)


def path_text(text: str, width: int, style: str = "") -> Text:
    """Input text (escaped as :func:`plain` does) whose long paths break between their parts."""
    return Text(break_path(clean(text), width), style=style)


def where(file: str, line: Any) -> str:
    """``file:line``; what was read from standard input (``-``) is ``stdin:line``."""
    return f"{'stdin' if file == '-' else file}:{line}"


def render_logs_terminal(s: dict[str, Any], console: Console) -> None:
    """The triage on a terminal: the counts and notes, the root-cause panel, then one table per block."""
    _print_head(s, console)
    console.print(_verdict(s, max(console.width - 4, 20)))  # inside the panel's border and padding
    first = s["first_error"]
    if first is not None and s["root_cause"] is not None:
        at = f"{_when(first)} {first['module'] or ''} {_where(first)}"
        console.print(path_text(f"First error in time: {at}: {_cut(first['message'], 160)}", console.width))
    for block in (_codes_table, _findings_table, _ranks_table):
        shown = block(s, console)
        if shown is not None:
            console.print(shown)
    for key, label in (("by_module", "module"), ("by_device", "device_id")):
        if s[key]:
            line = ", ".join(f"{r[label] if r[label] is not None else '?'} {r['count']}" for r in s[key][:12])
            console.print(plain(f"errors by {label}: {line}", style="dim"))
    if s["timeline"]:
        console.print(_timeline_table(s, console))


def _print_head(s: dict[str, Any], console: Console) -> None:
    """The counts (the records' own levels: "1 warning" read as one of npudiag's warnings) and the notes."""
    head = Text("npudiag logs", style="bold")
    numbers = (
        f"{count(s['files'], 'file')}, {count(s['records'], 'record')}: "
        f"{s['errors']:,} at ERROR or FATAL, {s['warnings']:,} at WARNING"
    )
    head.append(f"  {numbers}", style="dim")
    console.print(head)
    for r in s.get("repeated_files") or []:
        repeats = f"{r['file']} repeats {count(r['records'], 'problem record')} of {r['same_as']}: counted once"
        console.print(plain(repeats, style="dim"))
    for key in ("note", "clock_note"):
        if s.get(key):
            console.print(plain(s[key], style="yellow"))
    if s.get("info_records_naming_codes"):
        n = s["info_records_naming_codes"]
        console.print(
            plain(f"{n:,} INFO/DEBUG/EVENT records name an error code (a catalogue, not errors)", style="dim")
        )
    for p in s.get("line_prefixes") or []:
        note = f"{p['file']}: every line starts with a {p['prefix']} prefix; stripped (kept in the prefix column)"
        console.print(plain(note, style="dim"))


# the root cause's role as the panel's title says it
_ROLE_TITLE = {
    "device_fault": "earliest device fault",
    "cause": "earliest known failure",
    "symptom": "earliest consequence seen",
}


def _verdict(s: dict[str, Any], inner: int) -> Panel | Text:
    """The root-cause panel, else the first error's, else that there were none."""
    root, first = s["root_cause"], s["first_error"]
    if root is not None:
        kind = _ROLE_TITLE.get(root["role"], "earliest known failure")
        body = _root_body(s, root, inner)
        return Panel(body, title=f"Root-cause candidate ({kind})", title_align="left", border_style="red")
    if first is not None:
        title = plain(f"First error: {_where(first)}")
        return Panel(plain(first["message"]), title=title, title_align="left", border_style="red")
    return Text("No errors found.", style="green")


def _root_body(s: dict[str, Any], root: dict[str, Any], inner: int) -> Text:
    """What the root cause is, where it was first seen, what followed, what to check and the fix (with its source)."""
    body = Text()
    body.append_text(plain(root["title"], style="bold red"))
    body.append("\n")
    body.append_text(plain(root["meaning"]))
    for k in s.get("fault_kernels") or []:  # the operator the runtime named as failed: the one to investigate
        body.append("\nfault kernel: ", style="bold")
        body.append_text(plain(k["kernel_name"]))
        body.append_text(plain(f" ({k['count']:,}×, first {_when(k, 'first_timestamp')})", style="dim"))
    body.append("\nfirst seen: ", style="dim")
    body.append_text(
        path_text(f"{_when(root, 'first_timestamp')}  {where(root['first_file'], root['first_line'])}", inner)
    )
    body.append("\nlog: ", style="dim")
    body.append_text(plain(root["example"]))
    body.append("\n")
    followers = [f["title"] for f in s["findings"] if f.get("follows_from") == root["kb_id"]]
    if followers:  # the rule chain: what the logs show following from it
        body.append("followed by: ", style="bold")
        more = f"; +{len(followers) - 6} more" if len(followers) > 6 else ""
        body.append_text(plain("; ".join(followers[:6]) + more))
        body.append("\n")
    if root["checks"]:
        body.append("check next:\n", style="bold")
    for c in root["checks"]:
        body.append("  • ")
        body.append_text(plain(c))
        body.append("\n")
    body.append("fix: ", style="bold green")
    body.append_text(plain(root["fix"]))
    if root.get("advice", "").startswith("general"):
        body.append_text(plain(f" ({root['advice']}: the source names the code, not this fix)", style="dim"))
    if root.get("source"):
        body.append("\nfrom: ", style="dim")
        applies = f" ({root['applies_to']})" if root.get("applies_to") else ""
        body.append_text(plain(root["source"] + applies, style="dim"))
    return body


def _codes_table(s: dict[str, Any], console: Console) -> Table | None:
    if not s["error_codes"]:
        return None
    cols = [
        Col("code", "fixed", 0),
        Col("count", priority=1),
        Col("first seen", "fixed", 2),
        Col("meaning", "text", 0, min_width=20),
    ]
    rows = [
        [r["code"], f"{r['count']:,}", _when(r, "first_timestamp"), r["meaning"] or ""] for r in s["error_codes"][:30]
    ]
    return table(console, "Error codes", cols, rows)


def _findings_table(s: dict[str, Any], console: Console) -> Table | None:
    if not s["findings"]:
        return None
    cols = [
        Col("failure", "text", 0, min_width=20),
        Col("role", "fixed", 3),
        Col("count", priority=1),
        Col("first seen", "fixed", 2),
        Col("fix", "text", 1, min_width=20),
    ]
    rows = [
        [
            f["title"],
            f["role"],
            f"{f['count']:,}",
            _when(f, "first_timestamp"),
            f"{f['fix']} (from: {_short_source(f)})",
        ]
        for f in s["findings"][:30]
    ]
    return table(console, "Known failures (knowledge base)", cols, rows)


def _ranks_table(s: dict[str, Any], console: Console) -> Table | None:
    if len(s["first_failure_by_rank"]) <= 1:
        return None
    cols = [
        Col("rank", priority=0),
        Col("time", "fixed", 1),
        Col("where", "name", 2, min_width=12),
        Col("message", "text", 0, min_width=20),
    ]
    rows = [
        [str(r["rank"]), _when(r), where(r["file"], r["line"]), _cut(r["message"], 120)]
        for r in s["first_failure_by_rank"][:16]
    ]
    return table(console, "First error per rank (earliest first)", cols, rows)


def _timeline_table(s: dict[str, Any], console: Console) -> Table:
    cols = [
        Col("time", "fixed", 0),
        Col("module", "fixed", 2),
        Col("codes", "name", 1, min_width=8),
        Col("message", "text", 0, min_width=20),
    ]
    shown = s["timeline"][:20]
    rows = [[_when(r), r["module"] or "", ",".join(r["error_codes"]), r["message"][:200]] for r in shown]
    if len({r["file"] for r in shown}) > 1:  # records of several files: say whose each is
        cols.insert(3, Col("file", "name", 3, min_width=10))
        for row, r in zip(rows, shown):
            row.insert(3, where(r["file"].rsplit("/", 1)[-1], r["line"]))
    return table(console, "Timeline of errors", cols, rows)


def _short_source(f: dict[str, Any]) -> str:
    """A finding's source as a table cell holds it: the first source named, folders dropped from a repository
    path (``hicann/runtime@681ef7610df1 error_code.json#EK0204``), the release of the text, and whether the fix
    is the category's general advice."""
    first = (f.get("source") or "not recorded").split(";")[0].split(", ")[0].strip()
    seen = re.match(
        r"log seen in (?:https?://(?:www\.)?github\.com/)?"
        r"(?:https?://(?:www\.)?([\w.-]+)/\S*|([\w.-]+/[\w.-]+)(?:/(?:issues|pull)/(\d+))?)",
        first,
    )
    if seen:  # a real log: where it was seen, not its whole path
        host, repo, number = seen.groups()
        first = "a log in " + (host or repo) + (f"#{number}" if number else "")
    elif not first.startswith("http"):
        first = re.sub(r" \S*/(\S+)", r" \1", first)
    release = f.get("applies_to") or ""
    release = release.split(";")[0].replace(" text", "")
    general = "; general advice" if str(f.get("advice", "")).startswith("general") else ""
    return first + (f", {release}" if release else "") + general


def logs_markdown(s: dict[str, Any]) -> str:
    """The triage as GitHub-flavoured Markdown (a CI job summary after a failed run): the verdict, then the
    same tables as the terminal, every text from the logs escaped in its cell."""
    numbers = (
        f"{count(s['files'], 'file')}, {count(s['records'], 'record')}: "
        f"{s['errors']:,} at ERROR or FATAL, {s['warnings']:,} at WARNING"
    )
    lines = ["## npudiag logs", "", numbers, ""]
    lines += _verdict_markdown(s)
    codes = [
        [md_text(r["code"]), f"{r['count']:,}", _when(r, "first_timestamp"), md_text(r["meaning"] or "")]
        for r in s["error_codes"][:30]
    ]
    lines += _md_section("Error codes", ["Code", "Count", "First seen", "Meaning"], codes, [0, 3])
    findings = [
        [
            md_text(f["title"]),
            f["role"],
            f"{f['count']:,}",
            _when(f, "first_timestamp"),
            md_text(f"{f['fix']} (from: {_short_source(f)})"),
        ]
        for f in s["findings"][:30]
    ]
    lines += _md_section(
        "Known failures (knowledge base)", ["Failure", "Role", "Count", "First seen", "Fix"], findings, [0, 1, 4]
    )
    ranks = s["first_failure_by_rank"]
    rank_rows = [
        [str(r["rank"]), _when(r), md_text(where(r["file"], r["line"])), md_text(_cut(r["message"], 120))]
        for r in ranks[:16]
    ]
    if len(ranks) > 1:
        lines += _md_section(
            "First error per rank (earliest first)", ["Rank", "Time", "Where", "Message"], rank_rows, [2, 3]
        )
    timeline = [
        [
            _when(r),
            md_text(r["module"] or ""),
            md_text(",".join(r["error_codes"])),
            md_text(where(r["file"].rsplit("/", 1)[-1], r["line"])),
            md_text(r["message"][:200]),
        ]
        for r in s["timeline"][:20]
    ]
    lines += _md_section("Timeline of errors", ["Time", "Module", "Codes", "File", "Message"], timeline, [1, 2, 3, 4])
    notes = [s[k] for k in ("note", "clock_note") if s.get(k)]
    lines += [f"> **Note:** {md_text(n)}" for n in notes]
    return md_document(lines)


def _md_section(title: str, headers: list[str], rows: list[list[str]], text: list[int]) -> list[str]:
    """A titled table (nothing when it has no rows): columns ``text`` left-aligned, the rest right."""
    return section(title, md_table(headers, rows, text)) if rows else []


def _verdict_markdown(s: dict[str, Any]) -> list[str]:
    """The root cause (what it is, where first seen, what followed, what to check, the fix and its source), else
    the first error, else that there were none."""
    root, first = s["root_cause"], s["first_error"]
    if root is None and first is None:
        return ["**No errors found.**", ""]
    if root is None:
        return [f"### First error: {md_text(_where(first))}", "", md_text(first["message"]), ""]
    kind = _ROLE_TITLE.get(root["role"], "earliest known failure")
    out = [f"### ❌ Root-cause candidate ({kind}): {md_text(root['title'])}", "", md_text(root["meaning"]), ""]
    out += [
        f"- **fault kernel:** {md_text(k['kernel_name'])} ({k['count']:,}×, first {_when(k, 'first_timestamp')})"
        for k in s.get("fault_kernels") or []
    ]
    out.append(
        f"- **first seen:** {_when(root, 'first_timestamp')} {md_text(where(root['first_file'], root['first_line']))}"
    )
    out.append(f"- **log:** {md_text(root['example'])}")
    followers = [f["title"] for f in s["findings"] if f.get("follows_from") == root["kb_id"]]
    if followers:
        out.append(f"- **followed by:** {md_text('; '.join(followers))}")
    out += [f"- **check next:** {md_text(c)}" for c in root["checks"]]
    general = (
        f" ({root['advice']}: the source names the code, not this fix)"
        if root.get("advice", "").startswith("general")
        else ""
    )
    out.append(f"- **fix:** {md_text(root['fix'])}{md_text(general)}")
    if root.get("source"):
        applies = f" ({root['applies_to']})" if root.get("applies_to") else ""
        out.append(f"- **from:** {md_text(root['source'] + applies)}")
    if first is not None:
        at = f"{_when(first)} {first['module'] or ''} {_where(first)}"
        out.append(f"- **first error in time:** {md_text(at)}: {md_text(_cut(first['message'], 160))}")
    return out + [""]
