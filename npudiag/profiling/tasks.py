"""The device task model: one rule, for every source, that says what a device task is.

Every reader that sees device tasks (kernel_details / op_summary / task_time CSVs, trace JSON,
``.db`` exports) hands its rows to :func:`classify`, which puts each in exactly one class:

- ``compute``: an operator running on a compute unit (AI_CORE, AI_VECTOR_CORE, MIX_AIC/AIV, AI_CPU,
  DSA, the ``KERNEL_*`` runtime types, torch_npu's old ``Other``, or no task type at all as
  torch_npu Level0 writes it). These are kernels.
- ``communication``: one row per collective / p2p communication op (``HCCL`` / ``COMMUNICATION``
  rows, ``hcom_*`` names), as kernel_details has them. These are kernels too.
- ``comm_task``: a sub-task HCCL runs for an op (Notify Wait / Record, SDMA, RDMA, Reduce Inline,
  Write Value, and any task on a stream HCCL owns). They go to ``comm_tasks``, never to kernels:
  the op row already covers their time.
- ``copy``: a memory copy task (``MEMCPY_*``, the DMA SQE types). They go to ``copies``.
- ``sync``: stream synchronisation (EVENT_RECORD / WAIT / RESET, NOTIFY_* outside HCCL, their
  ``*_SQE`` forms). Counted, not kernels: an EVENT_WAIT lasts as long as the wait.
- ``other``: bookkeeping tasks (PROFILING_ENABLE / DISABLE, TASK_TIMEOUT_SET, MODEL_*...) and, in
  a ``.db``, compute-type tasks without COMPUTE_TASK_INFO (the export's own kernel tables leave
  them out). Counted, not kernels.

A task type this table does not know is counted as compute, and named in a warning, so a new
compute unit is not lost silently.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COMPUTE = "compute"
COMMUNICATION = "communication"
COMM_TASK = "comm_task"
COPY = "copy"
SYNC = "sync"
OTHER = "other"
CLASSES = (COMPUTE, COMMUNICATION, COMM_TASK, COPY, SYNC, OTHER)
KERNEL_CLASSES = (COMPUTE, COMMUNICATION)

COMPUTE_TYPES = frozenset(
    {
        "AI_CORE",
        "AI_VECTOR_CORE",
        "MIX_AIC",
        "MIX_AIV",
        "AI_CPU",
        "AICPU",
        "KERNEL_AICORE",
        "KERNEL_AIVEC",
        "KERNEL_AICPU",
        "KERNEL_MIX_AIC",
        "KERNEL_MIX_AIV",
        "FFTS_PLUS",
        "DSA_SQE",
        "DSA",
        "STARS_COMMON",
        "AIC_SQE",
        "AIV_SQE",
        "AICPU_SQE",
        "DVPP",
        "Other",  # torch_npu 2023 traces write every compute task as "Other"
        "N/A",
        "",
    }
)
COMMUNICATION_TYPES = frozenset({"HCCL", "COMMUNICATION"})
# HCCL's own sub-task types, as the trace, task_time and the .db TASK table name them
COMM_TASK_TYPES = frozenset(
    {
        "Notify Wait",
        "Notify Record",
        "Notify_Wait",
        "Notify_Record",
        "Write Value",
        "WRITE_VALUE",
        "SDMA",
        "RDMA",
        "RDMA_SEND",
        "RDMASend",
        "Reduce Inline",
        "Reduce_Inline",
        "REDUCE_INLINE",
        "REDUCE_ASYNC_V2",
        "REDUCE_ASYNC",
        "Memcpy",
        "LOCAL",
        "HCCL_AI_CPU",
        "HCCL_AICPU",
        "CCU",
    }
)
COPY_TYPES = frozenset(
    {"MEMCPY_ASYNC", "MEMCPY", "MEMCPY_ASYNC_SQE", "PCIE_DMA_SQE", "SDMA_SQE", "ASYNCCPY_SQE", "MEMCPY_ADDR_ASYNC"}
)
SYNC_TYPES = frozenset(
    {
        "EVENT_RECORD",
        "EVENT_WAIT",
        "EVENT_RESET",
        "EVENT_RECORD_SQE",
        "EVENT_WAIT_SQE",
        "EVENT_RESET_SQE",
        "NOTIFY_RECORD",
        "NOTIFY_WAIT",
        "NOTIFY_RECORD_SQE",
        "NOTIFY_WAIT_SQE",
        "STREAM_WAIT_EVENT",
        "STREAM_SWITCH",
        "STREAM_ACTIVE",
        "PLACE_HOLDER_SQE",
        "CAPTURE_RECORD",
        "CAPTURE_WAIT",
        "COND_SQE",
        "BARRIER",
    }
)
OTHER_TYPES = frozenset(
    {
        "PROFILING_ENABLE",
        "PROFILING_DISABLE",
        "TASK_TIMEOUT_SET",
        "MODEL_MAINTAINCE",
        "MODEL_EXECUTE",
        "MODEL_END_GRAPH",
        "MODEL_TO_AICPU",
        "MAINTENANCE",
        "WRITE_BACK",
        "INVALID",
        "LABEL_SET",
        "LABEL_SWITCH",
        "LABEL_GOTO",
        "FLIP",
        "RDMA_DB_SEND",
        "TIMESTAMP",
    }
)
KNOWN_TYPES = COMPUTE_TYPES | COMMUNICATION_TYPES | COMM_TASK_TYPES | COPY_TYPES | SYNC_TYPES | OTHER_TYPES


def classify(
    task_type: pa.ChunkedArray | pa.Array,
    op_name: pa.ChunkedArray | pa.Array,
    hccl_stream: np.ndarray | None = None,
) -> tuple[pa.Array, list[str]]:
    """Each task's class, and the task types not in the tables above (counted as compute).

    ``hccl_stream`` marks tasks on a stream HCCL owns (known from HCCL plane tasks or the .db's
    COMMUNICATION_TASK_INFO): every task there except the op rows and EVENT_* hand-overs is a
    communication sub-task, whatever its type (HCCL's MEMCPY_ASYNC and NOTIFY_* tasks run there).

    A task type (whitespace trimmed) decides the class, except that an op name starting
    ``hcom_`` makes a row typed as nothing more specific a communication op, and an op name holding
    ``MEMCPY`` (any case) makes a row that is not a communication sub-task a copy. What a type
    implies is worked out once per distinct type (a profile has a few dozen), then looked up per row."""
    n = len(task_type)
    raw = pc.cast(task_type, pa.string())
    distinct = pc.unique(raw)
    row_type = pc.index_in(raw, value_set=distinct).to_numpy(zero_copy_only=False).astype(np.intp)  # null matches null
    # per distinct type (vectorised too: a hostile file may have as many types as rows): the class the
    # type gives by itself, and the facts the op name and the stream combine with
    types = pc.utf8_trim_whitespace(distinct)

    def among(values: frozenset[str]) -> np.ndarray:
        return pc.fill_null(pc.is_in(types, pa.array(sorted(values), pa.string())), False).to_numpy(
            zero_copy_only=False
        )

    def holds(text: str) -> np.ndarray:
        return pc.fill_null(pc.match_substring(types, text), False).to_numpy(zero_copy_only=False)

    by_type = np.full(len(types), _CODE[COMPUTE], np.int8)
    for values, label in ((OTHER_TYPES, OTHER), (SYNC_TYPES, SYNC), (COMM_TASK_TYPES, COMM_TASK)):  # the last one wins
        by_type[among(values)] = _CODE[label]
    type_copy = among(COPY_TYPES) | holds("MEMCPY")
    comm_type = among(COMMUNICATION_TYPES)
    hcom_may_name = ~among(KNOWN_TYPES - COMPUTE_TYPES)
    name_copy_may = ~among(COMM_TASK_TYPES)
    event = holds("EVENT")
    unknown_type = ~among(KNOWN_TYPES) & pc.is_valid(types).to_numpy(zero_copy_only=False)

    name = pc.fill_null(pc.cast(op_name, pa.string()), "")
    hcom_name = pc.starts_with(name, "hcom_").to_numpy(zero_copy_only=False)
    memcpy_name = pc.match_substring(name, "MEMCPY", ignore_case=True).to_numpy(zero_copy_only=False)

    code = by_type[row_type]
    code[type_copy[row_type] | (memcpy_name & name_copy_may[row_type])] = _CODE[COPY]
    if hccl_stream is not None and len(hccl_stream) == n:
        code[hccl_stream] = _CODE[COMM_TASK]
        # events on HCCL's streams are the hand-over between compute and communication streams: sync
        code[hccl_stream & event[row_type]] = _CODE[SYNC]
    code[comm_type[row_type] | (hcom_name & hcom_may_name[row_type])] = _CODE[COMMUNICATION]
    unknown_rows = unknown_type[row_type] & (code == _CODE[COMPUTE])
    unknown = (
        sorted(set(types.take(pa.array(np.unique(row_type[unknown_rows]))).to_pylist())) if unknown_rows.any() else []
    )
    return _LABELS.take(pa.array(code)), unknown


_LABELS = pa.array(CLASSES, pa.string())
_CODE = {c: np.int8(i) for i, c in enumerate(CLASSES)}


def counts(
    classes: pa.Array, task_type: pa.ChunkedArray | pa.Array, keep: tuple[str, ...] = (SYNC, OTHER)
) -> dict[str, dict[str, int]]:
    """``{class: {task type: count}}`` for the classes that leave no table of their own."""
    out: dict[str, dict[str, int]] = {}
    if len(classes) == 0:
        return out
    t = pa.table({"c": classes, "t": pc.fill_null(pc.cast(task_type, pa.string()), "(none)")})
    t = t.filter(pc.is_in(t["c"], pa.array(list(keep), pa.string())))
    if t.num_rows == 0:
        return out
    g = (
        t.group_by(["c", "t"], use_threads=False)
        .aggregate([("t", "count")])
        .sort_by([("c", "ascending"), ("t", "ascending")])
    )
    for c, ttype, k in zip(g["c"].to_pylist(), g["t"].to_pylist(), g["t_count"].to_pylist()):
        out.setdefault(c, {})[ttype] = k
    return out


def merge_counts(parts: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for p in parts:
        for c, by_type in p.items():
            for t, k in by_type.items():
                out.setdefault(c, {})[t] = out.get(c, {}).get(t, 0) + k
    return {c: dict(sorted(v.items())) for c, v in sorted(out.items())}


def is_kernel(kernels: pa.Table) -> pa.ChunkedArray:
    return pc.fill_null(pc.is_in(kernels["task_class"], pa.array(list(KERNEL_CLASSES))), True)


def communication_mask(kernels: pa.Table) -> np.ndarray:
    """Kernels that are communication ops (the one definition every analysis uses)."""
    if kernels.num_rows == 0:
        return np.zeros(0, bool)
    return pc.fill_null(pc.equal(kernels["task_class"], COMMUNICATION), False).to_numpy(zero_copy_only=False)
