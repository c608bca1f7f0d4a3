"""npudiag profile / doctor against a stand-in msprof: switches, modes, signals, exit codes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npudiag.profiling import msprof as mp

from .helpers import msprof_standin_path, run_cli

# the msprof stand-in and the profiled programs run as child processes
pytestmark = pytest.mark.slow

APP = """
import json, os, sys, time
from pathlib import Path
out = Path(os.environ["APP_RECORD"])
out.write_text(json.dumps({"argv": sys.argv[1:], "mode": os.environ.get("PROFILING_MODE"),
                           "options": os.environ.get("PROFILING_OPTIONS")}))
if os.environ.get("APP_WRITES_PROF"):  # what CANN itself does in env / acl.json modes
    sys.path.insert(0, os.environ["NPUDIAG_ROOT"])
    from npudiag.testing.generate import write_msprof_profile
    write_msprof_profile(Path(os.environ["APP_WRITES_PROF"]), kernels=200, seed=4, copies=2)
if os.environ.get("APP_SLEEP"):
    Path(os.environ["APP_RECORD"] + ".started").write_text("1")
    time.sleep(float(os.environ["APP_SLEEP"]))
sys.exit(int(os.environ.get("APP_EXIT", "0")))
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "app.py").write_text(APP)
    return {
        **msprof_standin_path(tmp_path / "bin"),
        "MSPROF_ARGS_LOG": str(tmp_path / "msprof_args.txt"),
        "APP_RECORD": str(tmp_path / "app_record.json"),
        "NPUDIAG_ROOT": str(Path(__file__).resolve().parent.parent),
        "HOME": str(tmp_path),
    }


def _msprof_calls(env: dict[str, str]) -> list[list[str]]:
    return [line.split("\x1f") for line in Path(env["MSPROF_ARGS_LOG"]).read_text().splitlines()]


def test_options_map_to_documented_switches() -> None:
    o = mp.ProfileOptions(
        Path("/o"), task_time="l1", ascendcl="on", runtime_api="on", aicpu="on", ai_core="on", aic_metrics="Memory",
        sys_hardware_mem="on", l2="on", hccl="off", delay_s=5, duration_s=30, storage_limit_mb=500, extra=["--sys-cpu-profiling=on"],
    )  # fmt: skip
    assert mp.cli_args(o) == [
        "--output=/o",
        "--task-time=l1",
        "--ascendcl=on",
        "--runtime-api=on",
        "--aicpu=on",
        "--ai-core=on",
        "--aic-metrics=Memory",
        "--sys-hardware-mem=on",
        "--l2=on",
        "--hccl=off",
        "--delay=5",
        "--duration=30",
        "--storage-limit=500MB",
        "--sys-cpu-profiling=on",
    ]
    assert mp.cli_args(mp.ProfileOptions(Path("/o"))) == ["--output=/o"]  # unset options keep msprof's defaults
    for bad in (dict(task_time="l9"), dict(aic_metrics="Cache"), dict(aicpu="yes"), dict(storage_limit_mb=10)):
        with pytest.raises(ValueError):
            mp.cli_args(mp.ProfileOptions(Path("/o"), **bad))
    assert mp.torch_schedule(10, 19) == "torch_npu.profiler.schedule(wait=0, warmup=1, active=10, repeat=1, skip_first=9)"
    assert mp.torch_schedule(0, 4) == "torch_npu.profiler.schedule(wait=0, warmup=0, active=5, repeat=1, skip_first=0)"


