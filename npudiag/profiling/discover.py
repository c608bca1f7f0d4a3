"""Find profiler output inside the paths a user gives: which folders are profiles, which files are what.

A *unit* is one profile of one process/rank: a torch_npu ``*_ascend_pt`` folder, an msprof
``PROF_*`` folder (one unit per ``device_N`` in the CANN <= 7 layout), or a single file given
directly. A parent folder holding many units yields them all, each becoming a rank partition.
"""

from __future__ import annotations

import gzip
import os
import re
import shlex
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from npudiag.errors import InputError
from npudiag.profiling.formats.registry import formats
from npudiag.safeio import inside, is_regular, load_json, small_int

# files we recognise and list in the manifest but do not read into tables yet
KNOWN_UNREAD = re.compile(
    r"^(operator_details|l2_cache|communication"
    r"|communication_statistic|hccl_statistic|fusion_op|aicpu|msprof_tx|ai_core_utilization"
    r"|data_preprocess|cluster_|hbm|llc|pcie|hccs|nic|roce|soc_pmu|dvpp|ddr|cpu_usage|sys_mem|host_)"
    r"[\w]*\.(csv|json|db)$"
)
# SQLite's own files beside a .db it has open (shared memory, write-ahead log, rollback journal): part of
# the .db, no input
SQLITE_SIDECAR = re.compile(r"\.db-(shm|wal|journal)$")
MAX_DEPTH = 8
DEVICE_DIR = re.compile(r"device_([0-9]{1,9})")  # msprof's device_N folders (ASCII digits, bounded)


@dataclass
class Unit:
    """One profile: its folder, its rank when known, and its data files by kind."""

    path: Path
    kind: str  # torch_npu, msprof, file
    rank: int | None = None
    files: dict[str, list[Path]] = field(default_factory=dict)
    unread: list[Path] = field(default_factory=list)
    # raw data that a tool must turn into readable files first: one line naming the command, or None
    unexported: str | None = None

    # files in the profile that match no format by name or content, with the reason
    not_read: list[tuple[Path, str]] = field(default_factory=list)
    declared_rank: int | None = (
        None  # the rank its own records declare (``rank`` may be given one when it declares none)
    )

    def add(self, path: Path, *, sniff: bool = False) -> bool:
        """File ``path`` under its kind; with ``sniff``, a CSV or JSON of unknown name is recognised by
        its content (a CSV's header, a JSON's Chrome-trace shape), and one that fits nothing is noted."""
        kind = classify(path.name)
        if kind is None and SQLITE_SIDECAR.search(path.name):
            return False
        if kind is None and KNOWN_UNREAD.match(path.name):
            self.unread.append(path)
            return False
        lower = path.name.lower()
        if kind is None and sniff and lower.endswith(".csv"):
            kind = kind_by_header(path)
        if kind is None and sniff and lower.endswith((".json", ".json.gz")):
            kind = kind_by_content(path)
        if kind is None:
            if sniff:
                self.not_read.append((path, "neither its name nor its content matches a format npudiag reads"))
            return False
        self.files.setdefault(kind, []).append(path)
        return True


def classify(name: str) -> str | None:
    """The kind of a file by its name alone (the registry's formats, in order)."""
    for kind, fmt in formats().items():
        if fmt.name.match(name):
            return kind
    return None


def kind_by_header(path: Path) -> str | None:
    """The kind of a CSV from its header line (the first 1 MiB at most), None when it fits none."""
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as fh:
            first = fh.readline(1 << 20)
        names = {n.strip().strip('"') for n in first.decode("utf-8-sig", "replace").split(",")}
    except OSError:
        return None
    for kind, fmt in formats().items():
        if any(need <= names for need in fmt.headers):
            return kind
    return None


# the start of a Chrome trace: an array of event objects, or an object with a traceEvents array;
# an event object names its phase ("ph")
_TRACE_START = re.compile(rb'^\s*(\[\s*\{|\{\s*"traceEvents"\s*:\s*\[)')
_TRACE_EVENT = re.compile(rb'"ph"\s*:\s*"[A-Za-z]"')


def kind_by_content(path: Path) -> str | None:
    """The format that reads a JSON file that is a Chrome trace whatever its name (a renamed trace_view.json or
    msprof_*.json), from its first 64 KiB; None otherwise."""
    try:
        if not path.is_file():
            return None
        with gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except (OSError, EOFError, zlib.error):  # a damaged compressed file is no trace
        return None
    head = head.removeprefix(b"\xef\xbb\xbf")
    for kind, fmt in formats().items():
        if fmt.content is not None and fmt.content(head):
            return kind
    if not (_TRACE_START.match(head) and _TRACE_EVENT.search(head)):
        return None
    return next((kind for kind, fmt in formats().items() if fmt.trace_content), None)


