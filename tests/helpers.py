from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real command line (python -m npudiag), as a user would; ``env`` adds to the environment."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "npudiag", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300, env=full_env, input=input
    )


STANDIN_BIN = Path(__file__).resolve().parent / "bin"


def with_standins(env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose PATH finds the stand-in vendor tools (msnpureport) first."""
    return {**(env or {}), "PATH": f"{STANDIN_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def msprof_standin_path(bin_dir: Path) -> dict[str, str]:
    """Put an ``msprof`` on a fresh PATH that runs tests/standins/msprof.py with this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "msprof"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve().parent / "standins" / "msprof.py"}" "$@"\n')
    wrapper.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def both_log_paths_agree(texts: list[str], chunk_lines: int) -> int:
    """Parse every text on the vectorised path (small chunks, so short texts take it) and line by line;
    assert the rows are equal; return how many chunks the vectorised path took."""
    from npudiag.logs.formats import ascend_log, plog_fast
    from npudiag.logs.formats.log_common import LogContext

    used: list[bool] = []
    real = plog_fast.parse_plog_chunk

    def spy(*a, **k):
        r = real(*a, **k)
        used.append(r is not None)
        return r

    saved = ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES
    ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES = chunk_lines, 0
    plog_fast.parse_plog_chunk = spy
    try:
        for i, text in enumerate(texts):
            fast = ascend_log.parse_text(text, LogContext("x.log"))
            slow = ascend_log.parse_text(text, LogContext("x.log"), vectorised=False)
            assert fast.to_pylist() == slow.to_pylist(), f"text {i}"
    finally:
        ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES = saved
        plog_fast.parse_plog_chunk = real
    return sum(used)
