"""torch_npu's ``profiler_metadata.json`` (beside ASCEND_PROFILER_OUTPUT in each rank folder).

Only ``distributed_args`` is taken: the Megatron sizes (world, TP, PP, DP, CP, EP) that place a
rank in the parallel layout, which msprof-analyze turns into the DP/PP/TP Index columns of
cluster_step_trace_time.csv. The file is optional; a broken one is a warning, not an error,
because everything else about the rank is still readable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npudiag.errors import InputError
from npudiag.safeio import load_json

MAX_BYTES = 16 << 20  # metadata is a few kB; a larger file is not one torch_npu wrote


def read_distributed_args(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(distributed_args or None, warning or None)."""
    if not path.exists() and not path.is_symlink():
        return None, None
    try:
        data = load_json(path, MAX_BYTES)
    except InputError as exc:
        return None, f"{exc.one_line()}; its distributed_args were ignored"
    args = data.get("distributed_args") if isinstance(data, dict) else None
    if args is not None and not isinstance(args, dict):
        return None, f"{path}: distributed_args is not an object; ignored"
    return args, None
