"""What every library call returns: one protocol, the same names on every result.

``summary`` (the dict ``--format json`` prints, which the renderers draw; for an analysis,
:class:`npudiag.summary_model.Summary` gives its blocks typed; None when nothing could be read),
``tables`` (name -> pyarrow.Table), ``errors`` and ``warnings`` (one line each, naming the file), ``to_dict()`` (the
summary as plain JSON values). ``analyze``, ``load_output``, ``compare``, ``gate``, ``cluster``,
``parse_dump``, ``compare_dumps`` and ``parse_logs`` each return a :class:`Result`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa


@runtime_checkable
class Result(Protocol):
    summary: dict[str, Any] | None
    errors: list[str]
    warnings: list[str]

    @property
    def tables(self) -> dict[str, pa.Table]: ...

    def to_dict(self) -> dict[str, Any]: ...


# on a profiler event of a many-rank timeline (``profiling.pipeline.TimelineView``): the rank whose trace it
# is, so a renderer keeps the ranks' processes and flows apart
RANK_KEY = "npudiag_rank"