def test_cli_mode_runs_msprof_with_the_app_and_analyses(env: dict[str, str], tmp_path: Path) -> None:
    r = run_cli(
        "profile", "--task-time", "l1", "--aic-metrics", "PipeUtilization", "--collect-dir", tmp_path / "prof", "--out", tmp_path / "ana",
        "--", sys.executable, tmp_path / "app.py", "--lr", "0.1", "a b 'c'", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    call = _msprof_calls(env)[0]
    assert call[:3] == [f"--output={tmp_path / 'prof'}", "--task-time=l1", "--aic-metrics=PipeUtilization"]
    assert call[3:] == [sys.executable, str(tmp_path / "app.py"), "--lr", "0.1", "a b 'c'"]
    assert json.loads(Path(env["APP_RECORD"]).read_text())["argv"] == ["--lr", "0.1", "a b 'c'"]
    assert (tmp_path / "ana" / "manifest.json").is_file() and "Hot operators" in r.stdout
    assert "layout:" in r.stderr


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--output", "DIR", "./app"], "msprof's --output is --collect-dir here"),
        (["--outptu", "DIR", "./app"], "msprof's --output is --collect-dir here"),
        (["--task-tim", "l1", "./app"], "did you mean --task-time?"),
        (["--sys-cpu-profiling=on", "./app"], "goes through --msprof-arg=--sys-cpu-profiling=on"),
    ],
)
def test_an_unknown_option_before_the_program_is_a_usage_error(env: dict[str, str], tmp_path: Path, argv: list[str], says: str) -> None:
    """It became part of the program's command line: msprof ran and failed, exit 1."""
    r = run_cli("profile", "--collect-dir", tmp_path / "prof", *argv, cwd=tmp_path, env=env)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not Path(env["MSPROF_ARGS_LOG"]).exists() and not (tmp_path / "prof").exists()  # msprof never ran


def test_exit_code_propagates_and_partial_data_is_still_analysed(env: dict[str, str], tmp_path: Path) -> None:
    r = run_cli(
        "profile",
        "--collect-dir",
        tmp_path / "p",
        "--out",
        tmp_path / "a",
        sys.executable,
        tmp_path / "app.py",
        cwd=tmp_path,
        env={**env, "APP_EXIT": "3"},
    )
    assert r.returncode == 3 and (tmp_path / "a" / "manifest.json").is_file()


def test_export_step_runs_when_msprof_did_not_export(env: dict[str, str], tmp_path: Path) -> None:
    e = {**env, "MSPROF_STANDIN_NO_EXPORT": "1"}
    r = run_cli(
        "profile", "--collect-dir", tmp_path / "p", "--out", tmp_path / "a", sys.executable, tmp_path / "app.py", cwd=tmp_path, env=e
    )
    assert r.returncode == 0, r.stderr
    calls = _msprof_calls(env)
    assert calls[1][0] == "--export=on" and calls[1][1].startswith(f"--output={tmp_path / 'p'}/PROF_")
    assert (tmp_path / "a" / "kernels.parquet").is_file()


def test_env_mode_sets_profiling_options(env: dict[str, str], tmp_path: Path) -> None:
    e = {**env, "APP_WRITES_PROF": str(tmp_path / "p")}
    r = run_cli("profile", "--mode", "env", "--aicpu", "on", "--task-time", "l0", "--collect-dir", tmp_path / "p", "--out", tmp_path / "a",
                sys.executable, tmp_path / "app.py", cwd=tmp_path, env=e)  # fmt: skip
    assert r.returncode == 0, r.stderr
    rec = json.loads(Path(env["APP_RECORD"]).read_text())
    assert rec["mode"] == "true"
    assert json.loads(rec["options"]) == {"output": str(tmp_path / "p"), "training_trace": "on", "task_trace": "l0", "aicpu": "on"}
    assert not Path(env["MSPROF_ARGS_LOG"]).exists()  # msprof was not run
    bad = run_cli("profile", "--mode", "env", "--l2", "on", sys.executable, tmp_path / "app.py", cwd=tmp_path, env=e)
    assert bad.returncode == 2 and "not available with --mode env" in bad.stderr


