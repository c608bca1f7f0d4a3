"""Log triage: match log records against the shipped knowledge base and say what failed first.

The knowledge base is data (``npudiag/logs/log_kb.toml``), so adding a failure is adding an entry
with its example line, not code. Matching is vectorised over the whole log_events table (RE2 via
pyarrow compute), one pass per entry.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag.logs.formats.log_common import CODE_MODULES, QUIET_LEVELS, error_codes
from npudiag.schemas import TRIAGE
from npudiag.tomlfile import read_toml

PROBLEM_LEVELS = ["ERROR", "FATAL", "WARNING"]
# the root cause is the earliest finding of the first tier present: a fault the device reported
# (AI Core / vector core / AICPU exception, TS exception, HBM/ECC) comes before a host-side cause
# (out of memory, HCCL init, a compile error), which comes before what follows from a failure
# elsewhere (stream sync failed, EZ9999 wrappers, task run failed, watchdog timeouts)
ROLES = ("device_fault", "cause", "symptom")


@dataclass(frozen=True)
class KbEntry:
    id: str
    title: str
    role: str
    codes: tuple[str, ...]
    patterns: tuple[str, ...]
    modules: tuple[str, ...]
    meaning: str
    causes: tuple[str, ...]
    checks: tuple[str, ...]
    fix: str
    example: str
    levels: tuple[str, ...] = ()  # information levels (EVENT...) this entry also matches; others never do
    source: str = ""
    leads_to: tuple[str, ...] = ()  # ids of the entries whose findings follow from this one (rule chains)
    # where meaning / checks / fix come from: "" for an entry written from its sources; for an entry generated
    # from the code catalogue whose source gives no solution for the code, the category whose general advice it carries
    general: str = ""
    applies_to: str = ""  # the CANN / torch_npu releases the source text is from ("" where not recorded)


_REQUIRED = ("id", "title", "meaning", "fix", "example")


def load_kb(path: Path | None = None) -> list[KbEntry]:
    """The entries of ``path`` (default: the shipped file), then one entry per catalogued CANN error
    code (error_catalogue.toml) that no hand-written entry covers, when ``path`` defines the catalogue's
    categories. ValueError names a malformed entry. The shipped knowledge base is read once a process."""
    return list(_shipped_kb()) if path is None else _load_kb(path)


@functools.lru_cache(maxsize=1)
def _shipped_kb() -> tuple[KbEntry, ...]:
    return tuple(_load_kb(None))


def _load_kb(path: Path | None) -> list[KbEntry]:
    if path is None:
        with resources.as_file(resources.files("npudiag.logs") / "log_kb.toml") as p:
            data = read_toml(p)
    else:
        data = read_toml(path)
    entries = []
    seen: set[str] = set()
    links: dict[str, list[str]] = {}
    for i, e in enumerate(data.get("entry", []), 1):
        missing = [k for k in _REQUIRED if not e.get(k)]
        if missing or not (e.get("codes") or e.get("patterns")):
            raise ValueError(
                f"knowledge base entry {i} ({e.get('id', '?')}): needs {', '.join(missing) or 'codes or patterns'}"
            )
        if e.get("role", "cause") not in ROLES:
            raise ValueError(f"knowledge base entry {i} ({e['id']}): role must be one of {', '.join(ROLES)}")
        if e["id"] in seen:
            raise ValueError(f"knowledge base entry {i}: duplicate id {e['id']}")
        seen.add(e["id"])
        for p in e.get("patterns", []):
            re.compile(p)
        links[e["id"]] = list(e.get("leads_to", []))
        entries.append(
            KbEntry(
                e["id"],
                e["title"],
                e.get("role", "cause"),
                tuple(e.get("codes", [])),
                tuple(e.get("patterns", [])),
                tuple(m.upper() for m in e.get("modules", [])),
                e["meaning"],
                tuple(e.get("causes", [])),
                tuple(e.get("checks", [])),
                e["fix"],
                e["example"],
                tuple(x.upper() for x in e.get("levels", [])),
                e.get("source", ""),
            )
        )
    categories = {c["id"]: c for c in data.get("category", [])}
    members: dict[str, list[str]] = {}
    if categories:
        if any(c.get("leads_to") for c in categories.values()):
            raise ValueError(
                "knowledge base categories take no leads_to: a chain needs a source or a real log showing it"
            )
        entries = _with_sources(entries) + _catalogue_entries(categories, entries, members)
    return _with_chains(entries, links, members)


def _with_sources(hand: list[KbEntry]) -> list[KbEntry]:
    """Hand-written entries naming catalogued codes carry those codes' releases, and the code's own fix from
    its source (code_advice.toml's wording) wherever their text leaves out a fact of it (an API, a variable,
    a size, a link: the catalogue's terms)."""
    rows = {r["code"]: r for r in _catalogue()}
    advice, _ = _advice()
    out = []
    for e in hand:
        mine = [rows[c] for c in e.codes if c in rows]
        fix = e.fix
        for r in mine:
            own = advice.get((r["code"], r.get("advice_sha", "")), {}).get("fix")
            text = _plain(" ".join((e.meaning, fix, *e.causes, *e.checks)))
            if own and any(_plain(t) not in text for t in r.get("terms", [])):
                fix += f" For {r['code']} the source says: {own}"
        out.append(replace(e, fix=fix, applies_to=next((applies_to(r) for r in mine if applies_to(r)), "")))
    return out


def _plain(text: str) -> str:
    """Text as facts are compared: lower case, "20 MB" written as "20mb"."""
    return re.sub(r"(\d) (mb|gb|s)\b", r"\1\2", text.lower())


# the printf conversions of a catalogued message format ("%s", "%zu", "%d"...), filled in an example
_PRINTF = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[sdiuxXfgcp]")


def _catalogue_entries(
    categories: dict[str, dict[str, Any]], hand: list[KbEntry], members: dict[str, list[str]]
) -> list[KbEntry]:
    """One entry per catalogued code that no hand-written entry names (in its codes or its example): the
    code's own cause and fix as code_advice.toml words them from the code's source; the code's category's
    general texts only where that source has none (``general`` says so)."""
    rows = _catalogue()
    advice, meanings = _advice()
    covered = {c for e in hand for c in (*e.codes, *error_codes(e.example))}
    out = []
    for r in rows:
        code, cat = r["code"], categories.get(r["category"])
        if cat is None:
            raise ValueError(f"error_catalogue.toml: code {code}: unknown category {r['category']!r}")
        if code in covered:
            continue
        if code.isdigit():
            title = f"{r['name']} ({code}): {meanings.get(code) or cat['title']}"
            api = "aclmdlExecute(modelId, input, output)" if code[1:3] == "45" else "aclrtSynchronizeStream(stream)"
            example = f"RuntimeError: NPU function error: {api}, error code is {code}"
        elif code.startswith(
            "ERR"
        ):  # torch_npu prints "[ERROR] <time> (PID:.., Device:.., RankID:..) ERR01100 OPS call acl api failed"
            title = f"torch_npu {code}: {r.get('message') or cat['title']}"
            example = f"[ERROR] 2025-01-01-00:00:00 (PID:1, Device:0, RankID:0) {code} {r.get('message', '')}"
        else:
            title = f"{r['component']} {code}: {cat['title']}"
            example = f"{code}: " + _PRINTF.sub("x", r.get("message") or cat["title"])
        kb_id = "code-" + code.lower()
        members.setdefault(cat["id"], []).append(kb_id)
        own = advice.get((code, r.get("advice_sha", "")), {})
        cause = own.get("cause", "")
        if cause or code in meanings:
            meaning = cause or meanings[code][:1].upper() + meanings[code][1:] + "."
        elif own.get("fix"):  # the source gives no cause: the line's own message says what failed
            meaning = (
                f"{r['component']} error {code}: the log line says what failed; the fix below "
                "is the source's for this code."
            )
        else:
            meaning = cat["meaning"]
        out.append(
            KbEntry(
                kb_id,
                title,
                cat["role"],
                (code,),
                (),
                (),
                meaning,
                (cause,) if cause else tuple(cat.get("causes", [])),
                () if own.get("fix") else tuple(cat.get("checks", [])),
                own.get("fix") or cat["fix"],
                example,
                source=r["source"],
                general="" if own.get("fix") else cat["id"],
                applies_to=applies_to(r),
            )
        )
    return out


def applies_to(row: dict[str, Any]) -> str:
    """The releases a catalogued code's text is from: the CANN release of the source read, the first public
    release holding the code (releases before the sources went public are not checked), torch_npu's first."""
    if row.get("torch_npu"):
        return f"torch_npu {row['torch_npu']} and later"
    if not row.get("cann"):
        return ""
    since = (
        f"; in public CANN releases since {row['since']}" if row.get("since") and row["since"] != row["cann"] else ""
    )
    return f"CANN {row['cann']} text{since}"


@functools.lru_cache(maxsize=1)
def _catalogue() -> list[dict[str, Any]]:
    with resources.as_file(resources.files("npudiag.logs") / "error_catalogue.toml") as p:
        return list(read_toml(p).get("code", []))


@functools.lru_cache(maxsize=1)
def _advice() -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, str]]:
    """(code, source_sha) -> npudiag's wording of that code's own cause / fix; numeric code -> its meaning."""
    with resources.as_file(resources.files("npudiag.logs") / "code_advice.toml") as p:
        data = read_toml(p)
    return {(c, a["source_sha"]): a for a in data.get("advice", []) for c in a["codes"]}, dict(data.get("meaning", {}))


