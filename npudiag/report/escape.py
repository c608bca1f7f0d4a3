"""Input text as one safe line: control characters shown escaped (``\\x1b``), bidi controls and
invisible characters shown as ``\\u202e``; nothing else imported.

Kept apart from :mod:`npudiag.report.text` (which needs Rich) so the CLI's error path and ``--help``
stay light.
"""

from __future__ import annotations

import re
from typing import Any

# C0 (not TAB) and C1 controls, DEL; bidi embeddings, overrides, isolates and marks; zero-width and
# other invisible format characters; line / paragraph separators; the BOM; interlinear annotations.
# Any of them lets a log line reorder, hide or restyle what the terminal shows.
_CONTROL = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    if ch in "\n\r":
        return {"\n": "\\n", "\r": "\\r"}[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: Any) -> str:
    """``value`` as one line of text: control characters (not TAB) and invisible or bidi characters escaped."""
    s = "" if value is None else str(value)
    return _CONTROL.sub(_escape, s) if _CONTROL.search(s) else s


def clean_json(text: str) -> str:
    """JSON text with the characters :func:`clean` escapes written as JSON escapes (``\\u202e``): the
    same document, safe on a terminal (json.dumps leaves C1, bidi and invisible characters raw)."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) if _CONTROL.search(text) else text


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~&])")


def md_text(value: Any) -> str:
    """Input text for a Markdown table cell or line: every character Markdown or HTML acts on is
    escaped (a backslash, or an entity for < > &), pipes cannot end the cell, control characters and
    newlines cannot end the row."""
    s = clean(value).replace("\\n", " ")
    return _MD_SPECIAL.sub(lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(m.group(1), "\\" + m.group(1)), s)
