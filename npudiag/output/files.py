"""Single files: written to a temporary name and renamed over a regular file only; a FIFO or a character
device written into, ``/dev/stdout`` and ``/dev/fd/N`` streamed into; a file npudiag writes into one of
its out folders listed in the folder's manifest, and the manifest itself written."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

from npudiag.errors import InputError, OutputError, writing
from npudiag.output import system
from npudiag.output.encode import dumps
from npudiag.output.guard import current_umask, link_allowed, resolved, stream_fd, within
from npudiag.output.manifest import MANIFEST, is_member, is_view, npudiag_manifest, out_folder_of, walk
from npudiag.safeio import small_int
from npudiag.version import SCHEMA_VERSION, __version__


def write_file(
    path: str | Path, write: Callable[[BinaryIO], None] | bytes | str, *, inputs: Iterable[Path] = ()
) -> Path:
    """Write one file at ``path`` and return where it went.

    A regular file (or a new name) is written to a temporary name beside it, flushed and renamed over
    it (keeping its permission bits); a FIFO or character device is written into; ``/dev/stdout``
    and ``/dev/fd/N`` stream into the open descriptor. OutputError (one line, exit 2) for a folder,
    socket or block device, a link that is not followed, an input of this run, or any OS failure."""
    if isinstance(write, str):
        write = write.encode("utf-8")
    if isinstance(write, (bytes, bytearray)):
        data = bytes(write)

        def write(fh: BinaryIO) -> None:
            fh.write(data)

    path = Path(path)
    fd = stream_fd(path)
    if fd is not None:
        _write_stream(fd, write, path)
        return path
    target = path
    with writing(path):
        if path.is_symlink():
            why = link_allowed(path)
            if why is not None:
                raise OutputError(path, why)
            target = resolved(path)
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
    real = resolved(target)
    owner = out_folder_of(real)
    view = owner is not None and st is not None and is_view(owner, real)  # an earlier page or trace npudiag put there
    for p in inputs:
        rp = resolved(Path(p))
        if rp == real:
            raise OutputError(path, "is an input of this run; it is never overwritten")
        if (
            st is not None and not view and within(real, rp)
        ):  # a file of an input folder (a link to its trace, say) may be what was read
            raise OutputError(
                path, f"{_via(path, real)}is a file of an input of this run ({p}); it is never overwritten"
            )
    if owner is not None and st is not None and not view and is_member(owner, real):
        folder, manifest = owner
        raise OutputError(
            path,
            f"{_via(path, real)}is part of the npudiag out folder {folder} ({manifest.get('output', 'analyze')}); "
            "an output never replaces it: write it elsewhere or under a new name",
        )
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            _write_into(target, write, path)
            return target
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a block device"
        raise OutputError(path, f"is {kind}; a file name was expected")
    _remove_stale_temps(target)
    _atomic_replace(target, write, None if st is None else stat.S_IMODE(st.st_mode), shown=path)
    if owner is not None:  # a new file in an out folder: listed in its manifest, so the folder stays npudiag's whole
        _adopt(owner[0], real)
    return target


def append_file(path: str | Path, text: str) -> Path:
    """Append ``text`` to the file at ``path`` (created when missing): for a file other programs add to
    as well, GitHub's step summary ($GITHUB_STEP_SUMMARY) the first; never a folder, a link another
    user made, an input of this run or a member of an out folder (:func:`write_file`'s rules)."""
    path = Path(path)
    with writing(path):
        if path.is_symlink() and (why := link_allowed(path)) is not None:
            raise OutputError(path, why)
        real = resolved(path)
        owner = out_folder_of(real)
        if owner is not None and is_member(owner, real):
            raise OutputError(path, f"is part of the npudiag out folder {owner[0]}; an output never changes it")
        fd = os.open(
            real, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666 & ~current_umask()
        )
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OutputError(path, "is not a regular file; a file name was expected")
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
    return real


def _via(path: Path, real: Path) -> str:
    """``through a link to X, which `` where ``path`` is a link, else nothing."""
    return f"through a link to {real}, which " if path.is_symlink() else ""


def _adopt(folder: Path, path: Path) -> None:
    """List a file npudiag wrote into ``folder`` (an out folder) in its manifest, as one of its
    ``views``: the folder stays npudiag's whole, and a later view may replace it."""
    manifest = npudiag_manifest(folder)
    listed = manifest.get("files") if manifest is not None else None
    rel = os.path.relpath(path, folder).replace(os.sep, "/")
    if manifest is None or not isinstance(listed, list) or rel in listed:
        return
    views = manifest.get("views") if isinstance(manifest.get("views"), list) else []
    body = {**manifest, "files": sorted([*listed, rel]), "views": sorted({*views, rel})}
    text = dumps(body)
    atomic_write(folder / MANIFEST, lambda fh: fh.write(text.encode("utf-8") + b"\n"))


def _temp_prefix(path: Path, pid: int | None = None) -> str:
    """The start of the name of a temporary file npudiag writes ``path`` through: ``.<name>.npudiag-<pid>-``."""
    return f".{path.name[:200]}.npudiag-{os.getpid() if pid is None else pid}-"


def _remove_stale_temps(path: Path) -> None:
    """Delete the temporary files beside ``path`` that killed npudiag runs left while writing it: only
    regular files with npudiag's name pattern, of a process that is gone."""
    lead = f".{path.name[:200]}.npudiag-"
    try:
        entries = [e for e in os.scandir(path.parent) if e.name.startswith(lead) and e.name.endswith(".tmp")]
    except OSError:
        return
    for e in entries:
        pid = small_int(e.name[len(lead) :].split("-", 1)[0])
        if pid is not None and not system.alive(pid) and e.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.unlink(e.path)


def _write_stream(fd: int, write: Callable[[BinaryIO], None], shown: Path) -> None:
    """Into stdout / stderr as this process has them (through ``sys.stdout`` where it is fd 1, so a
    closed pipe is handled as for every other write), or into the open descriptor ``fd``."""
    stream = sys.stdout if fd == 1 else sys.stderr if fd == 2 else None
    if stream is not None:
        stream.flush()

        class _Text:
            def write(self, b: bytes) -> int:
                stream.write(b.decode("utf-8", "replace"))
                return len(b)

            def flush(self) -> None:
                stream.flush()

        write(_Text())  # type: ignore[arg-type]
        stream.flush()
        return
    with writing(shown):
        dup = os.dup(fd)
    with writing(shown), os.fdopen(dup, "wb") as fh:
        write(fh)


def _write_into(target: Path, write: Callable[[BinaryIO], None], shown: Path) -> None:
    """A FIFO (waits for its reader, as ``echo > fifo`` does) or a character device: opened for
    writing as it is, never created, truncated or replaced."""
    with writing(shown):
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "wb") as fh:
            write(fh)


