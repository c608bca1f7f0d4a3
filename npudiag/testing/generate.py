"""Write realistic torch_npu and msprof profile folders of any size, with a known ground truth.

The files follow the real formats byte for byte where the corpus shows them: CANN 8.3.RC1
kernel_details.csv header, trailing TAB after timestamps, triple-quoted shapes, ``N/A`` for HCCL
task/stream ids, ``4294967295`` as the no-model id, Chrome-trace JSON with string ``ts``. The
op mix is chosen by a seeded RNG; ``ground_truth.json`` (written beside the profile, never inside
it) holds the exact per-type counts and totals and the planted copies, so tests compare against it.

    python -m npudiag.testing.generate --kind torch --kernels 5000 --out fixtures/
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

KERNEL_DETAILS_HEADER = [
    "Step Id",
    "Device_id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "OP State",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Dim",
    "Mix Block Dim",
    "HF32 Eligible",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
    "Context ID",
    "aicore_time(us)",
    "aic_total_cycles",
    "aic_mac_time(us)",
    "aic_mac_ratio",
    "aic_scalar_time(us)",
    "aic_scalar_ratio",
    "aic_mte1_time(us)",
    "aic_mte1_ratio",
    "aic_mte2_time(us)",
    "aic_mte2_ratio",
    "aic_fixpipe_time(us)",
    "aic_fixpipe_ratio",
    "aic_icache_miss_rate",
    "aiv_time(us)",
    "aiv_total_cycles",
    "aiv_vec_time(us)",
    "aiv_vec_ratio",
    "aiv_scalar_time(us)",
    "aiv_scalar_ratio",
    "aiv_mte2_time(us)",
    "aiv_mte2_ratio",
    "aiv_mte3_time(us)",
    "aiv_mte3_ratio",
    "aiv_icache_miss_rate",
    "cube_utilization(%)",
]
OP_SUMMARY_HEADER = [
    "Device_id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Op Name",
    "OP Type",
    "OP State",
    "Task Type",
    "Task Start Time(us)",
    "Task Duration(us)",
    "Task Wait Time(us)",
] + KERNEL_DETAILS_HEADER[12:]
N_PMU = len(KERNEL_DETAILS_HEADER) - 22
NO_MODEL = 4294967295

# op type, kernel name, task type, mean duration us, weight, shapes, dtypes
OP_MIX = [
    (
        "MatMulV3",
        "aclnnMatmul_MatMulV3Common_MatMulV3",
        "AI_CORE",
        180.0,
        6,
        '"4096,1024;1024,3072"',
        "DT_BF16;DT_BF16",
    ),
    (
        "FlashAttentionScore",
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        "MIX_AIC",
        880.0,
        1,
        '"1,16,4096,64;1,16,4096,64;1,16,4096,64"',
        "DT_BF16;DT_BF16;DT_BF16",
    ),
    ("Add", "aclnnAdd_AddAiCore_Add", "AI_VECTOR_CORE", 30.0, 10, '"4096,1024;4096,1024"', "DT_BF16;DT_BF16"),
    ("Cast", "aclnnCast_CastAiCore_Cast", "AI_VECTOR_CORE", 12.0, 8, '"4096,1024"', "FLOAT"),
    ("RmsNorm", "aclnnRmsNorm_RmsNorm_RmsNorm", "AI_VECTOR_CORE", 45.0, 4, '"4096,1024;1024"', "DT_BF16;DT_BF16"),
    ("TransData", "trans_TransData_0", "AI_VECTOR_CORE", 20.0, 3, '"32,3,224,224"', "FLOAT"),
    ("NonZero", "aclnnNonzero_NonZero_NonZero", "AI_CPU", 60.0, 1, '"16"', "BOOL"),
    ("hcom_allReduce_", "hcom_allReduce__868_0_1", "HCCL", 2500.0, 0.2, "N/A", "N/A"),
]


@dataclass
class GroundTruth:
    kind: str
    kernels: int
    by_type: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: list[int] = field(default_factory=list)
    copies: dict[str, float] = field(default_factory=dict)
    profile_dir: str = ""
    memory: dict = field(default_factory=dict)
    loop: dict = field(default_factory=dict)  # a loop without step markers: its iterations and planted calls


def _ts(x: float) -> str:
    return f"{x:.3f}\t"


@dataclass(frozen=True)
class Variation:
    """How one run of a workload differs from another run of the same workload.

    ``jitter`` is the relative standard deviation of run-to-run noise, applied twice: once as a
    factor shared by every kernel of a step (clocks, host contention) and once per kernel, both
    drawn from ``noise_seed``. ``scale`` multiplies one op type's durations (a planted regression
    or improvement). The op sequence itself comes from the profile's ``seed`` and does not change.
    """

    noise_seed: int = 0
    jitter: float = 0.0
    scale: dict[str, float] = field(default_factory=dict)


def _vary(
    kinds: np.ndarray, dur: np.ndarray, gaps: np.ndarray, step: np.ndarray, v: Variation
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(v.noise_seed)
    per_step = 1.0 + rng.normal(0.0, v.jitter, int(step.max()) + 1)
    per_kernel = 1.0 + rng.normal(0.0, v.jitter, len(dur))
    factor = np.clip(per_step[step] * per_kernel, 0.5, 2.0)
    for op_type, k in v.scale.items():
        idx = [i for i, m in enumerate(OP_MIX) if m[0] == op_type]
        if not idx:
            raise ValueError(f"no op type {op_type!r} in the generator's op mix")
        factor = np.where(kinds == idx[0], factor * k, factor)
    gap_factor = np.clip(1.0 + rng.normal(0.0, v.jitter, len(gaps)), 0.5, 2.0)
    return np.round(dur * factor, 3), np.round(gaps * gap_factor, 3)


def _plan(
    n: int,
    seed: int,
    steps: int,
    idle_gaps: int = 0,
    idle_gap_us: float = 0.0,
    variation: Variation | None = None,
    repeat_steps: bool = False,
    syncs_per_step: int = 0,
    sync_idle_us: float = 0.0,
    fusible: Fusible | None = None,
    t0: float = 1764246877073569.640,
):
    rng = np.random.default_rng(seed)
    weights = np.array([m[4] for m in OP_MIX], float)
    kinds = rng.choice(len(OP_MIX), size=n, p=weights / weights.sum())
    means = np.array([m[3] for m in OP_MIX])[kinds]
    dur = np.round(means * rng.uniform(0.8, 1.2, n), 3)
    gaps = np.round(rng.uniform(1.0, 6.0, n), 3)
    if repeat_steps and steps > 1:  # a training loop: every step runs step 1's op sequence
        per = -(-n // steps)
        kinds, dur, gaps = (np.tile(a[:per], steps)[:n] for a in (kinds, dur, gaps))
    if variation is not None:
        dur, gaps = _vary(kinds, dur, gaps, (np.arange(n) * steps // max(n, 1)) + 1, variation)
    if idle_gaps:
        gaps[np.linspace(n // (idle_gaps + 1), n - 2, idle_gaps).astype(int)] = idle_gap_us  # planted device idle
    if syncs_per_step:
        gaps[sync_positions(n, steps, syncs_per_step)] = sync_idle_us  # the device waits for the host after each sync
    if fusible is not None:
        kinds, dur, gaps = fusible.plant(kinds, dur, gaps, (np.arange(n) * steps // max(n, 1)) + 1)
    start = np.round(t0 + np.cumsum(np.concatenate([[0.0], (dur + gaps)[:-1]])), 3)
    step = (np.arange(n) * steps // max(n, 1)) + 1
    return kinds, start, dur, gaps, step


@dataclass(frozen=True)
class Fusible:
    """A fusion candidate to plant: ``ops`` (op types of the mix, each short) run back to back
    ``per_step`` times in every step, ``gap_us`` apart, each time between two MatMulV3 (so the run
    of small ops is exactly ``ops``)."""

    ops: tuple[str, ...] = ("Cast", "Add", "Cast")
    per_step: int = 3
    gap_us: float = 60.0

    def positions(self, step: np.ndarray) -> np.ndarray:
        """Index of the first op of every planted occurrence."""
        width = len(self.ops) + 2
        out = []
        for s in sorted(set(step.tolist())):
            idx = np.flatnonzero(step == s)
            usable = len(idx) - width - 1
            if usable > width * self.per_step:
                out.extend(idx[0] + 1 + np.linspace(0, usable, self.per_step + 2).astype(int)[1:-1])
        return np.array(out, int)

    def plant(self, kinds, dur, gaps, step):
        names = [m[0] for m in OP_MIX]
        seq = np.array([names.index(op) for op in self.ops])
        mean = np.array([m[3] for m in OP_MIX])
        kinds, dur, gaps = kinds.copy(), dur.copy(), gaps.copy()
        for i in self.positions(step):
            kinds[i - 1] = kinds[i + len(seq)] = names.index("MatMulV3")
            dur[i - 1] = dur[i + len(seq)] = mean[names.index("MatMulV3")]
            kinds[i : i + len(seq)] = seq
            dur[i : i + len(seq)] = mean[seq]
            gaps[i : i + len(seq) - 1] = self.gap_us
        return kinds, dur, gaps


def sync_positions(n: int, steps: int, per_step: int) -> np.ndarray:
    """Indices of the kernels after which a planted stream synchronise ends: ``per_step`` evenly
    spaced inside each step, never its last kernel (the device gap they leave is inside the step)."""
    step = (np.arange(n) * steps // max(n, 1)) + 1
    out = []
    for s in range(1, steps + 1):
        idx = np.flatnonzero(step == s)
        if len(idx) > 2:
            out.extend(idx[np.linspace(1, len(idx) - 2, per_step + 2).astype(int)[1:-1]])
    return np.array(sorted(set(out)), int)


def _sync_events(start, dur, positions: np.ndarray, cann: int = 2711464191, blocked_us: float = 0.0) -> list[dict]:
    """aclrtSynchronizeStream (with its nested Runtime@StreamSynchronize) on the host, returning
    15 us after the kernel it waited for ends, plus ``blocked_us`` more: the host held in the call
    (waiting on an event of another stream or device) while this device idles."""
    ev: list[dict] = []
    for i in positions:
        end = float(start[i] + dur[i])
        ev.append(_api_event(cann, "acl", "aclrtSynchronizeStream", "ACL_RTS", end - 30.0, 45.0 + blocked_us, 0))
        ev.append(
            _api_event(cann, "runtime", "StreamSynchronize", "StreamSynchronize", end - 29.0, 43.0 + blocked_us, 0)
        )
    return ev


def _freq_events(t0: float, plan: list[tuple[float, float]], pid: int = 2711464384) -> list[dict]:
    """The "AI Core Freq" counter as msprof writes it: a process of that name and one ph C sample
    (args MHz) per change, at ``t0`` + offset µs."""
    ev: list[dict] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "AI Core Freq"}}]
    for offset, mhz in plan:
        ev.append(
            {"name": "AI Core Freq", "ts": f"{t0 + offset:.3f}", "pid": pid, "tid": 0, "args": {"MHz": mhz}, "ph": "C"}
        )
    return ev


def _truth(kind: str, kinds: np.ndarray, dur: np.ndarray) -> GroundTruth:
    gt = GroundTruth(kind, int(len(kinds)))
    for i, m in enumerate(OP_MIX):
        sel = kinds == i
        if sel.any():
            gt.by_type[m[0]] = {
                "count": int(sel.sum()),
                "total_us": float(np.round(dur[sel], 3).sum()),
                "task_type": m[2],
            }
    return gt


def _pmu_row(rng_vals: np.ndarray, task_type: str) -> list[str]:
    if task_type == "HCCL":
        return ["N/A"] * N_PMU
    return [f"{v:.3f}" for v in rng_vals]


def _kernel_rows(kinds, start, dur, gaps, step, torch: bool, seed: int, dynamic_ops: tuple[str, ...] = ()):
    """``dynamic_ops``: op types whose leading dimension (4096) shrinks by 64 every step, as a
    sequence length that changes from batch to batch would."""
    rng = np.random.default_rng(seed + 1)
    pmu = rng.uniform(0, 1, size=(len(kinds), N_PMU))
    task_id = 34473
    for i in range(len(kinds)):
        op_type, name, ttype, _, _, shapes, dtypes = OP_MIX[kinds[i]]
        if op_type in dynamic_ops:
            shapes = shapes.replace("4096", str(4096 - 64 * int(step[i])))
        hccl = ttype == "HCCL"
        tid = "N/A" if hccl else str(task_id)
        sid = "N/A" if hccl else "2"
        task_id += 1
        common = [
            str(NO_MODEL),
            tid,
            sid,
            name,
            op_type,
            "N/A" if hccl else "dynamic",
            "COMMUNICATION" if (hccl and torch) else ttype,
            _ts(start[i]),
            f"{dur[i]:.3f}",
            f"{(gaps[i - 1] if i else 0):.3f}" if not hccl else "0",
            "0" if hccl else "40",
            "N/A" if hccl else "0",
            "N/A" if hccl else "NO",
            shapes,
            dtypes,
            "N/A" if hccl else "ND",
            "N/A" if hccl else '"' + shapes.split(";")[0].strip('"') + '"',
            "N/A" if hccl else dtypes.split(";")[0],
            "N/A" if hccl else "ND",
            "N/A",
        ]
        tail = _pmu_row(pmu[i], ttype)
        if torch:
            yield [str(step[i]), "0", *common, *tail]
        else:
            yield ["0", *common, *tail]


def _write_csv(path: Path, header: list[str], rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _op_statistic(path: Path, gt: GroundTruth, kinds, dur, device_col: bool) -> None:
    rows = []
    total = sum(v["total_us"] for k, v in gt.by_type.items() if v["task_type"] != "HCCL")
    for i, m in enumerate(OP_MIX):
        if m[2] == "HCCL" or m[0] not in gt.by_type:
            continue
        d = dur[kinds == i]
        row = [
            m[0],
            m[2],
            str(len(d)),
            f"{d.sum():.3f}",
            f"{d.min():.3f}",
            f"{d.mean():.3f}",
            f"{d.max():.3f}",
            f"{100 * d.sum() / total:.3f}",
        ]
        rows.append((d.sum(), ["0", *row] if device_col else row))
    rows.sort(key=lambda r: -r[0])
    header = [
        "OP Type",
        "Core Type",
        "Count",
        "Total Time(us)",
        "Min Time(us)",
        "Avg Time(us)",
        "Max Time(us)",
        "Ratio(%)",
    ]
    _write_csv(path, ["Device_id", *header] if device_col else header, [r for _, r in rows])


_HOST_TID = 2647914
_PREFIX = {"acl": "AscendCL", "runtime": "Runtime"}


def _api_event(cann: int, level: str, api: str, mode: str, ts: float, dur: float, conn: int) -> dict:
    """A CANN host API call as msprof writes it (``AscendCL@api`` / ``Runtime@api``)."""
    args = {"Thread Id": _HOST_TID, "Mode": mode, "level": level, "id": api, "item_id": "0", "connection_id": conn}
    return {
        "name": f"{_PREFIX[level]}@{api}",
        "pid": cann,
        "tid": _HOST_TID,
        "ts": f"{ts:.3f}",
        "dur": dur,
        "args": args,
        "ph": "X",
    }


def _task_event(
    hw: int, name: str, task_type: str, task_id: int, ts: float, dur: float, conn: int, extra: dict | None = None
) -> dict:
    """An Ascend Hardware task on stream 2; ``extra`` adds msprof's copy args (size(B), operation...)."""
    args = {
        "Model Id": NO_MODEL,
        "Task Type": task_type,
        "Physic Stream Id": 2,
        "Task Id": task_id,
        "Batch Id": 0,
        "Subtask Id": 4294967295,
        "connection_id": conn,
        **(extra or {}),
    }
    return {"name": name, "pid": hw, "tid": 2, "ts": f"{ts:.3f}", "dur": dur, "args": args, "ph": "X"}


