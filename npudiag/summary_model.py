"""The analysis summary as typed blocks: what ``analyze`` and ``report`` show, read by every renderer.

A library result keeps its summary as the plain dict ``--format json`` prints (``Result.summary``, built by
:mod:`npudiag.profiling.analysis.summary`). :meth:`Summary.of` reads that dict into one frozen dataclass per
block, so a renderer names a field (``s.copies.by_direction``) instead of a key, and a block or a field the
dict lacks (a summary written by an older npudiag, a test's partial one) reads as its empty default instead of
each renderer guarding it. Rows of tables (ranks, operators, steps, findings) stay dicts keyed by the tables'
columns (docs/tables.md); the blocks are what is not a table row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

Row = dict[str, Any]
# device busy time split as the glossary defines it (they add up to it on every rank): the keys of the per-rank
# rows and of the profile block, defined here for the producer (analysis.summary) and the renderers alike
BUSY_PARTS = ("computing_us", "communication_not_overlapped_us", "copy_not_overlapped_us")
_T = TypeVar("_T")


def _block(cls: type[_T], data: Any) -> _T:
    """``cls`` from the keys of ``data`` it declares (others ignored, absent ones at their defaults)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in (data or {}).items() if k in names})


@dataclass(frozen=True)
class ProfileTotals:
    """The ``profile`` block: the whole profile's figures (docs/glossary.md defines each; sums over ranks)."""

    ranks: int = 0
    ranks_with_kernels: int | None = None  # None in a summary that predates it: every rank
    ranks_without_kernels: dict[str, list[str]] = field(default_factory=dict)  # rank -> the data it has
    kernels: int = 0
    kernel_time_us: float = 0.0
    span_us: float = 0.0
    rank_span_sum_us: float = 0.0
    device_busy_us: float = 0.0
    device_busy_pct: float | None = None
    computing_us: float = 0.0
    communication_not_overlapped_us: float = 0.0
    copy_not_overlapped_us: float = 0.0
    ranks_with_device_tasks: int = 0
    time_lost_us: float = 0.0
    api_calls: int = 0
    steps: int = 0
    steps_recorded: int | None = None  # None in a summary that predates it: as ``steps``

    @property
    def busy_parts(self) -> dict[str, float]:
        """Device busy time split as the glossary defines it: compute, communication and copies not overlapped."""
        return {key: getattr(self, key) for key in BUSY_PARTS}


@dataclass(frozen=True)
class HotOps:
    """The ``hot_ops`` block: the top operators grouped ``by`` type or name, of ``total_groups``."""

    by: str = "type"
    total_groups: int = 0
    top: list[Row] = field(default_factory=list)  # hot_ops.parquet rows


@dataclass(frozen=True)
class Copies:
    """The ``copies`` block: device copy tasks and the host calls that issued them, by direction."""

    count: int = 0
    host_calls: int = 0
    time_us: float = 0.0
    host_time_us: float = 0.0
    bytes: int | None = None  # None where no copy's size is recorded
    device_time_us: float = 0.0
    by_direction: list[Row] = field(default_factory=list)  # side, direction, mode, count, bytes, time_us, share_pct


@dataclass(frozen=True)
class Memory:
    """The ``memory`` block: each rank's allocation peak (npudiag.profiling.analysis.memory)."""

    ranks: list[Row] = field(default_factory=list)
    peak_allocated_bytes: int | None = None


@dataclass(frozen=True)
class IdleCauses:
    """The ``idle_causes`` block: device idle time inside steps by what delayed the next task."""

    idle_us: float = 0.0
    causes: list[Row] = field(default_factory=list)  # cause (None: nothing recorded says why), kind, idle_us
    by_kind_us: dict[str, float] = field(default_factory=dict)
    advice: str | None = None  # for the largest cause
    source: str | None = None  # where that advice comes from


@dataclass(frozen=True)
class RangeTree:
    """One kind of range (torch modules, mstx ranges): how many were recorded and the tree shown."""

    ranges: int = 0
    tree: list[Row] = field(default_factory=list)  # depth, name, calls, host_us, device_us, kernels


@dataclass(frozen=True)
class Summary:
    """One analysis as its renderers read it. ``Summary.of(result.summary)``."""

    profile: ProfileTotals = field(default_factory=ProfileTotals)
    per_rank: list[Row] = field(default_factory=list)
    task_types: list[Row] = field(default_factory=list)
    hot_ops: HotOps = field(default_factory=HotOps)
    op_efficiency: list[Row] = field(default_factory=list)
    copies: Copies = field(default_factory=Copies)
    steps: list[Row] = field(default_factory=list)
    step_breakdown: list[Row] = field(default_factory=list)
    findings: list[Row] = field(default_factory=list)
    memory: Memory = field(default_factory=Memory)
    idle_causes: IdleCauses = field(default_factory=IdleCauses)
    ranges: dict[str, RangeTree] = field(default_factory=dict)  # by kind: "module", "mstx"
    rules_skipped: dict[str, str] = field(default_factory=dict)  # rule -> why it did not run
    title: str | None = None
    out: str | None = None  # where the tables were written
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    npudiag_version: str | None = None

    @classmethod
    def of(cls, summary: dict[str, Any]) -> Summary:
        """The typed view of a summary dict (``analyze``'s, ``report``'s or one loaded from JSON)."""
        blocks = {
            "profile": _block(ProfileTotals, summary.get("profile")),
            "hot_ops": _block(HotOps, summary.get("hot_ops")),
            "copies": _block(Copies, summary.get("copies")),
            "memory": _block(Memory, summary.get("memory")),
            "idle_causes": _block(IdleCauses, summary.get("idle_causes")),
            "ranges": {kind: _block(RangeTree, b) for kind, b in (summary.get("ranges") or {}).items()},
        }
        plain = {k: v for k, v in summary.items() if k not in blocks and v is not None}
        return _block(cls, {**plain, **blocks})
