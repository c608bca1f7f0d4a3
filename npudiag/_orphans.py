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
    """The parent-death signal, and, where the parent is already gone, death now. Ctrl-C is npudiag's
    to answer (one line, exit 130, the workers then die with it): a worker or the fork server ignores
    SIGINT, which the terminal sends to the whole process group, instead of printing a traceback."""
    with contextlib.suppress(ValueError):  # not the main thread: nothing to set
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent_death_signal()
    if sys.platform.startswith("linux") and os.getppid() == 1:  # the parent died before the request
        os.kill(os.getpid(), signal.SIGKILL)


def _in_fork_server() -> bool:
    """This process is the fork server npudiag started: its parent set the variable to its own pid, and it
    runs multiprocessing's server (``python -c 'from multiprocessing.forkserver import main; ...'``). The
    variable alone is not enough: every child of that npudiag inherits it (an npudiag a test runs, a
    program npudiag profile runs), and must keep its own Ctrl-C."""
    return (
        os.environ.get(PARENT_VAR) == str(os.getppid())
        and sys.argv[:1] == ["-c"]
        and "multiprocessing.forkserver" in sys.modules
    )


if __name__ != "__main__" and _in_fork_server():
    # imported before the server saves its signal handlers: the workers it forks start with SIGINT ignored
    die_with_parent()
