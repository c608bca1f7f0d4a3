"""Device log clocks: the time zone a device log is written in, told from its own file name.

A device's logs (``slog/dev-os-N/device-N/device-N_<yyyymmddHHMMSSfff>.log`` in an msnpureport export)
are stamped by the device's clock, which often runs in UTC while the host writes local time: the
2020 msnpureport export in the corpus shows a device fault at 17:10 and the host's report of the same
fault at 01:10 the next day. The file's name carries the time it was created in the host's clock,
so the name's time minus the file's first record is the offset between the two clocks, up to the
moment between creating the file and writing its first line. Where that difference is a whole time
zone (a multiple of 15 minutes, at least 30 minutes, to within 2 minutes) the file's records are
moved by it; smaller differences (a file created seconds before its first line) are left alone.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import PurePosixPath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_STAMP = re.compile(r"_([0-9]{17})\.log$")
ZONE = timedelta(minutes=15)
TOLERANCE = timedelta(minutes=2)


def file_offsets(first_records: dict[str, datetime]) -> dict[str, dict]:
    """For each log file whose name's time and first record differ by a whole time zone: the offset
    (to add to its records to get the host's clock) and the evidence."""
    out = {}
    for file, first in first_records.items():
        m = _STAMP.search(PurePosixPath(file.replace("!", "/")).name)
        if m is None or first is None:
            continue
        try:
            named = datetime.strptime(m.group(1)[:14], "%Y%m%d%H%M%S") + timedelta(milliseconds=int(m.group(1)[14:]))
        except ValueError:
            continue
        diff = named - first
        zones = round(diff / ZONE)
        offset = zones * ZONE
        if abs(offset) >= timedelta(minutes=30) and abs(diff - offset) <= TOLERANCE:
            out[file] = {"file": file, "offset_s": int(offset.total_seconds()), "named": named, "first_record": first}
    return out


def to_host_clock(events: pa.Table, offsets: dict[str, dict]) -> pa.Table:
    """``events`` with the timestamps of the files in ``offsets`` moved into the host's clock."""
    if not offsets or events.num_rows == 0:
        return events
    files = pa.array(list(offsets), pa.string())
    shift_us = np.array([offsets[f]["offset_s"] * 1_000_000 for f in offsets] + [0], np.int64)
    pos = pc.fill_null(pc.index_in(events["file"], value_set=files), len(offsets)).to_numpy(zero_copy_only=False)
    delta = pa.array(shift_us[pos], pa.duration("us"))
    i = events.schema.get_field_index("timestamp")
    moved = pc.add(events["timestamp"], delta)
    return events.set_column(i, events.schema.field(i), moved.cast(events.schema.field(i).type))


def describe(offsets: dict[str, dict]) -> str | None:
    """One line for the user: which files were moved and by how much."""
    if not offsets:
        return None
    by = sorted({o["offset_s"] for o in offsets.values()})
    shown = ", ".join(f"{'+' if s >= 0 else '-'}{abs(s) // 3600}:{abs(s) % 3600 // 60:02d}" for s in by)
    names = ", ".join(PurePosixPath(f).name for f in list(offsets)[:3]) + (
        f" and {len(offsets) - 3} more" if len(offsets) > 3 else ""
    )
    return (
        f"device clock: {len(offsets)} device log file(s) are written {shown} h from the "
        "host's clock (their file names, "
        f"stamped in host time, against their first records): their records are shown in host time ({names})"
    )
