"""Running npudiag on crafted input: what it changed on disk, how long it took, how much memory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MAX_RSS_MB = 300
# a hang guard, not a speed test: a child still running after this long is stuck (an endless loop, a
# blocking read) and is killed; how fast npudiag is belongs to bench/, never to a test's verdict
HANG_S = 900.0


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float
    rss_mb: float


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): kind, size, mtime, inode."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            kind = st.st_mode >> 12
            # a folder's own size and mtime change when an entry is added under it (the target): not a change of it
            out[os.path.relpath(p, root)] = (
                (kind, st.st_ino) if os.path.isdir(p) and not os.path.islink(p) else (kind, st.st_size, st.st_mtime_ns, st.st_ino)
            )
    return out


def changed_outside(before: dict[str, tuple], after: dict[str, tuple], allowed: list[str]) -> list[str]:
    """Paths created, changed or deleted that lie in none of the ``allowed`` folders (relative)."""

    def ok(p: str) -> bool:
        return any(p == a or p.startswith(a.rstrip("/") + "/") for a in allowed)

    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k) and not ok(k))


# the child reports its own peak RSS (VmHWM of its own memory map) at exit: wait4's ru_maxrss would
# count the pages a big test process forked it with
_MEASURED = (
    "import atexit, os, sys\n"
    "def _hwm():\n"
    "    with open('/proc/self/status') as fh:\n"
    "        kb = next((line.split()[1] for line in fh if line.startswith('VmHWM:')), '0')\n"
    "    with open(os.environ['NPUDIAG_TEST_HWM'], 'w') as out:\n"
    "        out.write(kb)\n"
    "atexit.register(_hwm)\n"
    "sys.argv = ['npudiag', *sys.argv[1:]]\n"
    "from npudiag.cli import main\n"
    "main()\n"
)


def run(*args: str | Path, cwd: Path | None = None, timeout: float = HANG_S, stdin: str | None = None) -> Outcome:
    """``npudiag ARGS`` in a child: exit code, output, wall time (for the message only) and the child's
    own peak RSS; killed after ``timeout`` seconds as hung."""
    import tempfile

    fd, hwm = tempfile.mkstemp(prefix="npudiag-hwm-")
    os.close(fd)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURED, *map(str, args)], cwd=cwd, input=stdin, capture_output=True, text=True,
            timeout=timeout, env={**os.environ, "NPUDIAG_TEST_HWM": hwm},
        )  # fmt: skip
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -9, exc.stdout or "", (exc.stderr or "") + "\n[killed: timeout]"
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        err = err.decode(errors="replace") if isinstance(err, bytes) else err
    seconds = time.monotonic() - t0
    try:
        rss_mb = int(Path(hwm).read_text() or 0) / 1024.0
    finally:
        os.unlink(hwm)
    return Outcome(code, out, err, seconds, rss_mb)


def one_line_or_clean(o: Outcome) -> None:
    """Exit 0 or 2, never an internal error or a traceback."""
    assert o.code in (0, 2), (o.code, o.stderr[-2000:])
    assert "Traceback" not in o.stderr and "internal error" not in o.stderr, o.stderr[-2000:]
