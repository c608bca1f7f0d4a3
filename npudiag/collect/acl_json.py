"""acl.json as aclInit reads it: one file holding several sections (``profiler``, ``dump``...).

npudiag only ever replaces the section it was asked to write and keeps every other one, as written:
numbers a float cannot hold (``1e400``) are written back as they were read, never as ``Infinity``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npudiag.errors import InputError
from npudiag.output import dumps, write_file
from npudiag.safeio import loads_json, read_text_limited


def merged(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """``path``'s content with section ``key`` replaced; ValueError when the file is not a JSON object."""
    data: dict[str, Any] = {}
    if path.exists():
        try:
            text = read_text_limited(path)
            data = loads_json(text, path, keep_numbers=True) if text.strip() else {}
        except InputError as exc:
            raise ValueError(f"{exc.one_line()}; fix or remove it first") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object at the top level")
    data[key] = section
    return data


def write_section(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """Write section ``key`` into ``path`` (atomically), keeping the other sections."""
    data = merged(path, key, section)
    write_file(path, dumps(data, indent=4) + "\n")
    return data
