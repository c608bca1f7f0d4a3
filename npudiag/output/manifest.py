"""Reading an out folder's manifest.json: whether npudiag wrote the folder, which out folder a file lies
in, and what in a folder npudiag did not write (its foreign entries)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from npudiag.errors import InputError
from npudiag.safeio import load_json

MANIFEST = "manifest.json"


FOREIGN_SHOWN = 5  # names of foreign files a refusal shows


WALK_LIMIT = 200_000  # entries looked at before a folder is called foreign without looking further


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


def is_view(owner: tuple[Path, dict[str, Any]], path: Path) -> bool:
    """Whether ``path`` is a view npudiag wrote into the out folder after it (an HTML page, a Chrome
    trace: the manifest's ``views``), which a later view may replace."""
    folder, manifest = owner
    views = manifest.get("views")
    return isinstance(views, list) and os.path.relpath(path, folder).replace(os.sep, "/") in views


def is_member(owner: tuple[Path, dict[str, Any]], path: Path) -> bool:
    """Whether ``path`` is one of the files the out folder's manifest lists (or the manifest itself)."""
    folder, manifest = owner
    rel = os.path.relpath(path, folder).replace(os.sep, "/")
    listed = manifest.get("files")
    if isinstance(listed, list):
        return rel == MANIFEST or rel in listed
    return rel == MANIFEST or _legacy_table_file(rel)


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


def walk(folder: Path) -> Iterator[tuple[str, bool]]:
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

    for seen, (rel, is_dir) in enumerate(walk(folder), 1):
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


def describe_foreign(foreign: list[str]) -> str:
    shown = ", ".join(foreign[:FOREIGN_SHOWN])
    more = " and more" if len(foreign) > FOREIGN_SHOWN else ""
    return f"{shown}{more}"
