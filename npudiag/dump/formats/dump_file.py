"""CANN dump files (adump / ACL data dump): ``[uint64 LE header length N][N bytes DumpData protobuf][tensor bytes]``.

The tensor bytes are every input, then every output, buffer and workspace, each exactly its
``size``. Only the 8 + N header bytes are read to list the tensors; tensor data is read through a
memory map, block by block, so a file of any size is processed in bounded memory. Every size and
offset is checked against the file size before use (a malformed header must not steer reads).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from npudiag.dump.formats.dump_proto import DumpData
from npudiag.errors import InputError
from npudiag.safeio import small_int

# CANN OutputDataType -> (name, numpy dtype or None when kept raw)
DTYPES: dict[int, tuple[str, str | None]] = {
    0: ("DT_UNDEFINED", None), 1: ("DT_FLOAT", "float32"), 2: ("DT_FLOAT16", "float16"), 3: ("DT_INT8", "int8"),
    4: ("DT_UINT8", "uint8"), 5: ("DT_INT16", "int16"), 6: ("DT_UINT16", "uint16"), 7: ("DT_INT32", "int32"),
    8: ("DT_INT64", "int64"), 9: ("DT_UINT32", "uint32"), 10: ("DT_UINT64", "uint64"), 11: ("DT_BOOL", "bool"),
    12: ("DT_DOUBLE", "float64"), 13: ("DT_STRING", None), 14: ("DT_DUAL_SUB_INT8", None), 15: ("DT_DUAL_SUB_UINT8", None),
    16: ("DT_COMPLEX64", "complex64"), 17: ("DT_COMPLEX128", "complex128"), 18: ("DT_QINT8", "int8"), 19: ("DT_QINT16", "int16"),
    20: ("DT_QINT32", "int32"), 21: ("DT_QUINT8", "uint8"), 22: ("DT_QUINT16", "uint16"), 23: ("DT_RESOURCE", None),
    24: ("DT_STRING_REF", None), 25: ("DT_DUAL", None), 26: ("DT_VARIANT", None), 27: ("DT_BF16", "bfloat16"),
    28: ("DT_INT4", None), 29: ("DT_UINT1", None), 30: ("DT_INT2", None), 31: ("DT_UINT2", None), 32: ("DT_COMPLEX32", "complex32"),
    33: ("DT_HIFLOAT8", None), 34: ("DT_FLOAT8_E5M2", None), 35: ("DT_FLOAT8_E4M3FN", None), 36: ("DT_FLOAT8_E8M0", None),
    37: ("DT_FLOAT6_E3M2", None), 38: ("DT_FLOAT6_E2M3", None), 39: ("DT_FLOAT4_E2M1", None), 40: ("DT_FLOAT4_E1M2", None),
    41: ("DT_HIFLOAT4", None), 42: ("DT_HIFLOAT4_SCALE", None),
}  # fmt: skip
ITEMSIZE = {"bfloat16": 2, "complex32": 4}
FORMATS = {
    0: "NCHW", 1: "NHWC", 2: "ND", 3: "NC1HWC0", 4: "FRACTAL_Z", 5: "NC1C0HWPAD", 6: "NHWC1C0", 7: "FSR_NCHW", 8: "FRACTAL_DECONV",
    9: "C1HWNC0", 10: "FRACTAL_DECONV_TRANSPOSE", 11: "FRACTAL_DECONV_SP_STRIDE_TRANS", 12: "NC1HWC0_C04", 13: "FRACTAL_Z_C04",
    14: "CHWN", 15: "FRACTAL_DECONV_SP_STRIDE8_TRANS", 16: "HWCN", 17: "NC1KHKWHWC0", 18: "BN_WEIGHT", 19: "FILTER_HWCK",
    20: "HASHTABLE_LOOKUP_LOOKUPS", 21: "HASHTABLE_LOOKUP_KEYS", 22: "HASHTABLE_LOOKUP_VALUE", 23: "HASHTABLE_LOOKUP_OUTPUT",
    24: "HASHTABLE_LOOKUP_HITS", 25: "C1HWNCoC0", 26: "MD", 27: "NDHWC", 28: "FRACTAL_ZZ", 29: "FRACTAL_NZ", 30: "NCDHW",
    31: "DHWCN", 32: "NDC1HWC0", 33: "FRACTAL_Z_3D", 34: "CN", 35: "NC", 36: "DHWNC", 37: "FRACTAL_Z_3D_TRANSPOSE",
    38: "FRACTAL_ZN_LSTM", 39: "FRACTAL_Z_G", 40: "RESERVED", 41: "ALL", 42: "NULL", 43: "ND_RNN_BIAS", 44: "FRACTAL_ZN_RNN",
    45: "YUV", 46: "YUV_A", 47: "NCL", 48: "FRACTAL_Z_WINO", 49: "C1HWC0", 255: "MAX",
}  # fmt: skip
MAX_HEADER_BYTES = 256 << 20
# inputs, outputs, buffers and workspaces of one operator: real ones have tens, a grouped op a few
# thousand; a header listing more (each entry may be empty, so the file's size does not bound them)
# is refused before a row is made
MAX_TENSORS = 65_536


@dataclass
class TensorSpec:
    io: str  # input, output, buffer, workspace
    index: int
    data_type: int
    format: int
    shape: list[int]
    original_shape: list[int]
    size_bytes: int
    offset: int  # of the tensor bytes in the file

    @property
    def dtype_name(self) -> str:
        return DTYPES.get(self.data_type, (f"DT_{self.data_type}", None))[0]

    @property
    def numpy_dtype(self) -> str | None:
        return DTYPES.get(self.data_type, ("", None))[1]

    @property
    def format_name(self) -> str:
        return FORMATS.get(self.format, f"FORMAT_{self.format}")


@dataclass
class DumpFile:
    path: Path
    header_bytes: int
    op_name: str
    dump_time: int
    version: str
    tensors: list[TensorSpec] = field(default_factory=list)


def read_dump(path: Path) -> DumpFile:
    """The header and tensor layout of one dump file; InputError with the byte offset on any inconsistency."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise InputError(path, f"file of {size} bytes is too short for the 8-byte header length", offset=0)
            n = int.from_bytes(head, "little")
            if n > size - 8 or n > MAX_HEADER_BYTES:
                raise InputError(path, f"header length {n} is larger than the {size - 8} bytes after it", offset=0)
            raw = fh.read(n)
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror})") from None
    try:
        msg = DumpData.FromString(raw)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise InputError(path, f"DumpData protobuf header does not parse ({exc})", offset=8) from None
    groups = (("input", msg.input), ("output", msg.output), ("buffer", msg.buffer), ("workspace", msg.space))
    declared = sum(len(items) for _, items in groups)
    if declared > MAX_TENSORS:
        raise InputError(
            path,
            f"header lists {declared:,} tensors; no real operator has more than {MAX_TENSORS:,} (file not read)",
            offset=8,
        )
    dump = DumpFile(path, 8 + n, msg.op_name, int(msg.dump_time), msg.version)
    offset = 8 + n
    for io, items in groups:
        for i, t in enumerate(items):
            dtype = getattr(t, "data_type", 0)
            fmt = getattr(t, "format", 2)
            shape = list(t.shape.dim) if hasattr(t, "shape") else []
            orig = list(t.original_shape.dim) if hasattr(t, "original_shape") else []
            spec = TensorSpec(io, i, dtype, fmt, shape, orig, int(t.size), offset)
            if offset + spec.size_bytes > size:
                raise InputError(
                    path, f"{io} {i} needs {spec.size_bytes} bytes but the file ends at {size}", offset=offset
                )
            _check_size(path, spec)
            dump.tensors.append(spec)
            offset += spec.size_bytes
    if offset != size:
        raise InputError(
            path, f"header and tensor sizes add up to {offset} bytes, but the file has {size}", offset=offset
        )
    return dump