@dataclass
class Scope:
    """What a search may open: files under ``root`` (links out of it only with ``follow``), regular
    files only. What it leaves out is noted, one line per file."""

    root: Path
    follow: bool = False
    notes: list[str] = field(default_factory=list)

    def allows(self, p: Path) -> bool:
        if p.is_symlink() and not self.follow and not inside(p, self.root):
            self.notes.append(
                f"{p}: a link to {_link_target(p)}, outside {self.root}; not followed (--follow-symlinks reads it)"
            )
            return False
        return True


def _link_target(p: Path) -> str:
    """Where the link ``p`` points, as far as it can be told (a link into /proc may not be readable)."""
    try:
        return os.path.realpath(p)
    except OSError:
        try:
            return os.readlink(p)
        except OSError as exc:
            return f"a place that cannot be read ({exc.strerror})"


def _files(folder: Path, scope: Scope) -> list[Path]:
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    out = []
    for p in entries:
        try:
            if not scope.allows(p):
                continue
            if is_regular(p):
                out.append(p)
            elif p.exists() and not p.is_dir():
                scope.notes.append(f"{p}: not a regular file (a FIFO, device or socket); not read")
        except OSError as exc:
            scope.notes.append(f"{p}: cannot read ({exc.strerror or exc}); not read")
    return out


def _torch_rank(folder: Path, scope: Scope) -> int | None:
    for info in sorted(folder.glob("profiler_info*.json")):
        if not scope.allows(info):
            continue
        try:
            data = load_json(info, 1 << 20)
            rank = data.get("rank_id") if isinstance(data, dict) else None
            if small_int(rank) is not None:
                return small_int(rank)
        except InputError as exc:
            scope.notes.append(exc.one_line())
        m = re.match(r"profiler_info_([0-9]{1,9})\.json$", info.name)
        if m:
            return int(m.group(1))
    return None


def _device_info(unit: Unit, devices: list[Path], scope: Scope) -> None:
    """Add the ``info.json.N`` of these ``device_N`` folders (the only file read from them here)."""
    for dev in devices:
        if dev.is_dir() and scope.allows(dev):
            for f in _files(dev, scope):
                if formats()["device_info"].name.match(f.name):
                    unit.add(f)


def _raw_folders(folder: Path, pattern: str) -> list[str]:
    """The raw-data folders (``host/data``, ``device_N/data``) under ``folder`` that hold a file."""
    out = []
    for d in sorted(folder.glob(pattern)):
        try:
            if d.is_dir() and any(True for _ in os.scandir(d)):
                out.append(d.relative_to(folder).as_posix())
        except OSError:
            continue
    return out


def msprof_export_argv(msprof: str, prof: Path) -> list[str]:
    """msprof's export of a collected PROF_* folder (it writes mindstudio_profiler_output inside)."""
    return [msprof, "--export=on", f"--output={prof}"]


def torch_parse_argv(python: str, folder: Path) -> list[str]:
    """torch_npu's offline parse: ``analyse`` takes the folder that holds the ``*_ascend_pt`` folders."""
    return [
        python,
        "-c",
        f"from torch_npu.profiler.profiler import analyse; analyse(profiler_path={str(folder.parent)!r})",
    ]


def msprof_export_command(prof: Path) -> str:
    return shlex.join(msprof_export_argv("msprof", prof))


def torch_parse_command(folder: Path) -> str:
    return shlex.join(torch_parse_argv("python3", folder))


def _torch_unit(folder: Path, scope: Scope) -> Unit:
    unit = Unit(folder, "torch_npu", _torch_rank(folder, scope))
    for f in _files(folder / "ASCEND_PROFILER_OUTPUT", scope):
        unit.add(f, sniff=True)
    _device_info(unit, sorted(folder.glob("PROF_*/device_*")), scope)
    if not any(k != "device_info" for k in unit.files):
        raw = [d for d in ("FRAMEWORK",) if (folder / d).is_dir()] + _raw_folders(folder, "PROF_*/*/data")
        if raw:
            unit.unexported = (
                "collected but torch_npu's offline parse never ran (raw data in "
                f"{', '.join(raw[:4])}; no ASCEND_PROFILER_OUTPUT): "
                f"run {torch_parse_command(folder)} where torch_npu is installed, or npudiag analyze --export"
            )
    return unit


