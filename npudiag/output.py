"""Every file and folder npudiag writes goes through this module, under one discipline.

Never lose a user's file:

- **A folder** (``--out``, ``--npy``, ``--update-baseline``) is built in a hidden staging folder
  beside it (``.<name>.tmp-*``, marked with the pid that made it) and swapped in whole by one
  atomic exchange of names (``renameat2(RENAME_EXCHANGE)`` where the kernel has it). A kill -9 or a
  full disk at any moment leaves the old complete folder or the new complete one; the next run
  removes what a killed run left. Its ``manifest.json`` lists every file npudiag put there.
- **An existing folder is replaced only when npudiag wrote it**: its manifest is npudiag's and every
  file in it is one the manifest lists (or it is empty). Anything else is refused with one line
  naming what would be lost. ``force`` may replace a folder of other files, but never a file,
  ``/``, HOME, the working directory or one of its ancestors, an input or an ancestor of an input.
- **A single file** (``--html``, ``--chrome-trace``, ``--junit``, configs) is written to a temporary
  name and renamed over a regular file only. A FIFO or a character device (``/dev/null``) is written
  into, never replaced; ``/dev/stdout`` and ``/dev/fd/N`` stream into the open descriptor. A folder,
  socket or block device where a file is expected is one line, exit 2.
- **Links**: a link given as the target is resolved once; it is followed only when the user could
  have made it (it is theirs, or it does not sit in a world-writable sticky folder such as /tmp) and
  points somewhere they may write. Lock files are opened without following links.
- **What others read is strict**: JSON without NaN / Infinity (``null``, the places listed), CSV
  cells that a spreadsheet would run as a formula neutralised, file names made unique.

Nothing here imports pyarrow: the CLI's light paths use it too.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import math
import operator
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from npudiag.errors import InputError, OutputError, text_of, writing
from npudiag.safeio import JsonLiteral, load_json, safe_name, small_int
from npudiag.version import SCHEMA_VERSION, __version__

MANIFEST = "manifest.json"
STAGING_MARKER = ".npudiag-staging"  # inside every staging folder: {"pid": ..., "started": ..., "dest": ...}
NEW = "new"  # the folder being built, inside the staging folder
OLD = "old"  # where the old folder waits when names cannot be exchanged atomically
FOREIGN_SHOWN = 5  # names of foreign files a refusal shows
WALK_LIMIT = 200_000  # entries looked at before a folder is called foreign without looking further


# ----------------------------------------------------------------------------------------------
# permissions


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


# ----------------------------------------------------------------------------------------------
# strict outputs: JSON, CSV cells, names


class _Raw:
    def __init__(self, text: str) -> None:
        self.text = text


def strict(obj: Any, where: str = "$", found: list[str] | None = None) -> Any:
    """``obj`` with every float that JSON cannot hold (NaN, ±Infinity) replaced by None; the places
    (``$.a[2].b``) appended to ``found``. Tuples become lists; everything else is kept. A
    :class:`JsonLiteral` is kept, to be written as its text."""
    if isinstance(obj, JsonLiteral):
        return _Raw(obj.text)
    if isinstance(obj, str):  # a name from the file system that is not UTF-8: escaped, never unencodable
        return text_of(obj)
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        if found is not None:
            found.append(f"{where}: {obj!r}")
        return None
    if isinstance(obj, dict):
        return {text_of(k) if isinstance(k, str) else k: strict(v, f"{where}.{k}", found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    return obj


def dumps(obj: Any, *, indent: int | None = 2, ascii_only: bool = False, found: list[str] | None = None) -> str:
    """Strict JSON text (no NaN / Infinity: ``null``, the places in ``found``). Control, bidi and
    zero-width characters of input text are ``\\u``-escaped so they never reach a terminal raw."""
    raws: list[str] = []

    def default(o: Any) -> Any:
        if isinstance(o, _Raw):
            raws.append(o.text)
            return f"\x00raw{len(raws) - 1}\x00"
        return text_of(o)

    text = json.dumps(
        strict(obj, found=found), indent=indent, ensure_ascii=ascii_only, default=default, allow_nan=False
    )
    if raws:
        text = re.sub(r'"\\u0000raw([0-9]+)\\u0000"', lambda m: raws[int(m.group(1))], text)
    return escape_invisible(text)


# C0 / C1 controls, bidi embeddings / overrides / isolates, zero-width and other invisible format
# characters, line and paragraph separators: never written raw where a terminal or a viewer shows them
INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def json_safe(obj: Any) -> Any:
    """``obj`` as plain JSON values (what :func:`dumps` writes, parsed back): the results' ``to_dict()``."""
    return json.loads(json.dumps(strict(obj), ensure_ascii=False, default=text_of))


