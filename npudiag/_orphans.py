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
from collections.abc import Callable

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
    if hasattr(signal, "pthread_sigmask"):  # started with SIGINT blocked (executors._server_starts_deaf)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
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


def _pool_gone(exc: BaseException) -> bool:
    """A worker forked while npudiag shut its pool down (Ctrl-C) finds the pool's lock already unlinked:
    FileNotFoundError in multiprocessing's synchronize.py, as it reads its process object from npudiag."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return isinstance(exc, FileNotFoundError) and bool(frames) and frames[-1].filename.endswith("synchronize.py")


def _quiet_start(start: Callable[..., int]) -> Callable[..., int]:
    """multiprocessing's start of a forked worker (``spawn._main``), silent when the pool is gone (see
    :func:`_pool_gone`): the fork server would print that error's traceback with ``sys.excepthook``
    (Typer's by then: the worker has imported npudiag's ``__main__``) after npudiag said "interrupted",
    for nothing that went wrong. Any other error is raised and printed as before."""

    def run(*args: object, **kwargs: object) -> int:
        try:
            return start(*args, **kwargs)
        except Exception as exc:
            if _pool_gone(exc):
                return 1
            raise

    return run


def _started_after_parent_died() -> bool:
    """This process has the fork server's shape and the variable, but npudiag (the pid in it) is gone: it
    died (an interrupt) while this server was still starting, so the server was orphaned before it could
    ask to die with it. Such a server must not fork the workers npudiag asked for: their start fails on
    the pool's vanished lock and prints a traceback. A pid in the variable that is alive (another
    process's child that inherited it) keeps things as they are; a zombie is gone."""
    var = os.environ.get(PARENT_VAR, "")
    if not var.isdigit() or str(os.getppid()) == var or sys.argv[:1] != ["-c"]:
        return False
    if "multiprocessing.forkserver" not in sys.modules:
        return False
    try:
        os.kill(int(var), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    try:  # dead, not yet reaped by whoever started npudiag: a zombie still answers kill(pid, 0)
        with open(f"/proc/{var}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


if __name__ != "__main__" and _started_after_parent_died():
    os._exit(0)
if __name__ != "__main__" and _in_fork_server():
    from multiprocessing import spawn

    # imported before the server saves its signal handlers: the workers it forks start with SIGINT ignored
    die_with_parent()
    spawn._main = _quiet_start(spawn._main)  # type: ignore[assignment]
