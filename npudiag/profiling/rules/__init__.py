"""Bottleneck rules: each module holds one rule, a pure function over the canonical tables.

A rule declares its options with defaults (``OPTIONS``) and returns findings, or a reason why it
was skipped (the data it needs is not in this profile), like ``nsys analyze``'s SKIPPED lines.
Each module registers its rule (``rules.registry``); ``run_rules`` runs them all; ``rules.base`` holds
what they share.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, findings_table, sort_findings
from npudiag.profiling.rules.registry import Rule, profile_wide, register, rules, unregister
from npudiag.tomlfile import read_toml

__all__ = [
    "Finding",
    "Rule",
    "RuleContext",
    "Skipped",
    "findings_table",
    "load_rule_file",
    "options_for",
    "parse_rule_options",
    "profile_wide",
    "register",
    "rule_options",
    "rules",
    "run_rules",
    "sort_findings",
    "unregister",
]


def rule_options() -> dict[str, dict[str, float]]:
    """Every rule's options with their defaults (documented in docs/analyze.md)."""
    return {rule_id: dict(rule.options) for rule_id, rule in rules().items()}


def parse_rule_options(items: list[str]) -> dict[str, dict[str, float]]:
    """``["sync_copy.min_bytes=65536"]`` -> ``{"sync_copy": {"min_bytes": 65536.0}}``; ValueError names the bad item."""
    known = rule_options()
    out: dict[str, dict[str, float]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        rule_id, dot, opt = key.strip().partition(".")
        if not sep or not dot:
            raise ValueError(f"--rule-opt {item!r}: expected RULE.OPTION=VALUE")
        if rule_id not in known:
            raise ValueError(f"--rule-opt {item!r}: unknown rule {rule_id!r}; rules are {', '.join(known)}")
        if opt not in known[rule_id]:
            raise ValueError(
                f"--rule-opt {item!r}: {rule_id} has no option {opt!r}; options are {', '.join(known[rule_id])}"
            )
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"--rule-opt {item!r}: {value!r} is not a number") from None
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"--rule-opt {item!r}: expected a finite number >= 0")
        out.setdefault(rule_id, {})[opt] = number
    return out


def load_rule_file(path: Path) -> dict[str, dict[str, float]]:
    """Rule options from a TOML file, one table per rule: ``[sync_copy]`` then ``min_bytes = 65536``."""
    data = read_toml(path)
    items = []
    for rule_id, opts in data.items():
        if not isinstance(opts, dict):
            raise ValueError(f"{path}: {rule_id!r} must be a table of options, e.g. [{rule_id}]")
        items += [f"{rule_id}.{k}={v}" for k, v in opts.items()]
    try:
        return parse_rule_options(items)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}".replace("--rule-opt ", "")) from None


def options_for(rule_id: str, overrides: dict[str, dict[str, float]] | None = None) -> dict[str, float]:
    return {**rules()[rule_id].options, **(overrides or {}).get(rule_id, {})}


def run_rules(
    tables: dict[str, pa.Table] | RuleContext,
    overrides: dict[str, dict[str, float]] | None = None,
    exclude: tuple[str, ...] = (),
) -> tuple[list[Finding], dict[str, str]]:
    """All findings, most time lost first, and the rules skipped with their reasons. ``tables`` may
    be a context the caller already used, so what it built (timelines, hot ops) is not built again."""
    ctx = tables if isinstance(tables, RuleContext) else RuleContext(tables)
    findings: list[Finding] = []
    skipped: dict[str, str] = {}
    for rule_id, rule in rules().items():
        if rule_id in exclude:
            continue
        try:
            found = rule.run(ctx, options_for(rule_id, overrides))
        except Skipped as why:
            skipped[rule_id] = str(why)
            continue
        numbered: dict[Any, int] = {}
        for f in found:
            numbered[f.rank] = numbered.get(f.rank, 0) + 1
            f.finding_id = f"{f.rule_id}:{'all' if f.rank is None else f.rank}:{numbered[f.rank]}"
            if f.intervals is not None:
                f.evidence.setdefault("intervals", {"count": int(len(f.intervals[0])), "table": "finding_intervals"})
        findings.extend(found)
    findings.sort(key=lambda f: (-(f.time_lost_us or 0.0), f.rule_id))
    return findings, skipped
