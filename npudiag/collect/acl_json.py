"""acl.json as aclInit reads it: one file holding several sections (``profiler``, ``dump``...).

npudiag only ever replaces the section it was asked to write and keeps every other one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from npudiag.store import write_text


def merged(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """``path``'s content with section ``key`` replaced; ValueError when the file is not a JSON object."""
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not valid JSON ({exc}); fix or remove it first") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object at the top level")
    data[key] = section
    return data


def write_section(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """Write section ``key`` into ``path`` (atomically), keeping the other sections."""
    data = merged(path, key, section)
    write_text(json.dumps(data, indent=4) + "\n", path)
    return data
