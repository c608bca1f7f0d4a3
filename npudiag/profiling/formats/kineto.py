"""PyTorch's own profiler trace (Kineto, ``torch.profiler`` on a GPU): the framework ops with the
device time of the kernels they launched, so a GPU run can be the baseline of ``compare --level torch``.

Kineto writes a Chrome trace object (``*.pt.trace.json``, gzip-compressed as ``*.pt.trace.json.gz``
with ``use_gzip=True``) (``schemaVersion``, ``deviceProperties``, ``distributedInfo``,
``traceEvents`` ...). Read from it: ``cpu_op`` complete events (the aten / torch ops, nested on their
thread), the CUDA runtime / driver calls (``cuda_runtime``, ``cuda_driver``: ``cudaLaunchKernel``,
``cudaMemcpyAsync`` ...) and the device work they started (``kernel``, ``gpu_memcpy``, ``gpu_memset``),
linked by ``args.correlation`` (the same link the ``ac2g`` flow arrows draw). A kernel belongs to the
innermost framework op around the runtime call that launched it, as on the NPU (torch_ops), and
torch modules (``python_function`` "nn.Module: X", with ``with_modules``) become ranges. GPU kernels
are not read as device tasks: npudiag's device analyses are of Ascend devices.
"""

from __future__ import annotations

import re
from array import array
from pathlib import Path

import numpy as np
import pyarrow as pa

from npudiag import schemas
from npudiag.profiling.formats.jsonstream import iter_events
from npudiag.profiling.formats.registry import FileTables, Format, register
from npudiag.profiling.formats.torch_ops import MODULE_PREFIX, range_table, torch_op_table
from npudiag.profiling.formats.trace_events import MISSING, NS_LIMIT, code, exact_ns, num

LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
_STEP = re.compile(
    r"^ProfilerStep#(\d+)$"
)  # torch.profiler's step ranges (cpu_op, or user_annotation in newer versions)
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
# Kineto's own keys of the trace object, and the categories only a GPU run's events have (today's and
# the 2021 names); a torch_npu / msprof trace is an array, or carries Ascend's process names
_KINETO_KEY = re.compile(rb'"(?:schemaVersion|deviceProperties|distributedInfo)"\s*:')
_GPU_CAT = re.compile(
    rb'"cat"\s*:\s*"(?:cuda_runtime|cuda_driver|kernel|gpu_memcpy|gpu_memset|Runtime|Kernel|Memcpy|Memset)"'
)
_ASCEND = re.compile(rb'"(?:Ascend Hardware|async_npu|HostToDevice)"')
# the 2021 category names (torch 1.8 / 1.9 Kineto) and the current ones they are read as (Kineto's
# TensorBoard plugin reads both the same way, by lower-cased name)
OLD_CATS = {
    "operator": "cpu_op",
    "runtime": "cuda_runtime",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
}


def is_kineto(head: bytes) -> bool:
    """A JSON object with ``traceEvents`` and torch.profiler's marks (its own keys, or GPU events), in
    any key order (a harness may put its own ``metadata`` first), and nothing of Ascend's."""
    if head.lstrip()[:1] != b"{" or b'"traceEvents"' not in head or _ASCEND.search(head):
        return False
    return bool(_KINETO_KEY.search(head) or _GPU_CAT.search(head))


def _ns(ts: object, as_float: float) -> int:
    """Kineto's ts as exact ns: whole microseconds (an int in the JSON) exactly; a number with a
    fraction is as exact as the double it was read into (about 0.25 us at today's epoch)."""
    if ts.__class__ is int and -NS_LIMIT < ts * 1000 < NS_LIMIT:
        return ts * 1000
    return exact_ns(ts, as_float)


def _dur_ns(dur: object, as_float: float) -> int:
    return dur * 1000 if dur.__class__ is int else round(as_float * 1000)


class _Ranges:
    """Complete events of one kind: thread code, exact start and end ns, name."""

    def __init__(self) -> None:
        self.thread, self.start, self.end = array("q"), array("q"), array("q")
        self.names: list[str] = []

    def add(self, thread: int, start: int, dur_ns: int, name: str) -> None:
        self.thread.append(thread)
        self.start.append(start)
        self.end.append(start + dur_ns)
        self.names.append(name)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(
            np.frombuffer(a, np.int64) if len(a) else np.zeros(0, np.int64) for a in (self.thread, self.start, self.end)
        )


