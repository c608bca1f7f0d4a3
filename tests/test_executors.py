"""The local process pool: results per task, a task's exception stays its own, and a worker process
that dies takes only its own task down (the pool is rebuilt and the suspects retried alone)."""

from __future__ import annotations

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
