"""Folders: built in a hidden staging folder beside the target, locked against a second run, flushed and
swapped in whole by one atomic exchange of names; what a killed run left is removed by the next."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from npudiag.errors import InputError, OutputError, writing
from npudiag.output import system
from npudiag.output.files import write_manifest
from npudiag.output.guard import current_umask, link_allowed, protected_reason, resolved
from npudiag.output.manifest import describe_foreign, foreign_entries, walk
from npudiag.safeio import load_json

STAGING_MARKER = ".npudiag-staging"  # inside every staging folder: {"pid": ..., "started": ..., "dest": ...}


NEW = "new"  # the folder being built, inside the staging folder


OLD = "old"  # where the old folder waits when names cannot be exchanged atomically


def remove_stale_staging(dest: Path) -> None:
    """Clear what killed runs left beside ``dest``: staging folders whose marker says npudiag made
    them, for a process that is gone. Where a killed run had moved the old folder aside and not yet
    put the new one in (only without an atomic exchange), the old one is put back first."""

    prefix = f".{dest.name}.tmp-"
    try:
        entries = list(os.scandir(dest.parent))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            marker = load_json(Path(entry.path) / STAGING_MARKER, 4096)
        except InputError:
            _remove_if_unstarted(Path(entry.path), dest)
            continue
        pid = marker.get("pid") if isinstance(marker, dict) else None
        started = marker.get("started") if isinstance(marker, dict) else None
        started = float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None
        if not isinstance(pid, int) or isinstance(pid, bool) or system.alive(pid, started):
            continue
        old = Path(entry.path) / OLD
        if old.is_dir() and not old.is_symlink() and not os.path.lexists(dest):
            with contextlib.suppress(OSError):
                os.rename(old, dest)
        for _ in range(20):  # a worker of the killed run may still be finishing a file in it: again until gone
            remove_staging(Path(entry.path))
            if not os.path.lexists(entry.path):
                break
            time.sleep(0.05)


def remove_staging(staging: Path) -> None:
    """Remove a staging folder, its marker last: killed half-way, what is left still says it is npudiag's."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(staging):
            if entry.name != STAGING_MARKER:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
    with contextlib.suppress(OSError):
        os.unlink(staging / STAGING_MARKER)
    with contextlib.suppress(OSError):
        os.rmdir(staging)


def _remove_if_unstarted(folder: Path, dest: Path) -> None:
    """A staging folder a run was killed in before it finished its marker: its name carries the run's
    pid (``.<name>.tmp-<pid>-<random>``), the process is gone, and it holds nothing, or only the marker
    half written; removed. Called under the target's lock, so no live run is making it; a folder
    of another name (another tool's) is never touched."""
    m = re.fullmatch(re.escape(f".{dest.name[:200]}.tmp-") + r"([0-9]{1,9})-[A-Za-z0-9_]+", folder.name)
    if m is None or system.alive(int(m.group(1))):
        return
    try:
        names = os.listdir(folder)
    except OSError:
        return
    if set(names) <= {STAGING_MARKER}:
        with contextlib.suppress(OSError):
            if names:
                os.unlink(folder / STAGING_MARKER)
            os.rmdir(folder)


