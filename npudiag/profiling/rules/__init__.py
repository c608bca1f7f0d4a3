"""Bottleneck rules: each module holds one rule, a pure function over the canonical tables.

A rule declares its options with defaults (``OPTIONS``) and returns findings, or a reason why it
was skipped (the data it needs is not in this profile), like ``nsys analyze``'s SKIPPED lines.
This module is the registry: ``run_rules`` runs them all; ``rules.base`` holds what they share.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.profiling.rules import (
    aicore_freq,
    aicpu_ops,
    alloc_churn,
    alloc_in_loop,
    bandwidth,
    block_dim,
    comm_peer_wait,
    device_idle,
    dynamic_shape,
    fusion_candidates,
    hot_op,
    memory_fragmentation,
    memory_peak_op,
    op_efficiency,
    single_stream,
    small_copies,
    small_packets,
    sync_copy,
    sync_stream,
    unoverlapped_copy,
)
from npudiag.profiling.rules.base import Finding, RuleContext, Skipped, findings_table, sort_findings
from npudiag.tomlfile import read_toml

__all__ = [
    "PROFILE_WIDE",
    "RULES",
    "Finding",
    "RuleContext",
    "Skipped",
    "findings_table",
    "load_rule_file",
    "options_for",
    "parse_rule_options",
    "rule_options",
    "run_rules",
    "sort_findings",
]

RULES = (
    sync_copy,
    unoverlapped_copy,
    small_copies,
    alloc_in_loop,
    device_idle,
    single_stream,
    aicpu_ops,
    hot_op,
    memory_fragmentation,
    memory_peak_op,
    alloc_churn,
    sync_stream,
    aicore_freq,
    fusion_candidates,
    small_packets,
    dynamic_shape,
    block_dim,
    bandwidth,
    comm_peer_wait,
    op_efficiency,
)
RuleFn = Callable[[RuleContext, dict[str, float]], list[Finding]]


def _registry() -> dict[str, tuple[RuleFn, dict[str, float]]]:
    return {m.RULE_ID: (m.run, m.OPTIONS) for m in RULES}


def rule_options() -> dict[str, dict[str, float]]:
    """Every rule's options with their defaults (documented in docs/analyze.md)."""
    return {rule_id: dict(opts) for rule_id, (_, opts) in _registry().items()}


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


# rules that look at the profile as a whole (shares of all device time), not rank by rank: where
# ranks are analysed apart each rank gives the rule's ``partial(tables)`` and the rule runs once,
# ``combine(kernels, hot_ops, partials, opts)``, over what the ranks add up to (npudiag.profiling.rank_job)
PROFILE_WIDE_RULES = (hot_op,)
PROFILE_WIDE = tuple(m.RULE_ID for m in PROFILE_WIDE_RULES)


def options_for(rule_id: str, overrides: dict[str, dict[str, float]] | None = None) -> dict[str, float]:
    return {**_registry()[rule_id][1], **(overrides or {}).get(rule_id, {})}


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
    for rule_id, (fn, defaults) in _registry().items():
        if rule_id in exclude:
            continue
        opts = {**defaults, **(overrides or {}).get(rule_id, {})}
        try:
            found = fn(ctx, opts)
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