def test_acl_json_mode_merges_and_keeps_other_sections(env: dict[str, str], tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"dump": {"dump_path": "/d", "dump_list": []}, "profiler": {"switch": "off"}}))
    e = {**env, "APP_WRITES_PROF": str(tmp_path / "p")}
    r = run_cli("profile", "--mode", "acl-json", "--acl-json", acl, "--l2", "on", "--collect-dir", tmp_path / "p", "--out", tmp_path / "a",
                sys.executable, tmp_path / "app.py", cwd=tmp_path, env=e)  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = json.loads(acl.read_text())
    assert data["dump"] == {"dump_path": "/d", "dump_list": []}
    assert data["profiler"] == {"switch": "on", "output": str(tmp_path / "p"), "l2": "on"}
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    r2 = run_cli("profile", "--emit", "acl-json", "--acl-json", broken, cwd=tmp_path, env=env)
    assert r2.returncode == 2 and "not valid JSON" in r2.stderr and broken.read_text() == "{not json"


def test_emit_and_dry_run_run_nothing(env: dict[str, str], tmp_path: Path) -> None:
    cmd = run_cli("profile", "--emit", "command", "--aicpu", "on", "--collect-dir", "/o", "./my app", "--x", "it's", cwd=tmp_path, env=env)
    assert cmd.returncode == 0 and cmd.stdout.strip().endswith("msprof --output=/o --aicpu=on './my app' --x 'it'\"'\"'s'")
    env_file = run_cli("profile", "--emit", "env", "--hccl", "on", "--collect-dir", "/o", cwd=tmp_path, env=env)
    assert env_file.stdout.splitlines()[0] == "export PROFILING_MODE=true"
    assert env_file.stdout.splitlines()[1].startswith('export PROFILING_OPTIONS=\'{"output":"/o"')
    dry = run_cli("profile", "--dry-run", "--start-step", "3", "--stop-step", "9", "./app", cwd=tmp_path, env=env)
    assert dry.returncode == 0 and "run: " in dry.stdout and "--steps 3:9" in dry.stdout
    assert not Path(env["MSPROF_ARGS_LOG"]).exists() and not Path(env["APP_RECORD"]).exists()


def test_sigint_reaches_the_child_and_partial_results_are_analysed(env: dict[str, str], tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "npudiag", "profile", "--collect-dir", str(tmp_path / "p"), "--out", str(tmp_path / "a"),
         sys.executable, str(tmp_path / "app.py")],
        env={**os.environ, **env, "APP_SLEEP": "60"}, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    started = Path(env["APP_RECORD"] + ".started")
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started.exists()
    proc.send_signal(signal.SIGINT)  # to npudiag only, as `kill -INT` would
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and (tmp_path / "a" / "manifest.json").is_file()
    assert "KeyboardInterrupt" in err  # the app itself got the forwarded SIGINT (its own traceback)
    assert "npudiag/" not in err.split("KeyboardInterrupt")[-1] and "internal error" not in err