def _with_chains(entries: list[KbEntry], links: dict[str, list[str]], members: dict[str, list[str]]) -> list[KbEntry]:
    """Each entry with its ``leads_to`` resolved to entry ids: a name is an entry id, a category (all its
    entries) or an error code (the entries that name it)."""
    ids = {e.id for e in entries}
    by_code: dict[str, list[str]] = {}
    for e in entries:
        for c in e.codes:
            by_code.setdefault(c, []).append(e.id)
    out = []
    for e in entries:
        resolved: dict[str, None] = {}
        for name in links.get(e.id, []):
            found = [name] if name in ids else members.get(name) or by_code.get(name)
            if not found:
                raise ValueError(f"knowledge base entry {e.id}: leads_to names nothing known: {name}")
            resolved.update(dict.fromkeys(x for x in found if x != e.id))
        out.append(replace(e, leads_to=tuple(resolved)) if resolved else e)
    return out


def _code_mask(events: pa.Table, codes: tuple[str, ...]) -> np.ndarray:
    mask = np.zeros(events.num_rows, bool)
    if not codes or events.num_rows == 0:
        return mask
    lists = events["error_codes"].combine_chunks()
    flat = pc.list_flatten(lists)
    if len(flat) == 0:
        return mask
    parents = pc.list_parent_indices(lists).to_numpy()
    hit = pc.is_in(flat, pa.array(list(codes))).to_numpy(zero_copy_only=False)
    mask[parents[hit]] = True
    return mask