def _msprof_units(folder: Path, scope: Scope) -> list[Unit]:
    out = folder / "mindstudio_profiler_output"
    if out.is_dir() and scope.allows(out):
        unit = Unit(folder, "msprof")
        for f in _files(out, scope) + _files(folder, scope):
            unit.add(f, sniff=True)
        _device_info(unit, sorted(folder.glob("device_*")), scope)
        return [unit]
    units = []
    for dev in sorted(folder.glob("device_*")):
        m = DEVICE_DIR.fullmatch(dev.name)
        if not m or not dev.is_dir() or not scope.allows(dev):
            continue
        unit = Unit(dev, "msprof", int(m.group(1)))
        for sub in ("summary", "timeline"):
            for f in _files(dev / sub, scope):
                unit.add(f, sniff=True)
        if unit.files:
            _device_info(unit, [dev], scope)
            units.append(unit)
    if not units:
        unit = Unit(folder, "msprof")
        for f in _files(folder, scope):
            unit.add(f, sniff=True)
        raw = _raw_folders(folder, "host/data") + _raw_folders(folder, "device_*/data")
        if raw and not any(k != "device_info" for k in unit.files):
            unit.unexported = (
                f"collected but never exported (raw data in {', '.join(raw[:4])}; no mindstudio_profiler_output): "
                f"run {msprof_export_command(folder)}, or npudiag analyze --export"
            )
        units.append(unit)
    return units


def is_torch_folder(folder: Path) -> bool:
    return folder.name.endswith("_ascend_pt") or (folder / "ASCEND_PROFILER_OUTPUT").is_dir()


def is_msprof_folder(folder: Path) -> bool:
    return folder.name.startswith("PROF_") or (folder / "mindstudio_profiler_output").is_dir()


def discover(path: Path, skipped: list[str], follow_symlinks: bool = False) -> list[Unit]:
    """Units under ``path``. Unreadable folders, symlink loops, links out of ``path`` (unless
    ``follow_symlinks``) and files that are not regular are noted in ``skipped``."""
    scope = Scope(path if path.is_dir() else path.parent, follow_symlinks, skipped)
    if path.exists() and not path.is_dir() and not is_regular(path):
        skipped.append(f"{path}: not a regular file (a FIFO, device or socket); not read")
        return []
    if path.is_file():
        unit = Unit(path, "file")
        if not unit.add(path, sniff=True):
            skipped.append(
                f"{path}: not a profiler file npudiag reads: neither its name nor its header matches a known format "
                "(kernel_details / op_summary / task_time / op_statistic / api_statistic "
                "/ step_trace CSV, trace JSON, .db)"
            )
            return []
        return [unit]
    units: list[Unit] = []
    seen: set[tuple[int, int]] = set()
    _walk(path, 0, units, seen, scope)
    return units


def _walk(folder: Path, depth: int, units: list[Unit], seen: set[tuple[int, int]], scope: Scope) -> None:
    skipped = scope.notes
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
        units.append(_torch_unit(folder, scope))
        return
    if is_msprof_folder(folder):
        units.extend(_msprof_units(folder, scope))
        return
    loose = Unit(folder, "msprof")
    for f in _files(folder, scope):
        loose.add(f, sniff=True)
    if loose.files:
        units.append(loose)
        return
    if depth >= MAX_DEPTH:
        skipped.append(f"{folder}: deeper than {MAX_DEPTH} levels, not searched")
        return
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        skipped.append(f"{folder}: cannot list folder ({exc.strerror})")
        return
    for child in entries:
        try:
            if child.name.startswith(".") or not child.is_dir() or not scope.allows(child):
                continue
        except OSError as exc:  # a link into /proc, a folder of another user
            if scope.allows(child):
                skipped.append(f"{child}: cannot read ({exc.strerror or exc}); skipped")
            continue
        _walk(child, depth + 1, units, seen, scope)


_STAMP = re.compile(r"_([0-9]{14,17})(?:_|$)")  # PROF_000001_<yyyymmddHHMMSSfff>_..., <worker>_<pid>_<stamp>_ascend_pt


def collection_folder(u: Unit) -> Path:
    """The folder one collection wrote: the unit's own, or for a CANN <= 7 ``PROF_*/device_N`` unit its PROF_*
    folder."""
    return u.path.parent if DEVICE_DIR.fullmatch(u.path.name) else u.path


