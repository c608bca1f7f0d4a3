"""Running the profiled child: no shell, output passed straight through, Ctrl-C forwarded.

The child inherits npudiag's stdout and stderr, so its output appears as it is written (and a
tty stays a tty). No live status line is drawn beside it (the child writes to the same
terminal, and its next line would run into ours); the caller reports the elapsed time once the
child ends. SIGINT / SIGTERM sent to npudiag are forwarded to the child (msprof then stops the
app and still writes what it collected); npudiag keeps waiting, so the partial data can be
exported and analysed, and reports that it was interrupted.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from npudiag.collect.child import kill_group, popen


@dataclass
class ChildResult:
    returncode: int  # the child's exit code; 128 + N when a signal N ended it
    interrupted: bool  # npudiag got SIGINT / SIGTERM and forwarded it
    elapsed_s: float
    timed_out: bool = False


def run_child(
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float | None = None,
    stdout: int | None = None,
) -> ChildResult:
    """Run ``argv`` and wait for it, whatever signals arrive meanwhile; after ``timeout_s`` its whole
    process group is sent SIGTERM, then SIGKILL 10 s later. ``stdout``: a file descriptor for the
    child's output (2 keeps a tool's chatter off npudiag's own stdout)."""
    started = time.monotonic()
    try:
        proc = popen(argv, env=env, cwd=cwd, stdout=stdout)
    except FileNotFoundError:
        raise OSError(f"cannot run {argv[0]}: no such file") from None
    except PermissionError:
        raise OSError(f"cannot run {argv[0]}: permission denied (not executable?)") from None
    interrupted = False

    def forward(signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    timed_out = False
    try:
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc, signal.SIGTERM)
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(proc, signal.SIGKILL)
                rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    code = 128 - rc if rc < 0 else rc
    return ChildResult(code, interrupted, time.monotonic() - started, timed_out)


def prof_dirs(folder: Path) -> set[Path]:
    """PROF_* folders directly in ``folder`` or one level down (msprof writes PROF_* into --output)."""
    if not folder.is_dir():
        return set()
    found = {p for p in folder.glob("PROF_*") if p.is_dir()}
    found |= {p for p in folder.glob("*/PROF_*") if p.is_dir()}
    return found


def needs_export(prof: Path) -> bool:
    """True when msprof has not written its summaries yet (no mindstudio_profiler_output CSV/JSON/db)."""
    out = prof / "mindstudio_profiler_output"
    if out.is_dir() and any(p.suffix in (".csv", ".json") for p in out.iterdir()):
        return False
    if any(prof.glob("msprof_*.db")):
        return False
    return not any(p.is_dir() for p in prof.glob("device_*/summary"))  # CANN <= 7 exports into device_N/summary
