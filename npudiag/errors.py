"""The one error type that bad input raises.

Every reader turns malformed input into :class:`InputError` so the CLI can print one line naming the
file and position and exit 2, while other files of the same run are still processed.
"""

from __future__ import annotations

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
