"""Find profiler output inside the paths a user gives: which folders are profiles, which files are what.

A *unit* is one profile of one process/rank: a torch_npu ``*_ascend_pt`` folder, an msprof
``PROF_*`` folder (one unit per ``device_N`` in the CANN <= 7 layout), or a single file given
directly. A parent folder holding many units yields them all, each becoming a rank partition.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

# file kind -> file name pattern (matched on the name only)
KINDS: dict[str, re.Pattern[str]] = {
    "kernel_details": re.compile(r"^kernel_details(_\d+)?\.csv$"),
    "op_summary": re.compile(r"^op_summary(_slice_\d+)?(_\d+)*\.csv$"),
    "task_time": re.compile(r"^task_time(_slice_\d+)?(_\d+)*\.csv$"),
    "op_statistic": re.compile(r"^op_statistic(_slice_\d+)?(_\d+)*\.csv$"),
    "api_statistic": re.compile(r"^api_statistic(_slice_\d+)?(_\d+)*\.csv$"),
    "step_trace": re.compile(r"^step_trace(_time)?(_slice_\d+)?(_\d+)*\.csv$"),
    "trace": re.compile(r"^(trace_view|msprof(_slice_\d+)?(_\d+)*|task_time(_slice_\d+)?(_\d+)*)\.json$"),
    "db": re.compile(r"^(msprof_\d+|ascend_pytorch_profiler(_\d+)?)\.db$"),
    "communication_matrix": re.compile(r"^communication_matrix\.json$"),
    "communication": re.compile(r"^communication\.json$"),
}
# files we recognise and list in the manifest but do not read into tables yet
KNOWN_UNREAD = re.compile(
    r"^(npu_mem|npu_module_mem|memory_record|operator_memory|operator_details|l2_cache|communication"
    r"|communication_matrix|communication_statistic|hccl_statistic|fusion_op|aicpu|msprof_tx|ai_core_utilization"
    r"|data_preprocess|analysis|step_trace)[\w]*\.(csv|json|db)$"
)
MAX_DEPTH = 8


@dataclass
class Unit:
    """One profile: its folder, its rank when known, and its data files by kind."""

    path: Path
    kind: str  # torch_npu, msprof, file
    rank: int | None = None
    files: dict[str, list[Path]] = field(default_factory=dict)
    unread: list[Path] = field(default_factory=list)

    def add(self, path: Path) -> bool:
        kind = classify(path.name)
        if kind is None:
            if KNOWN_UNREAD.match(path.name):
                self.unread.append(path)
            return False
        self.files.setdefault(kind, []).append(path)
        return True


def classify(name: str) -> str | None:
    for kind, pattern in KINDS.items():
        if pattern.match(name):
            return kind
    return None


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file())
    except OSError:
        return []


def _torch_rank(folder: Path) -> int | None:
    for info in sorted(folder.glob("profiler_info*.json")):
        try:
            data = json.loads(info.read_text(encoding="utf-8"))
            rank = data.get("rank_id")
            if rank is not None and str(rank).lstrip("-").isdigit() and int(rank) >= 0:
                return int(rank)
        except (OSError, ValueError, AttributeError):
            pass
        m = re.match(r"profiler_info_(\d+)\.json$", info.name)
        if m:
            return int(m.group(1))
    return None


def _torch_unit(folder: Path) -> Unit:
    unit = Unit(folder, "torch_npu", _torch_rank(folder))
    for f in _files(folder / "ASCEND_PROFILER_OUTPUT"):
        unit.add(f)
    return unit


def _msprof_units(folder: Path) -> list[Unit]:
    out = folder / "mindstudio_profiler_output"
    if out.is_dir():
        unit = Unit(folder, "msprof")
        for f in _files(out) + _files(folder):
            unit.add(f)
        return [unit]
    units = []
    for dev in sorted(folder.glob("device_*")):
        m = re.match(r"device_(\d+)$", dev.name)
        if not m or not dev.is_dir():
            continue
        unit = Unit(dev, "msprof", int(m.group(1)))
        for sub in ("summary", "timeline"):
            for f in _files(dev / sub):
                unit.add(f)
        if unit.files:
            units.append(unit)
    if not units:
        unit = Unit(folder, "msprof")
        for f in _files(folder):
            unit.add(f)
        units.append(unit)
    return units


def is_torch_folder(folder: Path) -> bool:
    return folder.name.endswith("_ascend_pt") or (folder / "ASCEND_PROFILER_OUTPUT").is_dir()


def is_msprof_folder(folder: Path) -> bool:
    return folder.name.startswith("PROF_") or (folder / "mindstudio_profiler_output").is_dir()


def discover(path: Path, skipped: list[str]) -> list[Unit]:
    """Units under ``path``. Unreadable folders and symlink loops are noted in ``skipped``."""
    if path.is_file():
        unit = Unit(path, "file")
        if not unit.add(path):
            skipped.append(f"{path}: not a profiler file npudiag reads (expected {', '.join(KINDS)})")
            return []
        return [unit]
    units: list[Unit] = []
    seen: set[tuple[int, int]] = set()
    _walk(path, 0, units, seen, skipped)
    return units


def _walk(folder: Path, depth: int, units: list[Unit], seen: set[tuple[int, int]], skipped: list[str]) -> None:
    try:
        st = folder.stat()
    except OSError as exc:
        skipped.append(f"{folder}: cannot read folder ({exc.strerror})")
        return
    key = (st.st_dev, st.st_ino)
    if key in seen:
        skipped.append(f"{folder}: already visited (symlink loop), skipped")
        return
    seen.add(key)
    if is_torch_folder(folder):
        units.append(_torch_unit(folder))
        return
    if is_msprof_folder(folder):
        units.extend(_msprof_units(folder))
        return
    loose = Unit(folder, "msprof")
    for f in _files(folder):
        loose.add(f)
    if loose.files:
        units.append(loose)
        return
    if depth >= MAX_DEPTH:
        skipped.append(f"{folder}: deeper than {MAX_DEPTH} levels, not searched")
        return
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError as exc:
        skipped.append(f"{folder}: cannot list folder ({exc.strerror})")
        return
    for child in children:
        if child.name.startswith("."):
            continue
        _walk(child, depth + 1, units, seen, skipped)


def assign_ranks(units: list[Unit]) -> None:
    """Give every unit a distinct rank: its own when known, else the next free number."""
    used = {u.rank for u in units if u.rank is not None}
    taken: set[int] = set()
    nxt = 0
    for u in units:
        if u.rank is not None and u.rank not in taken:
            taken.add(u.rank)
            continue
        while nxt in used or nxt in taken:
            nxt += 1
        u.rank = nxt
        taken.add(nxt)
