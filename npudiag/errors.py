"""npudiag's errors: one hierarchy, each carrying the exit code the CLI ends with.

:class:`NpudiagError` is the base; every error has ``one_line()`` (what the user reads) and
``exit_code``. Every reader turns malformed input into :class:`InputError` naming the file and the
position, so other files of the same run are still processed; :class:`OutputError` is an output that
cannot be written; :class:`OptionError` a value given to the library that it cannot use (it names the
value, and the option in ``option`` so the CLI can name its flag); :class:`ToolError` a vendor tool
(msprof, msnpureport) missing or failing. The CLI maps them to exit codes in one place
(``npudiag.cli.main``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def text_of(value: object) -> str:
    """A path or message as text any stream or JSON writer can encode: the bytes of a file name that
    are not UTF-8 (kept by Python as lone surrogates) shown escaped (``plog_\\xff.log``), so two such
    names stay apart and the user can type the name back; the file itself is read by its real path."""
    s = str(value)
    return s if s.isascii() or not _SURROGATE.search(s) else _SURROGATE.sub(_escaped, s)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(m: re.Match[str]) -> str:
    """A byte the file system gave that is not UTF-8 (surrogateescape's U+DC80..U+DCFF) as ``\\xNN``;
    any other lone surrogate as U+FFFD."""
    c = ord(m.group())
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else "\ufffd"


class NpudiagError(Exception):
    """Base of every error npudiag reports to its user; ``exit_code`` is what the CLI exits with."""

    exit_code = 2

    def one_line(self) -> str:
        return str(self)


class InputError(NpudiagError):
    """Unusable input: which file, where in it (line, or character offset in a JSON stream), and what was expected."""

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        line: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.path = text_of(path)
        self.problem = text_of(problem)
        self.line = line
        self.offset = offset
        super().__init__(self.one_line())

    def __reduce__(self):  # picklable as it was made: a pool worker's error reaches the parent whole
        return (_input_error, (self.path, self.problem, self.line, self.offset))

    def one_line(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
        elif self.offset is not None:
            where += f" (offset {self.offset})"
        return f"{where}: {self.problem}"


class OutputError(NpudiagError):
    """An output that cannot be written (a read-only or missing parent, no space): one line, exit 2."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = text_of(path)
        self.reason = text_of(reason)
        super().__init__(self.one_line())

    def __reduce__(self):
        return (OutputError, (self.path, self.reason))

    def one_line(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


def _input_error(path: str, problem: str, line: int | None, offset: int | None) -> InputError:
    return InputError(path, problem, line=line, offset=offset)


class OptionError(NpudiagError, ValueError):
    """A value given to the library that it cannot use; ``option`` names the parameter (``steps``)."""

    def __init__(self, message: str, option: str | None = None) -> None:
        self.option = option
        super().__init__(message)


class ToolError(NpudiagError):
    """A vendor tool (msprof, msnpureport) that is missing, failed or timed out; the message is one line."""


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Turn an OSError raised while writing ``path`` into OutputError naming it."""
    try:
        yield
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
