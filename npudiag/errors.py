"""The error types of bad input and of outputs that cannot be written.

Every reader turns malformed input into :class:`InputError` so the CLI can print one line naming the
file and position and exit 2, while other files of the same run are still processed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class InputError(Exception):
    """Unusable input: which file, where in it (line, or character offset in a JSON stream), and what was expected."""

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        line: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.path = str(path)
        self.problem = problem
        self.line = line
        self.offset = offset
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
        elif self.offset is not None:
            where += f" (offset {self.offset})"
        return f"{where}: {self.problem}"


class OutputError(Exception):
    """An output that cannot be written (a read-only or missing parent, no space): one line, exit 2."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Turn an OSError raised while writing ``path`` into OutputError naming it."""
    try:
        yield
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