def escape_invisible(text: str) -> str:
    """``\\uXXXX`` for every character of :data:`INVISIBLE` (inside JSON strings this is the same
    string; JSON's own escapes for C0 controls are already in place and are not touched)."""
    return INVISIBLE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) if INVISIBLE.search(text) else text


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell no spreadsheet runs as a formula (OWASP): text that begins with ``= + - @``, TAB or
    CR gets a leading ``'``. Numbers are written as they are (a negative number is a number)."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def csv_column(values: list[str]) -> list[str]:
    """:func:`csv_cell` over a column of text cells, looked at cell by cell only where one could start a
    formula (a column of numbers of 40,000 steps costs one scan)."""
    firsts = set(map(operator.itemgetter(0), filter(None, values)))  # in C: no Python step per cell
    return [csv_cell(v) for v in values] if firsts.intersection(_FORMULA) else values


class UniqueNames:
    """File names from names found in inputs: one harmless path component each (``safe_name``),
    never the same twice in one folder. A name cut to the length limit ends in a short hash of the
    whole name; a name that still collides (``a/b`` and ``a_b``) gets ``~2``, ``~3``... before its
    suffix. Compared without case, for case-insensitive file systems."""

    def __init__(self, max_len: int = 160) -> None:
        self.max_len = max_len
        self.used: set[str] = set()

    def __call__(self, stem: str, suffix: str = "") -> str:
        import hashlib

        base = safe_name(stem, 1 << 20)
        if len(base) > self.max_len:
            digest = hashlib.sha256(stem.encode("utf-8", "surrogatepass")).hexdigest()[:10]
            base = f"{base[: self.max_len - 11]}~{digest}"
        candidate, n = base + suffix, 1
        while candidate.lower() in self.used:
            n += 1
            candidate = f"{base}~{n}{suffix}"
        self.used.add(candidate.lower())
        return candidate


# ----------------------------------------------------------------------------------------------
# where a write may go


def _home() -> Path | None:
    try:
        return Path(os.environ.get("HOME") or Path.home()).resolve()
    except (OSError, RuntimeError):
        return None


