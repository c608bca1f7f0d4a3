"""The tables analysis derives from the read ones: hot ops, findings and the per-step breakdown.

One function so that ``analyze``, ``compare`` and ``gate`` derive them the same way from a raw
profile; an ``--out`` folder already holds them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from npudiag.analysis.hot_ops import hot_ops_table
from npudiag.analysis.rules import findings_table, run_rules
from npudiag.analysis.step_breakdown import step_breakdown

DERIVED = ("hot_ops", "findings", "step_breakdown")


def derive(
    tables: dict[str, pa.Table], rule_options: dict[str, dict[str, Any]] | None = None
) -> tuple[dict[str, pa.Table], dict[str, str]]:
    """Return ``tables`` plus the derived ones, and the rules that were skipped (rule id -> reason)."""
    out = dict(tables)
    out["hot_ops"] = hot_ops_table(out["kernels"])
    findings, skipped = run_rules(out, rule_options or {})
    out["findings"] = findings_table(findings)
    out["step_breakdown"] = step_breakdown(out)
    return out, skipped
