"""What ``npudiag profile`` runs once its options are built: write the acl.json profiler section
when that method is used, run the program (under msprof, or with the PROFILING_* environment),
find the PROF_* folders it wrote, and export those that have no summaries yet (msprof
--export=on). Nothing here prints: ``tell`` receives what is being done, the result carries the
warnings and what was collected.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npudiag.errors import NpudiagError, ToolError


@dataclass
class Collection:
    """One collection run: the command, how it ended, the PROF_* folders that appeared."""

    argv: list[str]
    returncode: int
    elapsed_s: float
    prof_dirs: list[Path]
    warnings: list[str] = field(default_factory=list)


def write_acl_section(acl_json: Path, section: dict[str, Any]) -> None:
    """Merge the profiler section into acl.json; a file that cannot be merged is an NpudiagError (exit 2)."""
    from npudiag.profiling import msprof as mp

    try:
        mp.write_acl_json(acl_json, section)
    except ValueError as exc:
        raise NpudiagError(str(exc)) from None


def collect(
    argv: list[str],
    output: Path,
    env_extra: dict[str, str],
    *,
    msprof: Path | None,
    timeout_s: float | None = None,
    needs_msprof: bool = True,
    tell: Callable[[str], None] = lambda _message: None,
) -> Collection:
    """Run ``argv`` with ``env_extra`` added to the environment, collecting into ``output``.
    ``needs_msprof``: the command line method, which cannot run without msprof (ToolError)."""
    from npudiag.collect import toolkit
    from npudiag.collect.child import describe_exit
    from npudiag.collect.runner import needs_export, prof_dirs, run_child

    if needs_msprof and msprof is None:
        raise ToolError(toolkit.first_problem(toolkit.doctor(), "msprof") or "msprof not found")
    output.mkdir(parents=True, exist_ok=True)
    before = prof_dirs(output)
    tell(shlex.join(argv))
    try:
        result = run_child(argv, env={**os.environ, **env_extra}, timeout_s=timeout_s)
    except OSError as exc:
        raise ToolError(str(exc)) from None
    tell(f"{Path(argv[0]).name} ended after {result.elapsed_s:.1f} s (exit code {result.returncode})")
    warnings = []
    if result.timed_out:
        warnings.append(f"stopped after the --timeout of {timeout_s:g} s; analysing the partial data collected so far")
    if result.returncode > 128:
        warnings.append(f"the program was {describe_exit(result.returncode)}")
    if result.interrupted:
        warnings.append(f"interrupted after {result.elapsed_s:.1f} s; analysing the partial data collected so far")
    new = sorted(prof_dirs(output) - before)
    for prof in new:
        if needs_export(prof):
            if msprof is None:
                warnings.append(f"{prof} has no exported summaries and msprof is not found to export them")
                continue
            tell(f"exporting {prof.name} (msprof --export=on)")
            run_child([str(msprof), "--export=on", f"--output={prof}"], timeout_s=timeout_s)
    return Collection(argv, result.returncode, result.elapsed_s, new, warnings)