def _check_size(path: Path, spec: TensorSpec) -> None:
    np_dtype = spec.numpy_dtype
    if np_dtype is None or spec.io in ("buffer", "workspace"):
        return
    item = ITEMSIZE.get(np_dtype) or np.dtype(np_dtype).itemsize
    count = int(np.prod(spec.shape, dtype=np.int64)) if spec.shape else 1
    if count * item != spec.size_bytes:
        raise InputError(
            path,
            (
                f"{spec.io} {spec.index}: shape {spec.shape} of {spec.dtype_name} is "
                f"{count * item} bytes, header says {spec.size_bytes}"
            ),
            offset=spec.offset,
        )


class FileTensor:
    """A tensor's elements read from its dump file when asked for (``os.pread``), never memory-mapped:
    statistics read it block by block in bounded memory, ``np.asarray`` reads it whole. A file that
    shrinks while it is read (truncated by another process) is an InputError at the short read, where
    a memory map dies of SIGBUS (and left its staging folder and lock behind)."""

    def __init__(
        self, path: Path, offset: int, stored: np.dtype, per: int, dtype: np.dtype, shape: tuple[int, ...], count: int
    ) -> None:
        self.path, self.offset, self.stored, self.per = (
            path,
            offset,
            stored,
            per,
        )  # ``per`` stored values make one element
        self.dtype, self.shape, self.size = dtype, shape, count

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def reshape(self, *shape: Any) -> FileTensor | np.ndarray:
        want = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if tuple(want) in ((-1,), (self.size,)):  # the flat view: still read on demand
            return FileTensor(self.path, self.offset, self.stored, self.per, self.dtype, (self.size,), self.size)
        return np.asarray(self).reshape(*shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        if self.ndim == 1 and isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self.size)
            return self._read(start, max(start, stop))
        return np.asarray(self)[key]

    def tobytes(self) -> bytes:
        return np.asarray(self).tobytes()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self._read(0, self.size).reshape(self.shape)
        return a if dtype is None else a.astype(dtype)

    def _read(self, start: int, stop: int) -> np.ndarray:
        item = self.stored.itemsize * self.per
        want = (stop - start) * item
        buf = bytearray(want)
        view, got = memoryview(buf), 0
        at = self.offset + start * item
        with open(self.path, "rb", buffering=0) as fh:
            while got < want:
                n = os.preadv(fh.fileno(), [view[got:]], at + got)
                if n <= 0:
                    raise InputError(
                        self.path,
                        f"the file ends at {at + got} bytes while a tensor is read there (it changed while "
                        "it was read)",
                        offset=at + got,
                    )
                got += n
        raw = np.frombuffer(buf, self.stored)
        if self.stored == np.uint16 and self.dtype == np.float32:  # bfloat16: the high half of a float32
            return (raw.astype(np.uint32) << 16).view(np.float32)
        if self.per == 2:  # complex32: pairs of float16
            return raw.astype(np.float32).view(np.complex64)
        return raw


