"""What the CLI says on stderr: one line per message, input text shown safely (never raw control characters)."""

from __future__ import annotations

import sys

from npudiag.report.text import clean

MAX_WARNINGS = 5


def tell(message: str) -> None:
    """``npudiag: message`` on stderr, control characters in it escaped."""
    sys.stderr.write(f"npudiag: {clean(message)}\n")


def warn_all(warnings: list[str], where: str = "manifest.json") -> None:
    """The first warnings on stderr, and how many more there are (all of them are in ``where``)."""
    for w in warnings[:MAX_WARNINGS]:
        tell(f"warning: {w}")
    if len(warnings) > MAX_WARNINGS:
        tell(f"... and {len(warnings) - MAX_WARNINGS} more warning(s) in {where}")
