"""Run npudiag commands many times, cheaply, and SIGKILL them at chosen moments.

A server process imports npudiag once, then forks one child per request, so a run costs a fork, not an
interpreter start and the imports (the kill -9 tests run a few hundred). A request names the command,
and either a delay after which the child is SIGKILLed, or ``after_renames=K``: the child kills itself
right after its K-th rename (every file npudiag writes is renamed into place, and a folder is swapped
in by a rename, so these are the moments at which the target changes). The server reaps the child
and answers with how it ended and how many renames it made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SERVER = r"""
import json, os, signal, sys, threading, time
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
import npudiag.cli, npudiag.output, npudiag.store, npudiag.profiling.pipeline, npudiag.dump.pipeline, npudiag.logs.pipeline
import npudiag.profiling.rank_job, npudiag.profiling.ingest

out = sys.stdout
sys.stdout = sys.stderr

def child(req, count_path):
    os.chdir(req["cwd"])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    lock = threading.Lock()
    seen = [0]
    stop = req.get("after_renames")

    def counted(fn):
        def wrapped(*a, **k):
            r = fn(*a, **k)
            if r is False:  # npudiag.output.system.rename2: this system could not, nothing renamed
                return r
            with lock:
                seen[0] += 1
                with open(count_path, "w") as fh:
                    fh.write(str(seen[0]))
                if stop is not None and seen[0] >= stop:
                    os.kill(os.getpid(), signal.SIGKILL)
            return r
        return wrapped

    os.rename, os.replace = counted(os.rename), counted(os.replace)
    npudiag.output.system.rename2 = counted(npudiag.output.system.rename2)
    try:
        npudiag.cli.main(req["argv"])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        code = 99
    os._exit(code)

for line in sys.stdin:
    req = json.loads(line)
    count_path = req["count_path"]
    with open(count_path, "w") as fh:
        fh.write("0")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(req, count_path)
    if req.get("delay") is not None:
        time.sleep(req["delay"])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    with open(count_path) as fh:
        renames = int(fh.read() or 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    code = None if killed else os.waitstatus_to_exitcode(status)
    out.write(json.dumps({"killed": killed, "code": code, "renames": renames, "seconds": time.monotonic() - t0}) + "\n")
    out.flush()
"""


@dataclass
class Ended:
    killed: bool
    code: int | None
    renames: int
    seconds: float


class ForkRunner:
    """``run(argv, delay=..., after_renames=...)`` in a forked child of one long-lived server."""

    def __init__(self, tmp: Path) -> None:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NPUDIAG_WORKERS": "1"}
        self.count_path = str(tmp / ".renames")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1
        )

    def run(self, argv: list[str | Path], cwd: Path, delay: float | None = None, after_renames: int | None = None) -> Ended:
        req = {"argv": [str(a) for a in argv], "cwd": str(cwd), "delay": delay, "after_renames": after_renames,
               "count_path": self.count_path}  # fmt: skip
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the fork server died")
        return Ended(**json.loads(line))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