class TargetLock:
    """An exclusive lock on an output (fcntl on ``.<name>.lock`` beside it, removed on release), so
    two runs into one output cannot interleave: the second gets one line, exit 2. The lock file is
    opened without following links and must be a regular file with one name; a lock left by a
    killed run is free (the kernel drops the lock with the process) and is taken over."""

    def __init__(self, dest: Path) -> None:
        import fcntl

        self.path = dest.parent / f".{dest.name[:200]}.lock"
        self.fd: int | None = None
        flags = (
            os.O_RDWR
            | os.O_CREAT
            | getattr(os, "O_NOFOLLOW", 0)
            | getattr(os, "O_CLOEXEC", 0)
            | getattr(os, "O_NONBLOCK", 0)
        )
        while True:
            try:
                fd = os.open(self.path, flags, 0o666 & ~current_umask())
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise OutputError(self.path, "is a link; npudiag's lock file is never a link (remove it)") from None
                # the output is what cannot be written: its folder takes no new file (npudiag's lock beside it is the
                # first)
                raise OutputError(dest, f"{dest.parent} takes no new file ({exc.strerror or exc})") from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                os.close(fd)
                raise OutputError(self.path, "is not npudiag's lock file (not a plain file with one name); remove it")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise InputError(
                    dest, "another npudiag run is writing this folder now; wait for it or choose another --out"
                ) from None
            # the file may have been removed (and a new one locked) between our open and our lock
            try:
                same = st.st_ino == os.lstat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return
            os.close(fd)

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == os.fstat(self.fd).st_ino:
                os.unlink(self.path)
        os.close(self.fd)
        self.fd = None


