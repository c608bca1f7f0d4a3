"""Regenerate docs/cli.md, the command reference, from the commands' own ``--help``.

Every command and sub-command of the ``npudiag`` Typer app is listed in the order of the app,
each with its help text at 100 columns. Run from the repository root:

    python scripts/gen_cli_reference.py            # rewrite docs/cli.md
    python scripts/gen_cli_reference.py --check    # exit 1 when docs/cli.md is stale
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "cli.md"


def command_paths() -> list[list[str]]:
    """Every command path of the app, groups before their sub-commands: [[], ["analyze"], ["logs"], ["logs", "parse"], ...]."""
    sys.path.insert(0, str(ROOT))
    import typer

    from npudiag.cli import app

    out: list[list[str]] = []

    def walk(cmd, path: list[str]) -> None:
        out.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            if not sub.hidden:
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


def help_text(path: list[str]) -> str:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run([sys.executable, "-m", "npudiag", *path, "--help"], env=env, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"npudiag {' '.join(path)} --help failed: {r.stderr.strip()}")
    return "\n".join(line.rstrip() for line in r.stdout.strip("\n").splitlines())


def render() -> str:
    paths = command_paths()
    parts = [
        "# Command reference\n\n",
        f"Generated from each command's `--help` by `python {Path(__file__).relative_to(ROOT)}`; a test fails when\n"
        "this page is stale or a command is missing. Exit codes: see the end of `npudiag --help`.\n\n",
    ]
    parts += [f"- [`{' '.join(['npudiag', *p])}`](#{'-'.join(['npudiag', *p])})\n" for p in paths]
    for p in paths:
        title = " ".join(["npudiag", *p])
        parts.append(f"\n## {title}\n\n```text\n{help_text(p)}\n```\n")
    return "".join(parts)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _generated import write_or_check

    write_or_check(TARGET, render, "scripts/gen_cli_reference.py")