def read_kineto(path: Path, rank: int | None = None) -> FileTables:
    ops, modules = _Ranges(), _Ranges()
    steps: list[tuple[int, int, int]] = []  # ProfilerStep#N: (N, start ns, end ns)
    threads: dict[tuple[int, int], int] = {}
    launches: dict[int, tuple[int, int]] = {}  # correlation -> (thread code, ns) of the runtime call
    dev_corr, dev_us = array("q"), array("d")  # each device task: its launch's correlation, its time in us
    skipped = 0
    for ev in iter_events(path):
        if ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        if cat.__class__ is str and cat[:1].isupper():  # a 2021 trace's category
            cat = OLD_CATS.get(cat.lower(), cat)
        if (
            cat not in LAUNCH_CATS
            and cat not in DEVICE_CATS
            and cat != "cpu_op"
            and cat != "python_function"
            and cat != "user_annotation"
        ):
            continue
        t, d = num(ev.get("ts")), num(ev.get("dur"))
        if t != t or d != d or d < 0 or d > 1e12:
            skipped += 1
            continue
        a = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if cat in DEVICE_CATS:
            corr = code(a.get("correlation"))
            if corr != MISSING:
                dev_corr.append(corr)
                dev_us.append(d)
            continue
        s = _ns(ev.get("ts"), t)
        if s == MISSING:
            skipped += 1
            continue
        dns = _dur_ns(ev.get("dur"), d)
        thread = threads.setdefault((code(ev.get("pid")), code(ev.get("tid"))), len(threads))
        name = ev.get("name")
        name = name if name.__class__ is str else str(name)
        if (
            name.startswith("ProfilerStep#") and (m := _STEP.match(name)) is not None
        ):  # cpu_op or user_annotation by version
            steps.append((int(m.group(1)), s, s + dns))
            if cat == "cpu_op":
                ops.add(thread, s, dns, name)
        elif cat == "cpu_op":
            ops.add(thread, s, dns, name)
        elif cat == "python_function":
            if name.startswith(MODULE_PREFIX):
                modules.add(thread, s, dns, name[len(MODULE_PREFIX) :])
        else:
            corr = code(a.get("correlation"))
            if corr != MISSING:
                launches[corr] = (thread, s)
    linked = [i for i, c in enumerate(dev_corr) if c in launches]  # a launch may start several tasks
    lt = np.array([launches[dev_corr[i]][0] for i in linked], np.int64)
    lns = np.array([launches[dev_corr[i]][1] for i in linked], np.int64)
    k_us = np.array([dev_us[i] for i in linked], float)
    tids = np.array([tid for (_pid, tid) in threads], np.int64)  # thread code -> tid (codes are insertion order)
    torch_ops, host_ops, ranges = schemas.empty("torch_ops"), schemas.empty("host_ops"), schemas.empty("ranges")
    if ops.names:
        thread, start, end = ops.arrays()
        torch_ops = torch_op_table(ops.names, thread, start, end, lt, lns, k_us, rank)
        n = len(start)
        host_ops = pa.table(
            {
                "source": pa.repeat(pa.scalar("kineto", pa.string()), n),
                "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
                "name": pa.array(ops.names, pa.string()),
                "start_us": pa.array(start / 1000.0, pa.float64()),
                "start_ns": pa.array(start, pa.int64()),
                "duration_us": pa.array((end - start) / 1000.0, pa.float64()),
                "thread_id": pa.array(tids[thread], pa.int64(), mask=tids[thread] == MISSING),
            },
            schema=schemas.HOST_OPS,
        ).sort_by([("start_ns", "ascending")])
    if modules.names:
        thread, start, end = modules.arrays()
        ranges = range_table("kineto", "module", modules.names, thread, tids[thread], start, end, lt, lns, k_us, rank)
    warnings = [f"{path}: {skipped:,} event(s) without a usable ts / dur were skipped"] if skipped else []
    if not ops.names:
        warnings.append(
            f"{path}: a PyTorch (Kineto) trace with no cpu_op events; record it with torch.profiler's CPU activity"
        )
    return FileTables(
        {"torch_ops": torch_ops, "host_ops": host_ops, "ranges": ranges, "steps": _steps(steps, rank)}, warnings
    )


def _steps(found: list[tuple[int, int, int]], rank: int | None) -> pa.Table:
    """STEPS from torch.profiler's ProfilerStep#N ranges (the first of a step recorded twice)."""
    if not found:
        return schemas.empty("steps")
    first: dict[int, tuple[int, int]] = {}
    for n, s, e in sorted(found, key=lambda x: (x[1], x[0])):
        first.setdefault(n, (s, e))
    ids = sorted(first)
    start = np.array([first[i][0] for i in ids], np.int64)
    end = np.array([first[i][1] for i in ids], np.int64)
    k = len(ids)
    table = pa.table(
        {
            "source": pa.repeat(pa.scalar("kineto", pa.string()), k),
            "rank": pa.repeat(pa.scalar(rank, pa.int32()), k),
            "step": pa.array(ids, pa.int64()),
            "start_us": pa.array(start / 1000.0, pa.float64()),
            "end_us": pa.array(end / 1000.0, pa.float64()),
            "start_ns": pa.array(start, pa.int64()),
            "end_ns": pa.array(end, pa.int64()),
            "step_time_us": pa.array((end - start) / 1000.0, pa.float64()),
        }
    )
    return schemas.conform(table, schemas.STEPS)


register(
    Format(
        "kineto",
        re.compile(r"^[^/]*\.pt\.trace\.json(\.gz)?$"),
        read_kineto,
        ("torch_ops", "host_ops", "ranges", "steps"),
        content=is_kineto,
        sources={"torch_ops": 2, "host_ops": 2, "ranges": 2, "steps": 2},
    )
)
