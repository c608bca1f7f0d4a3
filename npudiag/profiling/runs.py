"""One side of a comparison: a profile, an earlier ``--out`` folder, or a folder of repeated runs.

``compare`` and ``gate`` take either raw profiler output (anything ``analyze`` reads) or the folder
``analyze --out`` wrote; both become the same table set. A folder whose sub-folders each hold a
whole profile (``run1/PROF_*``, ``run2/PROF_*``, or ``--out`` folders) is a set of repeated runs of
one workload; a folder whose sub-folders *are* profiles (``PROF_*``, ``*_ascend_pt``) is one
profile of several ranks, as ``analyze`` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag.errors import InputError, OptionError
from npudiag.output import OutputFolder, npudiag_manifest, write_manifest
from npudiag.profiling.analysis.op_perf import op_perf
from npudiag.profiling.analysis.window import CutError, Window, WindowError
from npudiag.profiling.derive import cut_and_derive
from npudiag.profiling.discover import discover, is_msprof_folder, is_torch_folder, run_groups
from npudiag.profiling.formats.registry import read_tables
from npudiag.profiling.ingest import ingest
from npudiag.store import analysis_manifest, load_outputs, write_table


@dataclass
class Run:
    """One profile's full table set (read and derived) and where it came from."""

    path: Path
    tables: dict[str, pa.Table]
    manifest: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)  # an out folder's: the warnings of the analysis that wrote it


def is_out_folder(path: Path) -> bool:
    """A folder of tables ``analyze --out`` (or ``gate --update-baseline``) wrote: its manifest.json is
    npudiag's and says so (manifests of npudiag before the ``output`` key were all analyze's)."""
    manifest = npudiag_manifest(path)
    return manifest is not None and manifest.get("output", "analyze") == "analyze"


def _analysed(tables: dict[str, pa.Table], window: Window, rule_options: dict[str, dict[str, Any]] | None, path: Path):
    try:
        return cut_and_derive(tables, window, rule_options)
    except (WindowError, CutError) as exc:
        raise OptionError(f"{path}: {exc}", window.option) from None


def load_run(
    path: Path,
    rule_options: dict[str, dict[str, Any]] | None = None,
    window: Window = Window(),
    need_kernels: bool = True,
) -> Run:
    """Read one profile (cut to ``window``, as ``analyze`` cuts it). Raw input that yields no kernels
    at all is unusable: InputError (without ``need_kernels``, framework ops alone do: a PyTorch GPU
    trace as the baseline of a torch-level comparison); a window that holds nothing of it: OptionError."""
    if path.is_dir() and is_out_folder(path):
        tables, manifest = load_outputs(path)
        warnings, earlier = [], [f"{path}: {w}" for w in manifest.get("warnings", [])]
        if window.active:  # the tables as read, cut, then derived again as analyze would have
            _cuttable(path, tables)
            tables = _analysed(
                {n: t for n, t in tables.items() if n in read_tables()}, window, rule_options, path
            ).tables
            manifest = {**manifest, "window": {"steps": window.steps, "time_us": window.time_us}}
        elif rule_options and rule_options.get("op_efficiency"):  # a peak given now: the stored op_perf took another
            tables["op_perf"] = op_perf(tables, rule_options["op_efficiency"])
    else:
        profile = ingest([path], hash_inputs=False)
        if not any(f.used_for for f in profile.inputs):
            raise InputError(path, profile.errors[0] if profile.errors else "no profiler data found")
        if window.active:
            _cuttable(path, profile.tables)
        done = _analysed(profile.tables, window, rule_options, path)
        tables = done.tables
        row_counts = {name: t.num_rows for name, t in profile.tables.items()}
        manifest = analysis_manifest(
            profile.inputs,
            profile.units,
            row_counts,
            profile.warnings,
            profile.errors,
            rules={"options": rule_options or {}, "skipped": done.skipped},
        )
        warnings, earlier = profile.warnings + profile.errors, []
    if tables["kernels"].num_rows == 0:
        if need_kernels:
            hint = (
                "; a PyTorch (Kineto) trace compares with --level torch"
                if tables.get("torch_ops", pa.table({})).num_rows
                else ""
            )
            raise InputError(path, f"no NPU kernels in this profile; nothing to compare{hint}")
        if tables.get("torch_ops") is None or tables["torch_ops"].num_rows == 0:
            raise InputError(path, "neither NPU kernels nor framework ops (cpu_op) in this profile; nothing to compare")
    return Run(path, tables, manifest, warnings, earlier)


