"""msprof's ``info.json.N`` (``PROF_*/device_N/``): what the device is made of.

The file is one JSON object; ``DeviceInfo`` is a list with one object per device, whose
``ai_core_num`` (AI Cores, the cube units), ``aiv_num`` (vector cores; 0 on chips without separate
ones), ``ai_cpu_core_num`` and ``aic_frequency`` (MHz, written as text) are read. A host's
``info.json`` has no ``DeviceInfo``: it gives no rows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from npudiag.errors import InputError
from npudiag.profiling.formats.registry import FileTables, Format, register
from npudiag.safeio import load_json
from npudiag.schemas import DEVICE_INFO

_MAX_BYTES = 16 << 20


def _int(path: Path, d: dict, key: str) -> int | None:
    v = d.get(key)
    if v is None or v == "":
        return None
    if isinstance(v, bool) or not isinstance(v, (int, str)) or not str(v).strip().isdigit() or len(str(v).strip()) > 9:
        raise InputError(path, f"DeviceInfo {key!r} is {v!r}, expected a whole number")
    return int(v)


def _mhz(v: object) -> float | None:
    """``aic_frequency`` ("1000", 1800, "1800.0"): a clock in MHz, None where it is none (not needed
    by any rule, so an odd value is not an error)."""
    try:
        f = float(v) if isinstance(v, (int, float, str)) and not isinstance(v, bool) else None
    except ValueError:
        return None
    return f if f is not None and 0 < f < 1e6 else None


def read_device_info(path: Path, rank: int | None) -> pa.Table:
    data = load_json(path, _MAX_BYTES)
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object (msprof's info.json)")
    devices = data.get("DeviceInfo") or []
    if not isinstance(devices, list):
        raise InputError(path, "'DeviceInfo' is not a list")
    rows = []
    for d in devices:
        if not isinstance(d, dict):
            raise InputError(path, "a 'DeviceInfo' entry is not an object")
        freq = _mhz(d.get("aic_frequency"))
        rows.append(
            {
                "rank": rank,
                "device_id": _int(path, d, "id"),
                "ai_core_num": _int(path, d, "ai_core_num"),
                "aiv_num": _int(path, d, "aiv_num"),
                "ai_cpu_core_num": _int(path, d, "ai_cpu_core_num"),
                "aic_frequency_mhz": None if freq is None else float(freq),
            }
        )
    return pa.Table.from_pylist(rows, schema=DEVICE_INFO) if rows else DEVICE_INFO.empty_table()


register(
    Format(
        "device_info",
        re.compile(r"^info\.json\.\d+$"),
        lambda path, rank: FileTables({"device_info": read_device_info(path, rank)}),
        ("device_info",),
        append=True,
    )
)