def _sync_tree(root: Path) -> None:
    """Everything written under ``root`` on disk before it is swapped in: each file and folder flushed,
    in one pass at the end (the first flush commits most of what the others would). Only what npudiag
    wrote: a syncfs(2) would also wait for every other program's unwritten data on that file system."""
    for rel, is_dir in walk(root):
        if is_dir:
            _fsync_dir(root / rel)
        else:
            with contextlib.suppress(OSError):
                fd = os.open(root / rel, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
    _fsync_dir(root)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def swap_in(new: Path, dest: Path, aside: Path) -> None:
    """Put folder ``new`` at ``dest`` in one step: exchange the two names (the old folder is then at
    ``new``), or rename ``new`` to a ``dest`` that does not exist. Without an atomic exchange the
    old folder is first renamed to ``aside`` (put back by the next run if this one dies between)."""
    if os.path.lexists(dest):
        if not system.rename2(new, dest, system.RENAME_EXCHANGE):
            os.rename(dest, aside)
            os.rename(new, dest)
    elif not system.rename2(new, dest, system.RENAME_NOREPLACE):
        os.rename(new, dest)
    _fsync_dir(dest.parent)


class FolderTarget:
    """Where a folder output goes, and whether it may go there (no side effects): a link given as
    the target resolved once; a file, a mount point, a protected folder or a folder of files
    npudiag did not write refused with one line (see the module's rules)."""

    def __init__(
        self,
        dest: str | Path,
        *,
        force: bool = False,
        inputs: Iterable[str | Path] = (),
        replaceable: Iterable[str | Path] = (),
        option: str = "--out",
    ) -> None:
        self.given = Path(dest)
        self.force = force
        self.option = option
        self.inputs = [Path(p) for p in inputs]
        self.replaceable = {resolved(Path(p)) for p in replaceable}
        given = self.given
        with writing(given):
            if given.is_symlink():
                target = resolved(given)
                if not target.exists():
                    raise OutputError(
                        given, f"is a link to {target}, which does not exist; make that folder or use another {option}"
                    )
                why = link_allowed(given)
                if why is not None:
                    raise OutputError(given, why)
            elif given.name in ("", ".", ".."):
                target = resolved(given)
            else:
                target = resolved(given.absolute().parent) / given.name
        self.dest = target
        self.check()

    def check(self) -> None:

        dest, given = self.dest, self.given
        try:
            st = os.lstat(dest)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise OutputError(given, exc.strerror or str(exc)) from None
        if not stat.S_ISDIR(st.st_mode):
            raise OutputError(
                given,
                f"is a file, not a folder; npudiag never replaces a file with a folder (use another {self.option})",
            )
        own = dest in self.replaceable
        why = protected_reason(dest, [p for p in self.inputs if not (own and resolved(p) == dest)])
        if why is not None:
            raise OutputError(given, f"{why}; npudiag never replaces it (use another {self.option})")
        if os.path.ismount(dest):
            inside = (given / "run1").as_posix()
            raise OutputError(
                given, f"is a mount point, which cannot be swapped whole; use a folder inside it (e.g. {inside})"
            )
        foreign = foreign_entries(dest)
        if not foreign or (self.force and not own):
            return
        hint = (
            f"not replaced; choose another {self.option}"
            if own
            else f"use --force to replace it, or another {self.option}"
        )
        raise InputError(given, f"exists and was not written by npudiag (it holds {describe_foreign(foreign)}); {hint}")


class OutputFolder:
    """A folder npudiag writes whole: ``work`` is where its files go; :meth:`commit` adds the
    manifest (with every file listed) and swaps the folder in; :meth:`abandon` (or leaving the
    ``with`` block on an error) removes the staging and lock and leaves ``dest`` as it was.

    ``kind`` names what wrote it (``analyze``, ``logs parse``...); the target's rules are
    :class:`FolderTarget`'s (``inputs`` are never replaced, nor their ancestors, except an input in
    ``replaceable`` that is itself the target and is npudiag's: the baseline of ``gate --update-baseline``)."""

    def __init__(
        self,
        dest: str | Path,
        *,
        kind: str,
        force: bool = False,
        inputs: Iterable[str | Path] = (),
        replaceable: Iterable[str | Path] = (),
        option: str = "--out",
    ) -> None:
        self.kind = kind
        self.committed = False
        self.lock: TargetLock | None = None
        self.staging: Path | None = None
        self.target = FolderTarget(dest, force=force, inputs=inputs, replaceable=replaceable, option=option)
        self.given, self.dest = self.target.given, self.target.dest
        with writing(self.given):
            self.dest.parent.mkdir(parents=True, exist_ok=True)
        self.lock = TargetLock(self.dest)
        try:
            remove_stale_staging(self.dest)
            self.target.check()  # again, now that no other npudiag run can change it
            with writing(self.given):
                # the pid in the name too: a run killed before its marker is written is still known
                self.staging = Path(
                    tempfile.mkdtemp(prefix=f".{self.dest.name[:200]}.tmp-{os.getpid()}-", dir=self.dest.parent)
                )
                marker = {"pid": os.getpid(), "started": time.time(), "dest": self.dest.name}
                (self.staging / STAGING_MARKER).write_text(json.dumps(marker))
                self.work = self.staging / NEW
                self.work.mkdir()
                os.chmod(self.work, 0o777 & ~current_umask())
        except BaseException:
            self.abandon()
            raise

    def commit(self, manifest: dict[str, Any] | None = None) -> Path:
        """Write manifest.json (``manifest`` plus npudiag's keys and the file list), swap the folder in."""
        if self.committed:
            return self.dest
        try:
            write_manifest(self.work, self.kind, manifest or {})
            _sync_tree(self.work)
            self.target.check()  # the analysis may have taken minutes: look again before replacing
            with writing(self.given):
                swap_in(self.work, self.dest, self.staging / OLD)  # type: ignore[operator]
            self.committed = True
        except BaseException as exc:
            self.explain(exc)
            raise
        finally:
            self._cleanup()
        return self.dest

    def abandon(self) -> None:
        """Leave ``dest`` as it was: remove the staging folder and the lock."""
        self._cleanup()

    def explain(self, exc: BaseException) -> None:
        """An OutputError about a file in the staging folder names the file at its place in ``dest``
        instead (the user never asked for the hidden staging folder)."""
        if isinstance(exc, OutputError) and hasattr(self, "work"):
            work = str(self.work)
            if exc.path == work or exc.path.startswith(work + os.sep):
                exc.path = str(self.given) + exc.path[len(work) :]
                exc.args = (exc.one_line(),)

    def _cleanup(self) -> None:
        if self.staging is not None:
            remove_staging(self.staging)
            self.staging = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self.explain(exc)
        if not self.committed:
            self.abandon()
