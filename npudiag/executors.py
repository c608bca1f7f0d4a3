"""Where per-rank tasks run: in this process, in a local process pool, or on a Dask cluster.

Every backend takes a picklable module-level function and a list of jobs and yields
``(index, result)`` or ``(index, exception)`` as tasks finish, so the caller reports a failed rank
and keeps the others. Scheduling across machines is Dask's (``distributed``), never ours: npudiag
only submits tasks and collects their small results; the tasks write their tables themselves to
a path every worker reaches.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol

from npudiag import _orphans
from npudiag.errors import InputError, OptionError
from npudiag.safeio import small_int

Task = Callable[[Any], Any]
CONNECT_TIMEOUT_S = 10


_THREADS: dict[str, ThreadPoolExecutor] = {}
_THREADS_LOCK = threading.Lock()


def threads(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's thread pool ``name`` (for pyarrow work that releases the GIL), started once and
    kept: a pool per file started its threads again for every file of every rank (769 thread starts,
    4 % of a 256-rank analyze). Never shut down by a user; a forked child starts its own."""
    with _THREADS_LOCK:
        pool = _THREADS.get(name)
        if pool is None:
            pool = _THREADS[name] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"npudiag-{name}")
        return pool


def _forget_threads() -> None:
    global _THREADS_LOCK
    _THREADS.clear()  # the parent's threads do not exist in a forked child
    _THREADS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_threads)


class WorkerDied(RuntimeError):
    """The process running a task ended without returning (a crash, the OOM killer, a signal)."""


class Backend(Protocol):
    name: str

    def run(self, fn: Task, jobs: Sequence[Any]) -> Iterator[tuple[int, Any]]: ...


def default_workers(tasks: int) -> int:
    """One process per core, never more than tasks; NPUDIAG_WORKERS overrides."""
    env = os.environ.get("NPUDIAG_WORKERS", "").strip()
    if env:
        n = small_int(env, 1, 4096)
        if n is None:
            raise OptionError(
                f"NPUDIAG_WORKERS={env[:40]!r}: expected a whole number of worker processes from 1 to 4096"
            )
        return max(1, min(n, tasks))
    return max(1, min(tasks, os.cpu_count() or 1))


