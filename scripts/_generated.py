"""What the scripts that write generated docs share: write the page, or with --check say it is stale."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(target: Path, render: Callable[[], str], script: str) -> None:
    """``script``: rewrite ``target`` with ``render()``; ``script --check``: exit 1 when it differs."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help=f"exit 1 when {target.name} is stale instead of rewriting it")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not target.is_file() or target.read_text() != text:
            print(f"{target} is stale: run python {script}", file=sys.stderr)
            sys.exit(1)
        return
    target.write_text(text)
    print(f"wrote {target}")
