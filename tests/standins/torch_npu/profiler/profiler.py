"""Stand-in for torch_npu's offline parse, ``analyse(profiler_path, max_process_number, export_type)``.

Like the real one it takes the folder that holds ``{worker}_{timestamp}_ascend_pt`` folders and
parses each that has raw data (FRAMEWORK/, PROF_*/) into its ASCEND_PROFILER_OUTPUT, here with
npudiag's fixture generator (the real text export: kernel_details.csv, trace_view.json, ...).
TORCH_NPU_ANALYSE_LOG=<file> records each call's profiler_path."""

import os
import shutil
import sys
import tempfile
from pathlib import Path


def analyse(profiler_path="", max_process_number=None, export_type=None):
    root = Path(profiler_path)
    if not root.is_dir():
        raise ValueError(f"Invalid profiler path: {profiler_path}")
    if os.environ.get("TORCH_NPU_ANALYSE_LOG"):
        with open(os.environ["TORCH_NPU_ANALYSE_LOG"], "a", encoding="utf-8") as fh:
            fh.write(f"{root}\n")
    sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
    from npudiag.testing.generate import write_torch_profile

    for pt in sorted(root.glob("*_ascend_pt")):
        if (pt / "ASCEND_PROFILER_OUTPUT").is_dir() or not (pt / "FRAMEWORK").is_dir():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            gt = write_torch_profile(Path(tmp), kernels=400, steps=3, copies=2, seed=5)
            shutil.copytree(Path(gt.profile_dir) / "ASCEND_PROFILER_OUTPUT", pt / "ASCEND_PROFILER_OUTPUT")
