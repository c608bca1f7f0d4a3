"""acl.json as aclInit reads it: one file holding several sections (``profiler``, ``dump``...).

npudiag only ever replaces the section it was asked to write and keeps every other one, as written:
numbers a float cannot hold (``1e400``) are written back as they were read, never as ``Infinity``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npudiag.errors import InputError
from npudiag.output import dumps, write_file
from npudiag.safeio import loads_json, read_text_limited


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"), ((int, float), "a number"))
    return next((name for t, name in kinds if isinstance(value, t)), type(value).__name__)


def merged(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """``path``'s content with section ``key`` replaced; InputError when the file is not a JSON object."""
    data: dict[str, Any] = {}
    if path.exists():
        try:
            text = read_text_limited(path)
            data = loads_json(text, path, keep_numbers=True, unique_keys=True) if text.strip() else {}
        except InputError as exc:
            raise InputError(
                exc.path, f"{exc.problem}; fix or remove it first", line=exc.line, offset=exc.offset
            ) from None
        if not isinstance(data, dict):
            raise InputError(
                path, f"expected a JSON object at the top level, found {json_kind(data)}; fix or remove it first"
            )
    data[key] = section
    return data


def write_section(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """Write section ``key`` into ``path`` (atomically), keeping the other sections."""
    data = merged(path, key, section)
    write_file(path, dumps(data, indent=4) + "\n")
    return data
