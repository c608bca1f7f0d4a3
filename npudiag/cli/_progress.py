"""The progress bar the library's pipelines report to (``npudiag.progress.Progress``).

Drawn on stderr, only on a terminal, gone when the run ends (transient). Imported only when a
command runs, never by ``--help``.
"""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

_LABEL = "[progress.description]{task.description}"


class Bar:
    """A context manager: ``with Bar(console) as bar: pipeline(..., progress=bar)``."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._bar: Progress | None = None
        self._task = None

    def start(self, unit: str, label: str, total: int | None) -> None:
        if self._bar is not None:  # the next stretch of work replaces the last
            self._bar.stop()
        if unit == "phase":  # no count: a spinner beside what is being done
            columns = (SpinnerColumn(), _LABEL, TimeElapsedColumn())
        else:
            counts = (DownloadColumn(), TransferSpeedColumn()) if unit == "bytes" else (MofNCompleteColumn(),)
            columns = (_LABEL, BarColumn(), *counts, TimeElapsedColumn())
        self._bar = Progress(*columns, console=self._console, transient=True)
        self._bar.start()
        self._task = self._bar.add_task(label, total=total)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def set_total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def __enter__(self) -> Bar:
        return self

    @classmethod
    def shown(cls, console: Console, hidden: bool):
        """A bar on ``console`` when it is a terminal and not ``hidden`` (quiet, JSON), else a context giving None."""
        return cls(console) if console.is_terminal and not hidden else contextlib.nullcontext()

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
