"""Test stand-in for CANN's msprof (run through a wrapper the tests put on PATH).

(a) It rejects any switch or value the real msprof does not accept, per the documented option
list; (b) it runs the application it was given, forwarding SIGINT / SIGTERM to it; (c) it writes
a PROF_* folder in the real layout (raw host/ and device_0/ data, plus mindstudio_profiler_output
from npudiag's fixture generator unless MSPROF_STANDIN_NO_EXPORT is set, in which case a later
``msprof --export=on --output=<PROF>`` writes it). MSPROF_ARGS_LOG=<file> records each argv.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ON_OFF = {"on", "off"}
INT = re.compile(r"^\d+$")
ANY = None
# msprof's switches and values as CANN Runtime's msprof checks them (hicann/runtime input_parser.h /
# input_parser.cpp, 2026): written out here on their own, so a test compares npudiag's table with them
METRICS = {
    "ArithmeticUtilization",
    "PipeUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
    "PipelineExecuteUtilization",
    "PipeUtilizationExct",
    "PipeStallCycle",
    "ScalarRatio",
}
# or Custom: with 1 - 8 PMU registers, hexadecimal or decimal (msprof's command-line reference)
_REGISTER = r"(0[xX][0-9a-fA-F]{1,8}|[0-9]{1,10})"
PMU_METRICS = re.compile(rf"^({'|'.join(sorted(METRICS))}|Custom:{_REGISTER}(,{_REGISTER}){{0,7}})$")
LEVELS = {"on", "off", "l0", "l1", "l2", "l3"}
MODES = {"task-based", "sample-based"}
OPTIONS = {
    "output": ANY, "storage-limit": re.compile(r"^\d+MB$"), "application": ANY, "environment": ANY, "dynamic": ON_OFF, "pid": INT,
    "delay": INT, "duration": INT, "aic-mode": MODES, "aic-metrics": PMU_METRICS, "aiv-mode": MODES, "aiv-metrics": PMU_METRICS,
    "npu-events": ANY, "sys-devices": re.compile(r"^(all|\d+(,\d+)*)$"), "llc-profiling": {"read", "write", "capacity", "bandwidth"},
    "python-path": ANY, "summary-format": {"csv", "json"}, "type": {"text", "db"}, "reports": ANY, "sys-mem-serviceflow": ANY,
    "optype": ANY, "rule": re.compile(r"^(communication|communication_matrix)(,(communication|communication_matrix))*$"),
    "ascendcl": ON_OFF, "ai-core": ON_OFF, "ai-vector-core": ON_OFF, "model-execution": ON_OFF, "runtime-api": ON_OFF,
    "task-tsfw": ON_OFF, "task-time": LEVELS, "aicore-shape": ON_OFF, "ge-api": {"off", "l0", "l1"}, "task-trace": LEVELS,
    "task-memory": ON_OFF, "aicpu": ON_OFF, "msproftx": ON_OFF, "mstx-domain-include": ANY, "mstx-domain-exclude": ANY,
    "sys-cpu-profiling": ON_OFF, "sys-profiling": ON_OFF, "sys-pid-profiling": ON_OFF, "sys-hardware-mem": ON_OFF,
    "sys-io-profiling": ON_OFF, "sys-interconnection-profiling": ON_OFF, "dvpp-profiling": ON_OFF, "task-block": ANY,
    "sys-lp": ON_OFF, "hccl": ON_OFF, "instr-profiling": ON_OFF, "l2": ON_OFF, "parse": ON_OFF, "query": ON_OFF,
    "export": ON_OFF, "clear": ON_OFF, "analyze": ON_OFF, "aic-freq": INT, "aiv-freq": INT, "instr-profiling-freq": INT,
    "sys-period": INT, "sys-sampling-freq": INT, "sys-pid-sampling-freq": INT, "sys-hardware-mem-freq": INT,
    "sys-io-sampling-freq": INT, "dvpp-freq": INT, "sys-cpu-freq": INT, "sys-interconnection-freq": INT,
    "host-sys-usage-freq": INT, "sys-lp-freq": INT, "iteration-id": INT, "model-id": INT,
    "host-sys": re.compile(r"^(cpu|mem|disk|network|osrt|numa|threads-sync|cache)(,(cpu|mem|disk|network|osrt|numa|threads-sync|cache))*$"),
    "host-sys-pid": INT, "host-sys-usage": re.compile(r"^(cpu|mem)(,(cpu|mem))*$"),
}  # fmt: skip


def die(msg):
    sys.stderr.write(f"[ERROR] {msg}\n")
    sys.exit(1)


def parse(argv):
    opts, i = {}, 0
    while i < len(argv) and argv[i].startswith("--"):
        name, eq, value = argv[i][2:].partition("=")
        if name not in OPTIONS:
            die(f"Invalid argument: --{name}")
        if not eq:
            die(f"Argument --{name} requires a value (--{name}=<value>)")
        rule = OPTIONS[name]
        ok = rule is None or (value in rule if isinstance(rule, set) else bool(rule.match(value)))
        if not ok:
            die(f"Argument --{name}: invalid value {value!r}")
        if name == "storage-limit" and not 200 <= int(value[:-2]) <= 4294967295:
            die("Argument --storage-limit out of range [200, 4294967295]")
        if name == "sys-lp-freq" and not 1 <= int(value) <= 100:
            die("Argument --sys-lp-freq out of range [1, 100]")
        opts[name] = value
        i += 1
    return opts, argv[i:]


def write_export(prof, kernels):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from npudiag.testing.generate import write_msprof_profile

    with tempfile.TemporaryDirectory() as tmp:
        # the tasks start when this run runs, as a real collection's do (two runs never share task times)
        gt = write_msprof_profile(Path(tmp), kernels=kernels, seed=3, copies=5, t0_us=round(time.time() * 1e6, 3))
        src = Path(gt.profile_dir) / "mindstudio_profiler_output"
        shutil.copytree(src, prof / "mindstudio_profiler_output")


def main():
    argv = sys.argv[1:]
    if os.environ.get("MSPROF_ARGS_LOG"):
        with open(os.environ["MSPROF_ARGS_LOG"], "a", encoding="utf-8") as fh:
            fh.write("\x1f".join(argv) + "\n")
    opts, app = parse(argv)
    if opts.get("export") == "on":
        if "output" not in opts or not Path(opts["output"]).is_dir():
            die("--export=on needs --output=<an existing PROF directory>")
        prof = Path(opts["output"])
        if not (prof / "mindstudio_profiler_output").exists():
            write_export(prof, 400)
        print(f"Export all data in {prof} done.")
        return 0
    if "application" in opts:
        app = opts["application"].split()
    if not app:
        die("No application given: msprof [options] <app> [app args]")
    out = Path(opts.get("output", os.getcwd()))
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(app)
    stopped = []

    def forward(signum, _frame):
        stopped.append(signum)
        proc.send_signal(signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    rc = proc.wait()
    stamp = time.strftime("%Y%m%d%H%M%S") + f"{int(time.time() * 1000) % 1000:03d}"
    prof = out / f"PROF_000001_{stamp}_{os.getpid():08d}STANDIN"[:48]
    (prof / "host" / "data").mkdir(parents=True)
    (prof / "device_0" / "data").mkdir(parents=True)
    (prof / "host" / "data" / "Msprof.info.0").write_bytes(b"\x00" * 16)
    if not os.environ.get("MSPROF_STANDIN_NO_EXPORT"):
        write_export(prof, 80 if stopped else 400)
    print(f"Profiling finished. Profiling data is saved in {prof}")
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
