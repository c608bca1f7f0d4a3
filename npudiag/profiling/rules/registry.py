"""The bottleneck rules, registered the way formats and renderers are: each rule module ends with one
``register(Rule(...))``, and the modules are imported on first use in the order of ``MODULES`` (the
order rules run in and docs/rules.md lists them). A test may register a rule of its own."""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from npudiag.profiling.rules.base import Finding, RuleContext

RuleFn = Callable[[RuleContext, dict[str, float]], list[Finding]]

# every rule module, in the order the rules run
MODULES = (
    "sync_copy",
    "unoverlapped_copy",
    "small_copies",
    "alloc_in_loop",
    "device_idle",
    "single_stream",
    "aicpu_ops",
    "hot_op",
    "memory_fragmentation",
    "memory_peak_op",
    "alloc_churn",
    "sync_stream",
    "aicore_freq",
    "fusion_candidates",
    "small_packets",
    "dynamic_shape",
    "block_dim",
    "bandwidth",
    "comm_peer_wait",
    "op_efficiency",
)


@dataclass(frozen=True)
class Rule:
    rule_id: str
    run: RuleFn  # (context of tables, options) -> findings; raises Skipped when its data is not in the profile
    options: Mapping[str, float]  # each option's default (--rule-opt RULE.OPTION=VALUE, --rule-file)
    msprof_analyze: str  # the msprof-analyze advisor check it corresponds to, or "none"
    doc: str  # first line: what it finds; the rest: how (docs/rules.md)
    # compares steps with each other (memory given back and taken again every step): a window of fewer
    # steps may not show what it finds
    across_steps: bool = False
    # a rule over the profile as a whole (shares of all device time), not rank by rank: where ranks are
    # analysed apart each rank gives ``partial(tables)`` and the rule runs once over what they add up to,
    # ``combine(kernels, hot_ops, partials, options)`` (npudiag.profiling.rank_job)
    partial: Callable[[dict[str, Any]], Any] | None = None
    combine: Callable[..., list[Finding]] | None = None


_RULES: dict[str, Rule] = {}
_loaded = False


def register(rule: Rule) -> Rule:
    """Add ``rule`` (a rule module calls this when imported; a test may add its own)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", rule.rule_id):
        raise ValueError(f"rule {rule.rule_id!r}: lower-case letters, digits and _")
    bad = [k for k, v in rule.options.items() if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0)]
    if bad:
        raise ValueError(f"rule {rule.rule_id}: option defaults must be finite numbers >= 0 ({', '.join(bad)})")
    if (rule.partial is None) != (rule.combine is None):
        raise ValueError(f"rule {rule.rule_id}: a profile-wide rule gives both partial and combine")
    _RULES[rule.rule_id] = rule
    return rule


def unregister(rule_id: str) -> None:
    _RULES.pop(rule_id, None)


def rules() -> dict[str, Rule]:
    """Every registered rule by id, in the order they run."""
    global _loaded
    if not _loaded:
        for module in MODULES:
            importlib.import_module(f"npudiag.profiling.rules.{module}")
        _loaded = True
    return _RULES


def profile_wide() -> tuple[Rule, ...]:
    """The rules that run once over the whole profile where ranks are analysed apart."""
    return tuple(r for r in rules().values() if r.combine is not None)
