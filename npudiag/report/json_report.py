"""The summary as one JSON document (for scripts and CI): keys are documented in docs/analyze.md.

Strict JSON (``npudiag.output.dumps``): numbers JSON cannot hold are null; control, bidi and
zero-width characters of input text are ``\\u``-escaped, so piping it to a terminal is safe too."""

from __future__ import annotations

import json
from typing import Any

from npudiag.output import dumps, strict


def render_json(summary: dict[str, Any]) -> str:
    return dumps(summary)


def json_safe(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as plain JSON values (what ``render_json`` prints, parsed back): the results' ``to_dict()``."""
    return json.loads(json.dumps(strict(summary), ensure_ascii=False, default=str))
