"""Wall and CPU time per phase of a run, for speed work: with ``NPUDIAG_PHASES=1`` in the environment
the command prints them to stderr when it ends (docs/speed.md has the table per input). A sampling
profiler (py-spy) cannot see the time Arrow spends on its own threads; this can, as the process CPU
time of each phase (every thread) beside its wall time. Off, a phase costs one environment lookup.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_ORIGIN = time.perf_counter()
_LOCK = threading.Lock()
_SEEN: list[Phase] = []


@dataclass(frozen=True)
class Phase:
    name: str
    start_s: float  # from the first import of this module (npudiag's start-up)
    wall_s: float
    cpu_s: float  # the process's CPU time while it ran: every thread, not only the one timed
    thread: str


def enabled() -> bool:
    return bool(os.environ.get("NPUDIAG_PHASES"))


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase ``name`` (when enabled)."""
    if not enabled():
        yield
        return
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        done = Phase(
            name, wall - _ORIGIN, time.perf_counter() - wall, time.process_time() - cpu, threading.current_thread().name
        )
        with _LOCK:
            _SEEN.append(done)


def taken() -> list[Phase]:
    """The phases timed so far, by start, and forgets them."""
    with _LOCK:
        out = sorted(_SEEN, key=lambda p: p.start_s)
        _SEEN.clear()
    return out