def _cuttable(path: Path, tables: dict[str, pa.Table]) -> None:
    """A step / time window cuts a run by its device tasks: a run without them (a PyTorch GPU trace) cannot be cut."""
    if tables["kernels"].num_rows == 0:
        raise OptionError(
            f"--steps / --time cut a run by its device tasks, and {path} has none (a PyTorch GPU trace "
            "cannot be cut): leave the window out",
            "steps",
        )


def _holds_profile(folder: Path) -> bool:
    if is_out_folder(folder) or is_torch_folder(folder) or is_msprof_folder(folder):
        return True
    try:
        return any(c.is_dir() and (is_torch_folder(c) or is_msprof_folder(c)) for c in folder.iterdir())
    except OSError:
        return False


def run_folders(path: Path) -> list[Path]:
    """The repeated runs under ``path``, or ``[path]`` when it is a single profile."""
    if not path.is_dir() or is_out_folder(path) or is_torch_folder(path) or is_msprof_folder(path):
        return [path]
    try:
        children = sorted(c for c in path.iterdir() if c.is_dir() and not c.name.startswith("."))
    except OSError as exc:
        raise InputError(path, f"cannot list folder ({exc.strerror})") from None
    if children and not any(is_torch_folder(c) or is_msprof_folder(c) for c in children):
        runs = [c for c in children if _holds_profile(c)]
        if runs:
            return runs
    # profiles side by side that are runs of one process (several `npudiag profile` into one
    # --collect-dir): each a run, as analyze counts them, never the ranks of one run
    units = discover(path, [], False)
    groups = run_groups(units)
    if len(groups) == 1 and len(groups[0]) == len(units):
        return [u.path for u in groups[0]]
    return [path]


def load_side(
    path: Path,
    rule_options: dict[str, dict[str, Any]] | None = None,
    window: Window = Window(),
    need_kernels: bool = True,
) -> list[Run]:
    if not path.exists():
        raise InputError(path, "no such file or folder")
    return [load_run(p, rule_options, window, need_kernels) for p in run_folders(path)]


def _write_run(run: Run, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in run.tables.items():
        write_table(table, folder / f"{name}.parquet")
    write_manifest(folder, "analyze", {**run.manifest, "stored_from": str(run.path)})


def store_runs(runs: list[Run], dest: Path, inputs: Sequence[Path] = (), replaceable: Sequence[Path] = ()) -> None:
    """Make ``dest`` hold ``runs`` as ``--out`` folders (one, or ``run_NNN`` sub-folders), written
    whole and swapped in (``npudiag.output``): a reader sees the old baseline or the new one, never a
    mixture; a folder holding anything npudiag did not write is never replaced."""
    with OutputFolder(
        dest,
        kind="analyze" if len(runs) == 1 else "runs",
        inputs=inputs,
        replaceable=replaceable,
        option="--update-baseline",
    ) as folder:
        if len(runs) == 1:
            for name, table in runs[0].tables.items():
                write_table(table, folder.work / f"{name}.parquet")
            folder.commit({**runs[0].manifest, "stored_from": str(runs[0].path)})
        else:
            for i, run in enumerate(runs, 1):
                _write_run(run, folder.work / f"run_{i:03d}")
            folder.commit({"runs": [str(r.path) for r in runs]})


def describe(runs: list[Run]) -> dict[str, Any]:
    return {"path": str(runs[0].path.parent if len(runs) > 1 else runs[0].path), "runs": [str(r.path) for r in runs]}
