"""Input is hostile until proven otherwise: the few file operations every reader and writer shares.

- Only regular files are opened for reading (a FIFO blocks forever, ``/dev/zero`` never ends), and
  small metadata files are read with a size cap.
- Names that come from inputs (op names, file names inside archives and dumps) are never paths:
  :func:`safe_name` makes one path component of them, and :func:`inside` checks that a path we are
  about to write lands inside the folder it must stay in.
- JSON and TOML from inputs are parsed with their nesting depth bounded, so a crafted file is an
  :class:`InputError`, not a RecursionError.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from npudiag.errors import InputError, text_of  # noqa: F401 - text_of is this module's API too


class JsonLiteral(float):
    """A number read from a user's JSON that npudiag writes back: its value as a float (infinite for
    ``1e400``), its text kept, and :func:`dumps` writes the text back (the user's own number, ``1e2``
    not ``100.0``)."""

    text: str

    def __new__(cls, text: str) -> JsonLiteral:
        obj = super().__new__(cls, float(text))
        obj.text = text
        return obj


SMALL_FILE = 16 << 20  # metadata files (profiler_info, manifest.json, configs) are kilobytes
MAX_DEPTH = 64  # real JSON / TOML here nests a few levels


def is_regular(path: Path) -> bool:
    """A regular file (after following links): not a FIFO, device, socket or folder."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_bytes_limited(path: Path, limit: int = SMALL_FILE) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; InputError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(path, "not a regular file (a FIFO, device or socket); not read")
        if st.st_size > limit:
            raise InputError(path, f"{st.st_size:,} bytes; a file of this kind is at most {limit:,}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise InputError(path, f"more than {limit:,} bytes; a file of this kind is at most {limit:,}")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_limited(path: Path, limit: int = SMALL_FILE) -> str:
    data = read_bytes_limited(path, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, "bytes that are not UTF-8 text", offset=exc.start) from None


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)  # a JSON string, or one left open to the end


def _depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings: the strings taken out by one pattern pass, then
    the running count of brackets with numpy (linear; the character loop it replaces cost 50 ms a MB)."""
    import numpy as np  # here, not at the top: the command line's start-up must not load numpy

    outside = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    if not outside:
        return 0
    b = np.frombuffer(outside, np.uint8)
    step = (b == ord("[")).astype(np.int64) + (b == ord("{")) - (b == ord("]")) - (b == ord("}"))
    return max(0, int(np.cumsum(step).max()))


# digits of a JSON integer read as one (a 64-bit id has 20); longer ones are read as floats (a count that
# large is no count), where Python's int would refuse them past 4,300 digits
MAX_INT_DIGITS = 40


def json_int(text: str) -> int | float:
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


def _kept_int(text: str) -> int | float:
    return int(text) if len(text) <= MAX_INT_DIGITS else JsonLiteral(text)


class DuplicateKey(ValueError):
    """A JSON object that holds one key twice."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(k)
        out[k] = v
    return out


def loads_json(text: str, path: Path, keep_numbers: bool = False, unique_keys: bool = False) -> Any:
    """``json.loads`` with the nesting bounded and every failure an InputError naming ``path``.
    ``keep_numbers``: every number keeps its text (``1e2`` stays ``1e2``, for a file npudiag writes back).
    ``unique_keys``: an object that holds a key twice is refused (JSON keeps the last one silently)."""
    if _depth(text) > MAX_DEPTH:
        raise InputError(path, f"JSON nested deeper than {MAX_DEPTH} levels; no real file is")
    numbers = {"parse_float": JsonLiteral, "parse_int": _kept_int} if keep_numbers else {"parse_int": json_int}
    try:
        return json.loads(text, object_pairs_hook=_unique if unique_keys else None, **numbers)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON ({exc.msg})", line=exc.lineno) from None
    except DuplicateKey as exc:
        key = str(exc)
        at = [m.start() for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)]
        line = text.count("\n", 0, at[1]) + 1 if len(at) > 1 else None
        raise InputError(
            path,
            f"the key {json.dumps(key)} appears twice in one object (JSON would keep only the last); keep one",
            line=line,
        ) from None
    except RecursionError:
        raise InputError(path, f"JSON nested deeper than {MAX_DEPTH} levels; no real file is") from None


def load_json(path: Path, limit: int = SMALL_FILE, unique_keys: bool = False) -> Any:
    return loads_json(read_text_limited(path, limit), path, unique_keys=unique_keys)


_UNSAFE = re.compile(r"[^\w.+@=-]+")


def safe_name(name: str, max_len: int = 180) -> str:
    """One harmless path component from a name found in an input: separators, ``..``, control
    characters and anything unusual become ``_``; never empty, never hidden, never too long."""
    out = _UNSAFE.sub("_", name).strip(".")
    out = out[:max_len] or "_"
    return "_" + out if out.startswith("-") else out


def inside(path: Path, folder: Path) -> bool:
    """``path`` (resolved, links followed) lies inside ``folder`` (resolved)."""
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError, RuntimeError):
        return False


_ASCII_INT = re.compile(r"[+-]?[0-9]{1,19}")


def small_int(value: Any, lo: int = 0, hi: int = (1 << 31) - 1) -> int | None:
    """An integer from an input (an int, or a string of ASCII digits with an optional sign) within
    [lo, hi]; None for anything else: a bool, other digits (``²``, ``٣``), too many digits, out of
    range. A name or a count read from a file is never trusted to fit a column or a loop."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and _ASCII_INT.fullmatch(value.strip()):
        n = int(value.strip())
    else:
        return None
    return n if lo <= n <= hi else None


def fit_int(value: int | None, bits: int = 63) -> int | None:
    """``value`` when a signed integer column of ``bits`` + 1 bits holds it, else None."""
    if value is None or -(1 << bits) <= value < (1 << bits):
        return value
    return None


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes, read 4 MiB at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()
