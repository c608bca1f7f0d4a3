"""Every switch of msprof's command line, with the values msprof accepts, in one table.

Source: CANN Runtime (hicann/runtime), ``src/dfx/msprof/collector/dvvp/msprofbin/include/input_parser.h``
(``LONG_OPTIONS``, the switch names) and ``src/input_parser.cpp`` (what each one checks: on/off,
the l0 - l3 levels, ranges), snapshot 1c32332 (2026). Some switches exist only on some chips (msprof
says "unrecognized option" elsewhere: AI Vector Core, low power, instruction profiling ...); that is
msprof's own check at run time, not npudiag's. What profile passes with --msprof-arg is checked against this
table before anything runs. ``PROFILE_SWITCHES`` lists the switches ``npudiag profile`` has an option for: its
command line's options are made from it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

ON_OFF = ("on", "off")
LEVELS = ("on", "off", "l0", "l1", "l2", "l3")  # task-time / task-trace (l3 where the chip supports it)
AIC_METRICS = (
    "ArithmeticUtilization", "PipeUtilization", "Memory", "MemoryL0", "MemoryUB", "ResourceConflictRatio", "L2Cache",
    "MemoryAccess", "PipelineExecuteUtilization", "PipeUtilizationExct", "PipeStallCycle", "ScalarRatio",
)  # fmt: skip


@dataclass(frozen=True)
class Switch:
    """``values``: the allowed words; ``low``/``high``: an integer range; ``items``: a comma list of
    these words; neither: any non-empty text (a path, a name, a list msprof checks itself)."""

    name: str
    values: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    items: tuple[str, ...] = ()
    what: str = ""
    mb: bool = False  # the number is written with MB after it
    custom: bool = False  # also Custom:<register>,... (the PMU metric switches)

    def check(self, value: str) -> str | None:
        """Why ``value`` is not accepted, or None."""
        if value == "":
            return f"--{self.name} needs a value"
        if self.custom and value.startswith("Custom:"):
            return _custom_registers(self.name, value)
        if self.values and value not in self.values:
            return f"--{self.name}={value}: expected one of {', '.join(self.values)}"
        number = value.removesuffix("MB") if self.mb else value
        if self.low is not None and (
            not re.fullmatch(r"[0-9]{1,10}", number) or not self.low <= int(number) <= (self.high or self.low)
        ):
            unit = " MB, e.g. 500MB" if self.mb else ""
            return f"--{self.name}={value}: expected a whole number from {self.low} to {self.high}{unit}"
        if self.items:
            bad = [v for v in value.split(",") if v not in self.items]
            if bad:
                return f"--{self.name}={value}: {bad[0]!r} is not one of {', '.join(self.items)}"
        return None


# Custom PMU registers (msprof's command-line reference, "aic-metrics": Custom:0x49,0x8,0x15,0x1b,0x64,0x10;
# at most 8 registers, each in [0x1, 0x7FFFFFFF], hexadecimal or decimal, not mixed with a metric group)
MAX_CUSTOM_REGISTERS = 8
MAX_CUSTOM_REGISTER = 0x7FFFFFFF


def _custom_registers(name: str, value: str) -> str | None:
    items = value.removeprefix("Custom:").split(",")
    if not 1 <= len(items) <= MAX_CUSTOM_REGISTERS or items == [""]:
        return f"--{name}={value}: Custom: takes 1 to {MAX_CUSTOM_REGISTERS} registers, comma-separated"
    for item in items:
        item = item.strip()
        if re.fullmatch(r"0[xX][0-9a-fA-F]{1,8}", item):
            n = int(item, 16)
        elif re.fullmatch(r"[0-9]{1,10}", item):
            n = int(item)
        else:
            return (
                f"--{name}={value}: {item!r} is not a register number (hexadecimal 0x49 or "
                "decimal 73; no metric group after Custom:)"
            )
        if not 1 <= n <= MAX_CUSTOM_REGISTER:
            return f"--{name}={value}: register {item} is outside 0x1 - 0x7FFFFFFF"
    return None


def _on_off(*names: str, what: str = "") -> list[Switch]:
    return [Switch(n, ON_OFF, what=what) for n in names]


def _freq(name: str, low: int, high: int) -> Switch:
    return Switch(name, low=low, high=high, what="sampling frequency or period")


SWITCHES: dict[str, Switch] = {
    s.name: s
    for s in [
        # the collection itself
        Switch("output", what="where PROF_* folders go"),
        Switch("storage-limit", low=200, high=4294967295, mb=True, what="disk limit"),
        Switch("application", what="the program (npudiag puts it after the switches)"),
        Switch("environment", what="environment variables for the program"),
        Switch("dynamic", ON_OFF, what="start and stop collection from another shell"),
        Switch("pid", low=1, high=2147483647, what="with --dynamic=on: attach to this running process"),
        Switch("delay", low=1, high=4294967295, what="seconds before collecting"),
        Switch("duration", low=1, high=4294967295, what="seconds of collection"),
        # what the device records
        Switch("aic-mode", ("task-based", "sample-based")),
        Switch("aic-metrics", AIC_METRICS, custom=True),
        Switch("aiv-mode", ("task-based", "sample-based")),
        Switch("aiv-metrics", AIC_METRICS, custom=True),
        Switch("npu-events", what="raw PMU events"),
        Switch("sys-devices", what="all, or device ids 0,1,..."),
        Switch(
            "llc-profiling",
            ("read", "write", "capacity", "bandwidth"),
            what="read/write; capacity/bandwidth on some chips",
        ),
        Switch("sys-mem-serviceflow"),
        Switch("optype", what="op types to scale, opType1,opType2"),
        *_on_off(
            "ascendcl",
            "ai-core",
            "ai-vector-core",
            "model-execution",
            "runtime-api",
            "task-tsfw",
            "task-memory",
            "aicpu",
            "msproftx",
            "sys-cpu-profiling",
            "sys-profiling",
            "sys-pid-profiling",
            "sys-hardware-mem",
            "sys-io-profiling",
            "sys-interconnection-profiling",
            "dvpp-profiling",
            "sys-lp",
            "hccl",
            "instr-profiling",
            "l2",
        ),
        Switch("aicore-shape", ON_OFF),
        Switch("task-time", LEVELS, what="device task timeline (l0 - l2; l3 on some chips)"),
        Switch("task-trace", LEVELS),
        Switch("ge-api", ("off", "l0", "l1"), what="GE host API timeline"),
        Switch("task-block"),
        Switch("mstx-domain-include", what="mstx domains to keep, with --msproftx=on"),
        Switch("mstx-domain-exclude", what="mstx domains to leave out, with --msproftx=on"),
        # frequencies and periods
        _freq("aic-freq", 1, 100),
        _freq("aiv-freq", 1, 100),
        _freq("instr-profiling-freq", 300, 30000),
        _freq("sys-period", 1, 2592000),
        _freq("sys-sampling-freq", 1, 10),
        _freq("sys-pid-sampling-freq", 1, 10),
        _freq("sys-hardware-mem-freq", 1, 10000),
        _freq("sys-io-sampling-freq", 1, 100),
        _freq("dvpp-freq", 1, 100),
        _freq("sys-cpu-freq", 1, 50),
        _freq("sys-interconnection-freq", 1, 50),
        _freq("host-sys-usage-freq", 1, 50),
        _freq("sys-lp-freq", 1, 100),  # Hz (ArgsManager::AddLowPowerArgs: "the range is 1 to 100Hz")
        # the host
        Switch("host-sys", items=("cpu", "mem", "disk", "network", "osrt", "numa", "threads-sync", "cache")),
        Switch("host-sys-pid", low=0, high=2147483647),
        Switch("host-sys-usage", items=("cpu", "mem")),
        # parsing and exporting what was collected
        Switch("python-path"),
        Switch("summary-format", ("csv", "json")),
        Switch("type", ("text", "db")),
        Switch("reports"),
        Switch("rule", items=("communication", "communication_matrix")),
        *_on_off("parse", "query", "export", "clear", "analyze"),
        Switch("iteration-id", low=0, high=4294967295),
        Switch("model-id", low=0, high=4294967295),
    ]
}
# switches npudiag sets itself: given through --msprof-arg they would fight its own
SET_BY_NPUDIAG = {
    "output": "--collect-dir",
    "application": "the program after npudiag's options (npudiag profile [OPTIONS] ./app)",
}


def check_switch(arg: str) -> str | None:
    """Why ``--name=value`` is not a switch msprof accepts, or None (the closest switch on a typo)."""
    if not arg.startswith("--"):
        return f"{arg!r}: expected an msprof switch as --name=value"
    name, eq, value = arg[2:].partition("=")
    if name in SET_BY_NPUDIAG:
        return f"--{name} is set by npudiag; use {SET_BY_NPUDIAG[name]}"
    sw = SWITCHES.get(name)
    if sw is None:
        close = difflib.get_close_matches(name, SWITCHES, n=1, cutoff=0.6)
        return f"--{name} is not an msprof switch" + (f" (did you mean --{close[0]}?)" if close else "")
    if not eq:
        return f"--{name} needs a value: --{name}=<value>"
    return sw.check(value)


@dataclass(frozen=True)
class ProfileSwitch:
    """One msprof switch ``npudiag profile`` has an option for: the ProfileOptions field it sets, msprof's
    switch (the option's name too), the value's type and the option's help."""

    attr: str
    switch: str
    kind: type
    help: str

    @property
    def param(self) -> str:
        """The command line's parameter name: the switch without its dashes (--aic-freq -> aic_freq)."""
        return self.switch[2:].replace("-", "_")


# profile's msprof switches, in the order of its --help and of msprof's command line
PROFILE_SWITCHES = (
    ProfileSwitch("task_time", "--task-time", str, "l0, l1, l2, l3, on, off [msprof default: on = l1]."),
    ProfileSwitch("ascendcl", "--ascendcl", str, "on/off: AscendCL API data [on]."),
    ProfileSwitch("runtime_api", "--runtime-api", str, "on/off: runtime API data [off]."),
    ProfileSwitch("aicpu", "--aicpu", str, "on/off: AI CPU operators [off]."),
    ProfileSwitch("ai_core", "--ai-core", str, "on/off: AI Core PMU [on with task-time l1]."),
    ProfileSwitch(
        "aic_metrics",
        "--aic-metrics",
        str,
        "PipeUtilization, ArithmeticUtilization, Memory, MemoryL0, MemoryUB, ResourceConflictRatio, L2Cache.",
    ),
    ProfileSwitch("aic_mode", "--aic-mode", str, "task-based or sample-based [task-based]."),
    ProfileSwitch("aic_freq", "--aic-freq", int, "AI Core sampling frequency (Hz), sample-based mode."),
    ProfileSwitch("sys_hardware_mem", "--sys-hardware-mem", str, "on/off: HBM/DDR bandwidth."),
    ProfileSwitch("sys_hardware_mem_freq", "--sys-hardware-mem-freq", int, "Its sampling frequency (Hz)."),
    ProfileSwitch("l2", "--l2", str, "on/off: L2 cache hit rate."),
    ProfileSwitch("hccl", "--hccl", str, "on/off: HCCL (deprecated in msprof; use --task-time)."),
    ProfileSwitch(
        "task_memory", "--task-memory", str, "on/off: operator memory (operator_memory, memory_record) [off]."
    ),
    ProfileSwitch("msproftx", "--msproftx", str, "on/off: the application's mstx marks and ranges [off]."),
    ProfileSwitch(
        "mstx_domain_include", "--mstx-domain-include", str, "With --msproftx on: only these mstx domains (a,b)."
    ),
    ProfileSwitch(
        "mstx_domain_exclude", "--mstx-domain-exclude", str, "With --msproftx on: every mstx domain but these."
    ),
    ProfileSwitch("ge_api", "--ge-api", str, "off, l0, l1: GE host API timeline (newer releases)."),
    ProfileSwitch(
        "delay_s", "--delay", int, "Start collecting after this many seconds (msprof --delay, newer releases)."
    ),
    ProfileSwitch(
        "duration_s", "--duration", int, "Collect for this many seconds (msprof --duration, newer releases)."
    ),
    ProfileSwitch("storage_limit_mb", "--storage-limit", int, "Disk limit in MB, 200 to 4294967295."),
)
