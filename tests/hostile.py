"""Running npudiag on crafted input: what it changed on disk, how long it took, how much memory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MAX_RSS_MB = 300
MAX_SECONDS = 5.0


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
            out[os.path.relpath(p, root)] = (kind, st.st_ino) if os.path.isdir(p) and not os.path.islink(p) else (
                kind, st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def changed_outside(before: dict[str, tuple], after: dict[str, tuple], allowed: list[str]) -> list[str]:
    """Paths created, changed or deleted that lie in none of the ``allowed`` folders (relative)."""

    def ok(p: str) -> bool:
        return any(p == a or p.startswith(a.rstrip("/") + "/") for a in allowed)

    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k) and not ok(k))


def run(*args: str | Path, cwd: Path | None = None, timeout: float = 60.0) -> Outcome:
    """``python -m npudiag ARGS``: exit code, output, wall time and the child's own peak RSS (wait4)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "npudiag", *map(str, args)], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = t0 + timeout
    out_chunks, err_chunks = [], []
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out_chunks)  # type: ignore[arg-type]
    sel.register(proc.stderr, selectors.EVENT_READ, err_chunks)  # type: ignore[arg-type]
    open_streams = 2
    while open_streams and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.2):
            data = os.read(key.fileobj.fileno(), 1 << 16)  # type: ignore[union-attr]
            if not data:
                sel.unregister(key.fileobj)
                open_streams -= 1
            else:
                key.data.append(data)
    if open_streams:
        proc.kill()
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return Outcome(code, b"".join(out_chunks).decode(errors="replace"), b"".join(err_chunks).decode(errors="replace"),
                   time.monotonic() - t0, usage.ru_maxrss / 1024.0)  # fmt: skip


def one_line_or_clean(o: Outcome) -> None:
    """Exit 0 or 2, never an internal error or a traceback."""
    assert o.code in (0, 2), (o.code, o.stderr[-2000:])
    assert "Traceback" not in o.stderr and "internal error" not in o.stderr, o.stderr[-2000:]
