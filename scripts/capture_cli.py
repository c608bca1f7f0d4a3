"""Regenerate docs/cli-80-columns.txt: what analyze, cluster, compare, gate, dump compare and logs
parse print at 80 columns, on the bundled samples and the generated workspace
(npudiag.testing.workspace). Run from the repository root:

    python scripts/capture_cli.py            # rewrite the file
    python scripts/capture_cli.py --check    # exit 1 when the file is stale
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "cli-80-columns.txt"
COMMANDS = [
    "npudiag analyze fixtures/sample_msprof --out o/msprof",
    "npudiag cluster cluster_prof --out o/cluster",
    "npudiag compare fixtures/sample_msprof fixtures/sample_torch --out o/compare --top 8",
    "npudiag gate fixtures/sample_torch fixtures/sample_torch --steps 2:",
    "npudiag dump compare dump golden --out o/dump-compare",
    "npudiag logs parse ascend/log --out o/logs",
]


def capture() -> str:
    sys.path.insert(0, str(ROOT))
    from npudiag.testing.workspace import build_workspace

    with tempfile.TemporaryDirectory() as tmp:
        ws = build_workspace(Path(tmp) / "ws", ROOT / "fixtures")
        env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}
        parts = [f"# What npudiag prints at 80 columns (regenerate: python {Path(__file__).relative_to(ROOT)})\n"]
        for line in COMMANDS:
            argv = line.split()
            r = subprocess.run([sys.executable, "-m", "npudiag", *argv[1:]], cwd=ws, env=env, capture_output=True, text=True)
            parts.append(f"\n$ {line}    # exit {r.returncode}\n{r.stdout}")
        return "".join(parts)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _generated import write_or_check

    write_or_check({TARGET: capture}, "scripts/capture_cli.py")
