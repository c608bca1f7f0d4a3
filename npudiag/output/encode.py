"""What npudiag writes for others to read is strict: JSON without NaN / Infinity (``null``, the places
listed), text without invisible characters, CSV cells a spreadsheet would run as a formula neutralised,
file names made unique."""

from __future__ import annotations

import json
import math
import operator
import re
from typing import Any

from npudiag.errors import text_of
from npudiag.safeio import JsonLiteral, safe_name


class _Raw:
    def __init__(self, text: str) -> None:
        self.text = text


def strict(obj: Any, where: str = "$", found: list[str] | None = None) -> Any:
    """``obj`` with every float that JSON cannot hold (NaN, ±Infinity) replaced by None; the places
    (``$.a[2].b``) appended to ``found``. Tuples become lists; everything else is kept. A
    :class:`JsonLiteral` is kept, to be written as its text."""
    if isinstance(obj, JsonLiteral):
        return _Raw(obj.text)
    if isinstance(obj, str):  # a name from the file system that is not UTF-8: escaped, never unencodable
        return text_of(obj)
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        if found is not None:
            found.append(f"{where}: {obj!r}")
        return None
    if isinstance(obj, dict):
        return {text_of(k) if isinstance(k, str) else k: strict(v, f"{where}.{k}", found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    return obj


def dumps(obj: Any, *, indent: int | None = 2, ascii_only: bool = False, found: list[str] | None = None) -> str:
    """Strict JSON text (no NaN / Infinity: ``null``, the places in ``found``). Control, bidi and
    zero-width characters of input text are ``\\u``-escaped so they never reach a terminal raw."""
    raws: list[str] = []

    def default(o: Any) -> Any:
        if isinstance(o, _Raw):
            raws.append(o.text)
            return f"\x00raw{len(raws) - 1}\x00"
        return text_of(o)

    text = json.dumps(
        strict(obj, found=found), indent=indent, ensure_ascii=ascii_only, default=default, allow_nan=False
    )
    if raws:
        text = re.sub(r'"\\u0000raw([0-9]+)\\u0000"', lambda m: raws[int(m.group(1))], text)
    return escape_invisible(text)


# C0 / C1 controls, bidi embeddings / overrides / isolates, zero-width and other invisible format
# characters, line and paragraph separators: never written raw where a terminal or a viewer shows them
INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def json_safe(obj: Any) -> Any:
    """``obj`` as plain JSON values (what :func:`dumps` writes, parsed back): the results' ``to_dict()``."""
    return json.loads(json.dumps(strict(obj), ensure_ascii=False, default=text_of))


def escape_invisible(text: str) -> str:
    """``\\uXXXX`` for every character of :data:`INVISIBLE` (inside JSON strings this is the same
    string; JSON's own escapes for C0 controls are already in place and are not touched)."""
    return INVISIBLE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) if INVISIBLE.search(text) else text


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell no spreadsheet runs as a formula (OWASP): text that begins with ``= + - @``, TAB or
    CR gets a leading ``'``. Numbers are written as they are (a negative number is a number)."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def csv_column(values: list[str]) -> list[str]:
    """:func:`csv_cell` over a column of text cells, looked at cell by cell only where one could start a
    formula (a column of numbers of 40,000 steps costs one scan)."""
    firsts = set(map(operator.itemgetter(0), filter(None, values)))  # in C: no Python step per cell
    return [csv_cell(v) for v in values] if firsts.intersection(_FORMULA) else values


class UniqueNames:
    """File names from names found in inputs: one harmless path component each (``safe_name``),
    never the same twice in one folder. A name cut to the length limit ends in a short hash of the
    whole name; a name that still collides (``a/b`` and ``a_b``) gets ``~2``, ``~3``... before its
    suffix. Compared without case, for case-insensitive file systems."""

    def __init__(self, max_len: int = 160) -> None:
        self.max_len = max_len
        self.used: set[str] = set()

    def __call__(self, stem: str, suffix: str = "") -> str:
        import hashlib

        base = safe_name(stem, 1 << 20)
        if len(base) > self.max_len:
            digest = hashlib.sha256(stem.encode("utf-8", "surrogatepass")).hexdigest()[:10]
            base = f"{base[: self.max_len - 11]}~{digest}"
        candidate, n = base + suffix, 1
        while candidate.lower() in self.used:
            n += 1
            candidate = f"{base}~{n}{suffix}"
        self.used.add(candidate.lower())
        return candidate
