"""Tasks for testing the executors: module-level, so worker processes can import them by name."""

from __future__ import annotations

import os


def square_or_die(job: tuple[int, str]) -> int:
    """``(n, how)``: return n*n, or end the worker process the way ``how`` says ("exit", "raise")."""
    n, how = job
    if how == "exit":
        os._exit(3)  # a crash: no exception, no result, the process is gone
    if how == "raise":
        raise ValueError(f"task {n} failed")
    return n * n