def _copy_args(nbytes: int, us: float, msprof_args: bool) -> dict | None:
    if not msprof_args:  # torch_npu's trace_view has no size/operation args
        return None
    return {"size(B)": nbytes, "bandwidth(GB/s)": round(nbytes / us / 1e3, 3), "operation": "host to device"}


def _trace_events(
    start,
    dur,
    kinds,
    copies: int,
    copy_bytes: int,
    copy_us: float,
    msprof_args: bool,
    pid_base: int = 2711464000,
    small_copies: int = 0,
    small_bytes: int = 1024,
    small_us: float = 5.0,
):
    """Chrome-trace events: metadata, device tasks, CANN API calls and planted sync copies."""
    hw, cann = pid_base + 352, pid_base + 191
    ev = [
        {"name": "process_name", "pid": hw, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"},
        {
            "name": "process_labels",
            "pid": hw,
            "tid": 0,
            "args": {"labels": "NPU 0" if msprof_args else "NPU"},
            "ph": "M",
        },
        {"name": "process_name", "pid": cann, "tid": 0, "args": {"name": "CANN"}, "ph": "M"},
        {"name": "process_labels", "pid": cann, "tid": 0, "args": {"labels": "CPU"}, "ph": "M"},
        {"name": "thread_name", "pid": hw, "tid": 2, "args": {"name": "Stream 2"}, "ph": "M"},
    ]
    conn = 1
    for i in range(len(kinds)):
        op_type, name, ttype, *_ = OP_MIX[kinds[i]]
        if ttype == "HCCL":
            continue
        ev.append(_api_event(cann, "acl", "aclnn" + op_type, "ACL_NN", start[i] - 12.0, 4.5, conn))
        ev.append(_task_event(hw, name, ttype, 34473 + i, start[i], float(dur[i]), conn))
        conn += 1
    t = float(start[-1] + dur[-1] + 100.0) if len(start) else 1764246877073569.640
    for _ in range(copies):
        ev.append(_api_event(cann, "acl", "aclrtMemcpy", "ACL_RTS", t, copy_us + 20.0, conn))
        ev.append(_api_event(cann, "runtime", "MemCopySync", "MemCopySync", t + 2.0, copy_us + 15.0, conn))
        extra = _copy_args(copy_bytes, copy_us, msprof_args)
        ev.append(_task_event(hw, "MEMCPY_ASYNC", "PCIE_DMA_SQE", 90000 + conn, t + 10.0, copy_us, conn, extra))
        conn += 1
        t += copy_us + 200.0
    for _ in range(small_copies):
        ev.append(_api_event(cann, "acl", "aclrtMemcpyAsync", "ACL_RTS", t, 1.5, conn))
        extra = _copy_args(small_bytes, small_us, msprof_args)
        ev.append(_task_event(hw, "MEMCPY_ASYNC", "SDMA_SQE", 90000 + conn, t + 2.0, small_us, conn, extra))
        conn += 1
        t += small_us + 4.0
    return ev


PREPARING_US = 20.0  # the host's step begins this long before its first device task (torch_npu's Preparing)
STEP_TAIL_US = 5.0  # and ends this long after its last one


def _copies_end(start, dur, copies: int, copy_us: float) -> float | None:
    """Where the last planted copy (``_trace_events``: after the last kernel) ends on the device, µs."""
    if not copies or not len(start):
        return None
    t = float(start[-1] + dur[-1] + 100.0)
    return t + (copies - 1) * (copy_us + 200.0) + 10.0 + copy_us


def step_ranges(start, dur, step, copies_end: float | None = None) -> dict[int, tuple[float, float, float]]:
    """Per step: (recorded start, recorded end, span of its device tasks), µs; the copies after the
    last kernel belong to the last step, as the host waits for them inside it."""
    out = {}
    ids = sorted(set(step.tolist()))
    for sv in ids:
        sel = step == sv
        first, last = float(start[sel].min()), float((start[sel] + dur[sel]).max())
        if copies_end is not None and sv == ids[-1]:
            last = max(last, copies_end)
        out[int(sv)] = (first - PREPARING_US, last + STEP_TAIL_US, last - first)
    return out


def _profiler_step_events(ranges: dict[int, tuple[float, float, float]], pid: int = 2647914) -> list[dict]:
    """torch_npu's ProfilerStep#N ranges on the Python process (category cpu_op), as trace_view.json has them."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
    ]
    for sv, (lo, hi, _) in ranges.items():
        ev.append(
            {
                "ph": "X",
                "name": f"ProfilerStep#{sv}",
                "pid": pid,
                "tid": pid,
                "ts": f"{lo:.3f}",
                "dur": round(hi - lo, 3),
                "cat": "cpu_op",
                "args": {"Sequence number": -1, "Fwd thread id": 0},
            }
        )
    return ev


def _alloc_events(start, step, per_step: int, us: float, cann: int = 2711464191) -> list[dict]:
    """aclrtMalloc/aclrtFree pairs (each with its nested runtime call) just after each step's first kernel."""
    ev: list[dict] = []
    for s in sorted(set(step.tolist())) if per_step else []:
        t = float(start[step == s][0]) + 1.0
        for _ in range(per_step):
            for acl, rt in (("aclrtMalloc", "DevMalloc"), ("aclrtFree", "DevFree")):
                ev.append(_api_event(cann, "acl", acl, "ACL_RTS", t, us, 0))
                ev.append(_api_event(cann, "runtime", rt, rt, t + 1.0, us - 2.0, 0))
                t += us + 5.0
    return ev


def _write_trace(path: Path, events: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        for i, e in enumerate(events):
            if i:
                fh.write(", ")
            fh.write(json.dumps(e))
        fh.write("]")


MEMORY_RECORD_HEADER = [
    "Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)", "Stream Ptr", "Device Type"
]  # fmt: skip
OPERATOR_MEMORY_HEADER = [
    "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)", "Duration(us)", "Active Duration(us)",
    "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
    "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type",
]  # fmt: skip
_MEM_OPS = (
    "aten::empty_strided",
    "aten::mm",
    "aten::add",
    "aten::_convolution",
    "npu::npu_fusion_attention",
    "aten::cat",
)
_STREAM_PTR = "1431569360"


@dataclass(frozen=True)
class MemoryPlan:
    """torch_npu's caching allocator over the profile, written as memory_record.csv / operator_memory.csv.

    ``base_bytes`` are allocated before the profile and held (weights: in the totals, in no
    operator_memory row); each step allocates
    ``blocks_per_step`` blocks of about ``block_bytes`` and frees them before it ends. ``peak_op``
    allocates ``peak_op_bytes`` in the middle of the last step (the profile's peak). The allocator
    reserves ``slack_bytes`` beyond what it hands out each time it grows (a fragmented cache);
    with ``churn`` it gives the freed memory back at the end of every step (``empty_cache``), so
    every step grows the reservation again."""

    base_bytes: int = 2 << 30
    blocks_per_step: int = 24
    block_bytes: int = 64 << 20
    peak_op: str | None = None
    peak_op_bytes: int = 0
    slack_bytes: int = 0
    churn: bool = False


def _ts_ns(t_ns: int) -> str:
    return f"{t_ns // 1000}.{t_ns % 1000:03d}\t"


def _mb(b: int) -> str:
    return repr(b / 1048576)


def write_torch_memory(prof: Path, start: np.ndarray, dur: np.ndarray, step: np.ndarray, plan: MemoryPlan) -> dict:
    """Simulate ``plan`` over the kernels' steps; returns its ground truth (peak, reserved there, who holds what)."""
    grain = 2 << 20
    events: list[tuple[int, int, int, str]] = []  # (time ns, order, +size / -size, block id)
    blocks: dict[str, dict] = {}
    t0 = int(round(float(start[0]) * 1000)) - 50_000

    def block(name: str, size: int, t_alloc: int, t_free: int | None) -> None:
        bid = f"b{len(blocks)}"
        blocks[bid] = {"name": name, "size": size, "alloc": t_alloc, "free": t_free}
        events.append((t_alloc, len(events), size, bid))
        if t_free is not None:
            events.append((t_free, len(events), -size, bid))

    block("aten::empty_strided", plan.base_bytes, t0, None)
    ids = sorted(set(step.tolist()))
    step_starts, step_ends = [], []
    for j, s in enumerate(ids):
        sel = step == s
        a = int(round(float(start[sel].min()) * 1000))
        b = int(round(float((start[sel] + dur[sel]).max()) * 1000))
        step_starts.append(a)
        step_ends.append(b)
        span = b - a
        for i in range(plan.blocks_per_step):
            size = (plan.block_bytes * (2 + i % 4) // 4) // 512 * 512
            t_alloc = a + span * (i + 1) * 6 // (10 * (plan.blocks_per_step + 1))
            t_free = a + span * 7 // 10 + span * (plan.blocks_per_step - i) * 2 // (10 * (plan.blocks_per_step + 1))
            block(_MEM_OPS[i % len(_MEM_OPS)], size, t_alloc, t_free)
        if plan.peak_op and j == len(ids) - 1:
            block(plan.peak_op, plan.peak_op_bytes, a + span * 65 // 100, a + span * 96 // 100)
    events.sort()
    allocated = reserved = 0
    records: list[list[str]] = []
    state: dict[str, tuple[int, int]] = {}  # block id -> (allocated, reserved) right after its event
    peak = (-1, 0, 0, "")
    growths: list[int] = []
    ends = iter(step_ends)
    next_end = next(ends, None)
    for t, _, delta, bid in events:
        while plan.churn and next_end is not None and t > next_end:
            reserved = -(-allocated // grain) * grain  # empty_cache: the cached blocks go back to the device
            records.append(
                ["PTA", _ts_ns(next_end), _mb(allocated), _mb(reserved), _mb(allocated), _STREAM_PTR, "NPU:0"]
            )
            records.append(
                ["PTA+GE", _ts_ns(next_end), _mb(allocated), _mb(reserved), _mb(allocated), _STREAM_PTR, "NPU:0"]
            )
            next_end = next(ends, None)
        allocated += delta
        if allocated > reserved:
            reserved = -(-(allocated + plan.slack_bytes) // grain) * grain
            growths.append(t)
        state[bid + ("+" if delta > 0 else "-")] = (allocated, reserved)
        for comp in ("PTA", "PTA+GE"):
            records.append([comp, _ts_ns(t), _mb(allocated), _mb(reserved), _mb(allocated), _STREAM_PTR, "NPU:0"])
        if allocated > peak[0]:
            peak = (allocated, reserved, t, blocks[bid]["name"])
    app = [
        ["APP", _ts_ns(t), "", _mb(reserved + (600 << 20)), "", "", "NPU:0"]
        for t in range(t0 - 10_000_000, t0, 2_000_000)
    ]
    _write_csv(prof / "memory_record.csv", MEMORY_RECORD_HEADER, app + records)
    rows = []
    for bid, bl in sorted(blocks.items(), key=lambda kv: kv[1]["alloc"]):
        if bid == "b0":
            continue  # the weights were allocated before the profile: in the totals, in no operator_memory row
        a_alloc, a_res = state[bid + "+"]
        row = [bl["name"], repr(bl["size"] / 1024), _ts_ns(bl["alloc"])]
        if bl["free"] is None:
            row += ["", "", "", "", _mb(a_alloc), _mb(a_res), _mb(a_alloc), "", "", ""]
        else:
            r_alloc, r_res = state[bid + "-"]
            held = bl["free"] - bl["alloc"]
            row += [
                _ts_ns(bl["free"]),
                _ts_ns(bl["free"] - 400),
                _ts_ns(held),
                _ts_ns(held - 400),
                _mb(a_alloc),
                _mb(a_res),
                _mb(a_alloc),
                _mb(r_alloc),
                _mb(r_res),
                _mb(r_alloc),
            ]
        rows.append(row + [_STREAM_PTR, "NPU:0"])
    _write_csv(prof / "operator_memory.csv", OPERATOR_MEMORY_HEADER, rows)
    t_peak = peak[2]
    held: dict[str, int] = {}
    for bid, bl in blocks.items():
        if bid != "b0" and bl["alloc"] <= t_peak and (bl["free"] is None or bl["free"] > t_peak):
            held[bl["name"]] = held.get(bl["name"], 0) + bl["size"]
    return {
        "peak_allocated_bytes": peak[0],
        "reserved_at_peak_bytes": peak[1],
        "peak_ts_ns": t_peak,
        "peak_op": peak[3],
        "held_at_peak_bytes": held,
        "peak_reserved_bytes": max(state.values(), key=lambda v: v[1])[1],
        "allocations": len(blocks) - 1,
        "reserved_growths_per_step": {
            str(s): int(sum(1 for t in growths if lo <= t <= hi)) for s, lo, hi in zip(ids, step_starts, step_ends)
        },
    }


def write_torch_profile(
    out: Path,
    kernels: int = 2000,
    seed: int = 0,
    steps: int = 4,
    rank: int = 0,
    copies: int = 40,
    copy_bytes: int = 4 << 20,
    copy_us: float = 12000.0,
    trace: bool = True,
    mallocs_per_step: int = 0,
    malloc_us: float = 300.0,
    variation: Variation | None = None,
    repeat_steps: bool = False,
    export: str = "text",
    overlap_analysis: bool = False,
    memory: MemoryPlan | None = None,
    syncs_per_step: int = 0,
    sync_idle_us: float = 500.0,
    aicore_freq: list[tuple[float, float]] | None = None,
    distributed_args: dict | None = None,
    fusible: Fusible | None = None,
    comm_sizes_mb: list[float] | None = None,
    dynamic_ops: tuple[str, ...] = (),
) -> GroundTruth:
    """``dynamic_ops``: op types whose input shapes change every step (see ``_kernel_rows``);
    ``comm_sizes_mb`` writes communication.json: each HCCL op of the profile an all-reduce moving
    the next of these sizes (MB of 10^6 bytes, cycled) over SDMA/HCCS; ``fusible`` plants a fusion
    candidate (see :class:`Fusible`); ``distributed_args`` goes into profiler_metadata.json as
    torch_npu writes it under Megatron (tensor/pipeline/data_parallel_size, world_size; ``rank`` is
    this rank's); ``aicore_freq`` writes the trace's AI Core Freq counter: (µs after the first
    kernel, MHz) per change; ``syncs_per_step`` plants that many aclrtSynchronizeStream calls inside every step, each
    followed by ``sync_idle_us`` of device idle, three quarters of it with the host still in the call (at the kernels
    ``sync_positions`` names);
    ``memory`` adds memory_record.csv and operator_memory.csv (text export only; its truth is in
    ``gt.memory``); ``mallocs_per_step`` plants that many aclrtMalloc + aclrtFree pairs at the start of every step;
    ``variation`` makes this one run of the ``seed`` workload among many (noise, a slower op);
    ``repeat_steps`` makes every step run the same op sequence, as a training loop does.
    ``export="db"`` writes torch_npu's db export instead of the text files
    (``ascend_pytorch_profiler_{rank}.db`` and ``analysis.db``); ``overlap_analysis`` adds the
    OVERLAP_ANALYSIS table MindStudio Insight writes into a .db it opens."""
    if export not in ("text", "db"):
        raise ValueError(f"export must be 'text' or 'db', not {export!r}")
    kinds, start, dur, gaps, step = _plan(
        kernels,
        seed,
        steps,
        variation=variation,
        repeat_steps=repeat_steps,
        syncs_per_step=syncs_per_step,
        sync_idle_us=sync_idle_us,
        fusible=fusible,
    )
    gt = _truth("torch_npu", kinds, dur)
    folder = out / f"npudiag-host_{2647914 + rank}_20251127192734{rank:03d}_ascend_pt"
    prof = folder / "ASCEND_PROFILER_OUTPUT"
    prof.mkdir(parents=True, exist_ok=True)
    if export == "text":
        _write_csv(
            prof / "kernel_details.csv",
            KERNEL_DETAILS_HEADER,
            _kernel_rows(kinds, start, dur, gaps, step, True, seed, dynamic_ops),
        )
        _op_statistic(prof / "op_statistic.csv", gt, kinds, dur, device_col=True)
    info = {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                "schedule": {"wait": 0, "active": steps, "warmup": 1, "repeat": 1, "skip_first": 0},
            },
            "experimental_config": {
                "_profiler_level": "Level1",
                "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
                "_export_type": [export],
            },
        },
        "torch_npu_version": "2.7.1",
        "cann_version": "8.3.RC1",
        "rank_id": str(rank),
    }
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=4), encoding="utf-8")
    if comm_sizes_mb:
        _communication_json(prof / "communication.json", kinds, start, dur, step, comm_sizes_mb)
    dist = {"rank": rank, "world_size": 1, **(distributed_args or {})}
    dist["rank"] = rank
    (folder / "profiler_metadata.json").write_text(json.dumps({"distributed_args": dist}), encoding="utf-8")
    rows = []
    ranges = step_ranges(
        start, dur, step, _copies_end(start, dur, copies, copy_us) if trace or export == "db" else None
    )
    for s in sorted(set(step.tolist())):
        sel = step == s
        comp = float(dur[sel & (np.array([OP_MIX[k][2] for k in kinds]) != "HCCL")].sum())
        comm = float(dur[sel & (np.array([OP_MIX[k][2] for k in kinds]) == "HCCL")].sum())
        # torch_npu's Stage: its first to last compute / communication task (copies are neither: the
        # step's copies after its last kernel are outside it), exactly (relative first: an absolute
        # float64 at today's epoch resolves only 0.25 us); Preparing: the host step's start to the first task
        stage = float(((start[sel] - start[sel][0]) + dur[sel]).max())
        rows.append(
            [
                "0",
                str(s),
                repr(comp),
                repr(comm),
                "0.0",
                repr(comm),
                repr(max(stage - comp - comm, 0.0)),
                repr(stage),
                "0",
                repr(comm),
                repr(PREPARING_US),
            ]
        )
        gt.steps.append(int(s))
    if export == "db":
        _write_db(
            prof / f"ascend_pytorch_profiler_{rank}.db",
            kinds,
            start,
            dur,
            copies,
            copy_bytes,
            copy_us,
            step=step,
            rank=rank,
            ranges=ranges,
            overlap_analysis=overlap_analysis,
        )
        _write_analysis_db(prof / "analysis.db", rows)
        gt.copies = {"count": copies, "bytes_each": copy_bytes, "device_us_each": copy_us, "mode": "sync"}
        gt.profile_dir = str(folder)
        (out / "ground_truth.json").write_text(json.dumps(gt.__dict__, indent=2), encoding="utf-8")
        return gt
    _write_csv(
        prof / "step_trace_time.csv",
        [
            "Device_id",
            "Step",
            "Computing",
            "Communication(Not Overlapped)",
            "Overlapped",
            "Communication",
            "Free",
            "Stage",
            "Bubble",
            "Communication(Not Overlapped and Exclude Receive)",
            "Preparing",
        ],
        rows,
    )
    if memory is not None:
        gt.memory = write_torch_memory(prof, start, dur, step, memory)
    if trace:
        events = _trace_events(start, dur, kinds, copies, copy_bytes, copy_us, msprof_args=False)
        events += _profiler_step_events(ranges, 2647914 + rank)
        events += _alloc_events(start, step, mallocs_per_step, malloc_us)
        if syncs_per_step:
            # the host stays in each sync for most of the idle after it (a sync that covers at least half a gap is
            # its cause)
            events += _sync_events(
                start, dur, sync_positions(kernels, steps, syncs_per_step), blocked_us=0.75 * sync_idle_us
            )
        if aicore_freq:
            events += _freq_events(float(start[0]), aicore_freq)
        _write_trace(prof / "trace_view.json", events)
    gt.copies = {"count": copies if trace else 0, "bytes_each": copy_bytes, "device_us_each": copy_us, "mode": "sync"}
    gt.profile_dir = str(folder)
    (out / "ground_truth.json").write_text(json.dumps(gt.__dict__, indent=2), encoding="utf-8")
    return gt


def write_msprof_profile(
    out: Path,
    kernels: int = 2000,
    seed: int = 0,
    copies: int = 40,
    copy_bytes: int = 4 << 20,
    copy_us: float = 12000.0,
    db: bool = False,
    text: bool = True,
    small_copies: int = 0,
    idle_gaps: int = 0,
    idle_gap_us: float = 0.0,
    device_info: tuple[int, int] | None = None,
    loop_iterations: int = 0,
    mallocs_per_iteration: int = 0,
    malloc_us: float = 300.0,
    syncs_per_iteration: int = 0,
    t0_us: float | None = None,
) -> GroundTruth:
    """``small_copies`` plants async 1 KiB H2D copies of 5 µs; ``idle_gaps`` plants device gaps of ``idle_gap_us``;
    ``loop_iterations`` with ``mallocs_per_iteration``: an AscendCL program's loop without step markers (msprof
    records none for it), each iteration's kernels a slice of the profile's, with that many aclrtMalloc +
    aclrtFree pairs at its start and ``syncs_per_iteration`` aclrtSynchronizeStream calls inside it (``gt.loop``);
    ``device_info`` (AI Cores, vector cores) writes device_0/info.json.0 as msprof does (every compute
    kernel of the generator runs on 40 blocks); ``t0_us``: when the first task starts (a run of msprof
    records the time it ran; two runs never share their task times)."""
    kinds, start, dur, gaps, step = _plan(
        kernels, seed, 1, idle_gaps, idle_gap_us, **({"t0": t0_us} if t0_us is not None else {})
    )
    gt = _truth("msprof", kinds, dur)
    folder = out / "PROF_000001_20260605155111872_NPUDIAGGENERATEDAA"
    mso = folder / "mindstudio_profiler_output"
    mso.mkdir(parents=True, exist_ok=True)
    ts = "20260605155140"
    if text:
        _write_csv(
            mso / f"op_summary_{ts}.csv", OP_SUMMARY_HEADER, _kernel_rows(kinds, start, dur, gaps, step, False, seed)
        )
        _op_statistic(mso / f"op_statistic_{ts}.csv", gt, kinds, dur, device_col=True)
        events = _trace_events(
            start, dur, kinds, copies, copy_bytes, copy_us, msprof_args=True, small_copies=small_copies
        )
        if loop_iterations:
            iteration = np.minimum(np.arange(len(start)) * loop_iterations // max(len(start), 1), loop_iterations - 1)
            events += _alloc_events(start, iteration, mallocs_per_iteration, malloc_us)
            syncs = (
                sync_positions(len(start), loop_iterations, syncs_per_iteration)
                if syncs_per_iteration
                else np.array([], int)
            )
            events += _sync_events(start, dur, syncs)
            gt.loop = {
                "iterations": loop_iterations,
                "acl_alloc_calls": 2 * mallocs_per_iteration * loop_iterations,
                "acl_sync_calls": len(syncs),
            }
        _write_trace(mso / f"msprof_{ts}.json", events)
    if db:
        _write_db(folder / f"msprof_{ts}.db", kinds, start, dur, copies, copy_bytes, copy_us)
    if device_info is not None:
        _info_json(folder / "device_0", *device_info)
    gt.copies = {"count": copies, "bytes_each": copy_bytes, "device_us_each": copy_us, "mode": "sync"}
    gt.profile_dir = str(folder)
    (out / "ground_truth.json").write_text(json.dumps(gt.__dict__, indent=2), encoding="utf-8")
    return gt


_DB_SCHEMA = """
CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY,value TEXT);
CREATE TABLE ENUM_API_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_HCCL_TRANSPORT_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_HCCL_LINK_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_MEMCPY_OPERATION (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE NPU_INFO (id INTEGER,name TEXT);
CREATE TABLE META_DATA (name TEXT,value TEXT);
CREATE TABLE TASK (startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,
                   globalPid INTEGER,
                   taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER);
CREATE TABLE COMPUTE_TASK_INFO (name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,
                   taskType INTEGER,
                   opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,outputFormats INTEGER,
                   outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER,opState INTEGER,hf32Eligible INTEGER);
CREATE TABLE COMMUNICATION_TASK_INFO (name INTEGER,globalTaskId INTEGER,taskType INTEGER,planeId INTEGER,
                   groupName INTEGER,
                   notifyId INTEGER,rdmaType INTEGER,srcRank INTEGER,dstRank INTEGER,transportType INTEGER,size INTEGER,
                   dataType INTEGER,linkType INTEGER,opId INTEGER,isMaster INTEGER,bandwidth NUMERIC);
CREATE TABLE COMMUNICATION_OP (opName INTEGER,startNs INTEGER,endNs INTEGER,connectionId INTEGER,groupName INTEGER,
                   opId INTEGER PRIMARY KEY,relay INTEGER,retry INTEGER,dataType INTEGER,algType INTEGER,count NUMERIC,
                   opType INTEGER,deviceId INTEGER);
CREATE TABLE MEMCPY_INFO (globalTaskId NUMERIC PRIMARY KEY,size NUMERIC,memcpyOperation NUMERIC);
CREATE TABLE CANN_API (startNs INTEGER,endNs INTEGER,type INTEGER,globalTid INTEGER,connectionId INTEGER PRIMARY KEY,
                   name INTEGER);
"""
_RUNTIME_TYPE = {
    "AI_CORE": "KERNEL_AICORE",
    "AI_VECTOR_CORE": "KERNEL_AIVEC",
    "AI_CPU": "KERNEL_AICPU",
    "MIX_AIC": "MIX_AIC",
}
_HCCL_STREAM = 4
_SUBTASKS = (
    ("Notify_Wait", 0.55, 0),
    ("Memcpy", 0.2, 1 << 20),
    ("Reduce_Inline", 0.15, 1 << 20),
    ("Notify_Record", 0.02, 0),
)


def _info_json(device: Path, ai_core_num: int, aiv_num: int) -> None:
    """msprof's device_N/info.json.N (and its .done marker), with the fields of a real Atlas A2 file."""
    device.mkdir(parents=True, exist_ok=True)
    info = {
        "jobInfo": "NA",
        "version": "1.0",
        "OS": "Linux-5.10.0-aarch64",
        "cpuCores": 192,
        "hostname": "npudiag-host",
        "hwtype": "aarch64",
        "devices": "0",
        "platform": "Ascend910B",
        "DeviceInfo": [
            {
                "id": 0,
                "env_type": 3,
                "ctrl_cpu_id": "ARMv8_Cortex_A55",
                "ctrl_cpu_core_num": 1,
                "ctrl_cpu_endian_little": 1,
                "ts_cpu_core_num": 1,
                "ai_cpu_core_num": 6,
                "ai_core_num": ai_core_num,
                "ai_cpu_core_id": 1,
                "ai_core_id": 0,
                "aicpu_occupy_bitmap": 126,
                "ctrl_cpu": "0",
                "ai_cpu": "1,2,3,4,5,6",
                "aiv_num": aiv_num,
                "hwts_frequency": "50",
                "aic_frequency": "1800",
                "aiv_frequency": "1800",
            }
        ],
        "platform_version": "5",
        "pid": "2647914",
        "memoryTotal": 1584332800,
        "cpuNums": 192,
        "sysClockFreq": 100,
        "rank_id": 0,
    }
    (device / "info.json.0").write_text(json.dumps(info), encoding="utf-8")
    (device / "info.json.0.done").write_text("", encoding="utf-8")


def _communication_json(path: Path, kinds, start, dur, step, sizes_mb: list[float]) -> None:
    """torch_npu's communication.json: per step, per collective op, its Communication Time Info and its
    Communication Bandwidth Info for every transport (those it did not use at 0), as Level1 writes it."""
    empty = {
        "Transit Size(MB)": 0,
        "Transit Time(ms)": 0,
        "Bandwidth(GB/s)": 0,
        "Large Packet Ratio": 0,
        "Size Distribution": {},
    }
    out: dict = {}
    for n, i in enumerate(np.flatnonzero(np.array([OP_MIX[k][2] for k in kinds]) == "HCCL")):
        size = sizes_mb[n % len(sizes_mb)]
        elapse_ms = float(dur[i]) / 1000.0
        transit_ms = round(elapse_ms * 0.8, 6)
        moved = {
            "Transit Size(MB)": size,
            "Transit Time(ms)": transit_ms,
            "Bandwidth(GB/s)": round(size / transit_ms, 4),
            "Large Packet Ratio": 1.0 if size >= 16 else 0.0,
            "Size Distribution": {str(size): [1, transit_ms]},
        }
        op = {
            "Communication Time Info": {
                "Start Timestamp(us)": float(start[i]),
                "Elapse Time(ms)": elapse_ms,
                "Transit Time(ms)": transit_ms,
                "Wait Time(ms)": round(elapse_ms - transit_ms, 6),
                "Synchronization Time(ms)": 0,
                "Idle Time(ms)": 0,
                "Wait Time Ratio": round((elapse_ms - transit_ms) / elapse_ms, 4),
                "Synchronization Time Ratio": 0,
            },
            "Communication Bandwidth Info": {"RDMA": empty, "HCCS": moved, "PCIE": empty, "SDMA": moved, "SIO": empty},
        }
        ops = out.setdefault(f"step{int(step[i])}", {"p2p": {}, "collective": {}})["collective"]
        ops[f"hcom_allReduce__868_{n}_1@13986101957389520"] = op
    path.write_text(json.dumps(out, indent=4), encoding="utf-8")


def _write_analysis_db(path: Path, step_rows: list[list[str]]) -> None:
    """torch_npu's analysis.db: StepTraceTime holds what step_trace_time.csv holds (µs)."""
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE StepTraceTime (step TEXT, computing NUMERIC, "
        "communication_not_overlapped NUMERIC, overlapped NUMERIC, "
        "communication NUMERIC, free NUMERIC, stage NUMERIC, bubble NUMERIC, "
        "communication_not_overlapped_and_exclude_receive NUMERIC, "
        "preparing NUMERIC)"
    )
    con.executemany(
        "INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?)", [(r[1], *map(float, r[2:])) for r in step_rows]
    )
    con.commit()
    con.close()


def overlap_analysis_rows(compute: list[tuple[int, int]], comm: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """MindStudio Insight's OVERLAP_ANALYSIS rows (type 0 Computing, 1 Communication, 2 Communication
    (Not Overlapped), 3 Free): the merged compute and communication blocks, then the
    not-overlapped parts of communication and the gaps between blocks, as Insight writes them when
    it opens a .db (compute tasks with startNs == endNs left out)."""

    def merged(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out: list[list[int]] = []
        for s, e in sorted(iv):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return [(s, e) for s, e in out]

    mc = merged([(s, e) for s, e in compute if s != e])
    mm = merged(comm)
    rows = [(s, e, 0) for s, e in mc] + [(s, e, 1) for s, e in mm]
    blocks = merged(mc + mm)
    for a, b in zip(blocks, blocks[1:]):
        rows.append((a[1], b[0], 3))
    # not overlapped: each communication block minus the compute blocks
    j = 0
    for s, e in mm:
        cur = s
        while j < len(mc) and mc[j][1] <= s:
            j += 1
        k = j
        while k < len(mc) and mc[k][0] < e:
            if mc[k][0] > cur:
                rows.append((cur, mc[k][0], 2))
            cur = max(cur, mc[k][1])
            k += 1
        if cur < e:
            rows.append((cur, e, 2))
    return rows


def _write_db(
    path: Path,
    kinds,
    start,
    dur,
    copies: int,
    copy_bytes: int,
    copy_us: float,
    *,
    step=None,
    rank: int | None = None,
    overlap_analysis: bool = False,
    ranges: dict | None = None,
) -> None:
    """A profiler export database in the documented layout (msprof docs, msprof_db.md): compute
    kernels in TASK + COMPUTE_TASK_INFO, each communication op in COMMUNICATION_OP with its HCCL
    sub-tasks in TASK + COMMUNICATION_TASK_INFO on HCCL's stream (plus the per-op task HCCL puts
    there, which has no info row), MEMCPY tasks with MEMCPY_INFO, EVENT record/wait tasks, and the
    host calls in CANN_API. ``step`` adds torch_npu's STEP_TIME and RANK_DEVICE_MAP;
    ``overlap_analysis`` adds the table MindStudio Insight writes into a .db it opens."""
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    con.executescript(_DB_SCHEMA)
    con.executemany(
        "INSERT INTO ENUM_API_TYPE VALUES (?, ?)",
        [(20000, "acl"), (15000, "model"), (10000, "node"), (5500, "communication"), (5000, "runtime")],
    )
    con.executemany(
        "INSERT INTO ENUM_HCCL_TRANSPORT_TYPE VALUES (?, ?)",
        [(0, "SDMA"), (1, "RDMA"), (2, "LOCAL"), (65535, "INVALID_TYPE")],
    )
    con.executemany(
        "INSERT INTO ENUM_HCCL_LINK_TYPE VALUES (?, ?)",
        [(0, "ON_CHIP"), (1, "HCCS"), (2, "PCIE"), (65535, "INVALID_TYPE")],
    )
    operations = [
        (0, "host to host"),
        (1, "host to device"),
        (2, "device to host"),
        (3, "device to device"),
        (65535, "other"),
    ]
    con.executemany("INSERT INTO ENUM_MEMCPY_OPERATION VALUES (?, ?)", operations)
    con.execute("INSERT INTO NPU_INFO VALUES (0, 'Ascend910B2')")
    con.execute("INSERT INTO META_DATA VALUES ('SCHEMA_VERSION', '1.1.1')")
    ids: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in ids:
            ids[s] = len(ids)
        return ids[s]

    pid = 2647914 + (rank or 0)
    tid = (pid << 32) | pid
    tasks, infos, comm_infos, comm_ops, apis, memcpy = [], [], [], [], [], []
    compute_iv, comm_iv = [], []
    g = conn = 0
    op_id = 0
    group = sid("90.91.105.46%enp189s0f0_60000_0_1736410538306028")
    for i in range(len(kinds)):
        op_type, name, ttype, _, _, shapes, dtypes = OP_MIX[kinds[i]]
        s_ns = int(round(start[i] * 1000))
        e_ns = s_ns + int(round(dur[i] * 1000))
        conn += 1
        if ttype == "HCCL":
            op_id += 1
            comm_ops.append(
                (sid(name), s_ns, e_ns, conn, group, op_id, 0, 0, 4, sid("MESH-RING"), 4097000, sid(op_type), 0)
            )
            comm_iv.append((s_ns, e_ns))
            apis.append((s_ns - 15000, s_ns - 5000, 5500, tid, conn, sid("hcom_allReduce_")))
            # HCCL's own per-op task on its stream, with no info row
            tasks.append((s_ns, e_ns, 0, conn, g, pid, sid("AI_CORE"), 4294967295, _HCCL_STREAM, 1000 + i, NO_MODEL))
            g += 1
            t = s_ns
            for k, (sub, share, nbytes) in enumerate(_SUBTASKS):
                d = int((e_ns - s_ns) * share)
                tasks.append(
                    (
                        t,
                        t + d,
                        0,
                        conn,
                        g,
                        pid,
                        sid("Notify Wait" if "Notify" in sub else "SDMA"),
                        4294967295,
                        _HCCL_STREAM,
                        1000 + i,
                        NO_MODEL,
                    )
                )
                bw = nbytes / (d / 1e9) if d and nbytes else 0
                comm_infos.append(
                    (
                        sid(name),
                        g,
                        sid(sub),
                        k % 2,
                        group,
                        k,
                        65535,
                        rank or 0,
                        1,
                        0,
                        nbytes,
                        4,
                        1 if nbytes else 0,
                        op_id,
                        1,
                        bw,
                    )
                )
                g += 1
                t += d
            continue
        apis.append((s_ns - 12000, s_ns - 7500, 20000, tid, conn, sid("aclnn" + op_type)))
        tasks.append(
            (s_ns, e_ns, 0, conn, g, pid, sid(_RUNTIME_TYPE.get(ttype, ttype)), 4294967295, 2, 34473 + i, NO_MODEL)
        )
        infos.append(
            (
                sid(name),
                g,
                40,
                0,
                sid(ttype),
                sid(op_type),
                sid("ND"),
                sid(dtypes),
                sid(shapes.strip('"')),
                sid("ND"),
                sid(dtypes),
                sid(shapes.strip('"')),
                sid(""),
                sid("dynamic"),
                sid("NO"),
            )
        )
        compute_iv.append((s_ns, e_ns))
        g += 1
        if kinds[i] == 0 and i % 7 == 0:  # an event hand-over to the HCCL stream now and then
            tasks.append((e_ns, e_ns + 20, 0, conn, g, pid, sid("EVENT_RECORD"), 4294967295, 2, 90000 + i, NO_MODEL))
            g += 1
    t = int(round((start[-1] + dur[-1] + 100.0) * 1000))
    for _ in range(copies):
        conn += 1
        apis.append((t, t + int((copy_us + 20.0) * 1000), 20000, tid, conn, sid("aclrtMemcpy")))
        tasks.append(
            (
                t + 10000,
                t + 10000 + int(copy_us * 1000),
                0,
                conn,
                g,
                pid,
                sid("MEMCPY_ASYNC"),
                4294967295,
                2,
                90000 + g,
                NO_MODEL,
            )
        )
        memcpy.append((g, copy_bytes, 1))
        g += 1
        t += int((copy_us + 200.0) * 1000)
    con.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", tasks)
    con.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", infos)
    con.executemany("INSERT INTO COMMUNICATION_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", comm_infos)
    con.executemany("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", comm_ops)
    con.executemany("INSERT INTO MEMCPY_INFO VALUES (?,?,?)", memcpy)
    con.executemany("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)", apis)
    if step is not None:
        con.execute("CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER)")
        con.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?, 0)", (rank or 0,))
        con.execute("CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER)")
        recorded = ranges or step_ranges(start, dur, step)
        rows = [(sv, int(round(lo * 1000)), int(round(hi * 1000))) for sv, (lo, hi, _) in recorded.items()]
        con.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?)", rows)
    if overlap_analysis:
        con.execute(
            "CREATE TABLE OVERLAP_ANALYSIS (id INTEGER PRIMARY KEY AUTOINCREMENT, deviceId integer, startNs integer, "
            "endNs integer, type integer)"
        )
        con.executemany(
            "INSERT INTO OVERLAP_ANALYSIS (deviceId, startNs, endNs, type) VALUES (0, ?, ?, ?)",
            overlap_analysis_rows(compute_iv, comm_iv),
        )
    con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(v, k) for k, v in ids.items()])
    con.commit()
    con.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=["torch", "msprof"], default="torch")
    ap.add_argument("--kernels", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--db", action="store_true", help="msprof: also write msprof_{ts}.db")
    ap.add_argument("--ranks", type=int, default=1, help="torch: this many ranks (0..N-1, seed+rank each) under --out")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.ranks < 1 or (a.ranks > 1 and a.kind != "torch"):
        ap.error("--ranks: a positive count, and more than 1 only with --kind torch")
    if a.kind == "torch":
        for rank in range(a.ranks):
            gt = write_torch_profile(a.out, a.kernels, a.seed + rank, rank=rank, copies=a.copies)
            if rank < a.ranks - 1:
                print(gt.profile_dir)
    else:
        gt = write_msprof_profile(a.out, a.kernels, a.seed, copies=a.copies, db=a.db)
    print(gt.profile_dir)


if __name__ == "__main__":
    main()
