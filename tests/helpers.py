from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line (python -m npudiag), as a user would."""
    return subprocess.run([sys.executable, "-m", "npudiag", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)