def _atomic_replace(
    path: Path, write: Callable[[BinaryIO], None], mode: int | None, shown: Path | None = None, durable: bool = True
) -> None:
    """Run ``write`` on a temporary file beside ``path``, flush it to disk (unless the caller syncs the
    whole folder later: not ``durable``), rename it over ``path``."""
    shown = shown or path
    with writing(shown):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with writing(shown):
            os.fchmod(fd, mode if mode is not None else 0o666 & ~current_umask())
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                if durable:
                    os.fsync(fh.fileno())
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """A file inside a folder npudiag is staging (no checks of the target: the folder is ours). Not
    flushed as it is written: the commit flushes the folder's files in one pass before it is swapped in
    (:func:`_sync_tree`)."""
    _atomic_replace(Path(path), write, None, durable=False)


def write_json(obj: Any, path: Path, *, inputs: Iterable[Path] = ()) -> list[str]:
    """Strict JSON (see :func:`dumps`) at ``path``; returns the places where a non-finite number became null."""
    found: list[str] = []
    data = (dumps(obj, found=found) + "\n").encode("utf-8")
    write_file(path, data, inputs=inputs)
    return found


def write_new_file(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """A file that must not exist yet (an archive for support): written to a temporary name, then
    linked to ``path`` only if nothing is there (never overwritten, even by a race)."""

    if os.path.lexists(path):
        raise InputError(path, "already exists; not overwritten")
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    try:
        with writing(path):
            os.fchmod(fd, 0o666 & ~current_umask())
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
        move_new(Path(tmp), path, "a file")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def move_new(src: Path, dest: Path, what: str) -> None:
    """Rename ``src`` to ``dest`` only if nothing is at ``dest`` (checked by the kernel where it can)."""

    with writing(dest):
        try:
            if system.rename2(src, dest, system.RENAME_NOREPLACE):
                return
        except FileExistsError:
            raise InputError(dest, f"already exists; npudiag never overwrites {what}") from None
        if os.path.lexists(dest):
            raise InputError(dest, f"already exists; npudiag never overwrites {what}")
        os.rename(src, dest)


def write_manifest(folder: Path, kind: str, manifest: dict[str, Any]) -> None:
    """``folder/manifest.json``: npudiag's version keys, what wrote it (``output``), ``manifest``'s
    keys, and ``files``, every file under ``folder`` (what makes the folder replaceable later)."""

    body = {"npudiag_version": __version__, "schema_version": SCHEMA_VERSION, "output": kind, **manifest}
    body["files"] = sorted(rel for rel, is_dir in walk(folder) if not is_dir and rel != MANIFEST)
    tables = [rel for rel in body["files"] if rel.endswith(".parquet")]
    if tables:  # what a reader checks before it decodes a file (a changed file may decode to billions of rows)
        import pyarrow.parquet as pq

        body["parquet_rows"] = {rel: pq.read_metadata(folder / rel).num_rows for rel in tables}
    found: list[str] = []
    text = dumps(body, found=found)
    if found:
        body["non_finite_as_null"] = found
        text = dumps(body)
    atomic_write(folder / MANIFEST, lambda fh: fh.write(text.encode("utf-8") + b"\n"))
