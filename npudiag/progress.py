"""How a long library call says how far it is: one protocol for every pipeline.

The CLI hands in a bar drawn on stderr (``npudiag.cli._progress.Bar``); a library caller hands in
its own object or None (nothing is reported). Nothing in the library prints."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, unit: str, label: str, total: int | None) -> None:
        """A new stretch of work named ``label``. ``unit``: what it counts, ``bytes`` read in this process,
        ``ranks`` done by their tasks or ``phase`` (no count); ``total`` None when not known yet."""

    def advance(self, n: int) -> None: ...

    def set_total(self, total: int) -> None: ...
