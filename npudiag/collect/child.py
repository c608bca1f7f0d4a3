"""Starting vendor tools so they can neither outlive npudiag nor be hit twice by one Ctrl-C.

Each child gets its own process group (a terminal's Ctrl-C reaches npudiag, which forwards it
once; a timeout kills the whole group, grandchildren included) and, on Linux, a parent-death
signal, so a kill -9 of npudiag takes the child down too instead of leaving an orphan.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any

from npudiag._orphans import parent_death_signal


def _in_child() -> None:  # runs between fork and exec: no locks, no allocation-heavy work
    os.setpgid(0, 0)
    parent_death_signal()


def popen(argv: list[str], **kw: Any) -> subprocess.Popen:
    """subprocess.Popen with an argument list (never a shell), own process group, parent-death signal."""
    return subprocess.Popen(argv, preexec_fn=_in_child, **kw)  # noqa: PLW1509 - preexec is what gives the guarantees


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def describe_exit(code: int) -> str:
    """'exit code 3' or 'killed by signal 9 (SIGKILL)'."""
    if code > 128 and code - 128 in signal.valid_signals():
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = "?"
        return f"killed by signal {code - 128} ({name})"
    return f"exit code {code}"