def match_entries(events: pa.Table, kb: list[KbEntry]) -> dict[str, np.ndarray]:
    """Entry id -> boolean mask over ``events`` of the records it matches (in ``kb`` order)."""
    out: dict[str, np.ndarray] = {}
    if events.num_rows == 0:
        return out
    message = pc.fill_null(events["message"], "")
    modules = pc.fill_null(events["module"], "")
    levels = pc.fill_null(events["level"], "")
    # an information record (GE's error-code catalogue at INFO, a DEBUG trace) is never a finding
    loud = ~pc.is_in(levels, pa.array(list(QUIET_LEVELS))).to_numpy(zero_copy_only=False)
    by_code = _code_only_masks(events, kb, loud)
    # one pass of every pattern at once finds the records any of them can match; the patterns are then
    # narrowed down on those alone (most records of a large log match none, most candidates one pattern)
    patterns = list(dict.fromkeys(p for e in kb if not _code_only(e) for p in e.patterns))
    cand = (
        np.flatnonzero(
            pc.match_substring_regex(message, _any_of(patterns), ignore_case=True).to_numpy(zero_copy_only=False)
        )
        if patterns
        else np.array([], np.int64)
    )
    hits = _pattern_hits(message.take(pa.array(cand)), patterns) if len(cand) else {}
    for e in kb:
        if e.id in by_code:
            out[e.id] = by_code[e.id]
            continue
        if _code_only(e):
            continue
        mask = _code_mask(events, e.codes)
        for p in e.patterns:
            if p in hits:
                mask[cand[hits[p]]] = True
        allowed = (
            loud | pc.is_in(levels, pa.array(list(e.levels), pa.string())).to_numpy(zero_copy_only=False)
            if e.levels
            else loud
        )
        mask &= allowed
        if e.modules and mask.any():
            mask &= pc.is_in(pc.utf8_upper(modules), pa.array(list(e.modules))).to_numpy(zero_copy_only=False)
        if mask.any():
            out[e.id] = mask
    return out


