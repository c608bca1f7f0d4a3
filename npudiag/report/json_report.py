"""The summary as one JSON document (for scripts and CI): keys are documented in docs/analyze.md."""

from __future__ import annotations

import json
import math
from typing import Any


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def render_json(summary: dict[str, Any]) -> str:
    return json.dumps(_clean(summary), indent=2, ensure_ascii=False, default=str)


def json_safe(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as plain JSON values (what ``render_json`` prints, parsed back): the results' ``to_dict()``."""
    return json.loads(json.dumps(_clean(summary), ensure_ascii=False, default=str))
