"""Driving the real ``msnpureport`` (driver tools): log export and device log levels.

What msnpureport accepts (see the project's formats notes): one of ``-g/-m/-e/-t/-r/-a/-f`` per
call; ``-d N`` only with ``-g/-m/-e/-r``; ``-t`` 0 all (default), 1 slog+message(+system_info),
2 bbox (hisi_logs), 3 stackcore, 4 vmcore, 5 module log (4 and 5 on newer drivers); ``-f`` adds
historical maintenance information. An export creates ``YYYY-MM-DD-hh-mm-ss/`` in the current
directory and prints ``Finished.`` at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from npudiag.collect.child import describe_exit, kill_group, popen
from npudiag.collect.toolkit import find_msnpureport
from npudiag.errors import InputError, ToolError
from npudiag.output import escape_invisible, move_new, write_json, write_new_file
from npudiag.safeio import is_regular, load_json, sha256_of

EXPORT_TYPES = {"all": "0", "slog": "1", "bbox": "2", "stackcore": "3", "vmcore": "4", "module": "5"}
DEVICE_LEVELS = ("error", "info", "warning", "debug", "null")
HOST_LEVEL_NUMBERS = {"debug": 0, "info": 1, "warning": 2, "error": 3, "null": 4}
# slog.h module names (newer CANN adds more in log_types.h; unknown names are passed through with a warning)
MODULES = [
    "SLOG",
    "IDEDD",
    "IDEDH",
    "HCCL",
    "FMK",
    "HIAIENGINE",
    "DVPP",
    "RUNTIME",
    "CCE",
    "HDC",
    "DRV",
    "DEVMM",
    "KERNEL",
    "LIBMEDIA",
    "CCECPU",
    "ASCENDDK",
    "ROS",
    "HCCP",
    "ROCE",
    "TEFUSION",
    "PROFILING",
    "DP",
    "APP",
    "TS",
    "TSDUMP",
    "AICPU",
    "LP",
    "TDT",
    "FE",
    "MD",
    "MB",
    "ME",
    "IMU",
    "IMP",
    "GE",
    "MDCFUSA",
    "CAMERA",
    "ASCENDCL",
    "TEEOS",
    "ISP",
    "SIS",
    "HSM",
    "DSS",
    "PROCMGR",
    "BBOX",
    "AIVECTOR",
    "TBE",
    "FV",
    "MDCMAP",
    "TUNE",
    "FFTS",
]
EXPORT_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}$")
DEFAULT_TIMEOUT_S = 1800.0


def require_msnpureport() -> Path:
    tool = find_msnpureport()
    if tool is None:
        raise ToolError(
            "msnpureport not found on PATH or in /usr/local/Ascend/driver/tools; it ships with the NPU driver "
            "(run on the host with the driver installed, or add its folder to PATH)"
        )
    return tool


def export_args(kind: str = "all", force: bool = False, events: bool = False) -> list[str]:
    """The switches for one export call: ``-t TYPE``, ``-f`` (everything plus historical maintenance
    information) or ``-a`` (everything plus the device's bbox event information); msnpureport takes one of
    them per call."""
    if kind not in EXPORT_TYPES:
        raise ValueError(f"--type must be one of {', '.join(EXPORT_TYPES)}")
    if force and events:
        raise ValueError("--history (msnpureport -f) and --events (msnpureport -a) are one export each; give one")
    if force or events:
        if kind != "all":
            flag = (
                "--history exports everything plus history (msnpureport -f)"
                if force
                else "--events exports everything plus device events (msnpureport -a)"
            )
            raise ValueError(f"{flag} and cannot be combined with --type")
        return ["-f"] if force else ["-a"]
    return [] if kind == "all" else ["-t", EXPORT_TYPES[kind]]


def level_commands(
    global_level: str | None = None,
    modules: list[str] | None = None,
    event: str | None = None,
    device: int | None = None,
    request: bool = False,
) -> list[list[str]]:
    """One msnpureport argument list per setting (the tool takes one switch per call)."""
    dev = ["-d", str(device)] if device is not None else []
    calls: list[list[str]] = []
    if global_level is not None:
        if global_level.lower() not in DEVICE_LEVELS:
            raise ValueError(f"--global must be one of {', '.join(DEVICE_LEVELS)}")
        calls.append(["-g", global_level.lower(), *dev])
    for spec in modules or []:
        mod, _, lvl = spec.partition(":")
        if not mod or lvl.lower() not in DEVICE_LEVELS:
            raise ValueError(
                f"--module {spec!r}: expected MODULE:LEVEL with LEVEL one of "
                f"{', '.join(DEVICE_LEVELS)}, e.g. RUNTIME:debug"
            )
        calls.append(["-m", f"{mod.upper()}:{lvl.lower()}", *dev])
    if event is not None:
        if event not in ("enable", "disable"):
            raise ValueError("--event must be enable or disable")
        calls.append(["-e", event, *dev])
    if request:
        calls.append(["-r", *dev])
    if not calls:
        raise ValueError("nothing to set: give --global, --module, --event or --request")
    return calls


def host_level_env(global_level: str | None, modules: list[str] | None, event: str | None) -> dict[str, str]:
    """The host-side environment that means the same as the device settings (set before the app starts)."""
    env: dict[str, str] = {}
    if global_level is not None:
        env["ASCEND_GLOBAL_LOG_LEVEL"] = str(HOST_LEVEL_NUMBERS[global_level.lower()])
    if modules:
        parts = []
        for spec in modules:
            mod, _, lvl = spec.partition(":")
            parts.append(f"{mod.upper()}={HOST_LEVEL_NUMBERS[lvl.lower()]}")
        env["ASCEND_MODULE_LOG_LEVEL"] = ":".join(parts)
    if event is not None:
        env["ASCEND_GLOBAL_EVENT_ENABLE"] = "1" if event == "enable" else "0"
    env["ASCEND_SLOG_PRINT_TO_STDOUT"] = "1"
    return env


def _shown(tool: Path, args: list[str]) -> str:
    return " ".join([tool.name, *args])


def run_tool(
    tool: Path, args: list[str], cwd: Path, echo: Callable[[str], None], timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[str]:
    """Run ``tool args`` in ``cwd``, echoing its output lines (control, bidi and invisible characters
    escaped: the tool's output reaches a terminal); ToolError on failure or timeout."""
    try:
        proc = popen(
            [str(tool), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
    except OSError as exc:
        raise ToolError(f"cannot run {tool}: {exc.strerror}") from None
    lines: list[str] = []

    def pump() -> None:  # a thread, so a tool that hangs silently still meets the timeout
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            echo(escape_invisible(line.rstrip("\n")))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.wait()
        raise ToolError(f"{_shown(tool, args)} did not finish in {timeout_s:g} s; killed") from None
    reader.join(timeout=5)
    if rc != 0:
        last = next((x for x in reversed(lines) if x.strip()), "")
        code = 128 - rc if rc < 0 else rc
        raise ToolError(f"{_shown(tool, args)} failed: {describe_exit(code)}" + (f": {last}" if last else ""))
    return lines


# the CANN 8.0.RC2 log reference (logreference_0016) recommends ``msnpureport report [options]`` for an
# export and still documents the bare form; older references document only the bare form
REPORT_FORM = "report"
# the same page: exports and level settings may run in several processes at once, no more than 4; older
# references allow no concurrent runs at all
MAX_PARALLEL = 4


def running_tools(proc: Path = Path("/proc")) -> int:
    """How many msnpureport processes are running (their command's program name), from ``proc``."""
    n = 0
    for d in proc.iterdir() if proc.is_dir() else ():
        if d.name.isdigit():
            try:
                argv0 = (d / "cmdline").read_bytes().split(b"\0", 1)[0]
            except OSError:  # gone meanwhile, or not ours to read
                continue
            n += Path(argv0.decode(errors="replace")).name == "msnpureport"
    return n


def export_calls(args: list[str]) -> list[list[str]]:
    """The argument lists to try for one export: the recommended ``report`` form, then the bare form an
    older driver takes."""
    return [[REPORT_FORM, *args], args]


@dataclass
class Export:
    folder: Path
    tool_output: list[str]
    kept: int | None = None  # with since_last: files new or changed since the record
    skipped: int | None = None  # and files the record already holds (removed from this export)
    record: Path | None = None
    form: str = REPORT_FORM  # "report" (msnpureport report [options]) or "bare" (an older driver's form)


RECORD = "npudiag-exported.json"  # beside the exports: what earlier exports into this folder held
_RECORD_KIND = "npudiag log export record"


def load_record(path: Path) -> dict[str, dict[str, object]]:
    """The files earlier exports held (path inside the export -> size, sha256); empty when there is
    no record. A file of that name that is not npudiag's record is refused, never replaced."""
    if not path.exists():
        return {}
    doc = load_json(path)
    if not isinstance(doc, dict) or doc.get("kind") != _RECORD_KIND or not isinstance(doc.get("files"), dict):
        raise InputError(path, f'is not npudiag\'s export record (no "kind": "{_RECORD_KIND}"); not used, not replaced')
    return {k: v for k, v in doc["files"].items() if isinstance(k, str) and isinstance(v, dict)}


def drop_exported(folder: Path, record: dict[str, dict[str, object]]) -> tuple[dict[str, dict[str, object]], int]:
    """Remove from ``folder`` (a fresh export) the files the record holds with the same path, size
    and content; return the entries of the files kept and how many were removed. Folders left empty
    are removed; links and special files are never followed (msnpureport writes regular files)."""
    kept: dict[str, dict[str, object]] = {}
    skipped = 0
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        size, digest = path.stat().st_size, sha256_of(path)
        seen = record.get(rel)
        if seen is not None and seen.get("size") == size and seen.get("sha256") == digest:
            path.unlink()
            skipped += 1
        else:
            kept[rel] = {"size": size, "sha256": digest}
    for d in sorted((p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    return kept, skipped


def _created_folder(workdir: Path, output: list[str]) -> Path:
    """The export folder the tool made in npudiag's private working folder. A path the tool merely
    prints is only taken when it lies inside that folder: nothing else is ever moved."""
    made = sorted(p for p in workdir.iterdir() if p.is_dir() and not p.is_symlink() and EXPORT_DIR.match(p.name))
    if made:
        return made[-1]
    if len(output) >= 2 and ":" in output[1]:  # the path after the last colon of line 2 (what ascend-fd reads)
        p = Path(output[1].rsplit(":", 1)[1].strip())
        if p.is_dir() and not p.is_symlink() and p.resolve().parent == workdir.resolve():
            return p
    raise ToolError(f"msnpureport finished but no YYYY-MM-DD-hh-mm-ss export folder appeared in {workdir}")


def export_logs(
    out: Path | None,
    kind: str,
    force: bool,
    echo: Callable[[str], None],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    events: bool = False,
    since_last: bool = False,
) -> Export:
    """Run the export in a private working folder beside ``out`` and move the result to ``out``
    (default ``./npudiag-logs/<timestamp>``). An existing ``out`` is never overwritten.

    ``since_last``: msnpureport always exports everything the device holds; keep only the files
    that earlier exports into the same folder did not hold (same path inside the export, size and
    sha256, from the record ``npudiag-exported.json`` there), and add this export's files to it."""
    args = export_args(kind, force, events)
    tool = require_msnpureport()
    if out is not None and out.exists():
        raise InputError(out, "already exists; npudiag never overwrites an export folder (choose another --out)")
    parent = (out.parent if out is not None else Path("npudiag-logs")).absolute()
    parent.mkdir(parents=True, exist_ok=True)
    record_path = parent / RECORD
    record = load_record(record_path) if since_last else {}
    work = Path(tempfile.mkdtemp(prefix=".msnpureport-", dir=parent))
    # the tool names the folder it made in our private working folder, which is gone once the export
    # is moved: echo the path the export will have instead
    private = re.compile(re.escape(str(work)) + r"(?:/([\w.-]+))?")

    def final(m: re.Match[str]) -> str:
        return str(out.absolute()) if out is not None else str(parent / m.group(1)) if m.group(1) else str(parent)

    busy = running_tools()
    if busy >= MAX_PARALLEL:
        raise ToolError(
            f"{busy} msnpureport processes are running; the driver's log reference allows "
            f"at most {MAX_PARALLEL} at once "
            "(older drivers none): wait for them to finish"
        )
    try:
        output, form = _run_export(tool, args, work, lambda line: echo(private.sub(final, line)), timeout_s, echo)
        made = _created_folder(work, output)
        dest = out.absolute() if out is not None else parent / made.name
        if not since_last:
            move_new(made, dest, "an export folder")
            return Export(dest, output, form=form)
        kept, skipped = drop_exported(made, record)
        move_new(made, dest, "an export folder")
        # the record is replaced only after the export is in place: a crash before leaves the old record
        write_json({"kind": _RECORD_KIND, "files": {**record, **kept}}, record_path)
        return Export(dest, output, kept=len(kept), skipped=skipped, record=record_path, form=form)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_export(
    tool: Path, args: list[str], work: Path, show: Callable[[str], None], timeout_s: float, echo: Callable[[str], None]
) -> tuple[list[str], str]:
    """Run the export in the ``report`` form; where the driver refuses it before exporting anything (an older
    msnpureport: no export folder appeared), once more in the bare form."""
    report, bare = export_calls(args)
    echo(f"running {_shown(tool, report)}")
    try:
        return run_tool(tool, report, work, show, timeout_s), REPORT_FORM
    except ToolError as exc:
        made = any(p.is_dir() and EXPORT_DIR.match(p.name) for p in work.iterdir())
        said = str(exc).split(" failed: ", 1)[-1]  # what the tool printed, not the command we show
        if made or not re.search(r"\b(?:usage|unknown|invalid|unrecogni[sz]ed|report)\b", said, re.I):
            raise  # a failure of the export itself, not of the form
        echo(f"msnpureport refused the report form ({exc}); an older driver: running {_shown(tool, bare)}")
        return run_tool(tool, bare, work, show, timeout_s), "bare"


def host_log_folders() -> list[Path]:
    """Where host processes write plog and flushed device logs."""
    base = os.environ.get("ASCEND_PROCESS_LOG_PATH")
    if base:
        return [Path(base)] if Path(base).is_dir() else []
    home = Path(os.environ.get("HOME", str(Path.home()))) / "ascend" / "log"
    return [home / d for d in ("debug", "run", "security") if (home / d).is_dir()]


def copy_host_logs(dest: Path, notes: list[str] | None = None) -> list[Path]:
    """Copy the host log folders into ``dest/host``: regular files and folders only. Links (which
    could point anywhere, and would be absolute in an archive) and FIFOs / devices are left out,
    each noted; so is ``dest`` itself where it lies inside a host log folder (an export made there
    once copied itself into itself, 409 folders deep)."""
    notes = notes if notes is not None else []
    itself = dest.resolve()

    def ignore(folder: str, names: list[str]) -> list[str]:
        skip = []
        for n in names:
            p = Path(folder) / n
            if p.resolve() == itself:
                notes.append(f"{p}: this export itself; not copied into itself")
                skip.append(n)
            elif p.is_symlink():
                notes.append(f"{p}: a link; not copied")
                skip.append(n)
            elif not p.is_dir() and not is_regular(p):
                notes.append(f"{p}: not a regular file (a FIFO, device or socket); not copied")
                skip.append(n)
        return skip

    copied = []
    for src in host_log_folders():
        target = dest / "host" / src.name
        shutil.copytree(src, target, symlinks=False, ignore=ignore)
        copied.append(target)
    return copied


def write_archive(folder: Path) -> Path:
    """``<folder>.tar.gz`` for sending to support, written to a temporary name first."""
    target = folder.with_name(folder.name + ".tar.gz")
    if target.exists():
        raise InputError(target, "already exists; not overwritten")

    def write(fh) -> None:
        import tarfile  # only when an archive is asked for

        with tarfile.open(fileobj=fh, mode="w:gz") as tar:
            tar.add(folder, arcname=folder.name)

    write_new_file(target, write)
    return target


def echo_stderr(line: str) -> None:
    sys.stderr.write(f"  {line}\n")


def unknown_modules(specs: list[str]) -> list[str]:
    """Module names not in slog.h's table (newer CANN has more; msnpureport itself has the last word)."""
    return [s.partition(":")[0].upper() for s in specs if s.partition(":")[0].upper() not in MODULES]
