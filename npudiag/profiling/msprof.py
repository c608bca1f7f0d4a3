"""Building an msprof collection three documented ways: the msprof command line, the
PROFILING_MODE / PROFILING_OPTIONS environment, and the ``profiler`` section of acl.json.

Only documented switches are produced (see the project's formats notes). An option left unset is
not passed, so msprof's own default applies. Not every option exists in every method: asking for
one the method lacks is an error that names the methods that have it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npudiag.collect import acl_json
from npudiag.profiling.msprof_switches import PROFILE_SWITCHES, check_switch

ON_OFF = ("on", "off")
TASK_TIME = ("l0", "l1", "l2", "l3", "on", "off")
AIC_METRICS = (
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
)
AIC_MODES = ("task-based", "sample-based")
GE_API = ("off", "l0", "l1")
MSTX_DOMAINS = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*")
STORAGE_LIMIT_MB = (200, 4294967295)


@dataclass
class ProfileOptions:
    """npudiag profile's collection options; None means 'leave msprof's default'."""

    output: Path
    task_time: str | None = None
    ascendcl: str | None = None
    runtime_api: str | None = None
    aicpu: str | None = None
    ai_core: str | None = None
    aic_metrics: str | None = None
    aic_mode: str | None = None
    aic_freq: int | None = None
    sys_hardware_mem: str | None = None
    sys_hardware_mem_freq: int | None = None
    l2: str | None = None
    hccl: str | None = None
    task_memory: str | None = None  # operator memory (operator_memory / memory_record)
    msproftx: str | None = None  # the application's mstx marks and ranges
    mstx_domain_include: str | None = None  # with msproftx: only these mstx domains (comma-separated)
    mstx_domain_exclude: str | None = None  # with msproftx: all mstx domains but these
    ge_api: str | None = None  # GE host API timeline: off, l0, l1
    memory: bool = False  # what npudiag's memory rows need: --task-memory and --sys-hardware-mem on, unless set
    delay_s: int | None = None
    duration_s: int | None = None
    storage_limit_mb: int | None = None
    extra: list[str] = field(default_factory=list)  # --msprof-arg, passed through unchanged

    implied: tuple[str, ...] = field(
        default=(), init=False
    )  # the switches --memory turned on (the user did not type them)

    def __post_init__(self) -> None:
        if self.memory:  # operator memory, and the device memory (HBM / DDR) timeline
            self.implied = tuple(n for n in ("task_memory", "sys_hardware_mem") if getattr(self, n) is None)
            self.task_memory = self.task_memory or "on"
            self.sys_hardware_mem = self.sys_hardware_mem or "on"

    def validate(self) -> None:
        if self.memory and "off" in (self.task_memory, self.sys_hardware_mem):
            raise ValueError(
                "--memory turns on --task-memory and --sys-hardware-mem; leave out the one set to off, or --memory"
            )

        def one_of(name: str, value: str | None, allowed: tuple[str, ...]) -> None:
            if value is not None and value not in allowed:
                raise ValueError(f"--{name} must be one of {', '.join(allowed)}, not {value!r}")

        for name in (
            "ascendcl",
            "runtime_api",
            "aicpu",
            "ai_core",
            "sys_hardware_mem",
            "l2",
            "hccl",
            "task_memory",
            "msproftx",
        ):
            one_of(name.replace("_", "-"), getattr(self, name), ON_OFF)
        one_of("ge-api", self.ge_api, GE_API)
        for name in ("mstx_domain_include", "mstx_domain_exclude"):
            value = getattr(self, name)
            if value is None:
                continue
            if self.msproftx != "on":
                raise ValueError(f"--{name.replace('_', '-')} selects mstx domains and needs --msproftx on")
            if not MSTX_DOMAINS.fullmatch(value):
                raise ValueError(f"--{name.replace('_', '-')} takes domain names separated by commas, not {value!r}")
        one_of("task-time", self.task_time, TASK_TIME)
        one_of("aic-metrics", self.aic_metrics, AIC_METRICS)
        one_of("aic-mode", self.aic_mode, AIC_MODES)
        if (
            self.storage_limit_mb is not None
            and not STORAGE_LIMIT_MB[0] <= self.storage_limit_mb <= STORAGE_LIMIT_MB[1]
        ):
            raise ValueError(f"--storage-limit must be in [{STORAGE_LIMIT_MB[0]}, {STORAGE_LIMIT_MB[1]}] MB")
        for name in ("delay_s", "duration_s", "aic_freq", "sys_hardware_mem_freq"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise ValueError(f"--{name.replace('_s', '').replace('_', '-')} must be positive")
        named = {switch: name for name, switch in _CLI.items() if getattr(self, name) is not None}
        for arg in self.extra:  # checked against msprof's own switch table before anything runs
            why = check_switch(arg)
            if why is not None:
                raise ValueError(f"--msprof-arg {why}")
            switch = arg.split("=", 1)[0]
            if switch in named:
                raise ValueError(
                    f"{switch} is given twice: as an npudiag option and through --msprof-arg={arg}; keep one"
                )


# option attribute -> msprof switch, for the ones written --name=value as given (the storage limit takes MB)
_CLI = {s.attr: s.switch for s in PROFILE_SWITCHES if s.attr != "storage_limit_mb"}
# PROFILING_OPTIONS keys (environment method) and acl.json profiler keys
_ENV = {"task_time": "task_trace", "aicpu": "aicpu", "hccl": "hccl", "aic_metrics": "aic_metrics"}
_ACL = {"task_time": "task_time", "aicpu": "aicpu", "hccl": "hccl", "aic_metrics": "aic_metrics", "l2": "l2"}
_METHODS = {"cli": _CLI, "env": _ENV, "acl-json": _ACL}


def _unsupported(opts: ProfileOptions, mapping: dict[str, str], method: str) -> None:
    for name in _CLI:
        if getattr(opts, name) is not None and name not in mapping:
            others = [m for m, table in _METHODS.items() if name in table]
            said = f"--memory (it turns on {_CLI[name]})" if name in opts.implied else _CLI[name]
            raise ValueError(f"{said} is not available with --mode {method} (use --mode {' or '.join(others)})")
    if opts.extra and method != "cli":
        raise ValueError(f"--msprof-arg passes msprof switches and needs --mode cli, not {method}")


def cli_args(opts: ProfileOptions) -> list[str]:
    """msprof's switches, ``--name=value`` as msprof writes them, in a stable order."""
    opts.validate()
    args = [f"--output={opts.output}"]
    for name, switch in _CLI.items():
        v = getattr(opts, name)
        if v is not None:
            args.append(f"{switch}={v}")
    if opts.storage_limit_mb is not None:
        args.append(f"--storage-limit={opts.storage_limit_mb}MB")
    return args + list(opts.extra)


