"""What the analyses and the rules share over one table set: :class:`RuleContext` (the tables plus
the per-rank timelines and hot ops, computed once), the step starts, the severity scale and the
order of findings. Below the rules: an analysis may use it without importing a rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from npudiag import schemas
from npudiag.profiling.analysis.hot_ops import hot_ops_table
from npudiag.profiling.analysis.quantities import Timeline, timeline


def rank_rows(t: pa.Table, rank: int | None) -> pa.Table:
    """The rows of ``t`` of one rank (None: the rows with no rank); ``t`` itself, not a copy, when
    every row is that rank's (a table may hold millions of rows)."""
    if t.num_rows == 0:
        return t
    if rank is not None and t["rank"].null_count == 0:
        lo, hi = pc.min_max(t["rank"]).values()
        if lo.as_py() == hi.as_py() == rank:
            return t
    mask = pc.is_null(t["rank"]) if rank is None else pc.equal(t["rank"], rank)
    return t.filter(pc.fill_null(mask, False))


@dataclass
class RuleContext:
    """The tables a rule may read, plus derived per-rank facts computed once."""

    tables: dict[str, pa.Table]
    _built: dict[Any, Any] = field(default_factory=dict)

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()`` once per key for this context (what several analyses and rules of a run share)."""
        if key not in self._built:
            self._built[key] = build()
        return self._built[key]

    def table(self, name: str) -> pa.Table:
        t = self.tables.get(name)
        return t if t is not None else schemas.empty(name)

    def ranks(self) -> list[int | None]:
        """Ranks with device tasks (kernels or device copies)."""
        seen: set = set()
        for name in ("kernels", "copies"):
            t = self.table(name)
            if name == "copies" and t.num_rows:
                t = t.filter(pc.fill_null(pc.equal(t["side"], "device"), False))
            if t.num_rows:
                seen |= set(pc.unique(t["rank"]).to_pylist())
        return sorted(seen, key=lambda r: (r is None, r))

    def ranks_of(self, name: str) -> list[int | None]:
        """The ranks that have rows in table ``name``, in order (no rank last)."""
        t = self.table(name)
        return sorted(set(pc.unique(t["rank"]).to_pylist()), key=lambda r: (r is None, r)) if t.num_rows else []

    def for_rank(self, name: str, rank: int | None) -> pa.Table:
        return rank_rows(self.table(name), rank)

    def severity(self, rank: int | None, lost_us: float, opts: dict[str, float], span_us: float | None = None) -> str:
        """Severity from the share of the rank's span (first kernel start to last end) the time lost is.

        With no span to compare against (no kernels), any time lost counts as the whole span."""
        span = self.span_us(rank) if span_us is None else span_us
        span = span or lost_us
        return severity_for(lost_us / span if span else 0.0, opts["warning_share"], opts["critical_share"])

    def timeline(self, rank: int | None) -> Timeline:
        """The rank's device timeline (kernels and device copies), built once per run of the rules."""
        return self.cached(
            ("timeline", rank), lambda: timeline(self.for_rank("kernels", rank), self.for_rank("copies", rank))
        )

    def hot_ops(self, by: str | None = None) -> pa.Table:
        """``hot_ops.parquet`` of the kernels, built once: all of it, or its rows grouped ``by`` op type or name."""
        every = self.cached("hot_ops", lambda: hot_ops_table(self.table("kernels")))
        return every if by is None else every.filter(pc.equal(every["group_by"], by))

    def span_us(self, rank: int | None) -> float:
        """The rank's span, as the glossary defines it (kernels and device copies)."""
        return self.timeline(rank).span_us


def sort_findings(table: pa.Table) -> pa.Table:
    """A findings table in ``run_rules``' order: most time lost first (none counts as 0), then rule id."""
    if table.num_rows < 2:
        return table
    key = pa.table({"lost": pc.fill_null(table["time_lost_us"], 0.0), "rule": table["rule_id"]})
    return table.take(pc.sort_indices(key, sort_keys=[("lost", "descending"), ("rule", "ascending")]))


def severity_for(share: float, warning: float, critical: float) -> str:
    if share >= critical:
        return "critical"
    if share >= warning:
        return "warning"
    return "info"


def step_starts(ctx: RuleContext, rank: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(start time, step id) of each step, sorted: from the steps table where it has times, else
    from the first kernel of each Step Id. Empty when the profile has no steps."""
    st = ctx.for_rank("steps", rank)
    if st.num_rows and pc.sum(pc.is_valid(st["start_us"])).as_py():
        st = st.filter(pc.is_valid(st["start_us"])).sort_by("start_us")
        return st["start_us"].to_numpy(), st["step"].to_numpy()
    k = ctx.for_rank("kernels", rank)
    if k.num_rows == 0 or pc.all(pc.is_null(k["step"])).as_py():
        return np.array([], float), np.array([], np.int64)
    k = k.select(["step", "start_us"])
    g = k.filter(pc.is_valid(k["step"])).group_by("step").aggregate([("start_us", "min")]).sort_by("start_us_min")
    return g["start_us_min"].to_numpy(), g["step"].to_numpy()