@dataclass
class InProcess:
    name: str = "one process"

    def run(self, fn: Task, jobs: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        for i, job in enumerate(jobs):
            try:
                yield i, fn(job)
            except Exception as exc:  # noqa: BLE001 - one failed task is that task's result
                yield i, exc


def _pool_context() -> multiprocessing.context.BaseContext:
    # forkserver: workers fork from a clean server process, not from this one, which may already
    # hold threads (Rich's refresh thread, Parquet writers); fork after threads can deadlock
    # the fork server listens on a socket in the temporary folder; a path too long for a socket
    # (a long TMPDIR) would fail at the first task, so such machines spawn instead
    if "forkserver" in multiprocessing.get_all_start_methods() and len(os.fsencode(tempfile.gettempdir())) < 70:
        ctx = multiprocessing.get_context("forkserver")
        os.environ[_orphans.PARENT_VAR] = str(os.getpid())  # the fork server dies with this process
        ctx.set_forkserver_preload(["npudiag._orphans", "npudiag.profiling.rank_job", "npudiag.profiling.ingest"])
        from multiprocessing import forkserver, resource_tracker

        # the tracker first: its own start unblocks SIGINT in this thread whatever the mask was before
        resource_tracker.ensure_running()
        with _server_starts_deaf():
            forkserver.ensure_running()
        return ctx
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def _server_starts_deaf() -> Iterator[None]:
    """SIGINT blocked in this thread while the fork server starts: it inherits the mask across fork and
    exec, so a Ctrl-C to the process group while it is still starting Python cannot kill it mid-start
    with "Fatal Python error: init_import_site" on the shared stderr (seen in CI). It unblocks SIGINT
    once it ignores it (``_orphans.die_with_parent``); the workers it forks start that way. A Ctrl-C
    meant for npudiag arrives here when the mask is put back."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@dataclass
class LocalPool:
    """A process pool on this machine that survives a worker dying.

    At most ``workers`` tasks are in flight, so when the pool breaks the suspects are known: those
    tasks are each run again alone in a fresh one-process pool, which names the one that really
    kills its process (reported as :class:`WorkerDied`) and completes the others; tasks not yet
    started go on in a new pool. A crash costs one rank, never the rest of the run.
    """

    workers: int
    name: str = "process pool"

    def _new_pool(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=workers, mp_context=_pool_context(), initializer=_orphans.die_with_parent
        )

    def _alone(self, fn: Task, job: Any) -> Any:
        pool = self._new_pool(1)
        try:
            return pool.submit(fn, job).result()
        except BrokenProcessPool:
            return WorkerDied("the worker process died while running this task (crash, out of memory or a signal)")
        except Exception as exc:  # noqa: BLE001 - the task's own error is its result
            return exc
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def run(self, fn: Task, jobs: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        pending = list(range(len(jobs)))
        pending.reverse()  # pop() from the end: jobs start in order
        while pending:
            pool = self._new_pool(min(self.workers, len(pending)))
            running: dict[Future[Any], int] = {}
            broken = False
            try:
                while pending or running:
                    while pending and len(running) < self.workers:
                        i = pending.pop()
                        try:
                            running[pool.submit(fn, jobs[i])] = i
                        except BrokenProcessPool:  # a worker died since the last wait: i never started
                            pending.append(i)
                            broken = True
                            break
                    if broken:
                        break
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        i = running.pop(fut)
                        try:
                            yield i, fut.result()
                        except BrokenProcessPool:
                            running[fut] = i  # a suspect: retried alone below
                            broken = True
                        except Exception as exc:  # noqa: BLE001
                            yield i, exc
                    if broken:
                        break
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
            if broken:
                for fut, i in sorted(running.items(), key=lambda kv: kv[1]):
                    if fut.done() and not fut.cancelled() and fut.exception() is None:
                        yield i, fut.result()  # finished before the pool broke
                    else:
                        yield i, self._alone(fn, jobs[i])


@dataclass
class DaskCluster:
    """Tasks on a Dask distributed cluster: an existing scheduler (``tcp://HOST:PORT``), or, with no
    address, a LocalCluster of one single-threaded worker process per core on loopback."""

    address: str | None = None
    workers: int | None = None
    name: str = "dask"

    def run(self, fn: Task, jobs: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError:
            raise RuntimeError(
                "the Dask backend needs the 'distributed' extra: pip install 'npudiag[distributed]'"
            ) from None
        cluster = None
        if self.address is None:
            n = self.workers or default_workers(len(jobs))
            cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
            )
            client = Client(cluster)
        else:
            try:
                client = Client(self.address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(self.address, f"cannot reach the Dask scheduler ({reason})") from None
        try:
            futures = [client.submit(fn, job, pure=False) for job in jobs]
            index = {f.key: i for i, f in enumerate(futures)}
            for fut in as_completed(futures):
                i = index[fut.key]
                try:
                    yield i, fut.result()
                except Exception as exc:  # noqa: BLE001 - includes KilledWorker: that rank only
                    yield i, exc
                fut.release()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


# below this much input a local pool costs more than it saves: starting the workers and importing
# npudiag in them takes about 1.5 s on two cores, reading 32 MB of profile about as long
SMALL_INPUT_BYTES = 32 << 20


def choose_backend(
    tasks: int, scheduler: str | None = None, dask: bool = False, input_bytes: int | None = None
) -> Backend:
    """``--scheduler ADDRESS`` or ``--dask``: Dask; else a local pool, or this process for one task or
    for a small input (``input_bytes`` under SMALL_INPUT_BYTES) unless NPUDIAG_WORKERS asks for a pool."""
    if scheduler or dask:
        import importlib.util

        if importlib.util.find_spec("distributed") is None:  # said before any work starts: a usage error, exit 2
            raise OptionError(
                "the Dask backend needs the 'distributed' extra: pip install 'npudiag[distributed]'",
                "scheduler" if scheduler else "dask",
            )
        return DaskCluster(scheduler)
    workers = default_workers(tasks)
    asked = bool(os.environ.get("NPUDIAG_WORKERS", "").strip())
    if input_bytes is not None and input_bytes < SMALL_INPUT_BYTES and not asked:
        return InProcess()
    return LocalPool(workers) if workers > 1 else InProcess()
