"""The local process pool: results per task, a task's exception stays its own, and a worker process
that dies takes only its own task down (the pool is rebuilt and the suspects retried alone)."""

from __future__ import annotations

import time

from npudiag.executors import InProcess, LocalPool, WorkerDied, choose_backend
from npudiag.testing.tasks import square_or_die


def _collect(backend, jobs):
    got = dict(backend.run(square_or_die, jobs))
    assert sorted(got) == list(range(len(jobs)))  # every task reports exactly once
    return got


def test_pool_returns_every_result() -> None:
    got = _collect(LocalPool(2), [(n, "ok") for n in range(12)])
    assert got == {n: n * n for n in range(12)}


def test_an_exception_is_that_task_only() -> None:
    jobs = [(n, "raise" if n == 4 else "ok") for n in range(8)]
    for backend in (LocalPool(2), InProcess()):
        got = _collect(backend, jobs)
        assert isinstance(got[4], ValueError) and "task 4 failed" in str(got[4])
        assert all(got[n] == n * n for n in range(8) if n != 4)


def test_a_dead_worker_fails_only_its_own_task() -> None:
    jobs = [(n, "exit" if n in (3, 9) else "ok") for n in range(14)]
    got = _collect(LocalPool(2), jobs)
    assert isinstance(got[3], WorkerDied) and isinstance(got[9], WorkerDied)
    assert all(got[n] == n * n for n in range(14) if n not in (3, 9))


def test_choose_backend() -> None:
    assert isinstance(choose_backend(1), InProcess)
    assert choose_backend(5, scheduler="tcp://127.0.0.1:1").name == "dask"


def test_small_inputs_stay_in_this_process(monkeypatch) -> None:
    from npudiag.executors import SMALL_INPUT_BYTES

    monkeypatch.delenv("NPUDIAG_WORKERS", raising=False)
    assert isinstance(choose_backend(4, input_bytes=SMALL_INPUT_BYTES - 1), InProcess)
    monkeypatch.setenv("NPUDIAG_WORKERS", "2")  # asked for: a pool even for a small input
    assert isinstance(choose_backend(4, input_bytes=1000), LocalPool)
    monkeypatch.setenv("NPUDIAG_WORKERS", "2")
    assert isinstance(choose_backend(4, input_bytes=SMALL_INPUT_BYTES), LocalPool)


def _sigint_disposition(_: object) -> str:
    import signal

    return str(signal.getsignal(signal.SIGINT))


def test_pool_workers_leave_ctrl_c_to_npudiag_and_other_children_keep_it() -> None:
    """Workers ignore SIGINT (npudiag answers Ctrl-C, they die with it); a child of an npudiag that
    started a pool (a program npudiag profile runs, an npudiag a test runs) inherits the variable that
    names the fork server's parent and once took itself for the fork server, ignoring Ctrl-C."""
    import os
    import subprocess
    import sys

    from npudiag.executors import LocalPool

    assert [r for _, r in LocalPool(2).run(_sigint_disposition, [1, 2])] == ["1", "1"]  # SIG_IGN
    env = {**os.environ, "NPUDIAG_POOL_PARENT": str(os.getpid())}
    child = subprocess.run([sys.executable, "-c", "import npudiag._orphans, signal; print(signal.getsignal(signal.SIGINT))"],
                           env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert child.stdout.strip() == "<built-in function default_int_handler>", child.stderr


def test_a_fork_server_orphaned_while_starting_exits_without_a_word(tmp_path) -> None:
    """CI: Ctrl-C to the process group while the fork server was still importing its preload; npudiag
    exited, the server (its parent gone, so never asked to die with it) then forked the queued workers,
    whose start failed on the pool's vanished lock and printed a traceback. A server whose npudiag is
    dead, or a zombie, now exits at once; with npudiag alive it goes on."""
    import os
    import subprocess
    import sys

    from npudiag import _orphans

    server = "import multiprocessing.forkserver, sys; sys.argv[:1] = ['-c']; import npudiag._orphans; print('serving')"

    def start_server(parent: int) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, _orphans.PARENT_VAR: str(parent)}
        return subprocess.run([sys.executable, "-c", server], env=env, capture_output=True, text=True, timeout=60)

    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()  # dead and reaped
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(200):  # dead, not reaped: a zombie
            with open(f"/proc/{zombie.pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    break
            time.sleep(0.05)
        for parent in (done.pid, zombie.pid):
            r = start_server(parent)
            assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), (parent, r)
    finally:
        zombie.wait()
    for parent in (os.getpid(), 1):  # its live parent; a live process of another tree (the var inherited)
        r = start_server(parent)
        assert r.stdout == "serving\n", (parent, r)


def test_a_worker_started_after_its_pool_is_gone_is_silent() -> None:
    """The fork server's workers start through a wrapper: the vanished lock of a pool npudiag shut down is
    no error to print; any other error of the start still is."""
    import multiprocessing.synchronize as ms

    import pytest

    from npudiag import _orphans

    def start() -> int:
        lock = object.__new__(ms.Lock)
        lock.__setstate__((0, 1, 1, "/npudiag-test-no-such-lock"))
        return 0

    def other() -> int:
        raise FileNotFoundError("not the pool's lock")

    assert _orphans._quiet_start(start)() == 1
    with pytest.raises(FileNotFoundError):
        _orphans._quiet_start(other)()
