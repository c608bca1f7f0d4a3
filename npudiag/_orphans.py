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


def _fork_server_parent() -> int | None:
    """The pid of the npudiag that started this process, when this is its fork server: npudiag set the
    variable to its own pid before starting it, and this process runs multiprocessing's server
    (``python -c 'from multiprocessing.forkserver import main; ...'``). The variable alone is not enough:
    every child of that npudiag inherits it (an npudiag a test runs, a program npudiag profile runs), and
    must keep its own Ctrl-C; such a child has its own parent, alive (see :func:`_gone`)."""
    var = os.environ.get(PARENT_VAR, "")
    if not var.isdigit() or sys.argv[:1] != ["-c"] or "multiprocessing.forkserver" not in sys.modules:
        return None
    return int(var)


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


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie not yet reaped by whoever started it has too: it still
    answers kill(pid, 0)). Unknown is alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


_npudiag = _fork_server_parent() if __name__ != "__main__" else None
if _npudiag is not None and os.getppid() == _npudiag:
    from multiprocessing import spawn

    # imported before the server saves its signal handlers: the workers it forks start with SIGINT ignored
    die_with_parent()
    spawn._main = _quiet_start(spawn._main)  # type: ignore[assignment]
elif _npudiag is not None and _gone(_npudiag):
    # npudiag died (an interrupt) while this server was still starting: orphaned before it could ask to die
    # with it, it must not fork the workers npudiag asked for (their start fails on the pool's vanished
    # lock and prints a traceback)
    os._exit(0)