def tensor_array(path: Path, spec: TensorSpec) -> np.ndarray | FileTensor | None:
    """The tensor with its shape, read from the file on demand (:class:`FileTensor`; ``np.asarray``
    gives the array), or None for dtypes kept raw."""
    np_dtype = spec.numpy_dtype
    if np_dtype is None:
        return None
    if spec.size_bytes == 0:
        return np.zeros(spec.shape or (0,), np.float32 if np_dtype in ("bfloat16", "complex32") else np_dtype)
    shape = tuple(spec.shape) if spec.shape else ()
    if np_dtype == "bfloat16":
        stored, per, dtype = np.dtype(np.uint16), 1, np.dtype(np.float32)
    elif np_dtype == "complex32":
        stored, per, dtype = np.dtype(np.float16), 2, np.dtype(np.complex64)
    else:
        stored = dtype = np.dtype(np_dtype)
        per = 1
    count = spec.size_bytes // (stored.itemsize * per)
    return FileTensor(path, spec.offset, stored, per, dtype, shape, count)


# -- formats ---------------------------------------------------------------------------------


def nc1hwc0_to_nchw(a: np.ndarray, channels: int | None = None) -> np.ndarray:
    """(N, C1, H, W, C0) -> (N, C, H, W), dropping the channel padding beyond ``channels``."""
    n, c1, h, w, c0 = a.shape
    out = a.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)
    return out[:, :channels] if channels is not None else out


def fractal_nz_to_nd(a: np.ndarray, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    """(..., W1, H1, H0, W0) -> (..., H, W): the matrix is tiled in H0 x W0 fractals, column-major over tiles."""
    *batch, w1, h1, h0, w0 = a.shape
    nb = len(batch)
    out = a.transpose(*range(nb), nb + 1, nb + 2, nb, nb + 3).reshape(*batch, h1 * h0, w1 * w0)
    return out[..., : rows if rows is not None else h1 * h0, : cols if cols is not None else w1 * w0]


def to_original_shape(a: np.ndarray, spec: TensorSpec) -> tuple[np.ndarray, str]:
    """The tensor in its framework layout where the conversion is well defined; else as stored."""
    a = np.asarray(a)
    fmt = spec.format_name
    orig = spec.original_shape
    if fmt == "NC1HWC0" and a.ndim == 5:
        return nc1hwc0_to_nchw(a, orig[1] if len(orig) == 4 else None), "NCHW"
    if fmt == "FRACTAL_NZ" and a.ndim >= 4:
        if len(orig) >= 2:
            return fractal_nz_to_nd(a, orig[-2], orig[-1]).reshape(orig), "ND"
        return fractal_nz_to_nd(a), "ND"
    return a, fmt


# -- names -----------------------------------------------------------------------------------

_TS = re.compile(r"^[0-9]{10,19}$")
_INT64_MAX = (1 << 63) - 1


@dataclass
class DumpName:
    op_type: str
    op_name: str
    task_id: int | None
    stream_id: int | None
    timestamp: int | None
    context_id: int | None = None


def parse_dump_name(name: str) -> DumpName | None:
    """``{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`` (FFTS+: ``.FFTSPLUS.{ctx}.{thread}.{device}`` after
    it)."""
    parts = name.split(".")
    ctx = None
    if len(parts) >= 9 and parts[-4].upper() == "FFTSPLUS":
        ctx = small_int(parts[-3], 0, _INT64_MAX)
        parts = parts[:-4]
    if len(parts) < 5:
        return None
    # ids are ASCII digits that fit the table's int64 columns; anything else is not a dump name
    task, stream, ts = (small_int(p, 0, _INT64_MAX) for p in parts[-3:])
    if task is None or stream is None or ts is None or not _TS.match(parts[-1]):
        return None
    return DumpName(parts[0], ".".join(parts[1:-3]), task, stream, ts, ctx)