def _run_identity(u: Unit) -> tuple[Path, str, object] | None:
    """Where a unit was collected and what it profiled: (collect folder, kind, rank or devices). Two
    units with one identity are two runs of the same process, not two ranks."""
    if u.kind == "torch_npu":
        return (u.path.parent, u.kind, u.rank) if u.rank is not None else None
    if u.kind != "msprof":
        return None
    folder = collection_folder(u)
    if folder != u.path:  # CANN <= 7: the unit is PROF_*/device_N
        return (folder.parent, u.kind, (u.path.name,))
    try:
        devices = tuple(sorted(d.name for d in u.path.glob("device_*") if DEVICE_DIR.fullmatch(d.name) and d.is_dir()))
    except OSError:
        return None
    return (u.path.parent, u.kind, devices) if devices else None


def _collected_at(u: Unit) -> tuple[str, float]:
    folder = collection_folder(u)
    m = _STAMP.search(folder.name.removesuffix("_ascend_pt"))
    try:
        mtime = folder.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (m.group(1).ljust(17, "0") if m else "", mtime)


def _collection_span(u: Unit) -> tuple[float, float] | None:
    """When a PROF_* folder's collection began and ended (epoch s): msprof's start_info / end_info
    (collectionTimeBegin / End, µs), else the time in its name and the folder's last change."""
    folder = collection_folder(u)
    begins, ends = [], []
    for pattern, key, out in (
        ("*/start_info.[0-9]*", "collectionTimeBegin", begins),
        ("*/end_info.[0-9]*", "collectionTimeEnd", ends),
    ):
        for f in sorted(folder.glob(pattern))[:16]:
            if f.name.endswith(".done"):
                continue
            try:
                v = load_json(f, 1 << 16).get(key)
                out.append(int(str(v)) / 1e6)
            except (InputError, AttributeError, ValueError, TypeError):
                continue
    if begins and ends:
        return min(begins), max(ends)
    m = _STAMP.search(folder.name)
    try:
        from datetime import datetime

        begin = datetime.strptime(m.group(1)[:14], "%Y%m%d%H%M%S").timestamp() if m else None
        end = folder.stat().st_mtime
    except (OSError, ValueError, OverflowError):
        return None
    return (begin, end) if begin is not None else None


def _one_after_another(group: list[Unit]) -> bool:
    """Whether the collections ran one after the other (repeated runs), not side by side (the ranks
    of one job, e.g. processes that each see their own card as device 0)."""
    spans = [_collection_span(u) for u in group]
    if any(sp is None for sp in spans):
        return False
    spans.sort()
    return all(b[0] >= a[1] - 1.0 for a, b in zip(spans, spans[1:]))


def run_groups(units: list[Unit]) -> list[list[Unit]]:
    """Units that are repeated runs of one process (collected side by side, the same rank or the
    same devices; for msprof folders, collected one after the other), each group oldest first."""
    groups: dict[tuple, list[Unit]] = {}
    for u in units:
        key = _run_identity(u)
        if key is not None:
            groups.setdefault(key, []).append(u)
    out = []
    for key, g in groups.items():
        if len(g) > 1 and (key[1] != "msprof" or _one_after_another(g)):
            out.append(sorted(g, key=_collected_at))
    return out


def duplicate_ranks(units: list[Unit]) -> dict[int, list[Unit]]:
    """Ranks that more than one unit declares, with those units."""
    by_rank: dict[int, list[Unit]] = {}
    for u in units:
        if u.rank is not None:
            by_rank.setdefault(u.rank, []).append(u)
    return {r: us for r, us in sorted(by_rank.items()) if len(us) > 1}


def assign_ranks(units: list[Unit]) -> list[str]:
    """Give every unit a distinct rank: its own when it declares one, else the next free number.

    A rank declared by several units stays with the first; the others get free numbers, and the
    returned warnings name them (merging their data under one rank would mix two processes)."""
    dups = duplicate_ranks(units)
    used = {u.rank for u in units if u.rank is not None}
    taken: set[int] = set()
    nxt = 0
    for u in units:
        if u.declared_rank is None:
            u.declared_rank = u.rank
        if u.rank is not None and u.rank not in taken:
            taken.add(u.rank)
            continue
        while nxt in used or nxt in taken:
            nxt += 1
        u.rank = nxt
        taken.add(nxt)
    warnings = []
    for rank, us in dups.items():
        moved = "; ".join(f"{u.path} is read as rank {u.rank}" for u in us[1:])
        warnings.append(f"rank {rank} is declared by {len(us)} folders; {us[0].path} keeps it, {moved}")
    return warnings
