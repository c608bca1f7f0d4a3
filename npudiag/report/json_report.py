"""The summary as one JSON document (for scripts and CI): keys are documented in docs/analyze.md.

Strict JSON (``npudiag.output.dumps``): numbers JSON cannot hold are null; control, bidi and
zero-width characters of input text are ``\\u``-escaped, so piping it to a terminal is safe too."""

from __future__ import annotations

from typing import Any

from npudiag.output import dumps


def render_json(summary: dict[str, Any]) -> str:
    return dumps(summary)