def test_missing_toolkit_is_one_line_of_advice(tmp_path: Path) -> None:
    r = run_cli("profile", "./app", cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "install the CANN toolkit" in lines[0]
    home_tk = tmp_path / "Ascend" / "ascend-toolkit" / "latest"
    home_tk.mkdir(parents=True)
    (home_tk.parent / "set_env.sh").write_text("export ASCEND_TOOLKIT_HOME=...\n")
    r2 = run_cli("profile", "./app", cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r2.returncode == 2 and f"source {home_tk.parent / 'set_env.sh'}" in r2.stderr


def test_doctor_reports_each_tool(tmp_path: Path) -> None:
    tk = tmp_path / "toolkit"
    msprof = tk / "tools" / "profiler" / "bin" / "msprof"
    msprof.parent.mkdir(parents=True)
    msprof.write_text("#!/bin/sh\n")
    msprof.chmod(0o755)
    (tk / "x86_64-linux").mkdir()
    (tk / "x86_64-linux" / "ascend_toolkit_install.info").write_text("package_name=Ascend-cann-toolkit\nversion=8.0.RC2\n")
    r = run_cli("doctor", "--json", env={"PATH": "/usr/bin:/bin", "ASCEND_TOOLKIT_HOME": str(tk), "HOME": str(tmp_path)})
    data = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert data["toolkit"]["ok"] and "8.0.RC2" in data["toolkit"]["found"]
    assert data["msprof"]["ok"] and data["msprof"]["found"] == str(msprof)
    assert not data["npu-smi"]["ok"] and data["npu-smi"]["fix"]
    assert r.returncode == 1  # something missing
    md = run_cli("doctor", "--format", "markdown", env={"PATH": "/usr/bin:/bin", "ASCEND_TOOLKIT_HOME": str(tk), "HOME": str(tmp_path)})
    assert md.returncode == 1
    missing = [c for c in data.values() if not c["ok"]]
    assert md.stdout.startswith(f"## ❌ npudiag doctor — {len(missing)} of {len(data)} missing\n")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.stdout.splitlines() if line.startswith("| ")][1:]
    assert [(row[0], row[1]) for row in rows] == [(name, "ok" if c["ok"] else "missing") for name, c in data.items()]
    assert run_cli("doctor", "--json", "--format", "markdown").returncode == 2  # two outputs on stdout: refused


def test_step_window_is_applied_at_analysis_or_explained(env: dict[str, str], tmp_path: Path) -> None:
    r = run_cli("profile", "--start-step", "2", "--stop-step", "3", "--collect-dir", tmp_path / "p", "--out", tmp_path / "a",
                sys.executable, tmp_path / "app.py", cwd=tmp_path, env=env)  # fmt: skip
    # msprof op_summary rows carry no step ids: the whole profile is analysed, and the user is told why
    assert r.returncode == 0, r.stderr
    assert "step window cannot be applied" in r.stderr and (tmp_path / "a" / "manifest.json").is_file()
    # in profile's own terms: it has no --steps / --time to suggest
    assert "--time" not in r.stderr and "--steps" not in r.stderr, r.stderr


def test_torch_snippet_carries_the_step_window(tmp_path: Path, env: dict[str, str]) -> None:
    r = run_cli(
        "profile", "--emit", "torch", "--start-step", "10", "--stop-step", "19", "--aic-metrics", "PipeUtilization", cwd=tmp_path, env=env
    )
    assert r.returncode == 0, r.stderr
    assert "schedule=torch_npu.profiler.schedule(wait=0, warmup=1, active=10, repeat=1, skip_first=9)" in r.stdout
    assert "aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization" in r.stdout
    compile(r.stdout, "snippet", "exec")


def test_plan_and_configuration_as_a_library(tmp_path: Path) -> None:
    from npudiag.errors import OptionError
    from npudiag.profiling import collection

    opts = mp.ProfileOptions(output=tmp_path / "p", aicpu="on")
    p = collection.plan(opts, ["./app", "--x"], method="env", steps=(3, None), msprof=Path("/opt/msprof"))
    assert p.argv == ["./app", "--x"] and p.env["PROFILING_MODE"] == "true" and p.window == "3:"
    assert json.loads(p.env["PROFILING_OPTIONS"])["aicpu"] == "on"
    cli = collection.plan(opts, ["./app"], msprof=Path("/opt/msprof"))
    assert cli.argv == ["/opt/msprof", f"--output={tmp_path / 'p'}", "--aicpu=on", "./app"] and cli.env == {}
    assert "run: /opt/msprof" in cli.describe() and "analysis window" not in cli.describe()
    with pytest.raises(OptionError) as bad:
        collection.plan(opts, ["./app"], steps=(5, 3))
    assert bad.value.option == "stop_step"
    with pytest.raises(OptionError):
        collection.plan(opts, ["./app"], method="nope")
    acl = tmp_path / "acl.json"
    text = collection.configuration(opts, "acl-json", acl_json=acl)
    assert json.loads(text) == json.loads(acl.read_text()) and json.loads(text)["profiler"]["switch"] == "on"


def test_msprof_switch_table_is_the_one_msprof_checks() -> None:
    """npudiag's switch table (what --msprof-arg is checked against) names exactly the switches the
    msprof stand-in accepts, which are written out from CANN Runtime's input_parser on their own."""
    import importlib.util

    from npudiag.profiling.msprof_switches import SWITCHES

    spec = importlib.util.spec_from_file_location("standin_msprof", Path(__file__).resolve().parent / "standins" / "msprof.py")
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    assert set(SWITCHES) == set(standin.OPTIONS)


def test_profile_has_one_option_per_switch_of_the_table() -> None:
    """profile's msprof options are made from PROFILE_SWITCHES: each is an msprof switch of SWITCHES (whole
    numbers where msprof takes a range), a ProfileOptions field, one option of --help, and is passed to msprof."""
    import dataclasses

    from npudiag.profiling.msprof import ProfileOptions, cli_args
    from npudiag.profiling.msprof_switches import PROFILE_SWITCHES, SWITCHES

    fields = {f.name for f in dataclasses.fields(ProfileOptions)}
    help_text = run_cli("profile", "--help", env={"COLUMNS": "200"}).stdout
    for sw in PROFILE_SWITCHES:
        msprof = SWITCHES[sw.switch[2:]]
        assert (sw.kind is int) == (msprof.low is not None), sw
        assert sw.attr in fields and len(re.findall(rf"^\s+{re.escape(sw.switch)}\s", help_text, re.M)) == 1, sw
    assert fields - {sw.attr for sw in PROFILE_SWITCHES} == {"output", "memory", "extra", "implied"}
    r = run_cli("profile", "--dry-run", "--aic-freq", "50", "--ge-api", "l1", "--storage-limit", "300", "--", "./app")
    assert r.returncode == 0, r.stderr
    assert "--aic-freq=50 --ge-api=l1 --storage-limit=300MB ./app" in r.stdout
    assert cli_args(ProfileOptions(Path("/o"), delay_s=5)) == ["--output=/o", "--delay=5"]


@pytest.mark.parametrize(
    "arg, why",
    [
        ("--task-memroy=on", "did you mean --task-memory?"),
        ("--task-memory=yes", "expected one of on, off"),
        ("--ge-api=l2", "expected one of off, l0, l1"),
        ("--aic-freq=0", "from 1 to 100"),
        ("--sys-cpu-freq=51", "from 1 to 50"),
        ("--host-sys=cpu,gpu", "'gpu' is not one of"),
        ("--storage-limit=100MB", "from 200 to 4294967295"),
        ("--output=/tmp/x", "use --collect-dir"),
        ("--msproftx", "needs a value"),
        ("--sys-lp-freq=1000", "from 1 to 100"),  # msprof: "the range is 1 to 100Hz"
        ("--aic-metrics=Custom:0x1,0x2,0x3,0x4,0x5,0x6,0x7,0x8,0x9", "1 to 8 registers"),
        ("--aic-metrics=Custom:0xab,PipeUtilization", "not a register number"),
        ("--aiv-metrics=Custom:0x0", "outside 0x1 - 0x7FFFFFFF"),
    ],
)
def test_msprof_arg_is_checked_before_anything_runs(tmp_path: Path, arg: str, why: str) -> None:
    r = run_cli("profile", "--dry-run", f"--msprof-arg={arg}", "./app", cwd=tmp_path)
    assert r.returncode == 2 and why in " ".join(r.stderr.split()), r.stderr


def test_todays_switches_pass_through_and_the_standin_takes_them(env: dict[str, str], tmp_path: Path) -> None:
    args = ["--task-memory=on", "--ge-api=l1", "--msproftx=on", "--mstx-domain-include=train", "--aic-metrics=PipeStallCycle",
            "--host-sys=cpu,mem", "--storage-limit=500MB", "--task-trace=l2"]  # fmt: skip
    r = run_cli("profile", *[f"--msprof-arg={a}" for a in args], "--collect-dir", tmp_path / "p", "--no-analyze",
                "--", sys.executable, tmp_path / "app.py", cwd=tmp_path, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert _msprof_calls(env)[0][1 : 1 + len(args)] == args


def test_custom_pmu_registers_pass_and_the_standin_takes_them(env: dict[str, str], tmp_path: Path) -> None:
    """msprof's command-line reference: --aic-metrics=Custom:0x49,0x8,0x15,0x1b,0x64,0x10 (hexadecimal or decimal)."""
    args = ["--aic-metrics=Custom:0x49,0x8,0x15,0x1b,0x64,0x10", "--aiv-metrics=Custom:73,8", "--sys-lp-freq=100"]
    r = run_cli("profile", *[f"--msprof-arg={a}" for a in args], "--collect-dir", tmp_path / "p", "--no-analyze",
                "--", sys.executable, tmp_path / "app.py", cwd=tmp_path, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert _msprof_calls(env)[0][1 : 1 + len(args)] == args


def test_named_options_for_todays_switches() -> None:
    o = mp.ProfileOptions(Path("/o"), task_memory="on", msproftx="on", mstx_domain_include="train,eval", ge_api="l1")
    assert mp.cli_args(o) == ["--output=/o", "--task-memory=on", "--msproftx=on", "--mstx-domain-include=train,eval", "--ge-api=l1"]
    # --memory: what the memory rows need (operator memory and the HBM / DDR timeline), unless set otherwise
    assert mp.cli_args(mp.ProfileOptions(Path("/o"), memory=True)) == ["--output=/o", "--sys-hardware-mem=on", "--task-memory=on"]
    bad = [
        (dict(mstx_domain_exclude="io"), "needs --msproftx on"),
        (dict(msproftx="on", mstx_domain_include="a;rm -rf"), "domain names separated by commas"),
        (dict(ge_api="l2"), "--ge-api must be one of off, l0, l1"),
        (dict(task_memory="yes"), "--task-memory must be one of on, off"),
        (dict(memory=True, task_memory="off"), "--memory turns on --task-memory"),
        (dict(task_memory="on", extra=["--task-memory=off"]), "given twice"),
    ]
    for kwargs, says in bad:
        with pytest.raises(ValueError, match=re.escape(says)):
            mp.cli_args(mp.ProfileOptions(Path("/o"), **kwargs))
    with pytest.raises(ValueError, match=re.escape("is not available with --mode env (use --mode cli)")):
        mp.profiling_options(mp.ProfileOptions(Path("/o"), memory=True))
    snippet = mp.torch_profiler_snippet(mp.ProfileOptions(Path("/o"), memory=True, msproftx="on", mstx_domain_include="train"), 0, 3)
    assert "profile_memory=True" in snippet and "mstx=True" in snippet and "mstx_domain_include=['train']" in snippet


def test_named_options_reach_msprof_and_the_standin_takes_them(env: dict[str, str], tmp_path: Path) -> None:
    named = ["--memory", "--msproftx", "on", "--mstx-domain-exclude", "io,log", "--ge-api", "l0"]
    r = run_cli("profile", *named, "--collect-dir", tmp_path / "p", "--no-analyze", "--", sys.executable, tmp_path / "app.py",
                cwd=tmp_path, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    call = _msprof_calls(env)[0]
    assert call[1:6] == ["--sys-hardware-mem=on", "--task-memory=on", "--msproftx=on", "--mstx-domain-exclude=io,log", "--ge-api=l0"]
    assert call[6:] == [sys.executable, str(tmp_path / "app.py")]
    r = run_cli("profile", "--dry-run", "--mstx-domain-include", "x", "./app", cwd=tmp_path, env=env)
    assert r.returncode == 2 and "needs --msproftx on" in r.stderr and len(r.stderr.strip().splitlines()) == 1