def profiling_options(opts: ProfileOptions) -> dict[str, Any]:
    """The PROFILING_OPTIONS JSON object (environment method)."""
    opts.validate()
    _unsupported(opts, _ENV, "env")
    d: dict[str, Any] = {"output": str(opts.output), "training_trace": "on"}
    for name, key in _ENV.items():
        v = getattr(opts, name)
        if v is not None:
            d[key] = v
    d.setdefault("task_trace", "on")
    if opts.storage_limit_mb is not None:
        d["storage_limit"] = f"{opts.storage_limit_mb}MB"
    return d


def env_vars(opts: ProfileOptions) -> dict[str, str]:
    return {"PROFILING_MODE": "true", "PROFILING_OPTIONS": json.dumps(profiling_options(opts), separators=(",", ":"))}


def env_file_text(env: dict[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())


def acl_profiler_section(opts: ProfileOptions) -> dict[str, Any]:
    opts.validate()
    _unsupported(opts, _ACL, "acl-json")
    d: dict[str, Any] = {"switch": "on", "output": str(opts.output)}
    for name, key in _ACL.items():
        v = getattr(opts, name)
        if v is not None:
            d[key] = v
    if opts.storage_limit_mb is not None:
        d["storage_limit"] = f"{opts.storage_limit_mb}MB"
    return d


def merged_acl_json(path: Path, section: dict[str, Any]) -> dict[str, Any]:
    return acl_json.merged(path, "profiler", section)


def write_acl_json(path: Path, section: dict[str, Any]) -> dict[str, Any]:
    return acl_json.write_section(path, "profiler", section)


def torch_schedule(start: int | None, stop: int | None) -> str:
    """The torch_npu.profiler.schedule that profiles steps START..STOP (ProfilerStep#N numbering, from 0).

    One warm-up step before START when there is room (the first profiled step pays the profiler's
    start-up), repeat=1 as the torch_npu guide recommends.
    """
    first = start or 0
    if stop is None:
        raise ValueError("a torch_npu schedule needs --stop-step")
    if stop < first:
        raise ValueError("--stop-step must not be before --start-step")
    warmup = 1 if first >= 1 else 0
    skip = first - warmup
    return (
        f"torch_npu.profiler.schedule(wait=0, warmup={warmup}, active={stop - first + 1}, repeat=1, skip_first={skip})"
    )


_TORCH_METRICS = {m: f"AiCMetrics.{m}" for m in AIC_METRICS}


def torch_profiler_snippet(opts: ProfileOptions, start: int | None, stop: int | None) -> str:
    """Python for a torch_npu training loop: the same collection through torch_npu.profiler, with the
    step window as its schedule (msprof itself has no step switches)."""
    level = {"l0": "Level0", "l1": "Level1", "l2": "Level2", "off": "Level_none"}.get(opts.task_time or "l1", "Level1")
    exp = [f"profiler_level=torch_npu.profiler.ProfilerLevel.{level}"]
    if opts.aic_metrics:
        exp.append(f"aic_metrics=torch_npu.profiler.{_TORCH_METRICS[opts.aic_metrics]}")
    if opts.l2 == "on":
        exp.append("l2_cache=True")
    if opts.msproftx == "on":
        exp.append("mstx=True")
        for key in ("mstx_domain_include", "mstx_domain_exclude"):
            if getattr(opts, key):
                exp.append(f"{key}={getattr(opts, key).split(',')!r}")
    lines = [
        "import torch_npu",
        "",
        "experimental_config = torch_npu.profiler._ExperimentalConfig(" + ", ".join(exp) + ")",
        "with torch_npu.profiler.profile(",
        "    activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],",
        *(["    profile_memory=True,"] if opts.task_memory == "on" else []),
        f"    schedule={torch_schedule(start, stop)},",
        f"    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler({str(opts.output)!r}),",
        "    experimental_config=experimental_config,",
        ") as prof:",
        "    for step, batch in enumerate(loader):",
        "        train_step(batch)",
        "        prof.step()",
        "",
    ]
    return "\n".join(lines)
