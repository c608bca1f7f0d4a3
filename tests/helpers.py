from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

# NPUDIAG_TEST_SUBPROCESS=1 runs every run_cli in a fresh `python -m npudiag` process, as before
IN_PROCESS = os.environ.get("NPUDIAG_TEST_SUBPROCESS") != "1"


def run_cli(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, input: str | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the command line's entry point (``npudiag.cli.main``) with these arguments, in this process
    (stdin, stdout, stderr, the environment and the working folder swapped for the call and put back),
    so the suite does not pay an interpreter start and the imports per call. ``process=True`` (or
    NPUDIAG_TEST_SUBPROCESS=1) runs ``python -m npudiag`` instead: for what only a real process shows
    (signals, what gets imported). ``env`` adds to the environment."""
    argv = [str(a) for a in args]
    if process or not IN_PROCESS:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "npudiag", *argv], capture_output=True, text=True, cwd=cwd, timeout=300, env=full_env, input=input
        )
    from npudiag.cli import main

    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8")
    saved_streams, saved_env, saved_cwd = (sys.stdin, sys.stdout, sys.stderr), dict(os.environ), os.getcwd()
    code: int = 0
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = stdin, out, err
        with warnings.catch_warnings():  # main() sets its own filters; they end with the call
            try:
                main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["npudiag", *argv], code, out.getvalue(), err.getvalue())


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
        used.append(any(not isinstance(p, tuple) for p in r))  # a chunk some of whose records took the vectorised path
        return r

    saved = ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES
    ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES = chunk_lines, 0
    plog_fast.parse_plog_chunk = spy
    try:
        for i, text in enumerate(texts):
            fast = parse_text(text, LogContext("x.log"))
            slow = parse_text(text, LogContext("x.log"), vectorised=False)
            assert fast.to_pylist() == slow.to_pylist(), f"text {i}"
    finally:
        ascend_log.CHUNK_LINES, ascend_log.MIN_VECTOR_LINES = saved
        plog_fast.parse_plog_chunk = real
    return sum(used)


def build_summary(tables: dict, **options) -> dict:
    """The summary of a table set held in memory, as analyze builds it (options: top, by, meta, rules_skipped)."""
    from npudiag.profiling.analysis.summary import SummaryParts, summary_from_parts

    return summary_from_parts(SummaryParts.of(tables), **options)


def parse_text(text: str, ctx=None, vectorised: bool = True):
    """A whole log text at once, through the reader ``logs parse`` uses (short excerpts, in tests)."""
    import pyarrow as pa

    from npudiag.logs.formats.ascend_log import LogContext, LogParser
    from npudiag.schemas import LOG_EVENTS

    parser = LogParser(ctx or LogContext("-"), vectorised=vectorised)
    return pa.Table.from_batches(list(parser.parse(text.splitlines())), schema=LOG_EVENTS)
