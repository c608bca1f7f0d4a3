"""Where a write may go: the permissions a new file gets, links followed only where the user could have
made them, and targets never replaced (``/``, HOME, the working directory and its ancestors, an input)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path


def current_umask() -> int:
    """The process's umask now (a library caller may change it between calls). Read from
    /proc/self/status where there is one, so no other thread sees a temporary umask of 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _home() -> Path | None:
    try:
        return Path(os.environ.get("HOME") or Path.home()).resolve()
    except (OSError, RuntimeError):
        return None


def within(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def resolved(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path.absolute()


def link_allowed(link: Path) -> str | None:
    """Why the link ``link`` must not be followed for a write, or None. A link is followed when the
    user could have made it: it is owned by the caller or by the folder's owner, or its folder is not
    world-writable and sticky (fs.protected_symlinks' rule), and its target's folder is writable."""
    try:
        st = os.lstat(link)
        parent = os.stat(link.parent)
    except OSError as exc:
        return exc.strerror or str(exc)
    sticky_shared = parent.st_mode & stat.S_ISVTX and parent.st_mode & stat.S_IWOTH
    if sticky_shared and st.st_uid not in (os.geteuid(), parent.st_uid):
        return "a link another user made in a shared folder; not followed"
    target = resolved(link)
    if not os.access(target.parent, os.W_OK):
        return f"a link to {target}, in a folder you cannot write"
    return None


def stream_fd(path: Path) -> int | None:
    """The descriptor ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names."""
    s = str(path)
    if s in ("/dev/stdout", "/dev/stderr"):
        return 1 if s.endswith("out") else 2
    m = re.fullmatch(r"/(?:dev/fd|proc/self/fd)/([0-9]{1,6})", s)
    return int(m.group(1)) if m else None


def protected_reason(dest: Path, inputs: Iterable[Path] = ()) -> str | None:
    """Why ``dest`` (resolved) may never be replaced, even with force: None when it may."""
    if dest == Path(dest.anchor):
        return "is the root folder"
    home = _home()
    if home is not None and dest == home:
        return "is your home folder"
    cwd = resolved(Path.cwd())
    if within(cwd, dest):
        return "is the working folder" if cwd == dest else "holds the working folder"
    for p in inputs:
        rp = resolved(Path(p))
        if rp == dest:
            return "is an input of this run"
        if within(rp, dest):
            return f"holds an input of this run ({p})"
    return None
