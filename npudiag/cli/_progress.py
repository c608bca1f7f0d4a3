"""The progress bar the library's pipelines report to (``npudiag.profiling.pipeline.Progress``).

Drawn on stderr, only on a terminal, gone when the run ends (transient). Imported only when a
command runs, never by ``--help``.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TransferSpeedColumn


class Bar:
    """A context manager: ``with Bar(console) as bar: pipeline(..., progress=bar)``."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._bar: Progress | None = None
        self._task = None

    def start(self, unit: str, label: str, total: int | None) -> None:
        counts = (DownloadColumn(), TransferSpeedColumn()) if unit == "bytes" else (MofNCompleteColumn(),)
        self._bar = Progress("[progress.description]{task.description}", BarColumn(), *counts, TimeElapsedColumn(),
                             console=self._console, transient=True)  # fmt: skip
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

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
