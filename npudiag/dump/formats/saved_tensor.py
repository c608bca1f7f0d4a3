"""The tensors msprobe saves in tensor mode: PyTorch's ``torch.save`` files (``.pt``) and NumPy's ``.npy``
(MindSpore), read into NumPy arrays without PyTorch.

A ``.pt`` file is a zip archive: ``<name>/data.pkl`` (a pickle that rebuilds the tensor), the raw
bytes of each storage in ``<name>/data/<key>``, and ``<name>/byteorder`` (``little`` unless it says
``big``). The pickle is read by an unpickler that knows only what a saved tensor needs
(``torch._utils._rebuild_tensor_v2``, the typed storage classes, ``collections.OrderedDict``):
anything else in it is refused, so a crafted file cannot run code. The storage's bytes must hold
every element the shape and strides reach. bfloat16 is widened to float32 exactly (its bits are
float32's upper half), as msprobe converts it before comparing; ``.npy`` is read without pickles.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from npudiag.errors import InputError

MAX_BYTES = 16 << 30  # one saved tensor; a bound, not a guess
MAX_PICKLE = 1 << 20  # the pickle that rebuilds one tensor: a few hundred bytes
# torch's storage classes (the names a saved tensor's pickle refers to) -> NumPy dtype; bfloat16 as raw bits
_STORAGES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16, "BFloat16Storage": np.uint16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_, "ComplexFloatStorage": np.complex64, "ComplexDoubleStorage": np.complex128,
}  # fmt: skip


class _Storage:
    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = np.dtype(_STORAGES[name])


class _Rebuilt:
    """A tensor's rebuild call, kept until its storage is known (``_rebuild_tensor_v2`` arguments)."""

    def __init__(self, storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any) -> None:
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, zf: zipfile.ZipFile, prefix: str, path: Path, big_endian: bool) -> None:
        super().__init__(io.BytesIO(data))
        self.zf, self.prefix, self.path, self.big_endian = zf, prefix, path, big_endian

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _Rebuilt
        if module == "torch" and name in _STORAGES:
            return _Storage(name)
        if module == "collections" and name == "OrderedDict":
            return dict
        raise InputError(self.path, f"the saved object refers to {module}.{name}; expected a tensor saved by torch.save")

    def persistent_load(self, pid: Any) -> np.ndarray:
        # ('storage', storage class, key, location, element count)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _Storage)):
            raise InputError(self.path, "a storage reference that is not torch.save's ('storage', class, key, location, size)")
        storage, key, count = pid[1], str(pid[2]), pid[4]
        if not key.isdigit() or not isinstance(count, int) or count < 0:
            raise InputError(self.path, f"storage {key!r}: not a storage key and element count")
        try:
            info = self.zf.getinfo(f"{self.prefix}/data/{key}")
        except KeyError:
            raise InputError(self.path, f"storage {key} is missing from the archive") from None
        if info.file_size != count * storage.dtype.itemsize or info.file_size > MAX_BYTES:
            raise InputError(self.path, f"storage {key}: {info.file_size:,} bytes for {count:,} elements of {storage.dtype}")
        raw = np.frombuffer(self.zf.read(info), dtype=storage.dtype.newbyteorder(">" if self.big_endian else "<"))
        return raw.view(np.uint16).astype(np.uint32) << 16 if storage.name == "BFloat16Storage" else raw  # bits -> float32 bits


def _rebuild(obj: _Rebuilt, path: Path) -> np.ndarray:
    flat = obj.storage
    size, stride, offset = obj.size, obj.stride, obj.offset
    if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride) and isinstance(offset, int)
            and all(isinstance(v, int) and v >= 0 for v in (*size, *stride, offset)) and len(size) <= 64):  # fmt: skip
        raise InputError(path, "a tensor's size, stride or offset is not what torch.save writes")
    reach = offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else offset - 1
    if reach >= len(flat):
        raise InputError(path, f"the tensor reaches element {reach:,} of a storage of {len(flat):,}")
    items = flat.itemsize
    out = np.lib.stride_tricks.as_strided(flat[offset:], shape=size, strides=tuple(s * items for s in stride)).copy() if all(size) \
        else np.zeros(size, flat.dtype)  # fmt: skip
    if out.dtype == np.uint32:  # bfloat16 widened: reinterpret the float32 bits
        out = out.view(np.float32)
    return out.astype(out.dtype.newbyteorder("="), copy=False)


def read_saved_tensor(path: Path) -> np.ndarray:
    """The array in ``path`` (a ``.pt`` saved by torch.save or a ``.npy``); InputError naming what is wrong."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise InputError(path, f"larger than {MAX_BYTES >> 30} GiB; not read")
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        with zipfile.ZipFile(path) as zf:
            pickles = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pickles) != 1:
                raise InputError(path, "not a torch.save archive (expected one <name>/data.pkl)")
            if zf.getinfo(pickles[0]).file_size > MAX_PICKLE:
                raise InputError(path, f"its data.pkl is over {MAX_PICKLE:,} bytes; a saved tensor's is a few hundred")
            prefix = pickles[0].split("/")[0]
            order = f"{prefix}/byteorder"
            big = order in zf.namelist() and zf.read(order).strip() == b"big"
            obj = _Unpickler(zf.read(pickles[0]), zf, prefix, path, big).load()
    except InputError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError, TypeError, IndexError, KeyError,
            AttributeError, RecursionError, MemoryError) as exc:  # fmt: skip
        raise InputError(path, f"not a readable saved tensor ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(obj, _Rebuilt) or not isinstance(obj.storage, np.ndarray):
        raise InputError(path, "the saved object is not a tensor")
    return _rebuild(obj, path)
