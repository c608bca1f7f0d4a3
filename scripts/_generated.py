"""What the scripts that write generated docs share: write the page, or with --check say it is stale."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(pages: dict[Path, Callable[[], str]], script: str) -> None:
    """``script``: rewrite each page with its render(); ``script --check``: exit 1 when one differs."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="exit 1 when a page is stale instead of rewriting it")
    args = ap.parse_args()
    stale = []
    for target, render in pages.items():
        text = render()
        if args.check:
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                stale.append(target)
            continue
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    for target in stale:
        print(f"{target} is stale: run python {script}", file=sys.stderr)
    if stale:
        sys.exit(1)
