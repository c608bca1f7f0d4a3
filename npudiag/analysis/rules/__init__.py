"""Bottleneck rules: each module holds one rule, a pure function over the canonical tables.

A rule declares its options with defaults (``OPTIONS``) and returns findings, or a reason why it
was skipped (the data it needs is not in this profile), like ``nsys analyze``'s SKIPPED lines.
``run_rules`` runs them all and collects a ``findings`` table.
"""

from __future__ import annotations

from npudiag.analysis.rules.base import (
    PROFILE_WIDE,
    Finding,
    RuleContext,
    Skipped,
    findings_table,
    load_rule_file,
    options_for,
    parse_rule_options,
    run_rules,
    sort_findings,
)

__all__ = [
    "PROFILE_WIDE",
    "Finding",
    "options_for",
    "RuleContext",
    "Skipped",
    "findings_table",
    "load_rule_file",
    "parse_rule_options",
    "run_rules",
    "sort_findings",
]
