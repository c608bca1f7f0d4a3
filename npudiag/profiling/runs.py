"""One side of a comparison: a profile, an earlier ``--out`` folder, or a folder of repeated runs.

``compare`` and ``gate`` take either raw profiler output (anything ``analyze`` reads) or the folder
``analyze --out`` wrote; both become the same table set. A folder whose sub-folders each hold a
whole profile (``run1/PROF_*``, ``run2/PROF_*``, or ``--out`` folders) is a set of repeated runs of
one workload; a folder whose sub-folders *are* profiles (``PROF_*``, ``*_ascend_pt``) is one
profile of several ranks, as ``analyze`` reads it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from npudiag import SCHEMA_VERSION, __version__
from npudiag.errors import InputError
from npudiag.profiling.analysis.derive import derive
from npudiag.profiling.discover import is_msprof_folder, is_torch_folder
from npudiag.profiling.ingest import ingest
from npudiag.store import (
    commit_staging,
    is_npudiag_manifest,
    load_outputs,
    output_manifest,
    temp_sibling_dir,
    write_json,
    write_table,
)


@dataclass
class Run:
    """One profile's full table set (read and derived) and where it came from."""

    path: Path
    tables: dict[str, pa.Table]
    manifest: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def is_out_folder(path: Path) -> bool:
    """A folder ``analyze --out`` wrote: its manifest.json is npudiag's."""
    return is_npudiag_manifest(path / "manifest.json")


def load_run(path: Path, rule_options: dict[str, dict[str, Any]] | None = None) -> Run:
    """Read one profile. Raw input that yields no kernels at all is unusable: InputError."""
    if path.is_dir() and is_out_folder(path):
        tables, manifest = load_outputs(path)
        warnings = list(manifest.get("warnings", []))
    else:
        profile = ingest([path], hash_inputs=False)
        if not any(f.used_for for f in profile.inputs):
            raise InputError(path, profile.errors[0] if profile.errors else "no profiler data found")
        tables, skipped = derive(profile.tables, rule_options)
        manifest = output_manifest(profile, __version__, SCHEMA_VERSION)
        manifest["rules"] = {"options": rule_options or {}, "skipped": skipped}
        warnings = profile.warnings + profile.errors
    if tables["kernels"].num_rows == 0:
        raise InputError(path, "no kernels in this profile; nothing to compare")
    return Run(path, tables, manifest, warnings)


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
    return [path]


def load_side(path: Path, rule_options: dict[str, dict[str, Any]] | None = None) -> list[Run]:
    if not path.exists():
        raise InputError(path, "no such file or folder")
    return [load_run(p, rule_options) for p in run_folders(path)]


def _write_run(run: Run, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in run.tables.items():
        write_table(table, folder / f"{name}.parquet")
    write_json({**run.manifest, "stored_from": str(run.path)}, folder / "manifest.json")


def store_runs(runs: list[Run], dest: Path) -> None:
    """Make ``dest`` hold ``runs`` as ``--out`` folders (one, or ``run_NNN`` sub-folders), atomically:
    everything is written to a sibling temporary folder first, then swapped in by rename, so a
    reader sees the old baseline or the new one, never a mixture."""
    dest = dest.absolute()
    tmp = temp_sibling_dir(dest)
    try:
        if len(runs) == 1:
            _write_run(runs[0], tmp)
        else:
            for i, run in enumerate(runs, 1):
                _write_run(run, tmp / f"run_{i:03d}")
        replace_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_dir(new: Path, dest: Path) -> None:
    """Put folder ``new`` at ``dest``, refusing to replace a folder npudiag did not write."""
    if dest.exists() and (not dest.is_dir() or not (is_out_folder(dest) or _is_runs_of_outs(dest))):
        raise InputError(dest, "exists and is not a folder npudiag wrote; refusing to replace it")
    commit_staging(new, dest)


def _is_runs_of_outs(path: Path) -> bool:
    subs = [c for c in path.iterdir() if c.is_dir() and not c.name.startswith(".")]
    return bool(subs) and all(is_out_folder(c) for c in subs)


def describe(runs: list[Run]) -> dict[str, Any]:
    return {"path": str(runs[0].path.parent if len(runs) > 1 else runs[0].path), "runs": [str(r.path) for r in runs]}