def _within(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def _resolved(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path.absolute()


def _link_allowed(link: Path) -> str | None:
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
    target = _resolved(link)
    if not os.access(target.parent, os.W_OK):
        return f"a link to {target}, in a folder you cannot write"
    return None


def _stream_fd(path: Path) -> int | None:
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
    cwd = _resolved(Path.cwd())
    if _within(cwd, dest):
        return "is the working folder" if cwd == dest else "holds the working folder"
    for p in inputs:
        rp = _resolved(Path(p))
        if rp == dest:
            return "is an input of this run"
        if _within(rp, dest):
            return f"holds an input of this run ({p})"
    return None


# ----------------------------------------------------------------------------------------------
# single files


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
    fd = _stream_fd(path)
    if fd is not None:
        _write_stream(fd, write, path)
        return path
    target = path
    with writing(path):
        if path.is_symlink():
            why = _link_allowed(path)
            if why is not None:
                raise OutputError(path, why)
            target = _resolved(path)
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
    real = _resolved(target)
    owner = out_folder_of(real)
    view = owner is not None and st is not None and _is_view(owner, real)  # an earlier page or trace npudiag put there
    for p in inputs:
        rp = _resolved(Path(p))
        if rp == real:
            raise OutputError(path, "is an input of this run; it is never overwritten")
        if (
            st is not None and not view and _within(real, rp)
        ):  # a file of an input folder (a link to its trace, say) may be what was read
            raise OutputError(
                path, f"{_via(path, real)}is a file of an input of this run ({p}); it is never overwritten"
            )
    if owner is not None and st is not None and not view and _member(owner, real):
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
        if path.is_symlink() and (why := _link_allowed(path)) is not None:
            raise OutputError(path, why)
        real = _resolved(path)
        owner = out_folder_of(real)
        if owner is not None and _member(owner, real):
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


# how far above a file its out folder's manifest may be: cluster's tables/<table>/rank=N/part-0.parquet
_OUT_DEPTH = 4


def out_folder_of(path: Path) -> tuple[Path, dict[str, Any]] | None:
    """The npudiag out folder ``path`` (resolved) lies in, with its manifest; None when it lies in none."""
    folder = path.parent
    for _ in range(_OUT_DEPTH):
        manifest = npudiag_manifest(folder)
        if manifest is not None:
            return folder, manifest
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def _is_view(owner: tuple[Path, dict[str, Any]], path: Path) -> bool:
    """Whether ``path`` is a view npudiag wrote into the out folder after it (an HTML page, a Chrome
    trace: the manifest's ``views``), which a later view may replace."""
    folder, manifest = owner
    views = manifest.get("views")
    return isinstance(views, list) and os.path.relpath(path, folder).replace(os.sep, "/") in views


def _member(owner: tuple[Path, dict[str, Any]], path: Path) -> bool:
    """Whether ``path`` is one of the files the out folder's manifest lists (or the manifest itself)."""
    folder, manifest = owner
    rel = os.path.relpath(path, folder).replace(os.sep, "/")
    listed = manifest.get("files")
    if isinstance(listed, list):
        return rel == MANIFEST or rel in listed
    return rel == MANIFEST or _legacy_table_file(rel)


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
        if pid is not None and not _alive(pid) and e.is_file(follow_symlinks=False):
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
            if _rename2(src, dest, _RENAME_NOREPLACE):
                return
        except FileExistsError:
            raise InputError(dest, f"already exists; npudiag never overwrites {what}") from None
        if os.path.lexists(dest):
            raise InputError(dest, f"already exists; npudiag never overwrites {what}")
        os.rename(src, dest)


# ----------------------------------------------------------------------------------------------
# folders


def _load_small_json(path: Path) -> Any:

    try:
        return load_json(path, 256 << 20)
    except InputError:
        return None


def npudiag_manifest(folder: Path) -> dict[str, Any] | None:
    """``folder``'s manifest.json when npudiag wrote it (it has npudiag's own keys), else None."""
    p = folder / MANIFEST
    try:
        if p.is_symlink() or not p.is_file():
            return None
    except OSError:
        return None
    data = _load_small_json(p)
    if isinstance(data, dict) and "npudiag_version" in data and "schema_version" in data:
        return data
    return None


def _legacy_table_file(rel: str) -> bool:
    """A file an ``analyze --out`` of npudiag before the manifest's file list wrote: ``name.parquet``
    or ``name/rank=N/part-K.parquet``."""
    parts = rel.split("/")
    named = parts[0].removesuffix(".parquet") if len(parts) == 1 else parts[0]
    if not named or not named.replace("_", "a").isalpha() or not named.islower():
        return False
    if len(parts) == 1:
        return parts[0].endswith(".parquet")
    return (
        len(parts) == 3
        and parts[1].startswith("rank=")
        and parts[2].startswith("part-")
        and parts[2].endswith(".parquet")
    )


def _legacy_run(name: str) -> bool:
    """A ``run_NNN`` folder of an older ``gate --update-baseline``."""
    return name.startswith("run_") and len(name) >= 7 and name[4:].isdigit() and name[4:].isascii()


def _walk(folder: Path) -> Iterator[tuple[str, bool]]:
    """(relative path, is a real folder) of every entry under ``folder``, links not followed."""
    stack = [folder]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            yield os.path.relpath(d, folder), False  # unreadable: cannot be vouched for
            continue
        for e in entries:
            is_dir = e.is_dir(follow_symlinks=False)
            yield os.path.relpath(e.path, folder).replace(os.sep, "/"), is_dir
            if is_dir:
                stack.append(Path(e.path))


def foreign_entries(folder: Path) -> list[str]:
    """What in ``folder`` npudiag did not write (relative paths; [] when npudiag may replace it).

    npudiag's: an empty folder; a folder whose npudiag manifest.json lists every file in it (one of
    an older npudiag without the list: only the table files it wrote); a folder holding only
    ``run_NNN`` sub-folders that are each npudiag's (an older ``gate --update-baseline``)."""
    manifest = npudiag_manifest(folder)
    foreign: list[str] = []
    if manifest is None:
        for rel, is_dir in _walk_top(folder):
            if is_dir and _legacy_run(rel) and npudiag_manifest(folder / rel) is not None:
                foreign.extend(f"{rel}/{x}" for x in foreign_entries(folder / rel))
            else:
                foreign.append(rel + ("/" if is_dir else ""))
            if len(foreign) > FOREIGN_SHOWN:
                break
        return foreign
    listed = manifest.get("files")
    if isinstance(listed, list) and all(isinstance(x, str) for x in listed):
        allowed = set(listed) | {MANIFEST}

        def ours(rel: str) -> bool:
            return rel in allowed
    else:

        def ours(rel: str) -> bool:
            return rel == MANIFEST or _legacy_table_file(rel)

    for seen, (rel, is_dir) in enumerate(_walk(folder), 1):
        if not is_dir and not ours(rel):
            foreign.append(rel)
        if len(foreign) > FOREIGN_SHOWN or seen > WALK_LIMIT:
            if seen > WALK_LIMIT and not foreign:
                foreign.append(f"(more than {WALK_LIMIT:,} entries)")
            break
    return foreign


def _walk_top(folder: Path) -> Iterator[tuple[str, bool]]:
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        yield f"(cannot list: {exc.strerror})", False
        return
    for e in entries:
        yield e.name, e.is_dir(follow_symlinks=False)


def _describe_foreign(foreign: list[str]) -> str:
    shown = ", ".join(foreign[:FOREIGN_SHOWN])
    more = " and more" if len(foreign) > FOREIGN_SHOWN else ""
    return f"{shown}{more}"


def write_manifest(folder: Path, kind: str, manifest: dict[str, Any]) -> None:
    """``folder/manifest.json``: npudiag's version keys, what wrote it (``output``), ``manifest``'s
    keys, and ``files``, every file under ``folder`` (what makes the folder replaceable later)."""

    body = {"npudiag_version": __version__, "schema_version": SCHEMA_VERSION, "output": kind, **manifest}
    body["files"] = sorted(rel for rel, is_dir in _walk(folder) if not is_dir and rel != MANIFEST)
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


def _alive(pid: int, started: float | None = None) -> bool:
    """Whether process ``pid`` runs, and (given ``started``, the epoch time it wrote in a marker) is
    the process that wrote it: a pid reused by a process started later is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    if started is not None:
        began = _start_time(pid)
        if began is not None and began > started + 2.0:
            return False
    return True


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), from /proc; None where that cannot be told."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, counted after the command name
        with open("/proc/stat", "rb") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


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
        if not isinstance(pid, int) or isinstance(pid, bool) or _alive(pid, started):
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
    if m is None or _alive(int(m.group(1))):
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
                # the output is what cannot be written: its folder takes no new file (npudiag's lock beside it is the first)
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


_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100


def _renameat2() -> Callable[..., int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2() if sys.platform.startswith("linux") else None


def _rename2(src: Path, dst: Path, flags: int) -> bool:
    """renameat2 with ``flags``: True when done, False when this system or file system cannot."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def _sync_tree(root: Path) -> None:
    """Everything written under ``root`` on disk before it is swapped in: each file and folder flushed,
    in one pass at the end (the first flush commits most of what the others would). Only what npudiag
    wrote: a syncfs(2) would also wait for every other program's unwritten data on that file system."""
    for rel, is_dir in _walk(root):
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
        if not _rename2(new, dest, _RENAME_EXCHANGE):
            os.rename(dest, aside)
            os.rename(new, dest)
    elif not _rename2(new, dest, _RENAME_NOREPLACE):
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
        self.replaceable = {_resolved(Path(p)) for p in replaceable}
        given = self.given
        with writing(given):
            if given.is_symlink():
                target = _resolved(given)
                if not target.exists():
                    raise OutputError(
                        given, f"is a link to {target}, which does not exist; make that folder or use another {option}"
                    )
                why = _link_allowed(given)
                if why is not None:
                    raise OutputError(given, why)
            elif given.name in ("", ".", ".."):
                target = _resolved(given)
            else:
                target = _resolved(given.absolute().parent) / given.name
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
        why = protected_reason(dest, [p for p in self.inputs if not (own and _resolved(p) == dest)])
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
        raise InputError(
            given, f"exists and was not written by npudiag (it holds {_describe_foreign(foreign)}); {hint}"
        )


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
