"""Reading log archives from other machines without trusting them.

An archive is checked member by member before anything is read: absolute paths, ``..``
components, links that point outside the archive (or anywhere absolute), device files and FIFOs,
and total sizes over a limit are refused with the member's name. npudiag then streams the
regular members' text straight out of the archive; ``safe_extract`` is for when files must land
on disk, and adds Python's ``tarfile`` data filter as a second line of defence.
"""

from __future__ import annotations

import posixpath
import tarfile
from pathlib import Path

from npudiag.errors import InputError

MAX_ARCHIVE_BYTES = 8 << 30  # uncompressed; an export of 8 devices is a few hundred MB
MAX_MEMBERS = 200_000
MAX_NAME_BYTES = 4096  # a GNU long name or link name (PATH_MAX)
MAX_PAX_BYTES = 64 << 10  # a pax extended header: a few records (path, times, xattrs)
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz")


class BoundedTarInfo(tarfile.TarInfo):
    """A tar header whose GNU long name or pax header is read only when it is small. A larger one
    (a 1.5 GB name costs 1.5 GB to read) is stepped over block by block and the member it belongs
    to is marked ``npudiag_skipped`` with the reason, for the reader to leave out and name."""

    npudiag_skipped: str | None = None

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK):
            limit, what = MAX_NAME_BYTES, "long name"
        elif self.type in (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE):
            limit, what = MAX_PAX_BYTES, "pax header"
        else:
            return super()._proc_member(tarfile_)
        if self.size <= limit:
            return super()._proc_member(tarfile_)
        fileobj = tarfile_.fileobj
        fileobj.seek(fileobj.tell() + self._block(self.size))  # forward: read and dropped in blocks
        try:
            nxt = self.fromtarfile(tarfile_)
        except tarfile.HeaderError as exc:
            raise tarfile.SubsequentHeaderError(str(exc)) from None
        nxt.offset = self.offset
        nxt.npudiag_skipped = f"a {what} of {self.size:,} bytes (at most {limit:,} are read); member skipped"
        return nxt


def is_archive(path: Path) -> bool:
    return path.name.endswith(ARCHIVE_SUFFIXES)


def _refuse(archive: Path, member: tarfile.TarInfo, why: str) -> InputError:
    return InputError(archive, f"member {member.name!r}: {why}; refusing the archive")


def check_members(
    archive: Path,
    tar: tarfile.TarFile,
    max_bytes: int = MAX_ARCHIVE_BYTES,
    max_members: int = MAX_MEMBERS,
    skipped: list[str] | None = None,
) -> list[tarfile.TarInfo]:
    """All members, after every check passed; InputError on the first unsafe one. Members whose
    header was too large to read are left out, each noted in ``skipped``."""
    total = 0
    members = []
    for m in members_of(archive, tar):
        if getattr(m, "npudiag_skipped", None):
            if skipped is not None:
                skipped.append(f"{archive}: member at offset {m.offset}: {m.npudiag_skipped}")
            continue
        members.append(m)
        if len(members) > max_members:
            raise InputError(archive, f"more than {max_members} members; refusing the archive")
        name = m.name
        if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
            raise _refuse(archive, m, "absolute path")
        parts = name.replace("\\", "/").split("/")
        if ".." in parts:
            raise _refuse(archive, m, "'..' in the path")
        if m.isdev() or m.isfifo() or m.ischr() or m.isblk():
            raise _refuse(archive, m, "device file or FIFO")
        if m.issym() or m.islnk():
            target = m.linkname
            if target.startswith("/"):
                raise _refuse(archive, m, f"link to the absolute path {target!r}")
            base = posixpath.dirname(name) if m.issym() else ""
            resolved = posixpath.normpath(posixpath.join(base, target))
            if resolved == ".." or resolved.startswith("../"):
                raise _refuse(archive, m, f"link pointing outside the archive ({target!r})")
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise _refuse(archive, m, "not a regular file, folder or link")
        total += max(m.size, 0)
        if total > max_bytes:
            raise InputError(
                archive, f"more than {max_bytes} bytes uncompressed (at member {m.name!r}); refusing the archive"
            )
    return members


def members_of(archive: Path, tar: tarfile.TarFile):
    """The members of ``tar``; a damaged archive (a bad header, a truncated or corrupt stream) is an
    InputError naming it, never another exception."""
    it = iter(tar)
    while True:
        try:
            m = next(it)
        except StopIteration:
            return
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            raise InputError(archive, f"not a readable tar archive ({exc})") from None
        yield m


def open_archive(archive: Path) -> tarfile.TarFile:
    """The archive, its headers read with :class:`BoundedTarInfo`."""
    try:
        return tarfile.open(archive, "r:*", tarinfo=BoundedTarInfo)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InputError(archive, f"not a readable tar archive ({exc})") from None


def safe_extract(archive: Path, dest: Path, max_bytes: int = MAX_ARCHIVE_BYTES) -> list[str]:
    """Extract into ``dest`` (which must not exist yet) after the checks; returns member names."""
    if dest.exists():
        raise InputError(dest, "already exists; refusing to extract over it")
    with open_archive(archive) as tar:
        members = check_members(archive, tar, max_bytes)
        dest.mkdir(parents=True)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, members=members, filter="data")
        else:  # pragma: no cover - Python without the PEP 706 filters (< 3.10.12)
            tar.extractall(dest, members=[m for m in members if m.isfile() or m.isdir()])
    return [m.name for m in members]