def _any_of(patterns: list[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def _pattern_hits(texts: pa.Array, patterns: list[str]) -> dict[str, np.ndarray]:
    """Each pattern that matches some of ``texts`` (ignoring case; every text matches at least one of
    ``patterns``) -> the positions of the texts it matches. The patterns are halved, each half's
    alternation run on the texts the whole matched, down to single patterns: a text matching one pattern
    is read about twice per halving, not once per pattern."""
    out: dict[str, np.ndarray] = {}
    whole = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    todo = [(np.arange(len(whole)), whole, patterns)]
    while todo:
        rows, sub, group = todo.pop()
        if len(group) == 1:
            out[group[0]] = rows
            continue
        for half in (group[: len(group) // 2], group[len(group) // 2 :]):
            hit = pc.match_substring_regex(sub, _any_of(half), ignore_case=True)
            found = hit.to_numpy(zero_copy_only=False)
            if found.any():
                todo.append((rows[found], sub.filter(hit), half))
    return out


def _code_only(e: KbEntry) -> bool:
    return bool(e.codes) and not (e.patterns or e.modules or e.levels)


def _code_only_masks(events: pa.Table, kb: list[KbEntry], loud: np.ndarray) -> dict[str, np.ndarray]:
    """The masks of every entry matched by its codes alone, from one pass over the records' codes
    (the catalogue's hundreds of entries cost one lookup per distinct code seen, not a pass each)."""
    lists = events["error_codes"].combine_chunks()
    flat = pc.list_flatten(lists)
    if len(flat) == 0:
        return {}
    parents = pc.list_parent_indices(lists).to_numpy()
    owners: dict[str, list[str]] = {}
    for e in kb:
        if _code_only(e):
            for c in e.codes:
                owners.setdefault(c, []).append(e.id)
    out: dict[str, np.ndarray] = {}
    for code in pc.unique(flat).to_pylist():
        if code not in owners:
            continue
        rows = parents[pc.equal(flat, code).to_numpy(zero_copy_only=False)]
        hit = np.zeros(events.num_rows, bool)
        hit[rows] = True
        hit &= loud
        if hit.any():
            for kb_id in owners[code]:
                out[kb_id] = out[kb_id] | hit if kb_id in out else hit.copy()
    return out


def _distinct_ints(values: list[int | None]) -> list[int]:
    return sorted({v for v in values if v is not None})


def triage_table(events: pa.Table, kb: list[KbEntry]) -> pa.Table:
    """One row per knowledge-base entry seen in the logs, earliest first."""
    matches = match_entries(events, kb)
    by_id = {e.id: e for e in kb}
    rows = []
    order = np.arange(events.num_rows)
    for kb_id, mask in matches.items():
        e = by_id[kb_id]
        idx = order[mask]
        sub = events.take(pa.array(idx))
        sub_ts = sub["timestamp"]
        first_i = _first_index(sub)
        codes: dict[str, None] = {}
        for lst in sub["error_codes"].to_pylist():
            for c in lst:
                codes[c] = None
        rows.append(
            {
                "kb_id": kb_id,
                "title": e.title,
                "role": e.role,
                "count": len(idx),
                "first_timestamp": pc.min(sub_ts).as_py(),
                "last_timestamp": pc.max(sub_ts).as_py(),
                "first_timestamp_no_year": pc.min(sub["timestamp_no_year"]).as_py()
                if sub_ts.null_count == len(sub_ts)
                else None,
                "first_file": sub["file"][first_i].as_py(),
                "first_line": sub["line"][first_i].as_py(),
                "device_ids": _distinct_ints(sub["device_id"].to_pylist()),
                "ranks": _distinct_ints(sub["rank"].to_pylist()),
                "error_codes": list(codes),
                "example": (sub["message"][first_i].as_py() or "").split("\n")[0][:400],
                "meaning": e.meaning,
                "causes": json.dumps(list(e.causes), ensure_ascii=False),
                "checks": json.dumps(list(e.checks), ensure_ascii=False),
                "fix": e.fix,
                "source": e.source,
                "advice": f"general advice for the {e.general} category" if e.general else "from the source",
                "applies_to": e.applies_to or None,
                "follows_from": None,
            }
        )
    t = pa.Table.from_pylist(rows, schema=TRIAGE)
    if t.num_rows:
        t = t.sort_by(
            [
                ("first_timestamp", "ascending"),
                ("first_timestamp_no_year", "ascending"),
                ("first_file", "ascending"),
                ("first_line", "ascending"),
            ]
        )
    i = TRIAGE.get_field_index("follows_from")
    return t.set_column(i, TRIAGE.field(i), pa.array(follows_from(t["kb_id"].to_pylist(), by_id), pa.string()))


def follows_from(kb_ids: list[str], by_id: dict[str, KbEntry]) -> list[str | None]:
    """For each finding (in time order), the earliest other finding whose entry's rule chain leads to it,
    or None: a consequence of a failure seen in the same logs is not its root cause."""
    out: list[str | None] = []
    for kb_id in kb_ids:
        out.append(next((g for g in kb_ids if g != kb_id and kb_id in by_id[g].leads_to), None))
    return out


def _first_index(t: pa.Table) -> int:
    """The earliest record: by timestamp where any has one, else by month-day time where any has one
    (a log of c10 / glog lines gives no year), else the first in file order."""
    for name in ("timestamp", "timestamp_no_year"):
        ts = t[name]
        if ts.null_count < len(ts):
            return int(pc.index(ts, pc.min(ts)).as_py())
    return 0


# the order of problem records: time (with a year, then month-day time without one), then file order
TIME_ORDER = [
    ("timestamp", "ascending"),
    ("timestamp_no_year", "ascending"),
    ("file", "ascending"),
    ("line", "ascending"),
]
_SAME_RECORD = ("timestamp", "timestamp_no_year", "level", "module", "pid", "thread_id", "message")


def distinct_records(problems: pa.Table) -> tuple[pa.Table, list[dict[str, Any]]]:
    """``problems`` without the records another file already holds (an asys collection with a plog
    and a renamed copy of it): same time, level, module, pid, thread and message, in a different
    file than the first one holding it; records without a time are all kept. Also, per file that
    repeated another, how many of its records were dropped and which file holds them."""
    if problems.num_rows < 2:
        return problems, []
    timed = pc.or_(pc.is_valid(problems["timestamp"]), pc.is_valid(problems["timestamp_no_year"])).to_numpy(
        zero_copy_only=False
    )
    idx = np.flatnonzero(timed)
    if len(idx) < 2:
        return problems, []
    t = problems.take(pa.array(idx))
    keys = pa.table({k: t[k] for k in _SAME_RECORD}).append_column("_i", pa.array(np.arange(len(idx))))
    order = pc.sort_indices(keys, [(k, "ascending") for k in (*_SAME_RECORD, "_i")]).to_numpy()
    s = keys.take(pa.array(order))
    same = np.ones(len(order) - 1, bool)
    for k in _SAME_RECORD:
        a, b = s[k].slice(0, len(order) - 1), s[k].slice(1)
        eq = pc.fill_null(pc.equal(a, b), False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        same &= pc.or_(eq, both_null).to_numpy(zero_copy_only=False)
    group = np.concatenate([[0], np.cumsum(~same)])
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    files = t["file"].take(pa.array(order)).to_numpy(zero_copy_only=False)
    first_file = files[starts[group]]
    dup_sorted = files != first_file
    if not dup_sorted.any():
        return problems, []
    drop = np.zeros(problems.num_rows, bool)
    drop[idx[order[dup_sorted]]] = True
    pairs: dict[tuple[str, str], int] = {}
    for f, of in zip(files[dup_sorted].tolist(), first_file[dup_sorted].tolist()):
        pairs[(f, of)] = pairs.get((f, of), 0) + 1
    return problems.filter(pa.array(~drop)), [{"file": f, "same_as": of, "records": n} for (f, of), n in pairs.items()]


def _problems(events: pa.Table) -> pa.Table:
    has_codes = pc.greater(pc.fill_null(pc.list_value_length(events["error_codes"]), 0), 0)
    bad_level = pc.fill_null(pc.is_in(events["level"], pa.array(PROBLEM_LEVELS[:2])), False)
    return events.filter(pc.or_(bad_level, has_codes))


def _counts(t: pa.Table, column: str) -> list[dict[str, Any]]:
    if t.num_rows == 0:
        return []
    g = t.group_by(column).aggregate([("line", "count")]).sort_by([("line_count", "descending")])
    return [{column: k, "count": c} for k, c in zip(g[column].to_pylist(), g["line_count"].to_pylist())]


def summarise(
    events: pa.Table,
    triage: pa.Table,
    kb: list[KbEntry],
    totals: dict[str, Any] | None = None,
    timeline_limit: int = 30,
) -> dict[str, Any]:
    """The dict every logs renderer draws from (terminal, JSON). ``events`` may hold only the problem
    records (``totals`` then gives the counts over every record)."""
    by_id = {e.id: e for e in kb}
    errors = _problems(events)
    errors = errors.sort_by(TIME_ORDER) if errors.num_rows else errors
    timed = errors.filter(pc.is_valid(errors["timestamp"])) if errors.num_rows else errors
    first = None
    source = timed if timed.num_rows else errors
    if source.num_rows:
        first = _row(source, 0)
    code_rows = _code_rows(errors, kb)
    findings = triage.to_pylist()
    for f in findings:
        f["causes"] = json.loads(f["causes"])
        f["checks"] = json.loads(f["checks"])
    root = root_cause(findings)
    ranks = _first_by(errors, "rank")
    if totals is None:
        totals = _totals(events)
    return {
        **totals,
        "first_error": first,
        "root_cause": root,
        "fault_kernels": fault_kernels(errors),
        "error_codes": sorted(code_rows.values(), key=lambda r: (-r["count"], r["code"])),
        "findings": findings,
        "by_module": _counts(errors, "module"),
        "by_device": _counts(errors, "device_id"),
        "by_rank": _counts(errors, "rank"),
        "first_failure_by_rank": ranks,
        "timeline": [_row(errors, i) for i in range(min(errors.num_rows, timeline_limit))],
        "knowledge_base_entries": len(by_id),
    }


def _code_rows(errors: pa.Table, kb: list[KbEntry]) -> dict[str, dict[str, Any]]:
    """Each error code the problem records name: how often, where first, and its meaning and fix (the
    knowledge base's first entry for the code, else the code's generic meaning)."""
    lists = errors["error_codes"].combine_chunks()
    flat = pc.list_flatten(lists)
    if not len(flat):
        return {}
    found = pc.dictionary_encode(flat)  # the codes in the order they are first named
    which = found.indices.to_numpy()
    _, first = np.unique(which, return_index=True)  # where each code is first named
    counts = np.bincount(which)
    at = pc.list_parent_indices(lists).to_numpy()[first]
    firsts = errors.select(["timestamp", "timestamp_no_year", "file", "line"]).take(pa.array(at)).to_pylist()
    code_rows: dict[str, dict[str, Any]] = {
        c: {
            "code": c,
            "count": int(n),
            "first_timestamp": r["timestamp"],
            "first_timestamp_no_year": r["timestamp_no_year"],
            "first_file": r["file"],
            "first_line": r["line"],
        }
        for c, n, r in zip(found.dictionary.to_pylist(), counts.tolist(), firsts)
    }
    code_kb: dict[str, KbEntry] = {}
    for e in kb:
        for c in e.codes:
            code_kb.setdefault(c, e)
    for c, row in code_rows.items():
        e = code_kb.get(c)
        row["kb_id"] = e.id if e else None
        row["meaning"] = e.title if e else _generic_meaning(c)
        row["fix"] = e.fix if e else None
    return code_rows


def _totals(events: pa.Table) -> dict[str, int]:
    """Files, records and records at ERROR and at WARNING, counted over ``events``."""
    if not events.num_rows:
        return {"files": 0, "records": 0, "errors": 0, "warnings": 0}

    def at(level: str) -> int:
        return int(pc.sum(pc.fill_null(pc.equal(events["level"], level), False)).as_py() or 0)

    files = int(pc.count_distinct(events["file"]).as_py() or 0)
    return {"files": files, "records": events.num_rows, "errors": at("ERROR"), "warnings": at("WARNING")}


_FAULT_KERNEL = r"fault kernel_name=([^,\s]+)"


def fault_kernels(errors: pa.Table, limit: int = 10) -> list[dict[str, Any]]:
    """The kernels the runtime names as failed ('... Aicore kernel execute failed, ..., fault
    kernel_name=NAME, ...'), each once, first seen first: the operator to investigate."""
    if errors.num_rows == 0:
        return []
    hit = pc.fill_null(pc.match_substring_regex(errors["message"], _FAULT_KERNEL), False)
    t = errors.filter(hit)
    if t.num_rows == 0:
        return []
    names = pc.struct_field(pc.extract_regex(t["message"], r".*?" + _FAULT_KERNEL.replace("(", "(?P<k>", 1)), "k")
    out: dict[str, dict[str, Any]] = {}
    cols = [names.to_pylist(), *(t[c].to_pylist() for c in ("timestamp", "timestamp_no_year", "file", "line"))]
    for name, ts, no_year, file, line in zip(*cols):
        row = out.setdefault(
            name,
            {
                "kernel_name": name,
                "count": 0,
                "first_timestamp": ts,
                "first_timestamp_no_year": no_year,
                "first_file": file,
                "first_line": line,
            },
        )
        row["count"] += 1
        if len(out) >= limit:
            break
    return list(out.values())


def root_cause(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The earliest finding (``findings`` are in time order) of the first role in ROLES that has one,
    among the findings no other finding's rule chain leads to (all of them, if every one is led to)."""
    heads = [f for f in findings if not f.get("follows_from")] or findings
    for role in ROLES:
        for f in heads:
            if f["role"] == role:
                return f
    return None


def _generic_meaning(code: str) -> str | None:
    if re.fullmatch(r"[EWI][0-9A-Z]\d{4}", code):
        level = {"E": "error", "W": "warning", "I": "info"}[code[0]]
        mod = CODE_MODULES.get(code[1], "unknown component")
        kind = "internal error: collect logs, contact support" if int(code[2:]) >= 9000 else "user-side problem"
        return f"{mod} {level} ({kind})"
    if code.isdigit():
        return {
            "1": "ACL parameter / environment error",
            "2": "ACL resource or hardware mismatch",
            "3": "ACL service error (queue)",
        }.get(code[0], "ACL internal error")
    return None


def _row(t: pa.Table, i: int) -> dict[str, Any]:
    r = t.slice(i, 1).to_pylist()[0]
    return {
        "timestamp": r["timestamp"],
        "timestamp_no_year": r["timestamp_no_year"],
        "file": r["file"],
        "line": r["line"],
        "origin": r["origin"],
        "level": r["level"],
        "module": r["module"],
        "device_id": r["device_id"],
        "rank": r["rank"],
        "pid": r["pid"],
        "error_codes": r["error_codes"],
        "message": (r["message"] or "").split("\n")[0][:300],
    }


def _first_by(errors: pa.Table, column: str) -> list[dict[str, Any]]:
    """For each rank, its first error (sorted: the rank that failed first comes first)."""
    if errors.num_rows == 0:
        return []
    t = errors.filter(pc.is_valid(errors[column]))
    t = t.append_column("_i", pa.array(np.arange(t.num_rows)))
    firsts = t.group_by(column).aggregate([("_i", "min")])["_i_min"].to_pylist()  # errors are in TIME_ORDER
    return [_row(t, i) for i in sorted(firsts)]
