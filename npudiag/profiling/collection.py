"""What ``npudiag profile`` runs once its options are parsed: :func:`plan` (the command, environment
and acl.json section of the chosen method, checked), :func:`configuration` (what ``--emit`` prints),
:func:`collect` (write the acl.json profiler section when that method is used, run the program under
msprof or with the PROFILING_* environment, find the PROF_* folders it wrote, and export those that
have no summaries yet with msprof --export=on), then ``pipeline.analyze_collected``. Nothing here prints:
``tell`` receives what is being done, the result carries the warnings and what was collected."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npudiag.collect import toolkit
from npudiag.collect.child import describe_exit
from npudiag.collect.runner import needs_export, prof_dirs, run_child
from npudiag.errors import NpudiagError, OptionError, ToolError
from npudiag.output import dumps
from npudiag.profiling import msprof as mp
from npudiag.profiling.discover import discover, msprof_export_argv, torch_parse_argv

METHODS = ("cli", "env", "acl-json")
EMITS = ("env", "acl-json", "command", "torch")


@dataclass
class Plan:
    """One collection, before it runs: ``argv`` (msprof and the app for the command line method, the
    app alone otherwise), the PROFILING_* variables (env method), the acl.json section (acl-json
    method) and the step window the analysis applies afterwards."""

    method: str
    argv: list[str]
    env: dict[str, str]
    acl_json: Path
    acl_section: dict[str, Any] | None
    msprof: Path | None
    options: mp.ProfileOptions
    steps: tuple[int | None, int | None] = (None, None)

    @property
    def window(self) -> str | None:
        """The ``--steps`` window of the analysis ("3:9", "3:"), None for every step."""
        lo, hi = self.steps
        if lo is None and hi is None:
            return None
        return f"{'' if lo is None else lo}:{'' if hi is None else hi}"

    def describe(self) -> str:
        """What would run, one fact per line (``--dry-run``): the command, each variable, the merged acl.json."""
        lines = [f"run: {shlex.join(self.argv)}"]
        lines += [f"env: {k}={shlex.quote(v)}" for k, v in self.env.items()]
        if self.acl_section is not None:
            lines.append(
                f"acl.json ({self.acl_json}): {dumps(mp.merged_acl_json(self.acl_json, self.acl_section), indent=None)}"
            )
        if self.window is not None:
            lines.append(f"analysis window: --steps {self.window}")
        return "\n".join(lines) + "\n"


def plan(
    options: mp.ProfileOptions,
    app: list[str],
    *,
    method: str = "cli",
    acl_json: str | Path = "acl.json",
    steps: tuple[int | None, int | None] = (None, None),
    msprof: Path | None = None,
) -> Plan:
    """Check the options for ``method`` and build what it runs; OptionError names what cannot be used.
    ``msprof``: the executable to run (default: the one the toolkit provides, else "msprof" on PATH)."""
    if method not in METHODS:
        raise OptionError(f"method must be one of {', '.join(METHODS)}, not {method!r}", "mode")
    lo, hi = steps
    if lo is not None and hi is not None and hi < lo:
        raise OptionError(f"the stop step {hi} is before the start step {lo}", "stop_step")
    try:
        cli = mp.cli_args(options)  # checks every value, whatever the method
        env = mp.env_vars(options) if method == "env" else {}
        section = mp.acl_profiler_section(options) if method == "acl-json" else None
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if msprof is None:
        msprof = toolkit.find_msprof(toolkit.find_toolkit()[0])
    argv = [str(msprof or "msprof"), *cli, *app] if method == "cli" else list(app)
    return Plan(method, argv, env, Path(acl_json), section, msprof, options, (lo, hi))


def configuration(
    options: mp.ProfileOptions,
    what: str,
    app: list[str] | None = None,
    *,
    acl_json: str | Path = "acl.json",
    steps: tuple[int | None, int | None] = (None, None),
) -> str:
    """The configuration alone, for ``--emit``: ``env`` (a file of exports), ``command`` (the msprof
    command line, shell-quoted), ``torch`` (a torch_npu.profiler snippet for the step window), or
    ``acl-json`` (merged into ``acl_json`` on disk; returns what was written)."""
    if what not in EMITS:
        raise OptionError(f"emit must be one of {', '.join(EMITS)}, not {what!r}", "emit")
    method = {"env": "env", "acl-json": "acl-json"}.get(what, "cli")
    p = plan(options, list(app or []), method=method, acl_json=acl_json, steps=steps)
    if what == "env":
        return mp.env_file_text(mp.env_vars(options))
    if what == "command":
        return shlex.join(p.argv) + "\n"
    if what == "torch":
        try:
            return mp.torch_profiler_snippet(options, *p.steps)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
    write_acl_section(p.acl_json, p.acl_section)
    return dumps(mp.merged_acl_json(p.acl_json, p.acl_section), indent=2) + "\n"


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


def export_unexported(
    paths: list[Path],
    *,
    follow_symlinks: bool = False,
    timeout_s: float | None = None,
    tell: Callable[[str], None] = lambda _message: None,
) -> list[str]:
    """Run the export each collected-but-unexported profile under ``paths`` needs: msprof's
    ``--export=on`` for a PROF_* folder, torch_npu's offline ``analyse`` (with a Python that has
    torch_npu) for an ``*_ascend_pt`` folder. They write inside those folders, as the tools do.
    Returns one note per export run; ToolError when the tool is missing or fails."""
    notes: list[str] = []
    done: set[Path] = set()
    for p in paths:
        if not Path(p).is_dir():
            continue
        for unit in discover(Path(p), [], follow_symlinks):
            if unit.unexported is None:
                continue
            if unit.kind == "torch_npu":
                if unit.path.parent in done:  # one analyse parses every *_ascend_pt folder beside it
                    continue
                python = torch_python()
                if python is None:
                    raise ToolError(
                        f"{unit.path}: --export needs torch_npu's offline parse, and no "
                        "Python with torch_npu was found "
                        "(tried this Python and python3 on PATH); run it where torch_npu is installed"
                    )
                argv = torch_parse_argv(python, unit.path)
                done.add(unit.path.parent)
            else:
                msprof = toolkit.find_msprof(toolkit.find_toolkit()[0])
                if msprof is None:
                    why = toolkit.first_problem(toolkit.doctor(), "msprof") or "not found"
                    raise ToolError(f"{unit.path}: --export needs msprof: {why}")
                argv = msprof_export_argv(str(msprof), unit.path)
            tell(shlex.join(argv))
            try:
                result = run_child(argv, timeout_s=timeout_s, stdout=2)
            except OSError as exc:
                raise ToolError(str(exc)) from None
            if result.returncode != 0:
                raise ToolError(f"{unit.path}: the export failed: {shlex.join(argv)} exited with {result.returncode}")
            notes.append(f"{unit.path}: exported before analysis with {shlex.join(argv)}")
    return notes


def torch_python() -> str | None:
    """A Python that can import torch_npu: this one, else python3 on PATH."""
    import shutil
    import subprocess
    import sys

    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch_npu') is None)"
    for candidate in dict.fromkeys([sys.executable, shutil.which("python3") or ""]):
        if candidate and subprocess.run([candidate, "-c", probe], capture_output=True, timeout=60).returncode == 0:
            return candidate
    return None
