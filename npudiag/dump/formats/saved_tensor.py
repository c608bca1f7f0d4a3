"""The tensors msprobe saves in tensor mode: PyTorch's ``torch.save`` files (``.pt``) and NumPy's ``.npy``
(MindSpore), read into NumPy arrays without PyTorch.

A ``.pt`` file is a zip archive: ``<name>/data.pkl`` (Python's object serialization, protocol 2, of
the call that rebuilds the tensor), the raw bytes of each storage in ``<name>/data/<key>``, and
``<name>/byteorder`` (``little`` unless it says ``big``). ``data.pkl`` is not handed to Python's
deserializer: a small interpreter here knows the few opcodes a saved tensor uses (tuples, ints,
strings, booleans, None, the memo) and only three names (``torch._utils._rebuild_tensor_v2``, the
typed storage classes, ``collections.OrderedDict``); anything else is refused, so a crafted file
cannot run code. The storage's bytes must hold every element the shape and strides reach. bfloat16
is widened to float32 exactly (its bits are float32's upper half), as msprobe converts it before
comparing; ``.npy`` files are read with NumPy's default, which loads no objects.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from npudiag.errors import InputError

MAX_BYTES = 16 << 30  # one saved tensor; a bound, not a guess
MAX_OBJECT_STREAM = 1 << 20  # data.pkl of one tensor: a few hundred bytes
# torch's storage classes (the names a saved tensor refers to) -> NumPy dtype; bfloat16 as raw bits
_STORAGES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16, "BFloat16Storage": np.uint16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_, "ComplexFloatStorage": np.complex64, "ComplexDoubleStorage": np.complex128,
}  # fmt: skip


class _Storage:
    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = np.dtype(_STORAGES[name])


class _Rebuild:
    """``torch._utils._rebuild_tensor_v2`` as a name: calling it keeps its arguments."""


class _Dict:
    """``collections.OrderedDict`` as a name: calling it with no arguments gives an empty dict."""


class _Rebuilt:
    def __init__(self, storage: Any, offset: Any, size: Any, stride: Any) -> None:
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


class _Mark:
    pass


_MARK = _Mark()


class _PickleReader:
    """The opcodes of a saved tensor's data.pkl (protocol 2, and 4's framing), nothing more."""

    def __init__(self, data: bytes, load_storage, path: Path) -> None:
        self.data, self.pos, self.path = data, 0, path
        self.load_storage = load_storage
        self.stack: list[Any] = []
        self.memo: dict[int, Any] = {}

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self._bad("ends in the middle of a value")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def _bad(self, what: str) -> InputError:
        return InputError(self.path, f"data.pkl at byte {self.pos}: {what}; expected a tensor saved by torch.save")

    def _pop_mark(self) -> list[Any]:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i] is _MARK:
                items = self.stack[i + 1 :]
                del self.stack[i:]
                return items
        raise self._bad("no mark to close")

    def _pop(self) -> Any:
        if not self.stack:
            raise self._bad("an empty stack popped")
        return self.stack.pop()

    def _global(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _Rebuild()
        if module == "torch" and name in _STORAGES:
            return _Storage(name)
        if module == "collections" and name == "OrderedDict":
            return _Dict()
        raise self._bad(f"refers to {module}.{name}")

    def _call(self, fn: Any, args: Any) -> Any:
        if not isinstance(args, tuple):
            raise self._bad("a call without an argument tuple")
        if isinstance(fn, _Rebuild) and len(args) >= 4:
            return _Rebuilt(*args[:4])
        if isinstance(fn, _Dict) and not args:
            return {}
        raise self._bad("a call a saved tensor does not make")

    def run(self) -> Any:
        """The value STOP returns; each opcode is one method of _OPCODES, an unknown one is refused."""
        while True:
            op = self._take(1)
            if op == b".":  # STOP
                return self._pop()
            handle = _OPCODES.get(op)
            if handle is None:
                raise self._bad(f"opcode {op!r}")
            handle(self, op)

    def _skip(self, op: bytes) -> None:  # PROTO n, FRAME size (protocol 4)
        self._take(1 if op == b"\x80" else 8)

    def _global_line(self, op: bytes) -> None:  # GLOBAL module\nname\n
        end1 = self.data.find(b"\n", self.pos)
        end2 = self.data.find(b"\n", end1 + 1)
        if end1 < 0 or end2 < 0 or end2 - self.pos > 256:
            raise self._bad("a malformed global name")
        module = self.data[self.pos : end1].decode("ascii", "replace")
        name = self.data[end1 + 1 : end2].decode("ascii", "replace")
        self.pos = end2 + 1
        self.stack.append(self._global(module, name))

    def _stack_global(self, op: bytes) -> None:  # STACK_GLOBAL (protocol 4)
        name, module = self._pop(), self._pop()
        if not (isinstance(module, str) and isinstance(name, str)):
            raise self._bad("a malformed global name")
        self.stack.append(self._global(module, name))

    def _index(self, op: bytes) -> int:
        """A memo index: one byte after BINPUT / BINGET, four after the LONG_ forms."""
        return self._take(1)[0] if op in (b"q", b"h") else struct.unpack("<I", self._take(4))[0]

    def _memo_put(self, op: bytes) -> None:  # BINPUT, LONG_BINPUT, MEMOIZE (the next index)
        key = len(self.memo) if op == b"\x94" else self._index(op)
        if not self.stack or len(self.memo) > 100_000:
            raise self._bad("a memo entry without a value")
        self.memo[key] = self.stack[-1]

    def _memo_get(self, op: bytes) -> None:  # BINGET, LONG_BINGET
        key = self._index(op)
        if key not in self.memo:
            raise self._bad("a memo entry that was never set")
        self.stack.append(self.memo[key])

    def _text(self, op: bytes) -> None:  # BINUNICODE, SHORT_BINUNICODE
        n = struct.unpack("<I", self._take(4))[0] if op == b"X" else self._take(1)[0]
        self.stack.append(self._take(n).decode("utf-8", "replace"))

    def _int(self, op: bytes) -> None:  # BININT1, BININT2, BININT
        fmt, size = _INTS[op]
        self.stack.append(struct.unpack(fmt, self._take(size))[0])

    def _long1(self, op: bytes) -> None:
        n = self._take(1)[0]
        self.stack.append(int.from_bytes(self._take(n), "little", signed=True))

    def _tuple_n(self, op: bytes) -> None:  # TUPLE1..3
        n = op[0] - 0x84
        if len(self.stack) < n:
            raise self._bad("a tuple of missing items")
        items = self.stack[-n:]
        del self.stack[-n:]
        self.stack.append(tuple(items))

    def _push(self, op: bytes) -> None:  # MARK, EMPTY_TUPLE, NEWTRUE, NEWFALSE, NONE, EMPTY_DICT (a new one)
        self.stack.append({} if op == b"}" else _CONSTANTS[op])

    def _tuple(self, op: bytes) -> None:  # TUPLE: the items since the mark
        self.stack.append(tuple(self._pop_mark()))

    def _persistent(self, op: bytes) -> None:  # BINPERSID: a storage
        self.stack.append(self.load_storage(self._pop()))

    def _reduce(self, op: bytes) -> None:  # REDUCE
        args = self._pop()
        self.stack.append(self._call(self._pop(), args))


_INTS = {b"K": ("<B", 1), b"M": ("<H", 2), b"J": ("<i", 4)}
_CONSTANTS = {b"(": _MARK, b")": (), b"\x88": True, b"\x89": False, b"N": None}
# the opcodes torch.save writes for a tensor (protocol 2, and 4's framing); nothing else is read
_OPCODES: dict[bytes, Callable[[_PickleReader, bytes], None]] = {
    b"\x80": _PickleReader._skip,
    b"\x95": _PickleReader._skip,
    b"c": _PickleReader._global_line,
    b"\x93": _PickleReader._stack_global,
    **dict.fromkeys((b"q", b"r", b"\x94"), _PickleReader._memo_put),
    **dict.fromkeys((b"h", b"j"), _PickleReader._memo_get),
    **dict.fromkeys((b"X", b"\x8c"), _PickleReader._text),
    **dict.fromkeys(_INTS, _PickleReader._int),
    b"\x8a": _PickleReader._long1,
    b"t": _PickleReader._tuple,
    **dict.fromkeys((b"\x85", b"\x86", b"\x87"), _PickleReader._tuple_n),
    **dict.fromkeys((*_CONSTANTS, b"}"), _PickleReader._push),
    b"Q": _PickleReader._persistent,
    b"R": _PickleReader._reduce,
}


def _storage_loader(zf: zipfile.ZipFile, prefix: str, path: Path, big_endian: bool):
    def load(pid: Any) -> np.ndarray:
        # ('storage', storage class, key, location, element count)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _Storage)):
            raise InputError(
                path, "a storage reference that is not torch.save's ('storage', class, key, location, size)"
            )
        storage, key, count = pid[1], str(pid[2]), pid[4]
        if not key.isdigit() or not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(path, f"storage {key!r}: not a storage key and element count")
        try:
            info = zf.getinfo(f"{prefix}/data/{key}")
        except KeyError:
            raise InputError(path, f"storage {key} is missing from the archive") from None
        if info.file_size != count * storage.dtype.itemsize or info.file_size > MAX_BYTES:
            raise InputError(path, f"storage {key}: {info.file_size:,} bytes for {count:,} elements of {storage.dtype}")
        raw = np.frombuffer(zf.read(info), dtype=storage.dtype.newbyteorder(">" if big_endian else "<"))
        return raw.astype(np.uint32) << 16 if storage.name == "BFloat16Storage" else raw  # bits -> float32 bits

    return load


def _rebuild(obj: _Rebuilt, path: Path) -> np.ndarray:
    flat = obj.storage
    size, stride, offset = obj.size, obj.stride, obj.offset
    ok = (
        isinstance(size, tuple)
        and isinstance(stride, tuple)
        and len(size) == len(stride) <= 64
        and isinstance(offset, int)
    )
    if not (ok and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (*size, *stride, offset))):
        raise InputError(path, "a tensor's size, stride or offset is not what torch.save writes")
    reach = offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else offset - 1
    if reach >= len(flat):
        raise InputError(path, f"the tensor reaches element {reach:,} of a storage of {len(flat):,}")
    if all(size):
        out = np.lib.stride_tricks.as_strided(
            flat[offset:], shape=size, strides=tuple(s * flat.itemsize for s in stride)
        ).copy()
    else:
        out = np.zeros(size, flat.dtype)
    if out.dtype == np.uint32:  # bfloat16 widened: reinterpret the float32 bits
        out = out.view(np.float32)
    return out.astype(out.dtype.newbyteorder("="), copy=False)


def read_saved_tensor(path: Path) -> np.ndarray:
    """The array in ``path`` (a ``.pt`` saved by torch.save or a ``.npy``); InputError naming what is wrong."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise InputError(path, f"larger than {MAX_BYTES >> 30} GiB; not read")
        if path.suffix == ".npy":
            return np.load(path)  # NumPy's default loads no Python objects
        with zipfile.ZipFile(path) as zf:
            streams = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(streams) != 1:
                raise InputError(path, "not a torch.save archive (expected one <name>/data.pkl)")
            if zf.getinfo(streams[0]).file_size > MAX_OBJECT_STREAM:
                raise InputError(
                    path, f"its data.pkl is over {MAX_OBJECT_STREAM:,} bytes; a saved tensor's is a few hundred"
                )
            prefix = streams[0].split("/")[0]
            order = f"{prefix}/byteorder"
            big = order in zf.namelist() and zf.read(order).strip() == b"big"
            obj = _PickleReader(zf.read(streams[0]), _storage_loader(zf, prefix, path, big), path).run()
    except InputError:
        raise
    except (
        OSError,
        ValueError,
        zipfile.BadZipFile,
        EOFError,
        TypeError,
        IndexError,
        KeyError,
        struct.error,
        MemoryError,
        NotImplementedError,
        RuntimeError,
        OverflowError,
        zlib.error,
    ) as exc:  # zipfile's own, on a damaged archive
        raise InputError(path, f"not a readable saved tensor ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(obj, _Rebuilt) or not isinstance(obj.storage, np.ndarray):
        raise InputError(path, "the saved object is not a tensor")
    return _rebuild(obj, path)
