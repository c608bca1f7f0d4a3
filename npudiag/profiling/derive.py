"""The tables analysis derives from the read ones: hot ops, the per-step breakdown, the idle causes,
findings and the time ranges the findings own.

One function so that ``analyze`` (one rank in memory, or each rank in its own task), ``compare``
and ``gate`` derive them the same way from a raw profile; an ``--out`` folder already holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from npudiag.phases import phase
from npudiag.profiling.analysis.idle_causes import idle_causes, idle_gaps, rank_attribution
from npudiag.profiling.analysis.op_perf import op_perf
from npudiag.profiling.analysis.step_breakdown import breakdown_and_gaps, step_time_warnings
from npudiag.profiling.analysis.window import Window
from npudiag.profiling.rules import findings_table, options_for, run_rules
from npudiag.profiling.rules.base import RuleContext, intervals_table

DERIVED = ("hot_ops", "step_breakdown", "findings", "finding_intervals", "idle_gaps", "idle_causes", "op_perf")


def derive(
    tables: dict[str, pa.Table],
    rule_options: dict[str, dict[str, Any]] | None = None,
    exclude: tuple[str, ...] = (),
) -> tuple[dict[str, pa.Table], dict[str, str]]:
    """Return ``tables`` plus the derived ones, and the rules that were skipped (rule id -> reason).
    ``exclude`` leaves out rules run elsewhere (the profile-wide ones, when ranks run apart)."""
    out = dict(tables)
    ctx = RuleContext(out)  # holds what the rules share with the tables here (hot ops, timelines)
    out["hot_ops"] = ctx.hot_ops()
    out["step_breakdown"], gaps = breakdown_and_gaps(out)
    out["idle_gaps"] = idle_gaps(out, gaps, lambda rank: rank_attribution(ctx, rank))
    del gaps  # each gap's start, end and length: no longer needed
    out["idle_causes"] = idle_causes(out["idle_gaps"])
    out["op_perf"] = op_perf(out, options_for("op_efficiency", rule_options))  # the rule's peak and thresholds
    with phase("derive: rules"):
        findings, skipped = run_rules(ctx, rule_options or {}, exclude=exclude)
    out["findings"] = findings_table(findings)
    out["finding_intervals"] = intervals_table(findings)
    return out, skipped


@dataclass
class Derived:
    """One table set analysed: the read tables cut to the window plus the derived ones, the rules
    skipped (rule id -> reason) and what the step times say is doubtful."""

    tables: dict[str, pa.Table]
    skipped: dict[str, str]
    warnings: list[str]


def cut_and_derive(
    read: dict[str, pa.Table],
    window: Window,
    rule_options: dict[str, dict[str, Any]] | None = None,
    *,
    exclude: tuple[str, ...] = (),
    on_cut: Callable[[dict[str, pa.Table]], None] | None = None,
) -> Derived:
    """The analysis of one rank (or of one in-memory profile): cut to ``window`` (WindowError when
    it holds nothing, ValueError when the profile cannot be cut that way), then :func:`derive`.
    ``on_cut`` sees the cut read tables before the derivation starts (to write them meanwhile).
    Every command that analyses a raw profile runs this, so they agree."""
    tables = window.cut(read)
    if on_cut is not None:
        on_cut(tables)
    tables, skipped = derive(tables, rule_options, exclude)
    return Derived(tables, skipped, step_time_warnings(tables["step_breakdown"]))
