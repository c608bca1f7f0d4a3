"""Write CANN dump files from numpy arrays, with the same DumpData schema npudiag reads.

For tests and benchmarks: real-layout files (8-byte LE header length, DumpData header, tensor
bytes in input/output order) and a model-dump tree
``{dump_path}/{time}/{device_id}/{model_name}/{model_id}/{iteration}/{op_type}.{op_name}.{task}.{stream}.{timestamp}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npudiag.dump.formats.dump_file import DTYPES, FORMATS
from npudiag.dump.formats.dump_proto import DumpData

_BY_NUMPY = {v: k for k, (_, v) in sorted(DTYPES.items(), reverse=True) if v}
_FORMAT_IDS = {v: k for k, v in FORMATS.items()}


@dataclass
class Tensor:
    data: np.ndarray
    dtype: str | None = None  # "bfloat16" to store float32 data as BF16; else from data.dtype
    format: str = "ND"
    original_shape: tuple[int, ...] | None = None

    def raw(self) -> tuple[int, bytes]:
        if self.dtype == "bfloat16":
            bits = np.ascontiguousarray(self.data, np.float32).view(np.uint32) >> 16
            return 27, bits.astype("<u2").tobytes()
        dt = self.data.dtype
        return _BY_NUMPY[dt.name], np.ascontiguousarray(self.data).astype(dt.newbyteorder("<")).tobytes()


def write_dump_file(path: Path, op_name: str, inputs: list[Tensor], outputs: list[Tensor], dump_time: int = 0) -> Path:
    msg = DumpData(version="2.0", dump_time=dump_time, op_name=op_name)
    payload = []
    for group, items in ((msg.input, inputs), (msg.output, outputs)):
        for t in items:
            dtype, data = t.raw()
            entry = group.add(data_type=dtype, format=_FORMAT_IDS[t.format], size=len(data))
            entry.shape.dim.extend(int(d) for d in t.data.shape)
            if t.original_shape is not None:
                entry.original_shape.dim.extend(t.original_shape)
            payload.append(data)
    header = msg.SerializeToString()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(len(header).to_bytes(8, "little"))
        fh.write(header)
        for data in payload:
            fh.write(data)
    return path


def dump_file_name(op_type: str, op_name: str, task_id: int, stream_id: int, timestamp: int) -> str:
    safe = op_name.replace("/", "_").replace("\\", "_").replace(" ", "_")
    return f"{op_type}.{safe}.{task_id}.{stream_id}.{timestamp:016d}"


def model_dump_dir(
    root: Path,
    model: str = "resnet50",
    device: int = 0,
    model_id: int = 1,
    iteration: int = 0,
    time: str = "20260605155111",
) -> Path:
    return (
        root
        / time
        / str(device)
        / model.replace(".", "_").replace("/", "_").replace(" ", "_")
        / str(model_id)
        / str(iteration)
    )


def nchw_to_nc1hwc0(a: np.ndarray, c0: int = 16) -> np.ndarray:
    """NCHW -> NC1HWC0 as the device stores it (channels zero-padded to C1 x C0): the inverse of
    ``dump_file.nc1hwc0_to_nchw``, to write dump files in that layout."""
    n, c, h, w = a.shape
    c1 = -(-c // c0)
    pad = np.zeros((n, c1 * c0, h, w), a.dtype)
    pad[:, :c] = a
    return pad.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2).copy()


def nd_to_fractal_nz(a: np.ndarray, h0: int = 16, w0: int = 16) -> np.ndarray:
    """(..., H, W) -> (..., W1, H1, H0, W0), zero-padded to whole fractals: the inverse of
    ``dump_file.fractal_nz_to_nd``, to write dump files in that layout."""
    *batch, h, w = a.shape
    h1, w1 = -(-h // h0), -(-w // w0)
    pad = np.zeros((*batch, h1 * h0, w1 * w0), a.dtype)
    pad[..., :h, :w] = a
    nb = len(batch)
    return pad.reshape(*batch, h1, h0, w1, w0).transpose(*range(nb), nb + 2, nb, nb + 1, nb + 3).copy()
