"""Pool processes die with npudiag: a kill -9 of npudiag must not leave workers writing into a
staging folder the next run is clearing.

Imported by the fork server at its start (its preload list) and run in each pool worker (the pool's
initializer): both ask Linux for SIGKILL when their parent dies (PR_SET_PDEATHSIG). The fork
server's parent is npudiag's process, which set ``NPUDIAG_POOL_PARENT`` to its pid before starting
it; a worker's parent is the fork server (or npudiag, with spawn).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
PARENT_VAR = "NPUDIAG_POOL_PARENT"


def parent_death_signal() -> None:
    """Ask Linux for SIGKILL when this process's parent dies (nothing elsewhere). Safe between fork
    and exec: no locks, no allocation-heavy work."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def die_with_parent() -> None:
    """The parent-death signal, and, where the parent is already gone, death now."""
    parent_death_signal()
    if sys.platform.startswith("linux") and os.getppid() == 1:  # the parent died before the request
        os.kill(os.getpid(), signal.SIGKILL)


if os.environ.get(PARENT_VAR) == str(os.getppid()) and __name__ != "__main__":  # the fork server, started by npudiag
    die_with_parent()
