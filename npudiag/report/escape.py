"""Input text as one safe line: control characters shown escaped (``\\x1b``), nothing else imported.

Kept apart from :mod:`npudiag.report.text` (which needs Rich) so the CLI's error path and ``--help``
stay light.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    return {"\n": "\\n", "\r": "\\r"}.get(ch, f"\\x{ord(ch):02x}")


def clean(value: Any) -> str:
    """``value`` as one line of text: control characters (not TAB) escaped."""
    s = "" if value is None else str(value)
    return _CONTROL.sub(_escape, s) if _CONTROL.search(s) else s
