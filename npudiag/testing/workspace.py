"""A working folder for trying every command: what the --help examples, the render tests and
``scripts/capture_cli.py`` run on. Everything in it is written by the real-format generators."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from npudiag.testing.dump_writer import Tensor, dump_file_name, model_dump_dir, write_dump_file
from npudiag.testing.generate import Variation, write_torch_profile

# two lines of a real plog (ascend-faultdiag's test fixture plog-1365_20250806230935838.log)
PLOG = (
    "[ERROR] RUNTIME(1365,python3.8):2025-08-06-23:09:35.772.604 [stars_engine.cc:1551]6219 ProcLogicCqRe"
    "port:[FINAL][FINAL]Task run failed, device_id=3, stream_id=2, task_id=8885, sqe_type=3(place holder)"
    ", errType=0x20(sq sw status error), sqSwStatus=0x105"
    "\n"
    "[ERROR] APP(1365,python3.8):2025-08-06-23:09:42.725.168 [log_inner.cpp:76]6124 build/CMakeFiles/torc"
    'h_npu.dir/compiler_depend.ts:checkDispatch:685: "[PTA]:"Process group work REDUCE_SCATTER, seq_num 3'
    '2716847 dispatch timeout. device 3: the current working event is 0xaaab40f5c5d0. ""'
    "\n"
)
# what `dmesg` prints of a real driver line (the knowledge base's example, from a public report)
DMESG = "[ 2204.894988] [ascend] [devdrv] [devdrv_heart_beat_callback 1338] receive ts exception msg\n"


def _dump_tree(root: Path, bad_from: int | None) -> None:
    """A chain of MatMul ops dumped in CANN's binary format; from op ``bad_from`` on the outputs drift."""
    d = model_dump_dir(root)
    x = np.random.default_rng(1).normal(size=(4, 64)).astype(np.float32)
    for i in range(6):
        # float64 then float32: a float32 matmul's last bits depend on the CPU's BLAS kernels, and the
        # capture of these files in docs/ must be the same on every machine
        w = np.random.default_rng(100 + i).normal(size=(64, 64)).astype(np.float32).astype(np.float64) / 8
        y = np.tanh(x.astype(np.float64) @ w).astype(np.float32)
        if bad_from is not None and i >= bad_from:
            y = y + np.random.default_rng(7 + i).normal(size=y.shape).astype(np.float32) * 0.3
        if i == 2:
            y[0, 0] = np.nan
        name = f"conv{i}" if i else "conv1_long_name_aclnnInplaceAdd_AddAiCore_Add_with_a_distinctive_end"
        write_dump_file(
            d / dump_file_name("MatMul", name, 10 + i, 1, 1764246877073569 + i), name, [Tensor(x)], [Tensor(y)]
        )
        x = y


def build_workspace(root: Path, fixtures: Path) -> Path:
    """``root`` filled with what every command's example reads: the bundled samples (copied from
    ``fixtures``), an 8-rank cluster with one slow rank, two dumps (one drifting from op 3 on, with
    a NaN), a host log folder, an empty train.py and a ``python`` on ``root/pybin``."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(fixtures, root / "fixtures")
    for rank in range(8):
        scale = {"MatMulV3": 1.3} if rank == 5 else {}
        write_torch_profile(
            root / "cluster_prof",
            kernels=600,
            seed=4,
            steps=4,
            rank=rank,
            copies=2,
            variation=Variation(rank, 0.01, scale),
            repeat_steps=True,
        )
    (root / "cluster_prof" / "ground_truth.json").unlink()
    _dump_tree(root / "dump", bad_from=3)
    _dump_tree(root / "golden", bad_from=None)
    plog = root / "ascend" / "log" / "debug" / "plog"
    plog.mkdir(parents=True)
    (plog / "plog-1365_20250806230935838.log").write_text(PLOG)
    (root / "train.py").write_text("print('training')\n")
    pybin = root / "pybin"
    pybin.mkdir()
    (pybin / "python").symlink_to(sys.executable)
    return root
