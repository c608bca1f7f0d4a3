"""Reading the TOML files teams commit (rule options, gate thresholds) with one-line errors."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from npudiag.errors import InputError
from npudiag.safeio import MAX_DEPTH, read_text_limited

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file; ValueError naming the file (and tomllib's line and column) otherwise."""
    try:
        text = read_text_limited(path, 4 << 20)
    except InputError as exc:
        raise ValueError(exc.one_line()) from None
    if text.count("[") + text.count("{") > 50_000 or _depth(text) > MAX_DEPTH or _key_depth(text) > MAX_DEPTH:
        raise ValueError(f"{path}: nested deeper than {MAX_DEPTH} levels; not a settings file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: nested deeper than {MAX_DEPTH} levels; not a settings file") from None
    return data


# a table header ([a.b.c]) or the key of a key = value line: its dots nest tables as deep as brackets do
_KEY = re.compile(
    r"^[ \t]*(?:\[{1,2}([^\]\n]*)|([^=#\n\[\]{}\s][^=#\n\[\]{}]*)=)", re.M
)  # linear: the key starts at a non-space


def _key_depth(text: str) -> int:
    """The most dots in one dotted key (``a.b.c = 1`` nests three tables: 2,500 dots recursed past
    Python's limit in tomllib, 20,000 took 2.4 GB); dots inside quoted key parts count too (a bound,
    not a parse)."""
    return max(
        (
            len(m.group(1) or m.group(2) or "") - len((m.group(1) or m.group(2) or "").replace(".", ""))
            for m in _KEY.finditer(text)
        ),
        default=0,
    )


def _depth(text: str) -> int:
    """Deepest nesting of arrays / inline tables, outside strings (a linear scan, quotes approximate)."""
    depth = best = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return best
